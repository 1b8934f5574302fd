"""The audit trail of a call through the treasury example: every event about it names the call's digest
(never an argument value), and ``audit verify`` checks that its execution followed the decisions it needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_approval.approval.binding import CallBinding
from mcp_approval.storage import AuditEvent
from tests.approval.inprocess import Harness, inprocess_treasury
from tests.treasury.helpers import approval_for, assert_approved_executed, settled

pytestmark = pytest.mark.anyio

ACCOUNT = "acct-audit-digest-7f3a"
AMOUNT = 31_337


async def events_of_call(harness: Harness, task_id: str, request_id: str) -> list[AuditEvent]:
    audit = harness.deployment.audit
    return [*await audit.events(subject=request_id), *await audit.events(subject=task_id)]


async def approved_and_run(harness: Harness) -> tuple[str, str]:
    """A gated transfer (with tasks), approved by carol and run; returns (task id, request id)."""
    arguments = {"to": ACCOUNT, "amount": AMOUNT}
    task_id = (await harness.alice.call_tool("wire_transfer", arguments)).result["taskId"]
    approval = await approval_for(harness.reviewer("carol"), "wire_transfer", to=ACCOUNT)
    assert (await harness.reviewer("carol").decide(approval["id"], "approve")).status_code == 200
    assert_approved_executed(await settled(harness.alice, task_id))
    return task_id, str(approval["id"])


async def test_every_event_about_a_call_carries_its_binding_digest_and_no_argument(tmp_path: Path, db_url: str) -> None:
    async with inprocess_treasury(tmp_path, {"store": {"url": db_url}}) as harness:
        task_id, request_id = await approved_and_run(harness)
        workflow = await harness.deployment.approval.store.get(task_id)
        assert workflow is not None
        assert workflow.binding_sealed is not None
        cipher = harness.deployment.approval.deps.cipher
        binding = CallBinding.from_json(cipher.open(workflow.binding_sealed, record=task_id))
        events = await events_of_call(harness, task_id, request_id)

    kinds = {event.kind for event in events}
    assert {"approval.submitted", "approval.decision", "approval.approved"} <= kinds
    assert {"approval.task_created", "approval.execution_claimed", "approval.execution_finished"} <= kinds
    assert {event.data.get("call_digest") for event in events} == {binding.digest}
    recorded = json.dumps([event.as_json() for event in events])
    for value in (ACCOUNT, str(AMOUNT)):
        assert value not in recorded


async def test_verify_accepts_the_executions_of_a_real_deployment(tmp_path: Path, db_url: str) -> None:
    async with inprocess_treasury(tmp_path, {"store": {"url": db_url}}) as harness:
        await approved_and_run(harness)
        found = await harness.deployment.audit.verify()
    assert found.ok, found.broken
    assert found.checked > 0
