"""Scenario 24: "delegation while away": carol hands her role for the treasury template to erin for
an hour; erin, who is no approver herself, approves alice's transfer for carol, and the decision
names both; carol then revokes the delegation at once.
"""

from __future__ import annotations

from mcp_approval.demo.clients import disposition_of
from mcp_approval.demo.context import Demo, ScenarioState, is_task
from mcp_approval.demo.scenarios import LARGE, tasks_client
from mcp_approval.protocol import DISPOSITION_APPROVED_EXECUTED

__all__ = ["delegated_while_away"]


async def delegated_while_away(demo: Demo, state: ScenarioState) -> str:
    """24. carol delegates the treasury template to erin; erin approves for carol; carol revokes."""
    account = demo.account(24)
    state.watch(to=account)
    tasks = tasks_client()
    async with demo.client("alice", extensions=[tasks]) as alice, demo.reviewers("carol", "erin") as (carol, erin):
        demo.narrator.call(
            "carol", "POST /delegations {'delegate': 'erin', 'template': 'treasury', 'duration_s': 3600}"
        )
        made = await carol.delegate("erin", "treasury", 3600)
        demo.expect(made.status_code == 201, f"the reviewer API answered {made.status_code}")
        delegation = made.json()
        demo.narrator.got(
            f"delegation {delegation['id'][:12]}…: erin decides treasury for carol until {delegation['ends_at']}"
        )
        created = await demo.call(alice, "alice", "wire_transfer", {"to": account, "amount": LARGE})
        demo.expect(is_task(created), "a working task, the tool not run")
        record = await erin.find("wire_transfer", to=account)
        await demo.decide(erin, record, "approve")
        decided = await erin.request(record["id"])
        (decision,) = decided["decisions"]
        demo.narrator.decided(f"{decision['reviewer']} for {decision['on_behalf_of']} (delegated)", decided["status"])
        demo.expect((decision["reviewer"], decision["on_behalf_of"]) == ("erin", "carol"), "the decision names both")
        result = await demo.wait(tasks, alice, "alice", created.task_id)
        state.disposition = disposition_of(result)
        demo.expect(state.disposition == DISPOSITION_APPROVED_EXECUTED, "the transfer ran")
        demo.narrator.call("carol", f"POST /delegations/{delegation['id'][:12]}…/revoke")
        revoked = await carol.revoke_delegation(delegation["id"])
        demo.expect(revoked.status_code == 200 and revoked.json()["state"] == "revoked", "revoked at once")
    demo.expect(demo.executions(to=account) == 1, "one ledger entry")
    return "erin approved for carol under a one-hour delegation (the decision names both); carol revoked it"
