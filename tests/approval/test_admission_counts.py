"""Admission counts (``approval_counts``, and the tasks layer's ``task_counts``): the database's
triggers keep them equal to the rows they count whatever statement moves a row, admission refuses
by them, and an upgrade counts the pending requests and unfinished tasks already stored."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, delete, func, select, update

from mcp_approval.approval.persistence import statements as store_sql
from mcp_approval.approval.persistence.records import Admission, Intent, NewWorkflow, TaskOutcome
from mcp_approval.approval.persistence.schema import (
    APPROVAL_MIGRATIONS,
    approval_counts_table,
    approval_intents_table,
    approval_workflows_table,
)
from mcp_approval.approval.persistence.states import Disposition, IntentState
from mcp_approval.approval.persistence.store import ApprovalStore
from mcp_approval.clock import ManualClock
from mcp_approval.storage import Database, migrate, open_database
from mcp_approval.storage.counts import FOLD_AT
from mcp_approval.tasks.schema import TASKS_MIGRATIONS, task_counts_table, tasks_table
from mcp_approval.tasks.sql_store import SqlTaskStore
from mcp_approval.tasks.states import TaskStatus
from mcp_approval.tasks.store import NewTask

pytestmark = pytest.mark.anyio

_T, _W, _I, _C, _TC = (
    tasks_table,
    approval_workflows_table,
    approval_intents_table,
    approval_counts_table,
    task_counts_table,
)
ALICE, BOB = "a" * 64, "b" * 64
UNLIMITED = 10**9
FENCED = TaskOutcome(TaskStatus.CANCELLED, status_message="withdrawn")
RAN = TaskOutcome(TaskStatus.COMPLETED, result={"content": []}, disposition=Disposition.APPROVED_EXECUTED.value)


@pytest.fixture
async def database(db_url: str) -> AsyncIterator[Database]:
    database = open_database(db_url)
    await migrate(database, TASKS_MIGRATIONS, APPROVAL_MIGRATIONS)
    try:
        yield database
    finally:
        await database.close()


def _true_counts(conn: Connection) -> dict[str, int]:
    """The counts computed from the rows themselves."""
    active = [status.value for status in (TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED)]
    counts = {"tasks": int(conn.execute(select(func.count()).where(_T.c.status.in_(active))).scalar_one())}
    owned = select(_T.c.principal_digest, func.count()).where(_T.c.status.in_(active)).group_by(_T.c.principal_digest)
    counts |= {f"tasks:{owner}": int(n) for owner, n in conn.execute(owned) if owner is not None}
    pending = select(_W.c.principal_digest, func.count()).where(_W.c.phase == "pending").group_by(_W.c.principal_digest)
    counts |= {f"pending:{owner}": int(n) for owner, n in conn.execute(pending)}
    return {scope: n for scope, n in counts.items() if n}


def _kept_counts(conn: Connection, prefix: str = "") -> dict[str, int]:
    """The counts as admission reads them: the per-minute ones (``prefix="rate:"``), or the others."""
    kept: dict[str, int] = {}
    for table in (_C, _TC):
        query = select(table.c.scope, func.sum(table.c.delta)).group_by(table.c.scope)
        kept |= {
            scope: int(n) for scope, n in conn.execute(query) if n and scope.startswith("rate:") == (prefix == "rate:")
        }
    return kept


def _rows_per_scope(conn: Connection) -> list[int]:
    """How many rows each scope of both counts tables is spread over."""
    return [
        n for table in (_C, _TC) for _, n in conn.execute(select(table.c.scope, func.count()).group_by(table.c.scope))
    ]


def _true_rates(conn: Connection) -> dict[str, int]:
    """The intents per principal and minute, computed from the rows."""
    query = select(_I.c.principal_digest, _I.c.created_at)
    counts: Counter[str] = Counter()
    for owner, created_at in conn.execute(query):
        counts[store_sql.rate_scope(owner, created_at // 60_000)] += 1
    return dict(counts)


async def _assert_counts_hold(database: Database) -> None:
    assert await database.read(_kept_counts) == await database.read(_true_counts)
    assert await database.read(functools.partial(_kept_counts, prefix="rate:")) == await database.read(_true_rates)


class Requests:
    """Approval tasks created through the store's own creation path."""

    def __init__(self, store: ApprovalStore) -> None:
        self.store = store
        self.made = 0

    async def open(self, owner: str, **limits: Any) -> tuple[Admission, str]:
        self.made += 1
        task_id = f"task-{self.made}"
        intent = Intent(
            key=f"key-{self.made}",
            task_id=task_id,
            generation=1,
            principal_digest=owner,
            tool_name="deploy",
            arguments_digest=f"{self.made:0>64}",
            body_sealed="k1:body",
            state=IntentState.OPEN,
            handle=None,
            created_at=self.store.clock.now_ms(),
        )
        admission, _ = await self.store.record_intent(
            intent,
            submissions_per_minute=limits.get("per_minute", UNLIMITED),
            max_pending=limits.get("max_pending", UNLIMITED),
            task_limits=limits.get("task_limits", (None, None)),
        )
        if admission is not Admission.RECORDED:
            return admission, task_id
        assert await self.store.mark_submitted(intent.key, f"h-{task_id}")
        assert await self.store.create_task(_workflow(task_id, intent.key, owner))
        return admission, task_id


