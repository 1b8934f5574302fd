"""The approval store's part for the workflow driver's passes: leases, the next look, chained generations."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, and_, or_, select, update

from mcp_approval.approval.persistence import statements as sql
from mcp_approval.approval.persistence.core import StoreCore
from mcp_approval.approval.persistence.records import (
    DueCheck,
    Intent,
    Reschedule,
    Workflow,
    intent_row,
    workflow_from_row,
)
from mcp_approval.approval.persistence.schema import approval_intents_table, approval_workflows_table
from mcp_approval.approval.persistence.states import IntentState, Phase

__all__ = ["LeaseStore"]

_W = approval_workflows_table
_I = approval_intents_table


class LeaseStore(StoreCore):
    """Leases due workflows to a worker and writes what one look at each decided, short of an ending."""

    async def lease_due(
        self, worker: str, lease_ms: int, limit: int, *, task_id: str | None = None, among: Sequence[str] = ()
    ) -> list[Workflow]:
        """Lease pending workflows due for a check to ``worker``.

        ``task_id`` leases just that workflow, due or not (a wake-up); ``among`` leases those of
        the given workflows that are still due (a pass that read them first, see :meth:`due_checks`).
        """
        now = self.clock.now_ms()
        free = or_(_W.c.lease_owner.is_(None), _W.c.lease_expires_at < now)
        due = and_(_W.c.phase == Phase.PENDING.value, free)
        due = and_(due, _W.c.task_id == task_id) if task_id is not None else and_(due, _W.c.next_check_at <= now)

        def lease(conn: Connection) -> list[Workflow]:
            ids = list(among) or [row.task_id for row in conn.execute(select(_W.c.task_id).where(due).limit(limit))]
            if not ids:
                return []
            # One statement per row, each addressed by its primary key: a single statement with
            # ``task_id IN (…)`` next to the due condition is planned on the due index by SQLite,
            # which then reads every pending row per batch (a pass quadratic in the pending set).
            params = [{"t": leased, "now": now, "until": now + lease_ms, "worker": worker} for leased in ids]
            conn.execute(sql.TAKE_LEASE if task_id is None else sql.TAKE_LEASE_NOW, params)
            rows = conn.execute(select(_W).where(_W.c.task_id.in_(ids), _W.c.lease_owner == worker))
            return [workflow_from_row(row._mapping) for row in rows]

        return await self.database.write(lease)

    async def due_checks(self, limit: int) -> list[DueCheck]:
        """Up to ``limit`` pending workflows due for a check and not leased, read without leasing them."""
        now = self.clock.now_ms()
        free = or_(_W.c.lease_owner.is_(None), _W.c.lease_expires_at < now)
        columns = (_W.c.task_id, _W.c.generation, _W.c.handle, _W.c.request_deadline, _W.c.created_at)
        query = select(*columns).where(_W.c.phase == Phase.PENDING.value, _W.c.next_check_at <= now, free).limit(limit)
        return await self.database.read(lambda conn: [DueCheck(*row) for row in conn.execute(query)])

    async def look_again_unleased(self, items: Sequence[Reschedule]) -> None:
        """Set the next check of workflows read by :meth:`due_checks` whose request is still pending.

        A compare-and-set, not a lease: an item is written only while its workflow is still at
        the same generation, pending, due and not leased. A worker that leased it meanwhile (a
        wake-up, another worker's pass) decides for it instead, so a decision is never
        overwritten by this "look again later", and nothing else is written without a lease.
        """
        now = self.clock.now_ms()
        params = [{"t": item.task_id, "g": item.generation, "n": item.next_check_at, "now": now} for item in items]
        if params:
            await self.database.write(lambda conn: conn.execute(sql.LOOK_AGAIN_UNLEASED, params))

    async def reschedule(self, item: Reschedule) -> bool:
        """Release the lease and set when to look again; optionally record moved deadlines."""
        return await self.database.write(lambda conn: sql.reschedule_one(conn, item, self.tasks, self.clock.now_ms()))

    async def reschedule_many(self, items: Sequence[Reschedule]) -> None:
        """:meth:`reschedule` for a driver pass, in one transaction.

        Plain "look again later" items (no moved deadline) go as one batched statement; a stale
        item (the workflow moved on meanwhile) simply matches no row.
        """
        plain = [item for item in items if item.only_next_check]
        other = [item for item in items if not item.only_next_check]
        if not items:
            return
        params = [{"t": item.task_id, "g": item.generation, "n": item.next_check_at} for item in plain]
        now = self.clock.now_ms()

        def write(conn: Connection) -> None:
            if params:
                conn.execute(sql.LOOK_AGAIN, params)
            for item in other:
                sql.reschedule_one(conn, item, self.tasks, now)

        await self.database.write(write)

    async def chain(self, task_id: str, generation: int, intent: Intent) -> bool:
        """Consume ``generation`` and record ``intent`` as the next one (SEP-2848 ``request``).

        After this, callbacks and statuses of the consumed generation are ignored. From
        generation 0 (a task that waited for its inputs) it also clears the answers it consumed.
        """
        now = self.clock.now_ms()
        guard = and_(_W.c.task_id == task_id, _W.c.generation == generation, _W.c.phase == Phase.PENDING.value)

        def write(conn: Connection) -> bool:
            if generation == 0:  # the task row is written too: locked first, as the fence does
                self.tasks.lock(conn, task_id)
            advanced = conn.execute(
                update(_W)
                .where(guard)
                .values(generation=generation + 1, handle=None, version=_W.c.version + 1, updated_at=now)
            )
            if advanced.rowcount != 1:
                return False
            conn.execute(
                update(_I)
                .where(_I.c.task_id == task_id, _I.c.generation == generation)
                .values(state=IntentState.CONSUMED.value, updated_at=now)
            )
            conn.execute(sql.INSERT_INTENT, intent_row(intent, now))
            if generation == 0:
                self.tasks.take_input_responses(conn, task_id, now)
            self._event(
                conn, now, "approval.generation_chained", task_id, intent.arguments_digest, generation=generation + 1
            )
            return True

        return await self._signalled(task_id, await self.database.write(write))

    async def bind_chained(self, key: str, task_id: str, generation: int, handle: str) -> bool:
        """Attach a chained submission's handle to its generation."""
        now = self.clock.now_ms()

        def write(conn: Connection) -> bool:
            bound = conn.execute(
                update(_I)
                .where(_I.c.idempotency_key == key, _I.c.state == IntentState.OPEN.value)
                .values(state=IntentState.BOUND.value, handle=handle, updated_at=now)
            )
            if bound.rowcount != 1:
                return False
            conn.execute(
                update(_W)
                .where(_W.c.task_id == task_id, _W.c.generation == generation)
                .values(handle=handle, version=_W.c.version + 1, updated_at=now)
            )
            return True

        return await self.database.write(write)
