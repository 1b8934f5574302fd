"""What every part of the approval store shares: the database, the clock, the audit trail, the reads.

Each part (:mod:`.admission`, :mod:`.retries`, :mod:`.leases`, :mod:`.endings`,
:mod:`.recovery`) is a :class:`StoreCore` that adds the transactions of one job;
:class:`~.store.ApprovalStore` is all of them, built once, and each collaborator is handed the
part it uses. Every operation is one transaction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import Connection, select, update

from mcp_approval.approval.persistence import statements as sql
from mcp_approval.approval.persistence.records import (
    Intent,
    Workflow,
    call_scope,
    intent_from_row,
    workflow_from_row,
)
from mcp_approval.approval.persistence.schema import approval_intents_table, approval_workflows_table
from mcp_approval.approval.persistence.states import IntentState, intent_sources
from mcp_approval.backends.contract import EarlierCall
from mcp_approval.clock import Clock, SystemClock
from mcp_approval.storage import AuditLog, Database
from mcp_approval.tasks.sql_store import TaskRows

__all__ = ["StoreCore"]

_W = approval_workflows_table
_I = approval_intents_table


class StoreCore:
    """The approval workflow tables, on the task store's database: what every part of the store shares.

    Args:
        database: the database that also holds the tasks, migrated with
            :data:`~mcp_approval.approval.persistence.schema.APPROVAL_MIGRATIONS`.
        result_retention_ms: how long a terminal approval task stays retrievable.
        clock: the source of time.
        audit: where each step is recorded, in the step's own transaction.
        tasks: the task row operations each step runs in its own transaction.
        changed: awaited with a task id after a committed step changed what ``tasks/get`` shows
            (the tasks runtime's change signal, for ``notifications/tasks``).
    """

    def __init__(
        self,
        database: Database,
        *,
        result_retention_ms: int,
        clock: Clock | None = None,
        audit: AuditLog | None = None,
        tasks: TaskRows | None = None,
        changed: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.database = database
        self._changed = changed
        self.result_retention_ms = result_retention_ms
        self.clock = clock or SystemClock()
        self.audit = audit
        self.tasks = tasks or TaskRows()

    def _event(self, conn: Connection, now: int, kind: str, task_id: str, call_digest: str, **data: Any) -> None:
        """An audit event in the transaction of the step it records, with the digest of the call it is about."""
        if self.audit is not None:
            self.audit.record_in(conn, now, kind, subject=task_id, data={"call_digest": call_digest, **data})

    def _event_of_row(self, conn: Connection, now: int, kind: str, task_id: str, **data: Any) -> None:
        """:meth:`_event` about a workflow read here: its call digest and its current request."""
        if self.audit is None:
            return
        row = conn.execute(
            select(_W.c.arguments_digest, _W.c.backend, _W.c.handle).where(_W.c.task_id == task_id)
        ).one()
        request = {"backend": row.backend, "request": row.handle}
        self._event(conn, now, kind, task_id, row.arguments_digest, **request, **data)

    # -- reading ---------------------------------------------------------------------------

    async def find_live(self, principal_digest: str, tool: str, digest: str) -> str | None:
        """The task id of a pending call in the same dedup scope (a live workflow or in-flight intent)."""
        call = call_scope(principal_digest, tool, digest)
        return await self.database.read(lambda conn: sql.live_match(conn, call))

    async def earlier_call(self, principal_digest: str, tool: str, digest: str) -> EarlierCall | None:
        """The identical call whose request ended latest, which a new request for it may duplicate.

        One read on the call index; ``None`` when no such request ended within the retention of
        its task (a workflow is purged with its task).
        """
        call = call_scope(principal_digest, tool, digest)
        return await self.database.read(lambda conn: sql.earlier_call(conn, call))

    async def get(self, task_id: str) -> Workflow | None:
        """One workflow, or ``None``."""

        def read(conn: Connection) -> Workflow | None:
            row = conn.execute(select(_W).where(_W.c.task_id == task_id)).first()
            return None if row is None else workflow_from_row(row._mapping)

        return await self.database.read(read)

    async def by_handle(self, handle: str) -> Intent | None:
        """The intent a backend handle belongs to (for callbacks and wake-ups)."""

        def read(conn: Connection) -> Intent | None:
            row = conn.execute(select(_I).where(_I.c.handle == handle)).first()
            return None if row is None else intent_from_row(row._mapping)

        return await self.database.read(read)

    async def intent(self, task_id: str, generation: int) -> Intent | None:
        """The intent of one generation of a task."""

        def read(conn: Connection) -> Intent | None:
            row = conn.execute(select(_I).where(_I.c.task_id == task_id, _I.c.generation == generation)).first()
            return None if row is None else intent_from_row(row._mapping)

        return await self.database.read(read)

    # -- moves every part makes ------------------------------------------------------------

    async def abandon_intent(self, intent: Intent) -> bool:
        """Settle an intent without a task: its backend request was refused, or withdrawn."""
        now = self.clock.now_ms()
        sources = sorted(state.value for state in intent_sources(IntentState.ABANDONED))
        statement = (
            update(_I)
            .where(_I.c.idempotency_key == intent.key, _I.c.state.in_(sources))
            .values(state=IntentState.ABANDONED.value, updated_at=now)
        )

        def write(conn: Connection) -> bool:
            if conn.execute(statement).rowcount != 1:
                return False
            self._event(
                conn,
                now,
                "approval.intent_abandoned",
                intent.task_id,
                intent.arguments_digest,
                generation=intent.generation,
            )
            return True

        return await self.database.write(write)

    async def _move_intent(self, key: str, target: IntentState, *, handle: str | None = None) -> bool:
        params = {"key": key, "now": self.clock.now_ms(), "handle": handle}
        return await self.database.write(lambda conn: conn.execute(sql.MOVE_INTENT[target], params).rowcount == 1)

    async def _signalled(self, task_id: str, written: bool) -> bool:
        """Report a committed change of ``task_id`` to the ``changed`` hook; returns ``written``."""
        if written and self._changed is not None:
            await self._changed(task_id)
        return written
