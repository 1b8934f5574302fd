"""SEP-2848: a similar-call rule's approval is an input to a new policy decision, never a standing
grant. A later call the rule decides is re-evaluated against current policy like any approval: a
policy that now denies it stops it; the call that runs is the one requested."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_approval.policy import Decision
from mcp_approval.policy.models import REASON_POLICY_DENIED
from tests.approval.inprocess import Harness, inprocess_treasury
from tests.treasury.helpers import approval_for, assert_approved_executed, assert_denied_not_executed, settled

pytestmark = pytest.mark.anyio

SIMILAR = {"expires_in_s": 600, "max_uses": 2, "arguments": {"amount": {"range": [25_001, 40_000]}}}


async def transfer(harness: Harness, amount: int) -> dict[str, Any]:
    created: dict[str, Any] = (
        await harness.alice.call_tool("wire_transfer", {"to": "acct-sim", "amount": amount})
    ).result
    return created


async def test_a_call_a_rule_approves_is_re_evaluated_against_current_policy(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path) as harness:
        first = await transfer(harness, 30_000)
        approval = await approval_for(harness.reviewer("carol"), "wire_transfer", to="acct-sim")
        answer = await harness.http.post(
            f"/approvals/{approval['id']}/decide",
            json={"decision": "approve", "similar": SIMILAR},
            headers={"Authorization": "Bearer carol-token"},
        )
        assert answer.status_code == 200, answer.text
        rule = answer.json()["similar_rule"]
        assert_approved_executed(await settled(harness.alice, first["taskId"]))

        # The policy now denies: the rule approves the next call, and the re-evaluation stops it.
        harness.pdp.script(Decision.deny(REASON_POLICY_DENIED))
        stopped = await transfer(harness, 31_000)
        assert_denied_not_executed(await settled(harness.alice, stopped["taskId"]))
        decided = await approval_for(harness.reviewer("carol"), "wire_transfer", ended_too=True, amount=31_000)
        assert [d["reviewer"] for d in decided["decisions"]] == [f"similar-rule:{rule['id']}"]
        assert harness.pdp.seen_approvals[-1]["id"] == decided["id"]  # the approval went in as an input

        # The policy allows again: the rule's second use runs exactly the call requested.
        runs = await transfer(harness, 32_000)
        assert_approved_executed(await settled(harness.alice, runs["taskId"]))
        assert [(e["to"], e["amount"]) for e in harness.ledger()] == [("acct-sim", 30_000), ("acct-sim", 32_000)]
