"""The counts of unfinished tasks the database keeps (tasks_0004), in all and per principal, match
a count of the rows through every way a task starts or stops being unfinished, and limits are
checked against them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import Connection, func, select

from mcp_approval.clock import ManualClock
from mcp_approval.storage import migrate, open_database
from mcp_approval.tasks import NewTask, TaskStatus
from mcp_approval.tasks.models import new_task_id
from mcp_approval.tasks.schema import TASKS_MIGRATIONS, task_counts_table, tasks_table
from mcp_approval.tasks.sql_store import SqlTaskStore
from mcp_approval.tasks.store import TaskLimitReachedError
from tests.tasks.test_worker_leases import _history_up_to, _row

pytestmark = pytest.mark.anyio


def _task(**fields: object) -> NewTask:
    base: dict[str, object] = dict(
        task_id=new_task_id(),
        principal_digest=None,
        tool_name="t",
        ttl_ms=60_000,
        poll_interval_ms=1000,
        owner="w1",
        lease_ms=1000,
    )
    base.update(fields)
    return NewTask(**base)  # type: ignore[arg-type]


ALICE = "a" * 64


def _scanned(conn: Connection, principal: str | None = None) -> int:
    active = tasks_table.c.status.in_(["working", "input_required"])
    if principal is not None:
        active &= tasks_table.c.principal_digest == principal
    return int(conn.execute(select(func.count()).select_from(tasks_table).where(active)).scalar_one())


def _delta_rows(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).select_from(task_counts_table)).scalar_one())


async def test_the_kept_count_follows_every_change_of_the_unfinished_set(db_url: str) -> None:
    clock = ManualClock()
    store = SqlTaskStore(db_url, clock=clock)
    await store.open()
    seen: list[tuple[int, int]] = []
    seen_own: list[tuple[int, int]] = []

    async def check() -> None:
        seen.append((await store.count_active(), await store.database.read(_scanned)))
        own = await store.database.read(lambda conn: _scanned(conn, ALICE))
        seen_own.append((await store.count_active(ALICE), own))

    try:
        tasks = [await store.create(_task(principal_digest=ALICE if i % 2 else None)) for i in range(6)]
        await store.create(_task(status=TaskStatus.COMPLETED, result={"done": True}))  # born finished
        await check()
        await store.add_input_requests(tasks[0].task_id, [{"method": "elicitation/create"}])  # still unfinished
        await store.transition(tasks[1].task_id, TaskStatus.COMPLETED, result={})
        await store.transition(tasks[1].task_id, TaskStatus.CANCELLED)  # absorbed: no change
        await asyncio.gather(
            *(store.transition(tasks[2].task_id, s) for s in (TaskStatus.FAILED, TaskStatus.CANCELLED))
        )
        await check()
        await store.heartbeat("w1", [tasks[3].task_id], 1000)
        clock.advance(1001)
        await store.fail_lapsed({"code": -32603, "message": "lost"}, "lost")  # the rest of w1's tasks
        await check()
        await store.create(_task(ttl_ms=1000))  # unfinished when its retention ends: purged
        clock.advance(1000)
        await store.purge_expired()  # and folds each count's rows into one
        await check()
        rows_after_fold = await store.database.read(_delta_rows)
    finally:
        await store.close()
    assert seen == [(6, 6), (4, 4), (0, 0), (0, 0)]
    assert seen_own == [(3, 3), (2, 2), (0, 0), (0, 0)]
    assert rows_after_fold == 0  # every count is 0: folded away


async def test_the_limit_is_checked_against_the_kept_count(db_url: str) -> None:
    store = SqlTaskStore(db_url)
    await store.open()
    try:
        first = await store.create(_task(), max_active=2)
        await store.create(_task(), max_active=2)
        with pytest.raises(TaskLimitReachedError) as refused:
            await store.create(_task(), max_active=2)
        await store.transition(first.task_id, TaskStatus.COMPLETED, result={})
        await store.create(_task(), max_active=2)  # a finished task frees its place
        await store.create(_task(principal_digest=ALICE), max_active_per_principal=1)
        with pytest.raises(TaskLimitReachedError) as own_refused:
            await store.create(_task(principal_digest=ALICE), max_active_per_principal=1)
        await store.create(_task(principal_digest="b" * 64), max_active_per_principal=1)  # another principal's count
    finally:
        await store.close()
    assert (refused.value.limit, refused.value.active) == ("max_tasks", 2)
    assert (own_refused.value.limit, own_refused.value.active) == ("max_per_principal", 1)


async def test_the_upgrade_counts_the_unfinished_tasks_already_stored(db_url: str, tmp_path: Path) -> None:
    now = ManualClock().now_ms()
    previous = _history_up_to(("__init__.py", "tasks_0001_tasks.py", "tasks_0002_handler.py"), tmp_path / "history")
    rows = [
        _row("a", now),
        _row("b", now, status=TaskStatus.INPUT_REQUIRED.value),
        _row("c", now, status=TaskStatus.COMPLETED.value, owner=None, lease_expires_at=None),
    ]
    database = open_database(db_url)
    try:
        await migrate(database, previous)
        await database.write(lambda conn: conn.execute(tasks_table.insert(), rows))
        await migrate(database, TASKS_MIGRATIONS)
        store = SqlTaskStore(db_url, database=database)
        counted = await store.count_active()
        await store.transition("a", TaskStatus.COMPLETED, result={})
        after = await store.count_active()
    finally:
        await database.close()
    assert (counted, after) == (2, 1)
