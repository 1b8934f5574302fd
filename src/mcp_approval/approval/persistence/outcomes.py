"""The approval workflows as the layers above read them: the outcome of the call behind an
approval request, the request a task waits on, and the calls pending by template.

Implements :class:`~mcp_approval.backends.outcomes.OutcomeReader` for the reviewer API and the
console: a backend request (its handle) leads to the task through the submission intent that
opened it (or the workflow's current handle), the workflow's phase says whether the call ran,
and the task's audit events say when and, for a call that did not run, why. Notifications read
which request a task's events are about (:meth:`WorkflowOutcomes.request_of`), metrics the
pending calls (:meth:`WorkflowOutcomes.pending_by_template`); neither reads the tables itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, func, inspect, select

from mcp_approval.approval.persistence.schema import approval_intents_table, approval_workflows_table
from mcp_approval.approval.persistence.states import Phase
from mcp_approval.backends.outcomes import RequestOutcome
from mcp_approval.storage import AuditEvent, AuditLog, Database

__all__ = ["EXECUTION_EVENTS", "WorkflowOutcomes", "reference_of_request", "request_of_reference"]

_W = approval_workflows_table
_I = approval_intents_table

#: The audit events that record a call's execution (or that it never will run).
EXECUTION_EVENTS = frozenset({"approval.execution_claimed", "approval.execution_finished", "approval.fenced"})


class WorkflowOutcomes:
    """Reads what happened to the call behind each backend request.

    Args:
        database: the store holding the approval workflows.
        audit: the audit log the workflow steps are recorded in.
    """

    def __init__(self, database: Database, audit: AuditLog) -> None:
        self._database = database
        self._audit = audit

    async def outcome(self, request_id: str) -> RequestOutcome | None:
        """The outcome of the call ``request_id`` was opened for, or ``None`` if no task carries one."""
        found = await self._database.read(lambda conn: _workflow_of(conn, request_id))
        if found is None:
            return None
        events = [
            e for e in await self._audit.events(subject=found["task_id"], limit=1000) if e.kind in EXECUTION_EVENTS
        ]
        return outcome_of(found, events)

    async def request_of(self, task_id: str) -> str | None:
        """The backend request (its handle) the task's workflow waits on or waited on, or ``None``."""
        return await request_of_reference(self._database, task_id)

    async def pending_by_template(self) -> dict[str, int]:
        """How many calls wait for approval or for their approved execution, by template (``""``: the default)."""
        return await self._database.read(_pending_by_template)


async def request_of_reference(database: Database, reference: str) -> str | None:
    """The backend request (its handle) of the task whose id (the requester's reference) is
    ``reference``, or ``None``; a store without approval workflows (an ``arap-server`` store, or one
    no server has run on) knows no reference."""

    def read(conn: Connection) -> str | None:
        if not inspect(conn).has_table(_W.name):
            return None
        handle: str | None = conn.execute(select(_W.c.handle).where(_W.c.task_id == reference)).scalar_one_or_none()
        return handle

    return await database.read(read)


async def reference_of_request(database: Database, handle: str) -> str | None:
    """The reference (task id) its requester was given for backend request ``handle``, or ``None``."""

    def read(conn: Connection) -> str | None:
        if not inspect(conn).has_table(_W.name):
            return None
        found = _workflow_of(conn, handle)
        return None if found is None else str(found["task_id"])

    return await database.read(read)


def _pending_by_template(conn: Connection) -> dict[str, int]:
    # Grouped by the bare column: PostgreSQL does not recognise two coalesce() expressions with
    # separately bound parameters as the same expression, so the missing template becomes "" here.
    query = select(_W.c.template, func.count()).where(_W.c.phase == Phase.PENDING.value).group_by(_W.c.template)
    counts: dict[str, int] = {}
    for template, count in conn.execute(query):
        counts[template or ""] = counts.get(template or "", 0) + int(count)
    return counts


def _workflow_of(conn: Connection, handle: str) -> dict[str, Any] | None:
    task_id = conn.execute(select(_I.c.task_id).where(_I.c.handle == handle).limit(1)).scalar_one_or_none()
    where = _W.c.task_id == task_id if task_id is not None else _W.c.handle == handle
    row = conn.execute(select(_W.c.task_id, _W.c.phase, _W.c.disposition, _W.c.updated_at).where(where)).first()
    return None if row is None else dict(row._mapping)


def outcome_of(workflow: Mapping[str, Any], events: Sequence[AuditEvent]) -> RequestOutcome:
    """The outcome a workflow row (``task_id``, ``phase``, ``disposition``, ``updated_at``) and its
    execution events (oldest first) describe."""
    task_id, phase = workflow["task_id"], Phase(workflow["phase"])
    last = events[-1] if events else None
    at = last.at if last is not None else None
    if phase is Phase.PENDING:
        return RequestOutcome(task_id, "pending")
    if phase is Phase.CLAIMED:
        return RequestOutcome(task_id, "running", at=at)
    disposition = workflow["disposition"]
    if phase is Phase.FINISHED:
        return RequestOutcome(task_id, disposition or "outcome-unknown", at=at or workflow["updated_at"])
    # Fenced: it never ran. A denial says why; otherwise the task was cancelled or failed.
    data = last.data if last is not None else {}
    if disposition is not None:
        return RequestOutcome(task_id, disposition, at=at or workflow["updated_at"], reason=data.get("reason"))
    state = "cancelled" if data.get("status") == "cancelled" else "failed"
    return RequestOutcome(task_id, state, at=at or workflow["updated_at"])
