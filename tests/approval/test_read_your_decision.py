"""Read-your-decision: once a reviewer's decision is stored, the identical retry gets its outcome.

The retry is sent at once after the decision, before this server has looked at the request again
(the decision is made through another worker's backend, so no listener wakes this one, and its
next poll is 30 s away). It must not answer "still open" and must not open a second request.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.util import await_only

from mcp_approval.approval.persistence.records import Admission, Intent, TaskOutcome
from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS
from mcp_approval.approval.persistence.states import IntentState
from mcp_approval.approval.persistence.store import ApprovalStore
from mcp_approval.server.local_backend import local_backend_from_config
from mcp_approval.storage import migrate, open_database
from mcp_approval.tasks.schema import TASKS_MIGRATIONS
from mcp_approval.tasks.states import TaskStatus
from tests.approval.inprocess import Harness, inprocess_treasury
from tests.approval.test_admission_counts import _workflow
from tests.approval.test_without_tasks import NO_TASKS, reference_of, transfers
from tests.support.polling import eventually
from tests.treasury.helpers import DISPOSITION, approval_for, text_of

pytestmark = pytest.mark.anyio
SLOW_REQUEST_MODE = {"approval": {"without_tasks": "request", "poll_interval_s": 30.0, "follow_changes": False}}


async def open_request(harness: Harness, account: str) -> str:
    """A pending request for a transfer to ``account``, after the server's first look at it."""
    first = (await harness.alice.call_tool("wire_transfer", {"to": account, "amount": 30_000}, meta=NO_TASKS)).result
    reference = reference_of(first)
    store = harness.deployment.approval.store

    async def next_look_in_ms() -> int:
        workflow = await store.get(reference)
        assert workflow is not None
        return workflow.next_check_at - workflow.created_at

    await eventually(next_look_in_ms, lambda delay: delay > 10_000)
    return reference


async def decide_on_another_worker(harness: Harness, account: str, decision: str) -> None:
    deployment = harness.deployment
    other = local_backend_from_config(deployment.config, deployment.approval.store.database, with_resolvers=False)
    approval = await approval_for(harness.reviewer("carol"), "wire_transfer", to=account)
    await other.decide(approval["id"], "carol", decision)  # type: ignore[arg-type]


async def retry(harness: Harness, account: str) -> dict:  # type: ignore[type-arg]
    return (await harness.alice.call_tool("wire_transfer", {"to": account, "amount": 30_000}, meta=NO_TASKS)).result


async def test_a_retry_sent_at_once_after_an_approval_gets_the_result(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, SLOW_REQUEST_MODE) as harness:
        await open_request(harness, "acct-ryd-approved")
        await decide_on_another_worker(harness, "acct-ryd-approved", "approve")
        result = await retry(harness, "acct-ryd-approved")
        assert result["isError"] is False, text_of(result)
        assert result["_meta"][DISPOSITION] == "approved-executed"
        assert len(transfers(harness, "acct-ryd-approved")) == 1
        assert await harness.reviewer("carol").pending() == []


async def test_a_retry_sent_at_once_after_a_denial_gets_the_denial_and_opens_nothing(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, SLOW_REQUEST_MODE) as harness:
        await open_request(harness, "acct-ryd-denied")
        await decide_on_another_worker(harness, "acct-ryd-denied", "deny")
        result = await retry(harness, "acct-ryd-denied")
        assert result["isError"] is True
        assert result["_meta"].get(DISPOSITION) == "denied-not-executed", text_of(result)
        assert await harness.reviewer("carol").pending() == []  # the denied call did not go back to the queue
        assert transfers(harness, "acct-ryd-denied") == []


def _intent(number: int, digest: str) -> Intent:
    return Intent(
        key=f"key-{number}",
        task_id=f"task-{number}",
        generation=1,
        principal_digest="alice",
        tool_name="deploy",
        arguments_digest=digest,
        body_sealed="k1:body",
        state=IntentState.OPEN,
        handle=None,
        created_at=0,
    )


async def _record(store: ApprovalStore, intent: Intent, *, owed_first: bool) -> tuple[Admission, str | None]:
    return await store.record_intent(
        intent, submissions_per_minute=1000, max_pending=1000, task_limits=(None, None), owed_first=owed_first
    )


