"""Identical calls admitted at once open one request, on SQLite and on PostgreSQL.

SQLite serializes write transactions; PostgreSQL at read committed does not, so there each
admission takes a lock on its call's dedup scope, and reads the in-flight intent before the live
workflow (a task creation committing between the two reads is then never missed).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from mcp_approval.approval.persistence.records import Admission, Intent, NewWorkflow
from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS
from mcp_approval.approval.persistence.states import IntentState
from mcp_approval.approval.persistence.store import ApprovalStore
from mcp_approval.storage import Database, migrate, open_database
from mcp_approval.tasks.schema import TASKS_MIGRATIONS

pytestmark = pytest.mark.anyio

OWNER, DIGEST = "a" * 64, "d" * 64
UNLIMITED = 10**9
CALLERS = 40


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[ApprovalStore]:
    database: Database = open_database(db_url)
    await migrate(database, TASKS_MIGRATIONS, APPROVAL_MIGRATIONS)
    try:
        yield ApprovalStore(database, result_retention_ms=60_000)
    finally:
        await database.close()


def intent(n: int, now: int) -> Intent:
    return Intent(
        key=f"key-{n}",
        task_id=f"task-{n}",
        generation=1,
        principal_digest=OWNER,
        tool_name="deploy",
        arguments_digest=DIGEST,
        body_sealed="k1:body",
        state=IntentState.OPEN,
        handle=None,
        created_at=now,
    )


def workflow(task_id: str, key: str) -> NewWorkflow:
    return NewWorkflow(
        task_id=task_id,
        intent_key=key,
        principal_digest=OWNER,
        tool_name="deploy",
        arguments_digest=DIGEST,
        binding_sealed="k1:binding",
        tool_fingerprint=None,
        backend="local",
        handle=f"h-{task_id}",
        template=None,
        request_deadline=None,
        next_check_at=0,
        ttl_ms=3_600_000,
        poll_interval_ms=1000,
        status_message="waiting",
        meta={},
    )


async def admit(store: ApprovalStore, n: int) -> tuple[Admission, str | None]:
    """One caller's whole creation: admission, then (when recorded) the handle and the task."""
    call = intent(n, store.clock.now_ms())
    admission, task_id = await store.record_intent(call, submissions_per_minute=UNLIMITED, max_pending=UNLIMITED)
    if admission is Admission.RECORDED:
        assert await store.mark_submitted(call.key, f"h-{call.task_id}")
        assert await store.create_task(workflow(call.task_id, call.key))
    return admission, task_id


async def test_identical_calls_admitted_at_once_open_one_request(store: ApprovalStore) -> None:
    answers = await asyncio.gather(*(admit(store, n) for n in range(CALLERS)))
    kinds = Counter(admission for admission, _ in answers)
    assert kinds == {Admission.RECORDED: 1, Admission.DUPLICATE: CALLERS - 1}
    # Every duplicate names the one request, whether it found the intent or the task.
    assert len({task_id for _, task_id in answers}) == 1


async def test_a_call_admitted_while_the_first_becomes_a_task_joins_it(store: ApprovalStore) -> None:
    """Admissions racing the first call's task creation, round after round: none opens a second."""
    for round_ in range(10):
        base = 1000 * (round_ + 1)
        first = intent(base, store.clock.now_ms())
        first = Intent(**{**first.__dict__, "arguments_digest": f"{round_:0>64}"})
        assert (await store.record_intent(first, submissions_per_minute=UNLIMITED, max_pending=UNLIMITED))[
            0
        ] is Admission.RECORDED
        assert await store.mark_submitted(first.key, "h")

        async def join(n: int, first: Intent = first) -> tuple[Admission, str | None]:
            call = Intent(**{**intent(n, store.clock.now_ms()).__dict__, "arguments_digest": first.arguments_digest})
            return await store.record_intent(call, submissions_per_minute=UNLIMITED, max_pending=UNLIMITED)

        bind = workflow(first.task_id, first.key)
        bind = NewWorkflow(**{**bind.__dict__, "arguments_digest": first.arguments_digest})
        created, *joined = await asyncio.gather(store.create_task(bind), *(join(base + n) for n in range(1, 9)))
        assert created
        assert {admission for admission, _ in joined} == {Admission.DUPLICATE}
        assert {task_id for _, task_id in joined} == {first.task_id}
