"""SEP-2848 §Completion: an approval is an input to a new decision, taken against current state.

The treasury deployment runs in-process; its PDP answers re-evaluations from a script.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from mcp_approval.clock import ManualClock, iso8601, parse_iso8601
from mcp_approval.policy import Decision
from mcp_approval.policy.models import REASON_GRANT_PENDING, REASON_OUT_OF_SCOPE, REASON_POLICY_DENIED
from tests.approval.inprocess import Harness, inprocess_treasury
from tests.support.polling import eventually
from tests.treasury.helpers import approval_for, assert_approved_executed, assert_denied_not_executed, settled, text_of

pytestmark = pytest.mark.anyio


def grant_pending(retry_after: int = 0) -> Decision:
    return Decision.deny(REASON_GRANT_PENDING, retry_after=retry_after)


def request_again() -> Decision:
    hint = {"expires_at": iso8601(4_102_444_800_000), "template": "treasury", "display": {"title": "Re-approval"}}
    return Decision.deny(REASON_OUT_OF_SCOPE, next_action="request", access_request=hint)


async def approve_transfer(harness: Harness, account: str, amount: float = 30_000) -> dict[str, Any]:
    """Ask for a transfer, approve it as carol; returns the created task."""
    created = (await harness.alice.call_tool("wire_transfer", {"to": account, "amount": amount})).result
    carol = harness.reviewer("carol")
    approval = await approval_for(carol, "wire_transfer", to=account)
    assert (await carol.decide(approval["id"], "approve")).status_code == 200
    return created


@pytest.mark.sep_check("sep-2848-reevaluate-with-approval", "sep-2848-retry-is-not-a-denial")
async def test_retry_waits_and_re_evaluates_until_allowed(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path) as harness:
        harness.pdp.script(grant_pending(), grant_pending())
        created = await approve_transfer(harness, "acct-retry")
        assert_approved_executed(await settled(harness.alice, created["taskId"]))
        assert len(harness.pdp.seen_approvals) == 3  # two retries, then the allow
        assert {tuple(sorted(seen)) for seen in harness.pdp.seen_approvals} == {("approved_at", "approved_until", "id")}
        assert [entry["to"] for entry in harness.ledger()] == ["acct-retry"]


@pytest.mark.sep_check("sep-2848-retry-stops-at-expiry", "sep-2848-retry-is-not-a-denial", "sep-2848-expiry-fences")
async def test_retry_never_outlives_the_approval(tmp_path: Path) -> None:
    overrides = {
        "templates": {"treasury": {"approvals_required": 1, "reviewer_role": "approver", "approval_valid_s": 0.4}}
    }
    async with inprocess_treasury(tmp_path, overrides) as harness:
        harness.pdp.script(*[grant_pending(retry_after=0)] * 100_000)
        created = await approve_transfer(harness, "acct-retry-expiry")
        task = await settled(harness.alice, created["taskId"])
        assert_denied_not_executed(task)
        assert "approval expired" in text_of(task["result"])  # ended by expiry, never by the retry itself
        assert harness.ledger() == []


@pytest.mark.sep_check("sep-2848-retry-stops-at-expiry", "sep-2848-expiry-fences")
async def test_an_approval_that_expires_during_its_re_evaluation_is_not_chained(tmp_path: Path) -> None:
    """The check starts before ``approved_until``; the PDP answers after it, asking for a new request.

    The approval ran out: the call ends as expired, as it does when the check starts late, and no
    second request is opened.
    """

    clock = ManualClock()

    async def answer_once_expired(approval: dict[str, Any]) -> Decision:
        until = parse_iso8601(approval["approved_until"])
        assert until is not None
        clock.advance(max(until - clock.now_ms(), 0) + 50)  # a PDP slower than what is left of the approval
        return request_again()

    template = {"approvals_required": 1, "reviewer_role": "approver", "approval_valid_s": 60}
    overrides = {"templates": {"treasury": template}}
    async with inprocess_treasury(tmp_path, overrides, clock=clock) as harness:
        harness.pdp.script(answer_once_expired)
        created = await approve_transfer(harness, "acct-expires-meanwhile")
        task = await settled(harness.alice, created["taskId"])
        assert_denied_not_executed(task)
        assert "approval expired" in text_of(task["result"])
        assert len(harness.pdp.seen_approvals) == 1
        assert await harness.deployment.approval.store.intent(created["taskId"], 2) is None  # nothing chained
        assert harness.ledger() == []


@pytest.mark.sep_check("sep-2848-intent-before-backend", "sep-2848-consumed-generation-ignored")
async def test_request_opens_a_new_generation_and_its_approval_runs_the_call(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path) as harness:
        harness.pdp.script(request_again())
        created = await approve_transfer(harness, "acct-chain")
        dave = harness.reviewer("dave")
        second = await approval_for(dave, "wire_transfer", to="acct-chain")  # the chained request
        first_handle = await harness.deployment.approval.store.intent(created["taskId"], 1)
        assert first_handle is not None
        assert first_handle.state.value == "consumed"
        await harness.deployment.approval.wake(str(first_handle.handle))  # a stale wake-up is ignored
        assert (await harness.alice.get(created["taskId"])).result["status"] == "working"
        assert harness.ledger() == []
        assert (await dave.decide(second["id"], "approve")).status_code == 200
        assert_approved_executed(await settled(harness.alice, created["taskId"]))
        assert [entry["to"] for entry in harness.ledger()] == ["acct-chain"]


@pytest.mark.sep_check("sep-2848-chained-requests-bounded")
async def test_chained_requests_are_bounded(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, {"approval": {"max_generations": 2}}) as harness:
        harness.pdp.script(request_again(), request_again())
        created = await approve_transfer(harness, "acct-bound")
        second = await approval_for(harness.reviewer("dave"), "wire_transfer", to="acct-bound")
        assert (await harness.reviewer("dave").decide(second["id"], "approve")).status_code == 200
        task = await settled(harness.alice, created["taskId"])
        assert_denied_not_executed(task)
        assert "more approval rounds" in text_of(task["result"])
        assert harness.ledger() == []


@pytest.mark.sep_check(
    "sep-2848-current-state-at-execution", "sep-2848-risk-re-read", "sep-2848-no-execution-on-denial-alone"
)
async def test_re_evaluation_deny_is_a_terminal_denial(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path) as harness:
        harness.pdp.script(Decision.deny(REASON_POLICY_DENIED))
        created = await approve_transfer(harness, "acct-policy-now")
        task = await settled(harness.alice, created["taskId"])
        assert_denied_not_executed(task)
        assert "re-checked" in text_of(task["result"])
        assert harness.ledger() == []


@pytest.mark.sep_check("sep-2848-current-state-at-execution", "sep-2848-invalid-principal-not-executed")
async def test_a_principal_no_longer_valid_does_not_run(tmp_path: Path) -> None:
    async def revoked(principal: str) -> bool:
        return principal != "alice"

    async with inprocess_treasury(tmp_path, principal_valid=revoked) as harness:
        created = await approve_transfer(harness, "acct-revoked")
        task = await settled(harness.alice, created["taskId"])
        assert_denied_not_executed(task)
        assert "no longer authorized" in text_of(task["result"])
        assert harness.ledger() == []


@pytest.mark.sep_check("sep-2848-changed-tool-fails-closed")
async def test_a_tool_changed_while_pending_fails_closed(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path) as harness:
        created = (await harness.alice.call_tool("wire_transfer", {"to": "acct-changed", "amount": 30_000})).result
        server: MCPServer[Any] = harness.deployment.server
        server.remove_tool("wire_transfer")

        @server.tool(name="wire_transfer")
        def wire_transfer_v2(to: str, amount: float, memo: str = "") -> str:
            """A changed definition: a new parameter."""
            raise AssertionError("a changed tool must not run on an approval given for the old one")

        carol = harness.reviewer("carol")
        approval = await approval_for(carol, "wire_transfer", to="acct-changed")
        assert (await carol.decide(approval["id"], "approve")).status_code == 200
        task = await settled(harness.alice, created["taskId"])
        assert_denied_not_executed(task)
        assert "tool changed" in text_of(task["result"])


@pytest.mark.sep_check("sep-2848-effect-auditable", "sep-2848-no-steering")
async def test_execution_runs_from_the_stored_binding(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path) as harness:
        first = await approve_transfer(harness, "acct-bind-a", 31_000)
        second = (await harness.alice.call_tool("wire_transfer", {"to": "acct-bind-b", "amount": 32_000})).result
        assert_approved_executed(await settled(harness.alice, first["taskId"]))
        assert harness.ledger() == [{"op": "wire_transfer", "to": "acct-bind-a", "amount": 31000.0}]
        assert (await harness.alice.get(second["taskId"])).result["status"] == "working"  # A's approval is A's only

        async def audit_kinds() -> list[str]:
            return [event.kind for event in await harness.deployment.audit.events(subject=first["taskId"])]

        kinds = await eventually(audit_kinds, lambda found: "approval.execution_finished" in found)
        assert kinds[:2] == ["approval.task_created", "approval.execution_claimed"]