async def _open_request_without_tasks(store: ApprovalStore, digest: str) -> None:
    """Request ``task-1`` for alice's call ``digest``, made without tasks (its outcome owed to her retry)."""
    first = _intent(1, digest)
    assert await _record(store, first, owed_first=True) == (Admission.RECORDED, "task-1")
    assert await store.mark_submitted(first.key, "h-1")
    workflow = replace(_workflow("task-1", first.key, "alice"), arguments_digest=digest, owed_to_retry=True)
    assert await store.create_task(workflow)


async def test_an_ended_request_owing_its_outcome_is_found_in_the_admission_transaction(store: ApprovalStore) -> None:
    """The request ended between the retry's look for an owed outcome and its admission: the
    admission itself finds it, so the retry answers that outcome instead of opening a request."""
    digest = "d" * 64
    await _open_request_without_tasks(store, digest)
    retry = _intent(2, digest)
    assert await _record(store, retry, owed_first=True) == (Admission.DUPLICATE, "task-1")  # still open
    assert await store.fence("task-1", TaskOutcome(TaskStatus.COMPLETED, "denied", disposition="denied-not-executed"))
    assert await _record(store, retry, owed_first=True) == (Admission.OUTCOME_OWED, "task-1")
    assert await store.take_retry_outcome("alice", "deploy", digest) == "task-1"
    assert await _record(store, retry, owed_first=True) == (Admission.RECORDED, "task-2")  # the outcome was taken


async def test_a_retry_whose_request_ends_after_its_admission_gets_the_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The admission found the request still running; it finished before the retry looked at the
    decision. The retry answers the result (not "still open"), and the outcome is taken once."""
    async with inprocess_treasury(tmp_path, SLOW_REQUEST_MODE) as harness:
        service = harness.deployment.approval
        store = service.store
        reference = await open_request(harness, "acct-ryd-ended")
        await decide_on_another_worker(harness, "acct-ryd-ended", "approve")
        admit = store.record_intent

        async def admit_then_finish(*args: object, **kwargs: object) -> tuple[Admission, str | None]:
            admission = await admit(*args, **kwargs)  # type: ignore[arg-type]
            if admission == (Admission.DUPLICATE, reference):  # the request runs, and ends, right now
                service.driver.nudge(reference)
                await eventually(lambda: store.get(reference), lambda w: w is not None and w.phase == "finished")
            return admission

        monkeypatch.setattr(store, "record_intent", admit_then_finish)
        result = await retry(harness, "acct-ryd-ended")
        assert result["isError"] is False, text_of(result)
        assert result["_meta"][DISPOSITION] == "approved-executed"
        assert len(transfers(harness, "acct-ryd-ended")) == 1


@pytest.mark.postgres
async def test_a_request_ending_between_the_admissions_reads_is_found_owed(postgres_url: str) -> None:
    """On PostgreSQL each statement of the admission sees the commits made before it started, and
    an ending takes no dedup lock. A request that ends after the look for an owed outcome and
    before the look for a live request is in neither; the admission must still answer it (here:
    owed), not open a second request for the same call."""
    database, other = open_database(postgres_url), open_database(postgres_url)
    await migrate(database, TASKS_MIGRATIONS, APPROVAL_MIGRATIONS)
    store, ending_side = (
        ApprovalStore(database, result_retention_ms=60_000),
        ApprovalStore(other, result_retention_ms=60_000),
    )
    try:
        digest = "e" * 64
        await _open_request_without_tasks(store, digest)
        denial = TaskOutcome(TaskStatus.COMPLETED, "denied", disposition="denied-not-executed")
        ended: list[bool] = []

        def end_after_the_owed_read(conn: object, cursor: object, statement: str, *args: object) -> None:
            if not ended and "owed_to_retry" in statement and statement.lstrip().upper().startswith("SELECT"):
                # Another connection ends the request and commits, between this read and the next.
                ended.append(await_only(asyncio.wait_for(ending_side.fence("task-1", denial), 10)))

        event.listen(database.engine.sync_engine, "after_cursor_execute", end_after_the_owed_read)
        try:
            admission = await _record(store, _intent(2, digest), owed_first=True)
        finally:
            event.remove(database.engine.sync_engine, "after_cursor_execute", end_after_the_owed_read)
        assert ended == [True]
        assert admission == (Admission.OUTCOME_OWED, "task-1")
    finally:
        await database.close()
        await other.close()