def _workflow(task_id: str, key: str, owner: str) -> NewWorkflow:
    return NewWorkflow(
        task_id=task_id,
        intent_key=key,
        principal_digest=owner,
        tool_name="deploy",
        arguments_digest=f"{task_id:0>64}",
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


def _plain_task(task_id: str, owner: str | None) -> NewTask:
    return NewTask(
        task_id=task_id,
        principal_digest=owner,
        tool_name="slow_job",
        ttl_ms=3_600_000,
        poll_interval_ms=1000,
        owner="worker-1",
        lease_ms=60_000,
    )


async def test_the_counts_follow_every_statement_that_moves_a_row(database: Database) -> None:
    store = ApprovalStore(database, result_retention_ms=60_000)
    requests = Requests(store)
    opened = [(await requests.open(owner))[1] for owner in (ALICE, ALICE, ALICE, BOB, BOB)]
    await _assert_counts_hold(database)
    # Creation, a fence, a claim (pending -> claimed), its finish.
    assert await store.fence(opened[0], FENCED)
    assert await store.claim(opened[1], 1, "worker-1", lease_until=10**13, deadline=10**13)
    await _assert_counts_hold(database)
    assert await store.finish(opened[1], RAN)
    await _assert_counts_hold(database)
    # Plain tasks beside them, one without a principal; an input round trip keeps a task counted.
    for task_id, owner in (("plain-1", ALICE), ("plain-2", None), ("plain-3", BOB)):
        await database.write(functools.partial(store.tasks.insert, task=_plain_task(task_id, owner), now_ms=1))
    await database.write(lambda conn: store.tasks.transition(conn, "plain-1", TaskStatus.INPUT_REQUIRED, 2))
    await database.write(lambda conn: store.tasks.transition(conn, "plain-1", TaskStatus.WORKING, 3))
    await _assert_counts_hold(database)
    # Bulk statements: a lapse failing several tasks at once, a status rewritten to itself, a purge.
    await database.write(
        lambda conn: conn.execute(update(_T).where(_T.c.task_id.in_(["plain-2", "plain-3"])).values(status="failed"))
    )
    await database.write(lambda conn: conn.execute(update(_T).values(status=_T.c.status)))
    await _assert_counts_hold(database)
    await database.write(lambda conn: conn.execute(delete(_T).where(_T.c.task_id.in_([opened[3], "plain-1"]))))
    await store.purge_orphans()  # deletes the orphaned (pending) workflow of opened[3], and its intent
    assert await database.read(_kept_counts) == await database.read(_true_counts)


async def test_admission_folds_the_rows_it_reads_without_changing_a_count(database: Database) -> None:
    store = ApprovalStore(database, result_retention_ms=60_000)
    requests = Requests(store)
    for _ in range(FOLD_AT + 8):
        _, task_id = await requests.open(ALICE, task_limits=(UNLIMITED, UNLIMITED))
        assert await store.fence(task_id, FENCED)
    # Each scope read (alice's pending workflows, unfinished tasks in all and alice's) was folded
    # once it passed FOLD_AT rows; the per-minute one, read as a range, too.
    assert max(await database.read(_rows_per_scope)) <= FOLD_AT + 2
    await _assert_counts_hold(database)
    # The periodic purges fold every scope, also those nobody's admission reads any more.
    for i in range(5):
        await database.write(functools.partial(store.tasks.insert, task=_plain_task(f"plain-{i}", BOB), now_ms=1))
    await store.purge_orphans()
    await SqlTaskStore(database=database).purge_expired()
    assert set(await database.read(_rows_per_scope)) == {1}
    assert await database.read(_kept_counts) == await database.read(_true_counts)


async def test_admission_refuses_by_the_counts(database: Database) -> None:
    store = ApprovalStore(database, result_retention_ms=60_000)
    requests = Requests(store)
    first = (await requests.open(ALICE, max_pending=2))[1]
    await requests.open(ALICE, max_pending=2)
    assert (await requests.open(ALICE, max_pending=2))[0] is Admission.TOO_MANY_PENDING
    assert (await requests.open(BOB, max_pending=2))[0] is Admission.RECORDED  # another principal's count
    assert (await requests.open(BOB, task_limits=(3, None)))[0] is Admission.TASK_LIMIT  # 3 unfinished in all
    assert (await requests.open(ALICE, task_limits=(None, 2)))[0] is Admission.PRINCIPAL_TASK_LIMIT  # 2 of alice's
    assert await store.fence(first, FENCED)  # a withdrawn request frees its place
    assert (await requests.open(ALICE, max_pending=2))[0] is Admission.RECORDED


def _to_revision(conn: Connection, history: Any, target: str) -> None:
    """Upgrade one history up to ``target`` only (a database an earlier release left)."""
    script = history.script()
    context = MigrationContext.configure(
        connection=conn,
        opts={"version_table": history.version_table, "fn": lambda heads, _ctx: script._upgrade_revs(target, heads)},
    )
    with Operations.context(context):
        context.run_migrations()


async def test_an_upgrade_counts_the_pending_requests_already_stored(db_url: str) -> None:
    database = open_database(db_url)
    try:
        await migrate(database, TASKS_MIGRATIONS)
        await database.write(lambda conn: _to_revision(conn, APPROVAL_MIGRATIONS, "approval_0002"))
        # Rows as approval_0002 stored them: three pending requests of alice, one ended one.
        tasks = ApprovalStore(database, result_retention_ms=60_000).tasks
        for i, phase in enumerate(("pending", "pending", "pending", "fenced")):
            task_id = f"old-{i}"
            workflow = {**_legacy_workflow(task_id), "phase": phase}
            status = TaskStatus.WORKING if phase == "pending" else TaskStatus.CANCELLED
            task = NewTask(
                task_id=task_id,
                principal_digest=ALICE,
                tool_name="deploy",
                ttl_ms=10**7,
                poll_interval_ms=1000,
                owner=None,
                lease_ms=None,
                status=status,
            )
            await database.write(functools.partial(tasks.insert, task=task, now_ms=1))
            await database.write(lambda conn, row=workflow: conn.execute(_W.insert(), row))
            intent = {**_legacy_intent(task_id), "state": "bound" if phase == "pending" else "abandoned"}
            await database.write(lambda conn, row=intent: conn.execute(_I.insert(), row))
        await migrate(database, TASKS_MIGRATIONS, APPROVAL_MIGRATIONS)
        await _assert_counts_hold(database)
        assert await database.read(_kept_counts) == {"tasks": 3, f"tasks:{ALICE}": 3, f"pending:{ALICE}": 3}
        # The kept requests still count against alice's limits, and still end normally.
        store = ApprovalStore(database, result_retention_ms=60_000, clock=ManualClock(start_ms=LEGACY_AT + 1))
        requests = Requests(store)
        assert (await requests.open(ALICE, per_minute=4))[0] is Admission.RATE_LIMITED  # 4 intents this minute
        assert (await requests.open(ALICE, max_pending=3))[0] is Admission.TOO_MANY_PENDING
        assert await store.fence("old-0", FENCED)
        assert (await requests.open(ALICE, max_pending=3))[0] is Admission.RECORDED
        await _assert_counts_hold(database)
    finally:
        await database.close()


LEGACY_AT = 1_780_000_000_000


def _legacy_intent(task_id: str) -> dict[str, Any]:
    return {
        "idempotency_key": f"key-{task_id}",
        "task_id": task_id,
        "generation": 1,
        "principal_digest": ALICE,
        "tool_name": "deploy",
        "arguments_digest": f"{task_id:0>64}",
        "body_ciphertext": "k1:body",
        "key_id": "k1",
        "state": "bound",
        "handle": f"h-{task_id}",
        "created_at": LEGACY_AT,
        "updated_at": LEGACY_AT,
    }


def _legacy_workflow(task_id: str) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "principal_digest": ALICE,
        "tool_name": "deploy",
        "arguments_digest": f"{task_id:0>64}",
        "binding_ciphertext": "k1:binding",
        "key_id": "k1",
        "phase": "pending",
        "generation": 1,
        "backend": "local",
        "handle": f"h-{task_id}",
        "next_check_at": 0,
        "attempts": 0,
        "created_at": 1,
        "updated_at": 1,
        "version": 0,
    }


