"""One lease per worker (tasks_0003): rows of the previous revision survive the upgrade with their
leases honoured, and a worker's renewal covers every task it holds in a fixed number of statements."""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from mcp_approval.clock import ManualClock
from mcp_approval.storage import Database, migrate, open_database
from mcp_approval.storage.migrations import Migrations
from mcp_approval.tasks import NewTask, TaskStatus
from mcp_approval.tasks.models import new_task_id
from mcp_approval.tasks.schema import TASKS_MIGRATIONS, tasks_table
from mcp_approval.tasks.sql_store import SqlTaskStore
from mcp_approval.tasks.store_url import store_from_url

pytestmark = pytest.mark.anyio

LEASE_MS = 10_000
LOST = {"code": -32603, "message": "lost"}


def _history_up_to(revision_files: tuple[str, ...], folder: Path) -> Migrations:
    """The tasks history as it stood before tasks_0003: the same files, the later ones left out."""
    folder.mkdir()
    for name in revision_files:
        shutil.copy(TASKS_MIGRATIONS.location / name, folder / name)
    return Migrations("tasks", folder)


def _row(task_id: str, now: int, **values: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "task_id": task_id,
        "principal_digest": "p" * 64,
        "tool_name": "t",
        "status": TaskStatus.WORKING.value,
        "status_message": None,
        "created_at": now,
        "updated_at": now,
        "ttl_ms": 3_600_000,
        "expires_at": now + 3_600_000,
        "poll_interval_ms": 1000,
        "result_json": None,
        "error_json": None,
        "input_requests_json": "{}",
        "input_responses_json": "{}",
        "input_seq": 0,
        "cancel_requested": False,
        "owner": "old-worker",
        "lease_expires_at": now + LEASE_MS,
        "version": 0,
        "handler": None,
        "meta_json": None,
    }
    row.update(values)
    return row


async def test_running_and_pending_rows_keep_their_leases_across_the_upgrade(db_url: str, tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.now_ms()
    previous = _history_up_to(
        ("__init__.py", "tasks_0001_tasks.py", "tasks_0002_handler.py"), tmp_path / "tasks_0002_history"
    )
    rows = [
        _row("running", now),
        _row("asking", now, status=TaskStatus.INPUT_REQUIRED.value, input_requests_json='{"in-1":{}}', input_seq=1),
        _row("cancelling", now, cancel_requested=True),
        _row("renewed-late", now, lease_expires_at=now + 3 * LEASE_MS),
        _row("already-lapsed", now, lease_expires_at=now - 1),
        _row("approval", now, owner=None, lease_expires_at=None, handler="approval"),
    ]
    database = open_database(db_url)
    try:
        await migrate(database, previous)
        await database.write(lambda conn: conn.execute(tasks_table.insert(), rows))
        assert await migrate(database, TASKS_MIGRATIONS) == {"tasks": ("tasks_0002",)}
        store = SqlTaskStore(db_url, clock=clock, database=database)
        survived = {row["task_id"]: await store.get(row["task_id"]) for row in rows}
        clock.advance(LEASE_MS - 1)
        # The leases written before the upgrade still count: only the one already lapsed fails.
        assert await store.fail_lapsed(LOST, "lost") == ["already-lapsed"]
        signals = await store.heartbeat("old-worker", ["cancelling"], LEASE_MS)
        clock.advance(2)
        # Past the rows' own leases: the worker lease renewed after the upgrade covers all its rows.
        assert await store.fail_lapsed(LOST, "lost") == []
        clock.advance(LEASE_MS)
        lapsed = sorted(await store.fail_lapsed(LOST, "lost"))
        after = {row["task_id"]: await store.get(row["task_id"]) for row in rows}
    finally:
        await database.close()
    for row in rows:
        record = survived[row["task_id"]]
        assert record is not None
        assert (record.status.value, record.owner, record.lease_expires_at) == (
            row["status"],
            row["owner"],
            row["lease_expires_at"],
        )
    assert [(s.task_id, s.cancel_requested) for s in signals] == [("cancelling", True)]
    assert lapsed == ["asking", "cancelling", "renewed-late", "running"]
    assert {task_id: record.status for task_id, record in after.items() if record is not None} == {
        "running": TaskStatus.FAILED,
        "asking": TaskStatus.FAILED,
        "cancelling": TaskStatus.FAILED,
        "renewed-late": TaskStatus.FAILED,
        "already-lapsed": TaskStatus.FAILED,
        "approval": TaskStatus.WORKING,
    }


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ]
)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store of each kind."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tasks.db'}"
    return str(request.getfixturevalue(f"{request.param}_url"))


