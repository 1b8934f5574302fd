"""TaskRows: the task row operations inside a transaction another layer holds.

What a caller writes beside the task row commits or rolls back with it, and the state table
guards a transition made this way exactly as it guards ``SqlTaskStore.transition``.
"""

from __future__ import annotations

import ast
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, literal, select

from mcp_approval.clock import ManualClock
from mcp_approval.tasks import NewTask, TaskStatus
from mcp_approval.tasks.sql_store import SqlTaskStore, TaskRows

pytestmark = pytest.mark.anyio

ROWS = TaskRows()
NOW = 1_780_000_000_000
SRC = Path(__file__).resolve().parents[2] / "src" / "mcp_approval"


def new_task(task_id: str, **fields: object) -> NewTask:
    base: dict[str, object] = {
        "task_id": task_id,
        "principal_digest": "p" * 64,
        "tool_name": "t",
        "ttl_ms": 60_000,
        "poll_interval_ms": 100,
        "owner": None,
        "lease_ms": None,
    }
    base.update(fields)
    return NewTask(**base)  # type: ignore[arg-type]


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[SqlTaskStore]:
    s = SqlTaskStore(db_url, clock=ManualClock(NOW))
    await s.open()
    yield s
    await s.close()


class Refused(Exception):
    """What the caller's own step raises after the task row was written."""


async def test_a_task_row_written_in_a_failing_transaction_is_rolled_back_with_it(store: SqlTaskStore) -> None:
    def create_then_fail(conn: Connection) -> None:
        ROWS.insert(conn, new_task("t-rolled-back"), NOW)
        raise Refused

    with pytest.raises(Refused):
        await store.database.write(create_then_fail)
    assert await store.get("t-rolled-back") is None


async def test_inputs_outstanding_from_creation_are_numbered_after_them(store: SqlTaskStore) -> None:
    requests = {"in-1": {"method": "elicitation/create", "params": {}}}
    status = TaskStatus.INPUT_REQUIRED
    await store.database.write(
        lambda conn: ROWS.insert(conn, new_task("t-inputs", status=status), NOW, input_requests=requests)
    )
    record = await store.get("t-inputs")
    assert record is not None
    assert (record.status, record.input_requests, record.input_seq) == (status, requests, 1)
    assert await store.add_input_requests("t-inputs", [{"method": "elicitation/create", "params": {}}]) == ["in-2"]


async def test_a_transition_in_the_callers_transaction_follows_the_state_table(store: SqlTaskStore) -> None:
    await store.create(new_task("t-done"))

    def finish(conn: Connection) -> tuple[bool, bool]:
        done = ROWS.transition(conn, "t-done", TaskStatus.COMPLETED, NOW + 5, result={"content": []})
        again = ROWS.transition(conn, "t-done", TaskStatus.FAILED, NOW + 6, error={"code": 1})
        return done, again

    assert await store.database.write(finish) == (True, False)
    record = await store.get("t-done")
    assert record is not None
    assert (record.status, record.result, record.error, record.updated_at) == (
        TaskStatus.COMPLETED,
        {"content": []},
        None,
        NOW + 5,
    )


async def test_retention_is_extended_never_shortened(store: SqlTaskStore) -> None:
    await store.create(new_task("t-ttl", ttl_ms=60_000))
    await store.database.write(lambda conn: ROWS.retain_until(conn, "t-ttl", NOW + 120_000))
    await store.database.write(lambda conn: ROWS.retain_until(conn, "t-ttl", NOW + 1_000))
    record = await store.get("t-ttl")
    assert record is not None
    assert record.ttl_ms == 120_000


async def test_lock_and_take_input_responses_see_the_rows_of_the_same_transaction(store: SqlTaskStore) -> None:
    await store.create(new_task("t-answers"))
    keys = await store.add_input_requests("t-answers", [{"method": "elicitation/create", "params": {}}])
    assert keys is not None
    await store.submit_input_responses("t-answers", {keys[0]: {"action": "accept"}})

    def take(conn: Connection) -> tuple[dict[str, object], dict[str, object]]:
        locked = ROWS.lock(conn, "t-answers")
        assert locked is not None
        return dict(locked.input_responses), ROWS.take_input_responses(conn, "t-answers", NOW)

    before, taken = await store.database.write(take)
    assert before == taken == {keys[0]: {"action": "accept"}}
    assert await store.take_input_responses("t-answers") == {}


async def test_exists_tells_which_task_rows_are_there(store: SqlTaskStore) -> None:
    await store.create(new_task("t-here"))

    def present(conn: Connection) -> list[str]:
        ids = ["t-here", "t-gone"]
        return [task_id for task_id in ids if conn.execute(select(ROWS.exists(literal(task_id)))).scalar_one()]

    assert await store.database.read(present) == ["t-here"]


def test_only_the_tasks_layer_names_the_tasks_table() -> None:
    """No other package imports the tasks table: task rows are written through TaskRows."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.is_relative_to(SRC / "tasks"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "mcp_approval.tasks.schema":
                offenders.append(str(path.relative_to(SRC)))
    assert offenders == []
