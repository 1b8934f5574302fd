"""SEP-2848 §Completion rules around the claim: carried through, fenced, stated, declared."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError
from sqlalchemy import update

from mcp_approval.approval.persistence.schema import approval_workflows_table
from mcp_approval.checks.wire import envelope
from mcp_approval.clock import ManualClock
from tests.approval.inprocess import Harness, inprocess_treasury
from tests.support.polling import eventually
from tests.treasury.helpers import (
    AUTHORIZATION,
    DISPOSITION,
    approval_for,
    assert_approved_executed,
    assert_denied_not_executed,
    settled,
    text_of,
)

pytestmark = pytest.mark.anyio
HOUR_MS = 3_600_000


async def approve(harness: Harness, tool: str, **arguments: Any) -> None:
    carol = harness.reviewer("carol")
    approval = await approval_for(carol, tool, **arguments)
    assert (await carol.decide(approval["id"], "approve")).status_code == 200


@pytest.mark.sep_check("sep-2848-carry-through-after-claim", "sep-2848-claimed-task-retained")
@pytest.mark.sep_check("sep-2848-claimed-task-retained", "sep-2848-carry-through-after-claim")
async def test_a_claimed_execution_carries_through_past_the_approval_expiry(tmp_path: Path) -> None:
    clock = ManualClock()
    started, release = asyncio.Event(), asyncio.Event()
    async with inprocess_treasury(tmp_path, clock=clock) as harness:

        @harness.deployment.server.tool()
        async def settle_batch(batch: str) -> str:
            """A slow, side-effecting tool."""
            started.set()
            await release.wait()
            return f"batch {batch} settled"

        harness.pdp.gate("settle_batch")
        created = (await harness.alice.call_tool("settle_batch", {"batch": "b-1"})).result
        await approve(harness, "settle_batch", batch="b-1")
        await started.wait()  # claimed and running
        task = (await harness.alice.get(created["taskId"])).result
        assert task["status"] == "working"  # the claim does not terminalize
        options = harness.deployment.approval.options
        claimed_window = round((options.execution_deadline_s + options.result_retention_s) * 1000)
        assert task["ttlMs"] >= claimed_window  # a claimed task outlives its execution deadline
        clock.advance(2 * HOUR_MS)  # the approval (valid one hour) expires mid-invocation
        release.set()
        done = await settled(harness.alice, created["taskId"])
        assert_approved_executed(done)
        assert "batch b-1 settled" in text_of(done["result"])


@pytest.mark.sep_check("sep-2848-failure-after-claim-is-completed")
@pytest.mark.sep_check(
    "sep-2848-failure-after-claim-is-completed", "sep-2848-disposition-required", "sep-2848-no-envelope-unless-denied"
)
async def test_a_tool_failing_after_the_claim_completes_as_execution_error(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path) as harness:

        @harness.deployment.server.tool()
        def post_journal(entry: str) -> str:
            """A tool that fails after it started."""
            raise ToolError(f"ledger rejected {entry}")

        harness.pdp.gate("post_journal")
        created = (await harness.alice.call_tool("post_journal", {"entry": "e-1"})).result
        await approve(harness, "post_journal", entry="e-1")
        task = await settled(harness.alice, created["taskId"])
        assert task["status"] == "completed"  # never a retryable `failed` once claimed
        result = task["result"]
        assert result["isError"] is True
        assert result["_meta"][DISPOSITION] == "execution-error"
        assert AUTHORIZATION not in result["_meta"]
        assert "side effect may have occurred" in text_of(result)


@pytest.mark.sep_check("sep-2848-binding-checked-before-execution")
@pytest.mark.sep_check("sep-2848-binding-checked-before-execution")
async def test_a_tampered_call_binding_fails_closed(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path) as harness:
        first = (await harness.alice.call_tool("wire_transfer", {"to": "acct-t1", "amount": 30_000})).result
        second = (await harness.alice.call_tool("wire_transfer", {"to": "acct-t2", "amount": 99_000})).result
        store = harness.deployment.approval.store
        donor = await store.get(second["taskId"])
        assert donor is not None
        statement = (
            update(approval_workflows_table)
            .where(approval_workflows_table.c.task_id == first["taskId"])
            .values(binding_ciphertext=donor.binding_sealed)  # another task's sealed call
        )
        await store.database.write(lambda conn: conn.execute(statement))
        await approve(harness, "wire_transfer", to="acct-t1")
        task = await settled(harness.alice, created_id := first["taskId"])
        assert_denied_not_executed(task)
        assert "could not be verified" in text_of(task["result"])
        assert harness.ledger() == [], created_id


@pytest.mark.sep_check("sep-2848-no-tasks-client")
@pytest.mark.sep_check("sep-2848-no-tasks-client")
async def test_without_tasks_the_server_can_answer_missing_capability(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, {"approval": {"without_tasks": "error"}}) as harness:
        reply = await harness.alice.call_tool(
            "wire_transfer", {"to": "acct-32021", "amount": 30_000}, meta=envelope(tasks=False)
        )
        assert reply.error["code"] == -32021
        assert "io.modelcontextprotocol/tasks" in str(reply.error["data"])
        assert await harness.reviewer("carol").pending() == []


@pytest.mark.sep_check("sep-2848-server-declares-both-extensions")
@pytest.mark.sep_check("sep-2848-server-declares-both-extensions")
async def test_the_server_declares_tool_approval_and_tasks(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path) as harness:
        capabilities = (await harness.alice.request("server/discover", {})).result["capabilities"]
        assert "io.modelcontextprotocol/tasks" in capabilities["extensions"]
        assert "io.modelcontextprotocol/tool-approval" in capabilities["extensions"]


@pytest.mark.sep_check("sep-2848-pending-not-presented-as-completed", "sep-2848-security-model-text")
async def test_pending_tasks_are_never_presented_as_done(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path) as harness:
        created = (await harness.alice.call_tool("wire_transfer", {"to": "acct-present", "amount": 30_000})).result

        async def pending_view() -> dict[str, Any]:
            return (await harness.alice.get(created["taskId"])).result

        task = await eventually(pending_view, lambda value: value["status"] == "working")
        for text in (created["statusMessage"], created["_meta"]["io.modelcontextprotocol/model-immediate-response"]):
            lowered = text.lower()
            assert "completed" not in lowered
            assert "not" in lowered or "only if" in lowered
        assert "result" not in task