async def test_the_per_minute_limit_counts_a_sliding_window_exactly(database: Database) -> None:
    clock = ManualClock(start_ms=10 * 60_000 + 30_000)  # half-way through a minute
    store = ApprovalStore(database, result_retention_ms=60_000, clock=clock)
    requests = Requests(store)
    for _ in range(3):
        assert (await requests.open(ALICE, per_minute=3))[0] is Admission.RECORDED
        clock.advance(15_000)  # at :30, :45 and the next minute's :00
    assert (await requests.open(ALICE, per_minute=3))[0] is Admission.RATE_LIMITED  # 3 in (now - 60 s, now]
    assert (await requests.open(BOB, per_minute=3))[0] is Admission.RECORDED
    await _assert_counts_hold(database)
    clock.advance(16_000)  # the first left the window; its minute still counts it, the exact count decides
    assert (await requests.open(ALICE, per_minute=3))[0] is Admission.RECORDED
    assert (await requests.open(ALICE, per_minute=3))[0] is Admission.RATE_LIMITED
    # Long after, the purge drops the per-minute counts of minutes past the window (and a bit).
    clock.advance((store_sql.RATE_KEPT_MINUTES + 3) * 60_000)
    await store.purge_orphans()
    scopes = await database.read(lambda conn: conn.execute(select(_C.c.scope)).scalars().all())
    assert not [scope for scope in scopes if scope.startswith("rate:")]
    assert (await requests.open(ALICE, per_minute=3))[0] is Admission.RECORDED