async def test_a_task_not_yet_covered_by_its_worker_lease_lives_on_its_own_lease(store_url: str) -> None:
    clock = ManualClock()
    store = store_from_url(store_url, clock=clock)
    await store.open()
    try:
        first = await store.create(_new_task("w1"))
        await store.heartbeat("w1", [first.task_id], LEASE_MS)  # covers first; w1's lease ends at +LEASE_MS
        clock.advance(LEASE_MS - 1)
        late = await store.create(_new_task("w1"))  # its own lease ends at 2 * LEASE_MS - 1
        clock.advance(2)
        lapsed_first = await store.fail_lapsed(LOST, "lost")
        late_record = await store.get(late.task_id)
        clock.advance(LEASE_MS)
        lapsed_late = await store.fail_lapsed(LOST, "lost")
    finally:
        await store.close()
    assert lapsed_first == [first.task_id]  # the worker lapsed; its new task still has its own lease
    assert late_record is not None
    assert (late_record.status, late_record.lease_expires_at) == (TaskStatus.WORKING, late.lease_expires_at)
    assert lapsed_late == [late.task_id]


async def test_a_worker_renewing_again_after_a_pause_keeps_its_new_tasks(store_url: str) -> None:
    """A worker whose lease lapsed unswept renews again: its tasks, new ones too, stay covered."""
    clock = ManualClock()
    store = store_from_url(store_url, clock=clock)
    await store.open()
    try:
        old = await store.create(_new_task("w1"))
        await store.heartbeat("w1", [old.task_id], LEASE_MS)
        clock.advance(LEASE_MS - 1)
        new = await store.create(_new_task("w1"))
        clock.advance(2)
        await store.heartbeat("w1", [old.task_id, new.task_id], LEASE_MS)  # lapsed, but nobody swept yet
        clock.advance(LEASE_MS - 1)
        lapsed = await store.fail_lapsed(LOST, "lost")
        old_record, new_record = await store.get(old.task_id), await store.get(new.task_id)
    finally:
        await store.close()
    assert lapsed == []
    assert old_record is not None
    assert new_record is not None
    assert (old_record.status, new_record.status) == (TaskStatus.WORKING, TaskStatus.WORKING)
    assert new_record.lease_expires_at == clock.now_ms() + 1


async def test_renewal_costs_the_same_statements_for_one_task_or_five_hundred(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    store = SqlTaskStore(url, clock=ManualClock())
    await store.open()
    try:
        counts = []
        for held in (1, 500):
            ids = [(await store.create(_new_task(f"w{held}"))).task_id for _ in range(held)]
            await store.heartbeat(f"w{held}", ids, LEASE_MS)  # hands the new tasks' leases over
            counts.append(await _statements(store.database, partial(store.heartbeat, f"w{held}", ids, LEASE_MS)))
    finally:
        await store.close()
    assert counts[0] == counts[1]


def _new_task(owner: str) -> NewTask:
    return NewTask(
        task_id=new_task_id(),
        principal_digest=None,
        tool_name="t",
        ttl_ms=None,
        poll_interval_ms=1000,
        owner=owner,
        lease_ms=LEASE_MS,
    )


async def _statements(database: Database, run: Any) -> int:
    """How many SQL statements ``run()`` sends."""
    sent: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        sent.append(statement)

    event.listen(database.engine, "before_cursor_execute", count)
    try:
        await run()
    finally:
        event.remove(database.engine, "before_cursor_execute", count)
    return len(sent)
