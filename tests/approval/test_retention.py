"""SEP-2848 §Retention: two phases, extended when deadlines move, records deleted when it ends.

Time is a :class:`ManualClock`; the backend is a small in-memory one whose answers the test sets
(the approval layer, not the backend, is under test).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from mcp_approval.approval.persistence.schema import approval_intents_table, approval_workflows_table
from mcp_approval.backends import ApprovalState, ApprovalStatus, ApprovalSubmission, StatusListener
from mcp_approval.clock import ManualClock, iso8601
from mcp_approval.protocol import META_TOOL_APPROVAL_DEADLINE
from tests.approval.inprocess import Harness, inprocess_treasury
from tests.support.polling import eventually

pytestmark = pytest.mark.anyio

DAY_MS = 86_400_000
RETENTION_S = 60.0


class SettableBackend:
    """An in-memory approval backend whose request states the test sets."""

    name = "settable"
    supports_cancel = True

    def __init__(self) -> None:
        self.requests: dict[str, ApprovalState] = {}
        self.keys: dict[str, str] = {}

    async def start(self, listener: StatusListener | None = None) -> None:
        self.listener = listener

    async def stop(self) -> None:
        return None

    async def submit(self, key: str, submission: ApprovalSubmission) -> str:
        handle = self.keys.setdefault(key, f"req-{len(self.keys) + 1}")
        self.requests.setdefault(handle, ApprovalState(ApprovalStatus.PENDING, deadline_ms=submission.deadline_ms))
        return handle

    async def find(self, key: str) -> str | None:
        return self.keys.get(key)

    async def status(self, handle: str) -> ApprovalState:
        return self.requests[handle]

    async def cancel(self, handle: str) -> None:
        self.requests[handle] = ApprovalState(ApprovalStatus.CANCELLED)


async def ttl_of(harness: Harness, task_id: str) -> int:
    return int((await harness.alice.get(task_id)).result["ttlMs"])


@pytest.mark.sep_check(
    "sep-2848-retention-covers-pending-deadline",
    "sep-2848-retention-covers-terminal-result",
    "sep-2848-retention-follows-later-deadline",
    "sep-2848-sensitive-records-protected",
    "sep-2848-bearer-credentials-encrypted",
)
async def test_retention_covers_moved_deadlines_and_the_terminal_result_then_ends(tmp_path: Path) -> None:
    clock = ManualClock()
    overrides = {"approval": {"result_retention_s": RETENTION_S, "max_pending_s": 30 * 86_400.0}}
    backend = SettableBackend()
    async with inprocess_treasury(tmp_path, overrides, clock=clock, backend=backend) as harness:
        start = clock.now_ms()
        created = (await harness.alice.call_tool("wire_transfer", {"to": "acct-ttl", "amount": 30_000})).result
        task_id = created["taskId"]
        retention_ms = round(RETENTION_S * 1000)
        # Phase one: createdAt + ttlMs covers the request deadline (the policy's P1D) plus retention.
        assert created["ttlMs"] == DAY_MS + retention_ms
        # The backend moves the deadline out to three days: ttlMs follows.
        (handle,) = backend.requests
        backend.requests[handle] = ApprovalState(ApprovalStatus.PENDING, deadline_ms=start + 3 * DAY_MS)
        await harness.deployment.approval.wake(handle)
        await eventually(lambda: ttl_of(harness, task_id), lambda ttl: ttl == 3 * DAY_MS + retention_ms)
        # Two and a half days later it is approved and runs; the result stays retrievable for the retention.
        clock.advance(5 * DAY_MS // 2)
        approval = {"id": "apr-1", "approved_until": iso8601(clock.now_ms() + 3_600_000)}
        backend.requests[handle] = ApprovalState(
            ApprovalStatus.APPROVED, approval=approval, approved_until_ms=clock.now_ms() + 3_600_000
        )
        await harness.deployment.approval.wake(handle)

        async def status() -> str:
            return str((await harness.alice.get(task_id)).result["status"])

        await eventually(status, lambda value: value == "completed")
        ttl = await ttl_of(harness, task_id)
        assert ttl >= 5 * DAY_MS // 2 + retention_ms  # covers terminalizedAt + resultRetention
        assert ttl >= 3 * DAY_MS + retention_ms  # and is never shortened
        # When retention ends the task, its workflow and its sealed call binding are deleted.
        clock.advance(ttl)
        unknown = await eventually(lambda: harness.alice.get(task_id), lambda reply: "error" in reply.body)
        assert unknown.error["code"] == -32602
        database = harness.deployment.approval.store.database

        async def leftovers() -> tuple[int, int]:
            await harness.deployment.approval.driver.reconcile()

            def count(conn: object) -> tuple[int, int]:
                workflows = conn.execute(  # type: ignore[attr-defined]
                    select(func.count()).where(approval_workflows_table.c.task_id == task_id)
                ).scalar_one()
                intents = conn.execute(  # type: ignore[attr-defined]
                    select(func.count()).where(approval_intents_table.c.task_id == task_id)
                ).scalar_one()
                return int(workflows), int(intents)

            return await database.read(count)

        await eventually(leftovers, lambda counts: counts == (0, 0))


async def test_a_moved_deadline_is_restated_in_the_tasks_status_message_and_meta(tmp_path: Path, db_url: str) -> None:
    """A tasks client sizes its wait by the deadline it reads, so a later one is restated (both databases)."""
    clock = ManualClock()
    overrides = {"approval": {"max_pending_s": 30 * 86_400.0}, "store": {"url": db_url}}
    backend = SettableBackend()
    async with inprocess_treasury(tmp_path, overrides, clock=clock, backend=backend) as harness:
        start = clock.now_ms()
        created = (await harness.alice.call_tool("wire_transfer", {"to": "acct-later", "amount": 30_000})).result
        first = created["_meta"][META_TOOL_APPROVAL_DEADLINE]
        assert first in created["statusMessage"]
        (handle,) = backend.requests
        backend.requests[handle] = ApprovalState(ApprovalStatus.PENDING, deadline_ms=start + 3 * DAY_MS)
        await harness.deployment.approval.wake(handle)
        later = iso8601(start + 3 * DAY_MS)

        async def task() -> dict[str, Any]:
            return (await harness.alice.get(created["taskId"])).result

        polled = await eventually(task, lambda t: t["_meta"][META_TOOL_APPROVAL_DEADLINE] == later)
        assert f"If no one decides by {later}, it expires and the call never runs." in polled["statusMessage"]
        assert first not in polled["statusMessage"]
        assert polled["status"] == "working"
