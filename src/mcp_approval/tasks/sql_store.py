"""The SQLAlchemy Core implementation of :class:`~mcp_approval.tasks.store.TaskStore`.

One implementation serves SQLite and PostgreSQL (see :mod:`mcp_approval.storage.database`).
Each operation is a synchronous function of a connection, run as one transaction. Status
changes are conditional UPDATEs guarded by the state table; read-modify-write operations lock
the row first (``SELECT ... FOR UPDATE`` on PostgreSQL, the ``BEGIN IMMEDIATE`` write lock on
SQLite).

:class:`TaskRows` is the same set of row operations for a transaction the caller holds: a layer
that keeps its own rows beside a task (the approval workflow) creates, locks and finishes the
task through it, so its rows and the task row commit together while this module stays the only
writer of the ``tasks`` table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Delete,
    Exists,
    Update,
    and_,
    bindparam,
    delete,
    exists,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from mcp_approval.clock import Clock, SystemClock
from mcp_approval.storage import Database, migrate, normalize_url, open_database
from mcp_approval.storage.counts import ScopedCounts
from mcp_approval.tasks.models import TaskRecord
from mcp_approval.tasks.schema import (
    SIGNAL_PENDING,
    TASKS_MIGRATIONS,
    task_counts_table,
    task_workers_table,
    tasks_table,
)
from mcp_approval.tasks.states import ACTIVE, TERMINAL, TaskStatus, sources_of
from mcp_approval.tasks.store import MAX_PER_PRINCIPAL, MAX_TASKS, NewTask, TaskLimitReachedError, TaskSignal

__all__ = ["ALL_TASKS", "TASK_COUNTS", "SqlTaskStore", "TaskRows", "check_task_limits", "tasks_of"]

_T = tasks_table
_W = task_workers_table
_ACTIVE_VALUES = sorted(status.value for status in ACTIVE)
_IS_ACTIVE = _T.c.status.in_(_ACTIVE_VALUES)
# Hot statements are built once with bound parameters, so SQLAlchemy compiles each only once.
#: The owner's worker lease beside a task row (NULL without an owner or a worker row).
_WORKER_LEASE = select(_W.c.lease_expires_at).where(_W.c.worker_id == _T.c.owner).scalar_subquery()
_GET = select(_T, _WORKER_LEASE.label("worker_lease")).where(_T.c.task_id == bindparam("task_id"))
_GET_FOR_UPDATE = _GET.with_for_update(of=_T)
_INSERT = _T.insert()
#: The counts of unfinished tasks the database keeps (revision tasks_0004): a limit check reads a
#: few rows, however many tasks are unfinished.
TASK_COUNTS = ScopedCounts(task_counts_table)
ALL_TASKS = "tasks"


def tasks_of(principal_digest: str) -> str:
    """The scope counting ``principal_digest``'s unfinished tasks."""
    return f"tasks:{principal_digest}"


def _renew_worker(dialect: Any) -> Any:
    """An upsert of one worker's lease row, in ``dialect``'s spelling (both accept the same form)."""
    statement = dialect.insert(_W).values(worker_id=bindparam("b_owner"), lease_expires_at=bindparam("b_expires"))
    return statement.on_conflict_do_update(
        index_elements=[_W.c.worker_id], set_={"lease_expires_at": statement.excluded.lease_expires_at}
    )


_RENEW_WORKER = {"postgresql": _renew_worker(postgresql), "sqlite": _renew_worker(sqlite)}
#: A task's own lease only bridges the time until its owner's worker lease is renewed: from then
#: on the worker lease covers it. Reads the owner's tasks not handed over yet (one index range).
_HAND_OVER = (
    update(_T)
    .where(_T.c.owner == bindparam("b_owner"), _T.c.lease_expires_at.is_not(None))
    .values(lease_expires_at=None)
)
#: The owner's tasks with a pending signal, read through the partial index that holds only those.
_SIGNALS = select(_T.c.task_id, _T.c.cancel_requested, _T.c.input_responses_json).where(
    _T.c.owner == bindparam("b_owner"), SIGNAL_PENDING, _IS_ACTIVE
)


def _transition_statement(target: TaskStatus, *, fenced: bool) -> Update:
    values: dict[str, Any] = {
        "status": target.value,
        "status_message": bindparam("b_message"),
        "updated_at": bindparam("b_now"),
        "version": _T.c.version + 1,
    }
    if target in TERMINAL:
        values.update(
            result_json=bindparam("b_result"),
            error_json=bindparam("b_error"),
            input_requests_json="{}",
            input_responses_json="{}",
            owner=None,
            lease_expires_at=None,
        )
    guard = _T.c.status.in_(sorted(source.value for source in sources_of(target)))
    statement = update(_T).where(_T.c.task_id == bindparam("b_task_id"), guard)
    if fenced:  # the owner's fence: a worker that lost the task writes nothing
        statement = statement.where(_T.c.owner == bindparam("b_owner"))
    return statement.values(**values)


