"""The SQLAlchemy Core implementation of :class:`~mcp_approval.tasks.store.TaskStore`.

One implementation serves SQLite and PostgreSQL. Status changes are single conditional
UPDATEs guarded by the state table; read-modify-write operations on a task's JSON columns
compare-and-set on the row's ``version``, retrying when another worker wrote in between.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import and_, delete, func, or_, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from mcp_approval.clock import Clock, SystemClock
from mcp_approval.storage import StoreUnavailableError, connect, migrate, tasks_table
from mcp_approval.tasks.models import TaskRecord
from mcp_approval.tasks.states import ACTIVE, TERMINAL, TaskStatus, sources_of
from mcp_approval.tasks.store import NewTask, TaskSignal

_T = tasks_table
_ACTIVE_VALUES = [status.value for status in ACTIVE]
# Read-modify-write attempts before giving up on a row that keeps changing under us.
_CAS_ATTEMPTS = 50


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
        lease_expires_at=values["lease_expires_at"],
        version=values["version"],
    )


class SqlTaskStore:
    """A durable task store on SQLite or PostgreSQL.

    Args:
        url: ``sqlite:///PATH`` (WAL file database), ``sqlite://`` (in memory, one process) or
            ``postgresql://...``.
        clock: the source of time for timestamps, leases and expiry.
        engine: an existing engine to share instead of creating one from ``url``.
    """

    def __init__(self, url: str = "sqlite://", *, clock: Clock | None = None, engine: AsyncEngine | None = None):
        self.url = url
        self._clock = clock or SystemClock()
        self._engine = engine
        self._owns_engine = engine is None

    @property
    def engine(self) -> AsyncEngine:
        """The engine, once :meth:`open` has run."""
        if self._engine is None:
            raise RuntimeError("the task store is not open")
        return self._engine

    async def open(self) -> None:
        """Create the engine and migrate the schema."""
        if self._engine is None:
            self._engine = connect(self.url)
        async with self._guard():
            await migrate(self._engine)

    async def close(self) -> None:
        """Dispose of the engine if this store created it."""
        if self._engine is not None and self._owns_engine:
            await self._engine.dispose()
            self._engine = None

    @asynccontextmanager
    async def _guard(self) -> AsyncIterator[None]:
        """Turn every database failure except a constraint violation into StoreUnavailableError."""
        try:
            yield
        except IntegrityError:
            raise
        except (DBAPIError, OSError, ConnectionError) as exc:
            raise StoreUnavailableError(f"task store unavailable: {type(exc).__name__}") from exc

    @asynccontextmanager
    async def _begin(self) -> AsyncIterator[AsyncConnection]:
        async with self._guard(), self.engine.begin() as conn:
            yield conn

    async def create(self, task: NewTask) -> TaskRecord:
        """Insert a task and commit it before returning."""
        now = self._clock.now_ms()
        values: dict[str, Any] = {
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
            "input_requests_json": "{}",
            "input_responses_json": "{}",
            "input_seq": 0,
            "cancel_requested": False,
            "owner": None if task.status in TERMINAL else task.owner,
            "lease_expires_at": None if task.status in TERMINAL or task.lease_ms is None else now + task.lease_ms,
            "version": 0,
        }
        async with self._begin() as conn:
            await conn.execute(_T.insert().values(**values))
        return _record(values)

    async def get(self, task_id: str) -> TaskRecord | None:
        """Read one task."""
        async with self._guard(), self.engine.connect() as conn:
            row = (await conn.execute(select(_T).where(_T.c.task_id == task_id))).first()
        return None if row is None else _record(dict(row._mapping))

    async def transition(
        self,
        task_id: str,
        target: TaskStatus,
        *,
        status_message: str | None = None,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> bool:
        """Compare-and-set the status against the state table."""
        values: dict[str, Any] = {
            "status": target.value,
            "status_message": status_message,
            "updated_at": self._clock.now_ms(),
            "version": _T.c.version + 1,
        }
        if target in TERMINAL:
            values.update(
                result_json=None if result is None else _dumps(result),
                error_json=None if error is None else _dumps(error),
                input_requests_json="{}",
                input_responses_json="{}",
                owner=None,
                lease_expires_at=None,
            )
        guard = _T.c.status.in_([s.value for s in sources_of(target)])
        async with self._begin() as conn:
            changed = await conn.execute(update(_T).where(_T.c.task_id == task_id, guard).values(**values))
        return changed.rowcount == 1

    async def add_input_requests(self, task_id: str, requests: Sequence[Mapping[str, Any]]) -> list[str] | None:
        """Issue requests under fresh keys ``in-<n>`` and move to ``input_required``."""
        for _ in range(_CAS_ATTEMPTS):
            record = await self.get(task_id)
            if record is None or record.terminal:
                return None
            keys = [f"in-{record.input_seq + i + 1}" for i in range(len(requests))]
            outstanding = dict(record.input_requests)
            outstanding.update({key: dict(request) for key, request in zip(keys, requests, strict=True)})
            written = await self._write_if_unchanged(
                record,
                input_requests_json=_dumps(outstanding),
                input_seq=record.input_seq + len(requests),
                status=TaskStatus.INPUT_REQUIRED.value,
            )
            if written:
                return keys
        raise StoreUnavailableError(f"task {task_id!r} kept changing; input request not recorded")

    async def submit_input_responses(self, task_id: str, responses: Mapping[str, Any]) -> list[str]:
        """Record answers for outstanding keys; the rest are ignored."""
        for _ in range(_CAS_ATTEMPTS):
            record = await self.get(task_id)
            if record is None or record.terminal:
                return []
            accepted = [key for key in responses if key in record.input_requests]
            if not accepted:
                return []
            outstanding = {k: v for k, v in record.input_requests.items() if k not in accepted}
            answered = dict(record.input_responses)
            answered.update({key: responses[key] for key in accepted})
            status = record.status
            if not outstanding and status is TaskStatus.INPUT_REQUIRED:
                status = TaskStatus.WORKING
            written = await self._write_if_unchanged(
                record,
                input_requests_json=_dumps(outstanding),
                input_responses_json=_dumps(answered),
                status=status.value,
            )
            if written:
                return accepted
        raise StoreUnavailableError(f"task {task_id!r} kept changing; answers not recorded")

    async def take_input_responses(self, task_id: str) -> dict[str, Any]:
        """Remove and return recorded answers."""
        for _ in range(_CAS_ATTEMPTS):
            record = await self.get(task_id)
            if record is None or not record.input_responses:
                return {}
            if await self._write_if_unchanged(record, input_responses_json="{}"):
                return dict(record.input_responses)
        raise StoreUnavailableError(f"task {task_id!r} kept changing; answers not taken")

    async def _write_if_unchanged(self, record: TaskRecord, **values: Any) -> bool:
        values.update(updated_at=self._clock.now_ms(), version=record.version + 1)
        statement = update(_T).where(_T.c.task_id == record.task_id, _T.c.version == record.version).values(**values)
        async with self._begin() as conn:
            changed = await conn.execute(statement)
        return changed.rowcount == 1

    async def request_cancel(self, task_id: str) -> TaskRecord | None:
        """Flag a non-terminal task for cancellation."""
        statement = (
            update(_T)
            .where(_T.c.task_id == task_id, _T.c.status.in_(_ACTIVE_VALUES))
            .values(cancel_requested=True, version=_T.c.version + 1)
        )
        async with self._begin() as conn:
            await conn.execute(statement)
        return await self.get(task_id)

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
        async with self._begin() as conn:
            changed = await conn.execute(statement)
        return changed.rowcount == 1

    async def heartbeat(self, owner: str, task_ids: Sequence[str], lease_ms: int) -> list[TaskSignal]:
        """Renew leases in one UPDATE, then read pending signals in one SELECT."""
        if not task_ids:
            return []
        mine = and_(_T.c.owner == owner, _T.c.task_id.in_(list(task_ids)), _T.c.status.in_(_ACTIVE_VALUES))
        async with self._begin() as conn:
            await conn.execute(update(_T).where(mine).values(lease_expires_at=self._clock.now_ms() + lease_ms))
            rows = await conn.execute(
                select(_T.c.task_id, _T.c.cancel_requested, _T.c.input_responses_json).where(
                    mine, or_(_T.c.cancel_requested.is_(True), _T.c.input_responses_json != "{}")
                )
            )
            return [
                TaskSignal(
                    task_id=r.task_id,
                    cancel_requested=bool(r.cancel_requested),
                    has_input_responses=r.input_responses_json != "{}",
                )
                for r in rows
            ]

    async def fail_lapsed(self, error: dict[str, Any], status_message: str) -> list[str]:
        """Fail every active task whose lease has lapsed."""
        now = self._clock.now_ms()
        lapsed = and_(_T.c.status.in_(_ACTIVE_VALUES), _T.c.lease_expires_at.is_not(None), _T.c.lease_expires_at < now)
        async with self._begin() as conn:
            ids = [r.task_id for r in await conn.execute(select(_T.c.task_id).where(lapsed))]
            if ids:
                await conn.execute(
                    update(_T)
                    .where(lapsed, _T.c.task_id.in_(ids))
                    .values(
                        status=TaskStatus.FAILED.value,
                        status_message=status_message,
                        error_json=_dumps(error),
                        input_requests_json="{}",
                        input_responses_json="{}",
                        owner=None,
                        lease_expires_at=None,
                        updated_at=now,
                        version=_T.c.version + 1,
                    )
                )
        return ids

    async def purge_expired(self) -> list[str]:
        """Delete tasks past their retention period."""
        now = self._clock.now_ms()
        expired = and_(_T.c.expires_at.is_not(None), _T.c.expires_at <= now)
        async with self._begin() as conn:
            ids = [r.task_id for r in await conn.execute(select(_T.c.task_id).where(expired))]
            if ids:
                await conn.execute(delete(_T).where(expired, _T.c.task_id.in_(ids)))
        return ids

    async def count_active(self, principal_digest: str | None = None) -> int:
        """Count non-terminal tasks."""
        statement = select(func.count()).select_from(_T).where(_T.c.status.in_(_ACTIVE_VALUES))
        if principal_digest is not None:
            statement = statement.where(_T.c.principal_digest == principal_digest)
        async with self._guard(), self.engine.connect() as conn:
            return int((await conn.execute(statement)).scalar_one())
