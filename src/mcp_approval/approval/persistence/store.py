"""Durable approval-workflow state: submission intents, workflows, the execution claim.

Each operation is one transaction. The claim (``pending → claimed``) and the fence (``pending →
fenced``) are compare-and-sets on the same column, so cancellation, expiry and denial exclude
execution whichever worker gets there first; each also writes the task row in the same
transaction, so a task's wire status and its workflow never disagree. The task row is written
through the tasks layer's :class:`~mcp_approval.tasks.sql_store.TaskRows`, never directly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, and_, delete, exists, or_, select, update

from mcp_approval.approval.persistence import statements as sql
from mcp_approval.approval.persistence.records import (
    APPROVAL_HANDLER,
    Admission,
    Creation,
    DueCheck,
    Intent,
    NewWorkflow,
    Reschedule,
    TaskOutcome,
    Workflow,
    call_scope,
    intent_from_row,
    intent_row,
    workflow_from_row,
    workflow_row,
)
from mcp_approval.approval.persistence.schema import approval_intents_table, approval_workflows_table
from mcp_approval.approval.persistence.states import IntentState, Phase, intent_sources, phase_sources
from mcp_approval.backends.contract import EarlierCall, SubmissionRejectedError
from mcp_approval.clock import Clock, SystemClock
from mcp_approval.crashpoints import crash_point
from mcp_approval.storage import AuditLog, Database
from mcp_approval.tasks.sql_store import TaskRows
from mcp_approval.tasks.states import TaskStatus
from mcp_approval.tasks.store import NewTask

_W = approval_workflows_table
_I = approval_intents_table


class ApprovalStore:
    """The approval workflow tables, on the task store's database.

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

    # -- creation --------------------------------------------------------------------------

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

    async def take_retry_outcome(self, principal_digest: str, tool: str, digest: str) -> str | None:
        """Take the ended, not yet answered request made without tasks in this dedup scope.

        A compare-and-set on ``owed_to_retry``: of concurrent identical retries exactly one takes
        it (and answers its outcome); the approval is then spent. Returns its task id, or ``None``.
        """
        now, call = self.clock.now_ms(), call_scope(principal_digest, tool, digest)

        def take(conn: Connection) -> str | None:
            task_id = sql.owed_match(conn, call)
            if task_id is None:
                return None
            taken = update(_W).where(_W.c.task_id == task_id, _W.c.owed_to_retry == 1).values(owed_to_retry=None)
            if conn.execute(taken).rowcount != 1:
                return None
            self._event(conn, now, "approval.outcome_answered", task_id, digest, tool=tool)
            return task_id

        return await self.database.write(take)

    async def record_intent(
        self,
        intent: Intent,
        *,
        submissions_per_minute: int,
        max_pending: int,
        task_limits: tuple[int | None, int | None] = (None, None),
        owed_first: bool = False,
    ) -> tuple[Admission, str | None]:
        """Persist ``intent`` unless a duplicate or a limit stops it; returns (admission, task id).

        ``task_limits``: the tasks extension's ``(max_tasks, max_per_principal)``. ``owed_first``:
        an ended request made without tasks that owes this call its outcome comes first
        (:attr:`Admission.OUTCOME_OWED`).
        """
        now = self.clock.now_ms()

        def record(conn: Connection) -> tuple[Admission, str | None]:
            refused = sql.refusal(
                conn, intent, now, submissions_per_minute, max_pending, task_limits, owed_first=owed_first
            )
            if refused is not None:
                return refused
            conn.execute(sql.INSERT_INTENT, intent_row(intent, now))
            return Admission.RECORDED, intent.task_id

        return await self.database.write(record)

    async def create_at_once(
        self,
        intent: Intent,
        submit: Callable[[Connection], str],
        workflow_for: Callable[[str], NewWorkflow],
        *,
        submissions_per_minute: int,
        max_pending: int,
        task_limits: tuple[int | None, int | None] = (None, None),
        owed_first: bool = False,
    ) -> Creation:
        """Admit ``intent``, submit it, and create its task, all in one transaction.

        For a backend that writes to this database
        (:class:`~mcp_approval.backends.contract.SupportsSubmitInTransaction`): ``submit`` opens
        the request in the transaction and returns its handle; ``workflow_for(handle)`` is the new
        task. Everything commits together or not at all, so nothing is ever in flight: the intent
        is stored already bound. The same dedup and limits as :meth:`record_intent` apply. A
        submission the backend refuses for good leaves the intent ``abandoned``, with its event.
        """
        now = self.clock.now_ms()

        def create(conn: Connection) -> Creation:
            refused = sql.refusal(
                conn, intent, now, submissions_per_minute, max_pending, task_limits, owed_first=owed_first
            )
            if refused is not None:
                return Creation(*refused)
            try:
                handle = submit(conn)
            except SubmissionRejectedError:
                conn.execute(sql.INSERT_INTENT, intent_row(replace(intent, state=IntentState.ABANDONED), now))
                digest, generation = intent.arguments_digest, intent.generation
                self._event(conn, now, "approval.intent_abandoned", intent.task_id, digest, generation=generation)
                return Creation(Admission.REFUSED, None)
            new = workflow_for(handle)
            conn.execute(sql.INSERT_INTENT, intent_row(replace(intent, state=IntentState.BOUND, handle=handle), now))
            task = self.tasks.insert(conn, _new_task(new), now, input_requests=new.input_requests)
            conn.execute(sql.INSERT_WORKFLOW, workflow_row(new, now))
            self._created(conn, now, new)
            crash_point("in_creation_transaction")
            return Creation(Admission.RECORDED, new.task_id, handle, task)

        return await self.database.write(create)

    async def mark_submitted(self, key: str, handle: str) -> bool:
        """Persist the backend's handle for an open intent."""
        return await self._move_intent(key, IntentState.SUBMITTED, handle=handle)

    async def renew_intents(self, keys: Sequence[str]) -> None:
        """Mark the in-flight intents ``keys`` as still being created (their writer is alive)."""
        in_flight = sorted(state.value for state in (IntentState.OPEN, IntentState.SUBMITTED))
        statement = (
            update(_I)
            .where(_I.c.idempotency_key.in_(list(keys)), _I.c.state.in_(in_flight))
            .values(updated_at=self.clock.now_ms())
        )

        def renew(conn: Connection) -> None:
            conn.execute(statement)

        await self.database.write(renew)

    async def claim_orphan(self, intent: Intent) -> bool:
        """Claim an in-flight intent for withdrawal; ``False`` if it moved on (e.g. its task was created).

        A compare-and-set on the intent: a task creation binds only a ``submitted`` intent, so of the
        two, exactly one wins.
        """
        return await self._move_intent(intent.key, IntentState.WITHDRAWING)

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

    async def create_waiting_task(
        self,
        new: NewWorkflow,
        draft: Intent,
        *,
        submissions_per_minute: int,
        max_pending: int,
        task_limits: tuple[int | None, int | None] = (None, None),
    ) -> tuple[Admission, str | None]:
        """Create a task that waits in ``input_required`` for its submission inputs (generation 0).

        Nothing is submitted yet. ``draft`` keeps the request body (generation 0, never sent);
        :meth:`chain` from generation 0 records the real submission once the inputs arrived. The
        same dedup and limits as :meth:`record_intent` apply; returns (admission, task id).
        """
        now = self.clock.now_ms()

        def create(conn: Connection) -> tuple[Admission, str | None]:
            refused = sql.refusal(conn, draft, now, submissions_per_minute, max_pending, task_limits)
            if refused is not None:
                return refused
            self.tasks.insert(conn, _new_task(new), now, input_requests=new.input_requests)
            conn.execute(sql.INSERT_WORKFLOW, {**workflow_row(new, now), "generation": 0})
            conn.execute(sql.INSERT_INTENT, intent_row(draft, now))
            self._created(conn, now, new)
            return Admission.RECORDED, new.task_id

        return await self.database.write(create)

    async def create_task(self, new: NewWorkflow) -> bool:
        """Create the task and its workflow and bind the intent, in one transaction.

        Returns ``False`` (and writes nothing) if the intent is no longer ``submitted``, i.e. the
        reconciler abandoned it meanwhile.
        """
        now = self.clock.now_ms()

        def create(conn: Connection) -> bool:
            if conn.execute(sql.BIND_INTENT, {"key": new.intent_key, "now": now}).rowcount != 1:
                return False
            self.tasks.insert(conn, _new_task(new), now, input_requests=new.input_requests)
            conn.execute(sql.INSERT_WORKFLOW, workflow_row(new, now))
            self._created(conn, now, new)
            return True

        return await self.database.write(create)

    def _created(self, conn: Connection, now: int, new: NewWorkflow) -> None:
        data = {"tool": new.tool_name, "template": new.template}
        self._event(conn, now, "approval.task_created", new.task_id, new.arguments_digest, **data)

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
            task = self.tasks.lock(conn, task_id)
            if task is None or task.terminal or task.cancel_requested:
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
            self.tasks.retain_until(conn, task_id, deadline + self.result_retention_ms)
            self._event_of_row(conn, now, "approval.execution_claimed", task_id, generation=generation, worker=worker)
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

    # -- reconciliation and retention ------------------------------------------------------

    async def stale_intents(self, older_than_ms: int, limit: int = 500) -> list[Intent]:
        """Unsettled intents (in flight, or being withdrawn) last moved or renewed before ``older_than_ms``."""
        statement = select(_I).where(_I.c.state.in_(sql.UNSETTLED), _I.c.updated_at < older_than_ms).limit(limit)
        return await self.database.read(lambda conn: [intent_from_row(row._mapping) for row in conn.execute(statement)])

    async def purge_orphans(self, after: str = "", limit: int = 1000) -> str | None:
        """Delete workflows and settled intents whose task row is gone (retention ended), one page at a time.

        The page is the next ``limit`` workflows by task id after ``after`` (and the intents of the
        same task id range), so a call reads a bounded number of rows however many are pending.
        Returns where the next page starts, or ``None`` once the last page was purged.

        Also tidies the admission counts: drops the per-minute intent counts of minutes long past
        and folds the rest, so the rows of principals that no longer ask do not pile up.
        """
        page = select(_W.c.task_id).where(_W.c.task_id > after).order_by(_W.c.task_id).limit(limit)
        now = self.clock.now_ms()

        def purge(conn: Connection) -> str | None:
            ids = list(conn.execute(page).scalars())
            upto = ids[-1] if len(ids) == limit else None
            in_range = [_W.c.task_id > after] + ([_W.c.task_id <= upto] if upto is not None else [])
            conn.execute(delete(_W).where(*in_range, ~self.tasks.exists(_W.c.task_id)))
            intents_in_range = [_I.c.task_id > after] + ([_I.c.task_id <= upto] if upto is not None else [])
            settled = _I.c.state.not_in(sql.UNSETTLED)
            conn.execute(delete(_I).where(*intents_in_range, settled, ~exists().where(_W.c.task_id == _I.c.task_id)))
            sql.fold_counts(conn, now)
            return upto

        upto = await self.database.write(purge)
        await sql.APPROVAL_COUNTS.reclaim(self.database)
        return upto

    # -- internals -------------------------------------------------------------------------

    async def _move_intent(self, key: str, target: IntentState, *, handle: str | None = None) -> bool:
        params = {"key": key, "now": self.clock.now_ms(), "handle": handle}
        return await self.database.write(lambda conn: conn.execute(sql.MOVE_INTENT[target], params).rowcount == 1)

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

    async def _signalled(self, task_id: str, written: bool) -> bool:
        """Report a committed change of ``task_id`` to the ``changed`` hook; returns ``written``."""
        if written and self._changed is not None:
            await self._changed(task_id)
        return written


def _new_task(new: NewWorkflow) -> NewTask:
    """The approval task's row: waiting for its inputs, else working; driven by the approval layer."""
    status = TaskStatus.INPUT_REQUIRED if new.input_requests else TaskStatus.WORKING
    return NewTask(
        task_id=new.task_id,
        principal_digest=new.principal_digest,
        tool_name=new.tool_name,
        ttl_ms=new.ttl_ms,
        poll_interval_ms=new.poll_interval_ms,
        owner=None,
        lease_ms=None,
        status=status,
        status_message=new.status_message,
        handler=APPROVAL_HANDLER,
        meta=new.meta,
    )


__all__ = [
    "APPROVAL_HANDLER",
    "Admission",
    "ApprovalStore",
    "DueCheck",
    "Intent",
    "NewWorkflow",
    "Reschedule",
    "TaskOutcome",
    "Workflow",
]
