"""Scenario 23: "approve similar": a reviewer approves one transfer and the next few like it.

Each later transfer is still its own request: it becomes a task, the similar-call rule decides
it automatically (the decision names the rule), and the server re-evaluates it against current
policy before it runs. Once the rule has made its decisions, the next transfer goes to people.
"""

from __future__ import annotations

from typing import Any

from mcp_approval.demo.clients import disposition_of
from mcp_approval.demo.context import Demo, ScenarioState, is_task
from mcp_approval.demo.scenarios import LARGE, tasks_client
from mcp_approval.protocol import DISPOSITION_APPROVED_EXECUTED, DISPOSITION_DENIED_NOT_EXECUTED

__all__ = ["approve_similar"]

#: carol's rule: this requester's transfers to this account of 25,000 to 60,000, twice, for ten minutes.
SIMILAR: dict[str, Any] = {
    "expires_in_s": 600,
    "max_uses": 2,
    "principal": "same",
    "arguments": {"amount": {"range": [25_000, 60_000]}},
}


async def approve_similar(demo: Demo, state: ScenarioState) -> str:
    """23. carol approves a transfer "and calls like it"; the rule decides the next two, then people decide."""
    account = demo.account(23)
    state.watch(to=account)
    tasks = tasks_client()
    async with demo.client("alice", extensions=[tasks]) as alice, demo.reviewers("carol") as (carol,):
        created = await demo.call(alice, "alice", "wire_transfer", {"to": account, "amount": LARGE})
        demo.expect(is_task(created), "a working task, the tool not run")
        record = await carol.find("wire_transfer", to=account)
        demo.narrator.call(
            "carol", f"POST /approvals/{record['id'][:8]}…/decide {{'decision': 'approve', 'similar': …}}"
        )
        response = await carol.decide(
            record["id"], "approve", comment="demo: this supplier's invoices", similar=SIMILAR
        )
        demo.expect(response.status_code == 200, f"the reviewer API answered {response.status_code}")
        rule = response.json()["similar_rule"]
        demo.narrator.decided("carol", f"approve, and a rule {rule['id'][:12]}…: {rule['scope']}, 2 uses")
        result = await demo.wait(tasks, alice, "alice", created.task_id)
        demo.expect(disposition_of(result) == DISPOSITION_APPROVED_EXECUTED, "the first transfer ran")
        for amount in (30_000, 45_000):
            created = await demo.call(alice, "alice", "wire_transfer", {"to": account, "amount": amount})
            demo.expect(is_task(created), "each later call is its own request")
            result = await demo.wait(tasks, alice, "alice", created.task_id)
            demo.expect(disposition_of(result) == DISPOSITION_APPROVED_EXECUTED, f"the {amount} transfer ran")
            decided = await carol.find("wire_transfer", status="decided", to=account, amount=amount)
            deciders = [decision["reviewer"] for decision in decided["decisions"]]
            demo.narrator.decided(", ".join(deciders), f"{decided['status']} (the rule, written by carol)")
            demo.expect(deciders == [f"similar-rule:{rule['id']}"], "decided by carol's rule")
        created = await demo.call(alice, "alice", "wire_transfer", {"to": account, "amount": 40_000})
        demo.expect(is_task(created), "a fourth request")
        record = await carol.find("wire_transfer", to=account, amount=40_000)
        demo.expect(record["decisions"] == [], "the rule made its two decisions: this one goes to people")
        await demo.decide(carol, record, "deny")
        result = await demo.wait(tasks, alice, "alice", created.task_id)
        state.disposition = disposition_of(result)
        demo.expect(state.disposition == DISPOSITION_DENIED_NOT_EXECUTED, "carol denied the fourth")
    demo.expect(demo.executions(to=account) == 3, "three ledger entries")
    return "carol approved one and wrote a rule; it decided two more; the fourth went to carol"