_TRANSITIONS = {
    (target, fenced): _transition_statement(target, fenced=fenced) for target in TaskStatus for fenced in (False, True)
}


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _record(values: Mapping[str, Any]) -> TaskRecord:
    return TaskRecord(
        task_id=values["task_id"],
        principal_digest=values["principal_digest"],
        tool_name=values["tool_name"],
        status=TaskStatus(values["status"]),
        created_at=values["created_at"],
        updated_at=values["updated_at"],
        ttl_ms=values["ttl_ms"],
        poll_interval_ms=values["poll_interval_ms"],
        status_message=values["status_message"],
        result=_loads(values["result_json"]),
        error=_loads(values["error_json"]),
        input_requests=_loads(values["input_requests_json"]) or {},
        input_responses=_loads(values["input_responses_json"]) or {},
        input_seq=values["input_seq"],
        cancel_requested=bool(values["cancel_requested"]),
        owner=values["owner"],
        lease_expires_at=_effective_lease(values),
        version=values["version"],
        handler=values["handler"],
        meta=_loads(values["meta_json"]),
    )


def _effective_lease(values: Mapping[str, Any]) -> int | None:
    """When the task's lease ends: the later of its own and its owner's worker lease."""
    leases = [lease for lease in (values["lease_expires_at"], values.get("worker_lease")) if lease is not None]
    return max(leases, default=None)


def _fetch(conn: Connection, task_id: str, *, lock: bool = False) -> TaskRecord | None:
    row = conn.execute(_GET_FOR_UPDATE if lock else _GET, {"task_id": task_id}).first()
    return None if row is None else _record(dict(row._mapping))


class TaskRows:
    """The task row operations, run inside a transaction the caller holds.

    Each method takes the caller's open connection and never commits: what it writes commits or
    rolls back with the caller's other writes. Times are the caller's (epoch ms), so one step of
    the caller stamps all its rows alike. :class:`SqlTaskStore` runs its own operations through
    these same methods.
    """

    def insert(
        self,
        conn: Connection,
        task: NewTask,
        now_ms: int,
        *,
        input_requests: Mapping[str, Mapping[str, Any]] | None = None,
        limits: tuple[int | None, int | None] = (None, None),
    ) -> TaskRecord:
        """Insert ``task``; ``input_requests`` are outstanding from the start (under their own keys).

        ``limits`` are ``(max_active, max_active_per_principal)``, counted in this transaction.

        Raises:
            TaskLimitReachedError: an unfinished task would exceed a limit (nothing is written).
        """
        values = _new_row(task, now_ms, input_requests or {})
        if task.status not in TERMINAL and limits != (None, None):
            check_task_limits(conn, task.principal_digest, *limits)
        conn.execute(_INSERT, values)
        return _record(values)

    def lock(self, conn: Connection, task_id: str) -> TaskRecord | None:
        """Read the task and hold its row lock until the caller's transaction ends."""
        return _fetch(conn, task_id, lock=True)

    def transition(
        self,
        conn: Connection,
        task_id: str,
        target: TaskStatus,
        now_ms: int,
        *,
        status_message: str | None = None,
        result: Mapping[str, Any] | None = None,
        error: Mapping[str, Any] | None = None,
        owner: str | None = None,
    ) -> bool:
        """Compare-and-set the status against the state table; ``False`` if it may not move there.

        A terminal ``target`` also records the result or error and clears inputs and lease.
        With ``owner``, the row must also still be held by that worker.
        """
        params = {"b_task_id": task_id, "b_message": status_message, "b_now": now_ms}
        if target in TERMINAL:
            params["b_result"] = None if result is None else _dumps(result)
            params["b_error"] = None if error is None else _dumps(error)
        if owner is not None:
            params["b_owner"] = owner
        return bool(conn.execute(_TRANSITIONS[target, owner is not None], params).rowcount == 1)

    def take_input_responses(self, conn: Connection, task_id: str, now_ms: int) -> dict[str, Any]:
        """Remove and return the recorded answers to the task's input requests."""
        record = _fetch(conn, task_id, lock=True)
        if record is None or not record.input_responses:
            return {}
        _rewrite(conn, record, now_ms, input_responses_json="{}")
        return dict(record.input_responses)

    def restate(
        self, conn: Connection, task_id: str, now_ms: int, *, status_message: str, meta: Mapping[str, Any]
    ) -> bool:
        """Replace an unfinished task's status message and ``_meta``; ``False`` if it ended (or is gone)."""
        record = _fetch(conn, task_id, lock=True)
        if record is None or record.status in TERMINAL:
            return False
        _rewrite(conn, record, now_ms, status_message=status_message, meta_json=_dumps(dict(meta)))
        return True

    def retain_until(self, conn: Connection, task_id: str, until_ms: int) -> None:
        """Make the task's retention last at least until ``until_ms`` (never shorter; unlimited stays so)."""
        row = conn.execute(select(_T.c.created_at, _T.c.ttl_ms).where(_T.c.task_id == task_id)).first()
        if row is None or row.ttl_ms is None:
            return
        needed = until_ms - row.created_at
        if needed > row.ttl_ms:
            conn.execute(
                update(_T).where(_T.c.task_id == task_id).values(ttl_ms=needed, expires_at=row.created_at + needed)
            )

    def exists(self, task_id: ColumnElement[Any]) -> Exists:
        """A clause true while a task row with id ``task_id`` (a column of the caller's query) exists."""
        return exists().where(_T.c.task_id == task_id)


