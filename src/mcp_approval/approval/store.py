"""Durable approval-workflow state: submission intents, workflows, the execution claim.

Each operation is one transaction. The claim (``pending → claimed``) and the fence (``pending →
fenced``) are compare-and-sets on the same column, so cancellation, expiry and denial exclude
execution whichever worker gets there first; each also writes the task row in the same
transaction, so a task's wire status and its workflow never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, exists, func, or_, select, update

from mcp_approval.approval.records import (
    APPROVAL_HANDLER,
    Admission,
    Intent,
    NewWorkflow,
    Reschedule,
    TaskOutcome,
    Workflow,
    dumps,
    intent_from_row,
    intent_row,
    task_row,
    workflow_from_row,
    workflow_row,
)
from mcp_approval.approval.states import IN_FLIGHT_INTENTS, IntentState, Phase, intent_sources, phase_sources
from mcp_approval.clock import Clock, SystemClock
from mcp_approval.storage import AuditLog, Database
from mcp_approval.storage.schema import approval_intents_table, approval_workflows_table, tasks_table
from mcp_approval.tasks.states import ACTIVE, sources_of

_W = approval_workflows_table
_I = approval_intents_table
_T = tasks_table
_LIVE_PHASES = sorted(phase.value for phase in (Phase.PENDING, Phase.CLAIMED))
_IN_FLIGHT = sorted(state.value for state in IN_FLIGHT_INTENTS)
_ACTIVE_TASK = sorted(status.value for status in ACTIVE)

# Statements of the creation path are built once with bound parameters: SQLAlchemy then compiles
# each only once, and a creation costs little more than its SQL.
_INSERT_INTENT = _I.insert()
_INSERT_TASK = _T.insert()
_INSERT_WORKFLOW = _W.insert()
_LIVE_WORKFLOW = (
    select(_W.c.task_id)
    .where(
        _W.c.principal_digest == bindparam("owner"),
        _W.c.tool_name == bindparam("tool"),
        _W.c.arguments_digest == bindparam("digest"),
        _W.c.phase.in_(_LIVE_PHASES),
    )
    .limit(1)
)
_IN_FLIGHT_INTENT = (
    select(_I.c.task_id)
    .where(
        _I.c.principal_digest == bindparam("owner"),
        _I.c.tool_name == bindparam("tool"),
        _I.c.arguments_digest == bindparam("digest"),
        _I.c.state.in_(_IN_FLIGHT),
        _I.c.generation == 1,
    )
    .limit(1)
)
_RECENT_SUBMISSIONS = select(func.count()).where(
    _I.c.principal_digest == bindparam("owner"), _I.c.created_at > bindparam("since")
)
_PENDING_WORKFLOWS = select(func.count()).where(
    _W.c.principal_digest == bindparam("owner"), _W.c.phase == Phase.PENDING.value
)
_BIND_INTENT = (
    update(_I)
    .where(_I.c.idempotency_key == bindparam("key"), _I.c.state == IntentState.SUBMITTED.value)
    .values(state=IntentState.BOUND.value, updated_at=bindparam("now"))
)


__all__ = [
    "APPROVAL_HANDLER",
    "Admission",
    "ApprovalStore",
    "Intent",
    "NewWorkflow",
    "Reschedule",
    "TaskOutcome",
    "Workflow",
]


_LOOK_AGAIN = (
    update(_W)
    .where(_W.c.task_id == bindparam("t"), _W.c.generation == bindparam("g"), _W.c.phase == Phase.PENDING.value)
    .values(next_check_at=bindparam("n"), lease_owner=None, lease_expires_at=None, version=_W.c.version + 1)
)


def _move_intent_statement(target: IntentState) -> Any:
    sources = sorted(state.value for state in intent_sources(target))
    return (
        update(_I)
        .where(_I.c.idempotency_key == bindparam("key"), _I.c.state.in_(sources))
        .values(state=target.value, updated_at=bindparam("now"), handle=func.coalesce(bindparam("handle"), _I.c.handle))
    )


_MOVE_INTENT = {target: _move_intent_statement(target) for target in IntentState}


class ApprovalStore:
    """The approval workflow tables, on the task store's database.

    Args:
        database: the (migrated) database that also holds the tasks.
        result_retention_ms: how long a terminal approval task stays retrievable.
        clock: the source of time.
        audit: where each step is recorded, in the step's own transaction.
    """

    def __init__(
        self, database: Database, *, result_retention_ms: int, clock: Clock | None = None, audit: AuditLog | None = None
    ) -> None:
        self.database = database
        self.result_retention_ms = result_retention_ms
        self.clock = clock or SystemClock()
        self.audit = audit

    def _event(self, conn: Connection, now: int, kind: str, task_id: str, **data: Any) -> None:
        """An audit event in the transaction of the step it records."""
        if self.audit is not None:
            self.audit.record_in(conn, now, kind, subject=task_id, data=data or None)

    # -- creation --------------------------------------------------------------------------

    async def find_live(self, principal_digest: str, tool: str, digest: str) -> str | None:
        """The task id of a pending call in the same dedup scope (a live workflow or in-flight intent)."""
        return await self.database.read(lambda conn: _live_match(conn, principal_digest, tool, digest))

    async def record_intent(
        self, intent: Intent, *, submissions_per_minute: int, max_pending: int
    ) -> tuple[Admission, str | None]:
        """Persist ``intent`` unless a duplicate or a limit stops it; returns (admission, task id)."""
        now = self.clock.now_ms()

        def record(conn: Connection) -> tuple[Admission, str | None]:
            refused = _refusal(conn, intent, now, submissions_per_minute, max_pending)
            if refused is not None:
                return refused
            conn.execute(_INSERT_INTENT, intent_row(intent, now))
            return Admission.RECORDED, intent.task_id

        return await self.database.write(record)

    async def mark_submitted(self, key: str, handle: str) -> bool:
        """Persist the backend's handle for an open intent."""
        return await self._move_intent(key, IntentState.SUBMITTED, handle=handle)

    async def abandon_intent(self, intent: Intent) -> bool:
        """Mark an in-flight intent abandoned (its backend request was withdrawn)."""
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
            self._event(conn, now, "approval.intent_abandoned", intent.task_id, generation=intent.generation)
            return True

        return await self.database.write(write)

    async def create_waiting_task(
        self, new: NewWorkflow, draft: Intent, *, submissions_per_minute: int, max_pending: int
    ) -> tuple[Admission, str | None]:
        """Create a task that waits in ``input_required`` for its submission inputs (generation 0).

        Nothing is submitted yet. ``draft`` keeps the request body (generation 0, never sent);
        :meth:`chain` from generation 0 records the real submission once the inputs arrived. The
        same dedup and limits as :meth:`record_intent` apply; returns (admission, task id).
        """
        now = self.clock.now_ms()

        def create(conn: Connection) -> tuple[Admission, str | None]:
            refused = _refusal(conn, draft, now, submissions_per_minute, max_pending)
            if refused is not None:
                return refused
            conn.execute(_INSERT_TASK, task_row(new, now))
            conn.execute(_INSERT_WORKFLOW, {**workflow_row(new, now), "generation": 0})
            conn.execute(_INSERT_INTENT, intent_row(draft, now))
            self._event(conn, now, "approval.task_created", new.task_id, tool=new.tool_name, template=new.template)
            return Admission.RECORDED, new.task_id

        return await self.database.write(create)

    async def create_task(self, new: NewWorkflow) -> bool:
        """Create the task and its workflow and bind the intent, in one transaction.

        Returns ``False`` (and writes nothing) if the intent is no longer ``submitted``, i.e. the
        reconciler abandoned it meanwhile.
        """
        now = self.clock.now_ms()

        def create(conn: Connection) -> bool:
            if conn.execute(_BIND_INTENT, {"key": new.intent_key, "now": now}).rowcount != 1:
                return False
            conn.execute(_INSERT_TASK, task_row(new, now))
            conn.execute(_INSERT_WORKFLOW, workflow_row(new, now))
            self._event(conn, now, "approval.task_created", new.task_id, tool=new.tool_name, template=new.template)
            return True

        return await self.database.write(create)

    # -- reading ---------------------------------------------------------------------------

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

    # -- resolving -------------------------------------------------------------------------

    async def lease_due(self, worker: str, lease_ms: int, limit: int, *, task_id: str | None = None) -> list[Workflow]:
        """Lease pending workflows due for a check (or just ``task_id``) to ``worker``."""
        now = self.clock.now_ms()
        free = or_(_W.c.lease_owner.is_(None), _W.c.lease_expires_at < now)
        due = and_(_W.c.phase == Phase.PENDING.value, free)
        due = and_(due, _W.c.task_id == task_id) if task_id is not None else and_(due, _W.c.next_check_at <= now)

        def lease(conn: Connection) -> list[Workflow]:
            ids = [row.task_id for row in conn.execute(select(_W.c.task_id).where(due).limit(limit))]
            if not ids:
                return []
            conn.execute(
                update(_W)
                .where(due, _W.c.task_id.in_(ids))
                .values(lease_owner=worker, lease_expires_at=now + lease_ms, version=_W.c.version + 1)
            )
            rows = conn.execute(select(_W).where(_W.c.task_id.in_(ids), _W.c.lease_owner == worker))
            return [workflow_from_row(row._mapping) for row in rows]

        return await self.database.write(lease)

    async def reschedule(self, item: Reschedule) -> bool:
        """Release the lease and set when to look again; optionally record moved deadlines."""
        return await self.database.write(lambda conn: _reschedule_one(conn, item))

    async def reschedule_many(self, items: Sequence[Reschedule]) -> None:
        """:meth:`reschedule` for a resolver pass, in one transaction.

        Plain "look again later" items (no moved deadline) go as one batched statement; a stale
        item (the workflow moved on meanwhile) simply matches no row.
        """
        plain = [item for item in items if item.only_next_check]
        other = [item for item in items if not item.only_next_check]
        if not items:
            return
        params = [{"t": item.task_id, "g": item.generation, "n": item.next_check_at} for item in plain]

        def write(conn: Connection) -> None:
            if params:
                conn.execute(_LOOK_AGAIN, params)
            for item in other:
                _reschedule_one(conn, item)

        await self.database.write(write)

    async def chain(self, task_id: str, generation: int, intent: Intent) -> bool:
        """Consume ``generation`` and record ``intent`` as the next one (SEP-2848 ``request``).

        After this, callbacks and statuses of the consumed generation are ignored. From
        generation 0 (a task that waited for its inputs) it also clears the answers it consumed.
        """
        now = self.clock.now_ms()
        guard = and_(_W.c.task_id == task_id, _W.c.generation == generation, _W.c.phase == Phase.PENDING.value)

        def write(conn: Connection) -> bool:
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
            conn.execute(_INSERT_INTENT, intent_row(intent, now))
            if generation == 0:
                conn.execute(update(_T).where(_T.c.task_id == task_id).values(input_responses_json="{}"))
            self._event(conn, now, "approval.generation_chained", task_id, generation=generation + 1)
            return True

        return await self.database.write(write)

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

    # -- the claim and the fence -----------------------------------------------------------

    async def claim(self, task_id: str, generation: int, worker: str, *, lease_until: int, deadline: int) -> bool:
        """The single atomic execution claim: ``pending → claimed``.

        Fails if the workflow moved on (another generation, a fence, an earlier claim) or the task
        is terminal or has a cancellation requested. Retention is extended through the
        execution deadline plus the result retention, so a claimed task is never purged first.
        """
        now = self.clock.now_ms()
        guard = and_(
            _W.c.task_id == task_id,
            _W.c.generation == generation,
            _W.c.phase.in_(sorted(p.value for p in phase_sources(Phase.CLAIMED))),
        )

        def write(conn: Connection) -> bool:
            task = conn.execute(
                select(_T.c.status, _T.c.cancel_requested).where(_T.c.task_id == task_id).with_for_update()
            ).first()
            if task is None or task.status not in _ACTIVE_TASK or task.cancel_requested:
                return False
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
            _extend_ttl(conn, task_id, deadline + self.result_retention_ms)
            self._event(conn, now, "approval.execution_claimed", task_id, generation=generation, worker=worker)
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

    async def fence(self, task_id: str, outcome: TaskOutcome, *, generation: int | None = None) -> bool:
        """``pending → fenced`` and the task's final status, together; ``False`` if a claim won."""
        return await self._end(task_id, Phase.FENCED, outcome, generation)

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

    # -- reconciliation and retention ------------------------------------------------------

    async def stale_intents(self, older_than_ms: int, limit: int = 500) -> list[Intent]:
        """In-flight intents recorded before ``older_than_ms`` whose submission never completed."""
        statement = select(_I).where(_I.c.state.in_(_IN_FLIGHT), _I.c.created_at < older_than_ms).limit(limit)
        return await self.database.read(lambda conn: [intent_from_row(row._mapping) for row in conn.execute(statement)])

    async def purge_orphans(self) -> int:
        """Delete workflows and settled intents whose task row is gone (retention ended)."""
        task_gone = ~exists().where(_T.c.task_id == _W.c.task_id)
        intent_settled = and_(_I.c.state.not_in(_IN_FLIGHT), ~exists().where(_W.c.task_id == _I.c.task_id))

        def purge(conn: Connection) -> int:
            removed = conn.execute(delete(_W).where(task_gone)).rowcount
            return removed + conn.execute(delete(_I).where(intent_settled)).rowcount

        return await self.database.write(purge)

    # -- internals -------------------------------------------------------------------------

    async def _move_intent(self, key: str, target: IntentState, *, handle: str | None = None) -> bool:
        params = {"key": key, "now": self.clock.now_ms(), "handle": handle}
        return await self.database.write(lambda conn: conn.execute(_MOVE_INTENT[target], params).rowcount == 1)

    async def _end(self, task_id: str, phase: Phase, outcome: TaskOutcome, generation: int | None) -> bool:
        now = self.clock.now_ms()
        guard = and_(_W.c.task_id == task_id, _W.c.phase.in_(sorted(p.value for p in phase_sources(phase))))
        if generation is not None:
            guard = and_(guard, _W.c.generation == generation)
        task_guard = and_(_T.c.task_id == task_id, _T.c.status.in_(sorted(s.value for s in sources_of(outcome.status))))

        def write(conn: Connection) -> bool:
            # Task row first, as the claim does: one lock order, so a fence racing a claim on
            # PostgreSQL waits for it instead of deadlocking.
            conn.execute(select(_T.c.task_id).where(_T.c.task_id == task_id).with_for_update())
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
            conn.execute(
                update(_T)
                .where(task_guard)
                .values(
                    status=outcome.status.value,
                    status_message=outcome.status_message,
                    result_json=None if outcome.result is None else dumps(outcome.result),
                    error_json=None if outcome.error is None else dumps(outcome.error),
                    input_requests_json="{}",
                    input_responses_json="{}",
                    owner=None,
                    lease_expires_at=None,
                    updated_at=now,
                    version=_T.c.version + 1,
                )
            )
            _extend_ttl(conn, task_id, now + self.result_retention_ms)
            kind = "approval.execution_finished" if phase is Phase.FINISHED else "approval.fenced"
            self._event(conn, now, kind, task_id, status=outcome.status.value, disposition=outcome.disposition)
            return True

        return await self.database.write(write)


