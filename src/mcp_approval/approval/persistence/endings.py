"""The approval store's part for a workflow's end: the single execution claim, the fence, the finish.

The claim (``pending → claimed``) and the fence (``pending → fenced``) are compare-and-sets on the
same column, so cancellation, expiry and denial exclude execution whichever worker gets there
first; each also writes the task row in the same transaction (through the tasks layer's
:class:`~mcp_approval.tasks.sql_store.TaskRows`), so a task's wire status and its workflow never
disagree.
"""

from __future__ import annotations

from sqlalchemy import Connection, and_, or_, select, update

from mcp_approval.approval.persistence.core import StoreCore
from mcp_approval.approval.persistence.executions import (
    CLAIM_EVENT,
    ExecutedBeforeError,
    ExecutionFact,
    executed_before,
    record_execution,
)
from mcp_approval.approval.persistence.records import TaskOutcome, Workflow, workflow_from_row
from mcp_approval.approval.persistence.schema import approval_workflows_table
from mcp_approval.approval.persistence.states import Phase, phase_sources
from mcp_approval.keyring import BindingCipher

__all__ = ["EndingStore"]

_W = approval_workflows_table


class EndingStore(StoreCore):
    """Claims approved calls and ends workflows (what the executor and every denial use)."""

    async def claim(
        self,
        task_id: str,
        generation: int,
        worker: str,
        *,
        lease_until: int,
        deadline: int,
        cipher: BindingCipher | None = None,
    ) -> bool:
        """The single atomic execution claim: ``pending → claimed``, and the execution's sealed record.

        Fails if the workflow moved on (another generation, a fence, an earlier claim) or the task
        is terminal or has a cancellation requested. Retention is extended through the
        execution deadline plus the result retention, so a claimed task is never purged first.
        The claim writes the :class:`~.executions.ExecutionFact` (sealed with ``cipher``) before
        the call runs; the call's stored workflow is not trusted to say it never ran.

        Raises:
            ExecutedBeforeError: a fact is stored for this generation or for the request it
                follows (whatever the workflow row says): nothing was claimed.
        """
        now = self.clock.now_ms()
        guard = and_(
            _W.c.task_id == task_id,
            _W.c.generation == generation,
            _W.c.phase.in_(sorted(p.value for p in phase_sources(Phase.CLAIMED))),
        )

        def write(conn: Connection) -> bool:
            task = self.tasks.lock(conn, task_id)
            if task is None or task.terminal or task.cancel_requested:
                return False
            row = conn.execute(select(_W).where(guard)).mappings().first()
            if row is None:
                return False
            backend, handle = str(row["backend"]), str(row["handle"] or "")
            if executed_before(conn, task_id, generation, backend, handle):
                raise ExecutedBeforeError(
                    f"the approved call of task {task_id} generation {generation} (request {handle}) already ran"
                )
            claimed = conn.execute(
                update(_W)
                .where(guard)
                .values(
                    phase=Phase.CLAIMED.value,
                    lease_owner=worker,
                    lease_expires_at=lease_until,
                    execution_deadline=deadline,
                    updated_at=now,
                    version=_W.c.version + 1,
                )
            )
            if claimed.rowcount != 1:
                return False
            fact = ExecutionFact(
                task_id,
                generation,
                backend,
                handle,
                row["call_scope"],
                str(row["arguments_digest"]),
                worker,
                now,
            )
            record_execution(conn, fact, cipher)
            self.tasks.retain_until(conn, task_id, deadline + self.result_retention_ms)
            # ``recorded``: this claim stored its sealed execution record (``audit verify`` asks for it).
            self._event_of_row(conn, now, CLAIM_EVENT, task_id, generation=generation, worker=worker, recorded=True)
            return True

        return await self.database.write(write)

    async def renew_execution(self, task_id: str, worker: str, lease_until: int) -> bool:
        """Keep a running execution's lease (so it is not taken for lost)."""
        statement = (
            update(_W)
            .where(_W.c.task_id == task_id, _W.c.phase == Phase.CLAIMED.value, _W.c.lease_owner == worker)
            .values(lease_expires_at=lease_until)
        )
        return await self.database.write(lambda conn: conn.execute(statement).rowcount == 1)

    async def fence(
        self, task_id: str, outcome: TaskOutcome, *, generation: int | None = None, integrity_failure: str | None = None
    ) -> bool:
        """``pending → fenced`` and the task's final status, together; ``False`` if a claim won.

        ``integrity_failure``: why the call's stored approval could not be trusted, recorded in the
        audit event (``mcp_approval_integrity_failures`` counts those events).
        """
        return await self._end(task_id, Phase.FENCED, outcome, generation, integrity_failure)

    async def finish(self, task_id: str, outcome: TaskOutcome) -> bool:
        """``claimed → finished`` with the execution's result."""
        return await self._end(task_id, Phase.FINISHED, outcome, None)

    async def lapsed_claims(self, limit: int = 100) -> list[Workflow]:
        """Claimed workflows whose executing worker stopped renewing its lease."""
        now = self.clock.now_ms()
        statement = (
            select(_W)
            .where(_W.c.phase == Phase.CLAIMED.value, or_(_W.c.lease_expires_at.is_(None), _W.c.lease_expires_at < now))
            .limit(limit)
        )
        return await self.database.read(
            lambda conn: [workflow_from_row(row._mapping) for row in conn.execute(statement)]
        )

    async def _end(
        self,
        task_id: str,
        phase: Phase,
        outcome: TaskOutcome,
        generation: int | None,
        integrity_failure: str | None = None,
    ) -> bool:
        now = self.clock.now_ms()
        guard = and_(_W.c.task_id == task_id, _W.c.phase.in_(sorted(p.value for p in phase_sources(phase))))
        if generation is not None:
            guard = and_(guard, _W.c.generation == generation)

        def write(conn: Connection) -> bool:
            # Task row first, as the claim does: one lock order, so a fence racing a claim on
            # PostgreSQL waits for it instead of deadlocking.
            self.tasks.lock(conn, task_id)
            moved = conn.execute(
                update(_W)
                .where(guard)
                .values(
                    phase=phase.value,
                    disposition=outcome.disposition,
                    lease_owner=None,
                    lease_expires_at=None,
                    updated_at=now,
                    version=_W.c.version + 1,
                )
            )
            if moved.rowcount != 1:
                return False
            self.tasks.transition(
                conn,
                task_id,
                outcome.status,
                now,
                status_message=outcome.status_message,
                result=outcome.result,
                error=outcome.error,
            )
            self.tasks.retain_until(conn, task_id, now + self.result_retention_ms)
            kind = "approval.execution_finished" if phase is Phase.FINISHED else "approval.fenced"
            reason = {"reason": outcome.reason} if outcome.reason is not None else {}
            if integrity_failure is not None:
                reason["integrity_failure"] = integrity_failure
            self._event_of_row(
                conn, now, kind, task_id, status=outcome.status.value, disposition=outcome.disposition, **reason
            )
            return True

        return await self._signalled(task_id, await self.database.write(write))