def _new_row(task: NewTask, now: int, input_requests: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    terminal = task.status in TERMINAL
    return {
        "task_id": task.task_id,
        "principal_digest": task.principal_digest,
        "tool_name": task.tool_name,
        "status": task.status.value,
        "status_message": task.status_message,
        "created_at": now,
        "updated_at": now,
        "ttl_ms": task.ttl_ms,
        "expires_at": None if task.ttl_ms is None else now + task.ttl_ms,
        "poll_interval_ms": task.poll_interval_ms,
        "result_json": None if task.result is None else _dumps(task.result),
        "error_json": None if task.error is None else _dumps(task.error),
        "input_requests_json": _dumps({key: dict(request) for key, request in input_requests.items()}),
        "input_responses_json": "{}",
        "input_seq": len(input_requests),
        "cancel_requested": False,
        "owner": None if terminal else task.owner,
        "lease_expires_at": None if terminal or task.lease_ms is None else now + task.lease_ms,
        "version": 0,
        "handler": task.handler,
        "meta_json": None if task.meta is None else _dumps(task.meta),
    }


class SqlTaskStore:
    """A durable task store on SQLite or PostgreSQL.

    Args:
        url: ``sqlite:///PATH`` (WAL file database), ``sqlite://`` (a private temporary database)
            or ``postgresql://...``.
        clock: the source of time for timestamps, leases and expiry.
        database: an already opened database for ``url`` to use instead of opening one.
    """

    #: The row operations, also for a transaction another layer holds (see :class:`TaskRows`).
    rows = TaskRows()

    def __init__(self, url: str = "sqlite://", *, clock: Clock | None = None, database: Database | None = None) -> None:
        normalize_url(url)  # a bad URL fails here, naming its scheme, not at the first request
        self.url = url
        self._clock = clock or SystemClock()
        # A database opened by the caller lets other components (approvals) share its connections;
        # the store still closes it.
        self._db: Database | None = database

    @property
    def database(self) -> Database:
        """The database, once :meth:`open` has run."""
        if self._db is None:
            raise RuntimeError("the task store is not open")
        return self._db

    async def open(self) -> None:
        """Connect and migrate the tasks table (:data:`~mcp_approval.tasks.schema.TASKS_MIGRATIONS`)."""
        if self._db is None:
            self._db = open_database(self.url)
        await migrate(self._db, TASKS_MIGRATIONS)

    async def close(self) -> None:
        """Release connections."""
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    async def create(
        self, task: NewTask, *, max_active: int | None = None, max_active_per_principal: int | None = None
    ) -> TaskRecord:
        """Insert a task and commit it; the limits count unfinished tasks (checked in the same transaction)."""
        now = self._clock.now_ms()
        limits = (max_active, max_active_per_principal)
        return await self.database.write(lambda conn: self.rows.insert(conn, task, now, limits=limits))

    async def get(self, task_id: str) -> TaskRecord | None:
        """Read one task."""
        return await self.database.read(lambda conn: _fetch(conn, task_id))

    async def transition(
        self,
        task_id: str,
        target: TaskStatus,
        *,
        status_message: str | None = None,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        owner: str | None = None,
    ) -> bool:
        """Compare-and-set the status against the state table (fenced on ``owner`` when given)."""
        now = self._clock.now_ms()
        return await self.database.write(
            lambda conn: self.rows.transition(
                conn, task_id, target, now, status_message=status_message, result=result, error=error, owner=owner
            )
        )

    async def add_input_requests(self, task_id: str, requests: Sequence[Mapping[str, Any]]) -> list[str] | None:
        """Issue requests under fresh keys ``in-<n>`` and move to ``input_required``."""
        now = self._clock.now_ms()

        def issue(conn: Connection) -> list[str] | None:
            record = _fetch(conn, task_id, lock=True)
            if record is None or record.terminal:
                return None
            keys = [f"in-{record.input_seq + i + 1}" for i in range(len(requests))]
            outstanding = dict(record.input_requests)
            outstanding.update({key: dict(request) for key, request in zip(keys, requests, strict=True)})
            _rewrite(
                conn,
                record,
                now,
                input_requests_json=_dumps(outstanding),
                input_seq=record.input_seq + len(requests),
                status=TaskStatus.INPUT_REQUIRED.value,
            )
            return keys

        return await self.database.write(issue)

    async def submit_input_responses(self, task_id: str, responses: Mapping[str, Any]) -> list[str]:
        """Record answers for outstanding keys; the rest are ignored."""
        now = self._clock.now_ms()

        def submit(conn: Connection) -> list[str]:
            record = _fetch(conn, task_id, lock=True)
            if record is None or record.terminal:
                return []
            accepted = [key for key in responses if key in record.input_requests]
            if not accepted:
                return []
            outstanding = {k: v for k, v in record.input_requests.items() if k not in accepted}
            answered = {**record.input_responses, **{key: responses[key] for key in accepted}}
            status = record.status
            if not outstanding and status is TaskStatus.INPUT_REQUIRED:
                status = TaskStatus.WORKING
            _rewrite(
                conn,
                record,
                now,
                input_requests_json=_dumps(outstanding),
                input_responses_json=_dumps(answered),
                status=status.value,
            )
            return accepted

        return await self.database.write(submit)

    async def take_input_responses(self, task_id: str) -> dict[str, Any]:
        """Remove and return recorded answers."""
        now = self._clock.now_ms()
        return await self.database.write(lambda conn: self.rows.take_input_responses(conn, task_id, now))

    async def request_cancel(self, task_id: str) -> TaskRecord | None:
        """Flag a non-terminal task for cancellation."""
        statement = (
            update(_T)
            .where(_T.c.task_id == task_id, _IS_ACTIVE)
            .values(cancel_requested=True, version=_T.c.version + 1)
        )

        def flag(conn: Connection) -> TaskRecord | None:
            conn.execute(statement)
            return _fetch(conn, task_id)

        return await self.database.write(flag)

    async def extend_ttl(self, task_id: str, ttl_ms: int | None) -> bool:
        """Set a new retention period counted from creation."""
        if ttl_ms is not None and ttl_ms <= 0:
            raise ValueError("ttl_ms must be positive or None")
        expires = None if ttl_ms is None else _T.c.created_at + ttl_ms
        statement = (
            update(_T)
            .where(_T.c.task_id == task_id)
            .values(ttl_ms=ttl_ms, expires_at=expires, version=_T.c.version + 1)
        )
        return await self.database.write(lambda conn: conn.execute(statement).rowcount == 1)

    async def heartbeat(self, owner: str, task_ids: Sequence[str], lease_ms: int) -> list[TaskSignal]:
        """Renew ``owner``'s worker lease and read its pending signals: a fixed number of statements.

        ``task_ids`` only tells whether the worker holds anything (a worker holding nothing lets
        its lease lapse, as every task lease did before). The lease covers every unfinished task
        the worker owns; its new tasks' own leases are handed over to it here.
        """
        if not task_ids:
            return []
        params = {"b_owner": owner, "b_expires": self._clock.now_ms() + lease_ms}

        def beat(conn: Connection) -> list[TaskSignal]:
            conn.execute(_RENEW_WORKER[conn.dialect.name], params)
            conn.execute(_HAND_OVER, params)
            return [
                TaskSignal(
                    task_id=row.task_id,
                    cancel_requested=bool(row.cancel_requested),
                    has_input_responses=row.input_responses_json != "{}",
                )
                for row in conn.execute(_SIGNALS, params)
            ]

        return await self.database.write(beat)

    async def fail_lapsed(self, error: dict[str, Any], status_message: str) -> list[str]:
        """Fail every active task whose lease has lapsed: its owner's worker lease and its own.

        Two indexed reads: the tasks of workers whose lease expired (their rows are then
        dropped), and tasks whose own lease expired with no live worker lease behind them (a
        worker that died before its first renewal, a row of an older release, no owner).
        """
        now = self._clock.now_ms()
        live_owner = exists().where(_W.c.worker_id == _T.c.owner, _W.c.lease_expires_at >= now)
        own_lapsed = or_(_T.c.lease_expires_at.is_(None), _T.c.lease_expires_at < now)
        lapsed_workers = select(_W.c.worker_id).where(_W.c.lease_expires_at < now).with_for_update()
        # No status test in the reads: only unfinished tasks have an owner or a lease (a terminal
        # write clears both), so each read is one range of a lease index, however many tasks are live.
        unrenewed = select(_T.c.task_id).where(
            _T.c.lease_expires_at.is_not(None), _T.c.lease_expires_at < now, ~live_owner
        )
        failure = {
            "status": TaskStatus.FAILED.value,
            "status_message": status_message,
            "error_json": _dumps(error),
            "input_requests_json": "{}",
            "input_responses_json": "{}",
            "owner": None,
            "lease_expires_at": None,
            "updated_at": now,
            "version": _T.c.version + 1,
        }

        def fail(conn: Connection) -> list[str]:
            workers = [row.worker_id for row in conn.execute(lapsed_workers)]
            ids: dict[str, None] = {}
            if workers:
                orphaned = select(_T.c.task_id).where(_T.c.owner.in_(workers), own_lapsed)
                ids.update((row.task_id, None) for row in conn.execute(orphaned))
            ids.update((row.task_id, None) for row in conn.execute(unrenewed))
            if ids:
                lapsed = and_(_IS_ACTIVE, own_lapsed, ~live_owner)  # re-checked under the write
                conn.execute(update(_T).where(lapsed, _T.c.task_id.in_(list(ids))).values(**failure))
            if workers:
                conn.execute(_drop_workers(workers, now))
            return list(ids)

        return await self.database.write(fail)

    async def purge_expired(self) -> list[str]:
        """Delete tasks past their retention period (and fold the unfinished-task count's rows)."""
        expired = and_(_T.c.expires_at.is_not(None), _T.c.expires_at <= self._clock.now_ms())

        def purge(conn: Connection) -> list[str]:
            ids = [row.task_id for row in conn.execute(select(_T.c.task_id).where(expired))]
            if ids:
                conn.execute(delete(_T).where(expired, _T.c.task_id.in_(ids)))
            TASK_COUNTS.fold_all(conn)
            return ids

        purged = await self.database.write(purge)
        await TASK_COUNTS.reclaim(self.database)
        return purged

    async def count_active(self, principal_digest: str | None = None) -> int:
        """Count non-terminal tasks, in all or of one principal (the counts the database keeps)."""
        scope = ALL_TASKS if principal_digest is None else tasks_of(principal_digest)
        return await self.database.write(lambda conn: TASK_COUNTS.read(conn, [scope]).get(scope, 0))


def _drop_workers(workers: Sequence[str], now: int) -> Delete:
    """Delete the lease rows of ``workers`` that are still lapsed (a worker renewing meanwhile stays)."""
    return delete(_W).where(_W.c.worker_id.in_(list(workers)), _W.c.lease_expires_at < now)


def _rewrite(conn: Connection, record: TaskRecord, now: int, **values: Any) -> None:
    """Update a row read under lock in this transaction, bumping its version."""
    values.update(updated_at=now, version=record.version + 1)
    conn.execute(update(_T).where(_T.c.task_id == record.task_id).values(**values))


def check_task_limits(
    conn: Connection, principal_digest: str | None, max_active: int | None, max_per_principal: int | None
) -> None:
    """Raise :class:`TaskLimitReachedError` if another unfinished task would exceed a limit.

    Runs inside the caller's transaction (task creation here, approval admission in the approval store).
    """
    own_scope = None if max_per_principal is None or principal_digest is None else tasks_of(principal_digest)
    wanted = ([ALL_TASKS] if max_active is not None else []) + ([own_scope] if own_scope is not None else [])
    if not wanted:
        return
    counts = TASK_COUNTS.read(conn, wanted)
    if max_active is not None and counts.get(ALL_TASKS, 0) >= max_active:
        raise TaskLimitReachedError(MAX_TASKS, counts[ALL_TASKS])
    if own_scope is not None and max_per_principal is not None and counts.get(own_scope, 0) >= max_per_principal:
        raise TaskLimitReachedError(MAX_PER_PRINCIPAL, counts[own_scope])