def _refusal(
    conn: Connection, intent: Intent, now: int, per_minute: int, max_pending: int
) -> tuple[Admission, str | None] | None:
    """Why ``intent`` may not be recorded (a live duplicate, or a limit), or ``None``."""
    existing = _live_match(conn, intent.principal_digest, intent.tool_name, intent.arguments_digest)
    if existing is not None:
        return Admission.DUPLICATE, existing
    owner = {"owner": intent.principal_digest}
    if int(conn.execute(_RECENT_SUBMISSIONS, {**owner, "since": now - 60_000}).scalar_one()) >= per_minute:
        return Admission.RATE_LIMITED, None
    if int(conn.execute(_PENDING_WORKFLOWS, owner).scalar_one()) >= max_pending:
        return Admission.TOO_MANY_PENDING, None
    return None


def _live_match(conn: Connection, principal_digest: str, tool: str, digest: str) -> str | None:
    """A live workflow, else an in-flight intent, in the same (principal, tool, arguments) scope."""
    scope = {"owner": principal_digest, "tool": tool, "digest": digest}
    row = conn.execute(_LIVE_WORKFLOW, scope).first() or conn.execute(_IN_FLIGHT_INTENT, scope).first()
    return None if row is None else str(row.task_id)


def _reschedule_one(conn: Connection, item: Reschedule) -> bool:
    values: dict[str, Any] = {"next_check_at": item.next_check_at, "lease_owner": None, "lease_expires_at": None}
    for name in ("attempts", "request_deadline", "approval_expires_at"):
        if getattr(item, name) is not None:
            values[name] = getattr(item, name)
    guard = and_(_W.c.task_id == item.task_id, _W.c.generation == item.generation, _W.c.phase == Phase.PENDING.value)
    moved = conn.execute(update(_W).where(guard).values(**values, version=_W.c.version + 1)).rowcount == 1
    if moved and item.min_ttl_end is not None:
        _extend_ttl(conn, item.task_id, item.min_ttl_end)
    return moved


def _extend_ttl(conn: Connection, task_id: str, until_ms: int) -> None:
    """Make the task's retention last at least until ``until_ms`` (never shortens it; null stays null)."""
    row = conn.execute(select(_T.c.created_at, _T.c.ttl_ms).where(_T.c.task_id == task_id)).first()
    if row is None or row.ttl_ms is None:
        return
    needed = until_ms - row.created_at
    if needed > row.ttl_ms:
        conn.execute(
            update(_T).where(_T.c.task_id == task_id).values(ttl_ms=needed, expires_at=row.created_at + needed)
        )
