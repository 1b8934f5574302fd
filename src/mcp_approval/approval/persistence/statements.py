"""The approval store's SQL: statements built once, and the steps it runs inside a transaction.

Statements take bound parameters, so SQLAlchemy compiles each only once and a task creation
costs little more than its SQL. Functions here run on a connection the caller's transaction holds.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    ColumnClause,
    Connection,
    and_,
    bindparam,
    delete,
    func,
    literal_column,
    or_,
    select,
    text,
    update,
)

from mcp_approval.approval.persistence.records import Admission, Intent, Reschedule, call_scope
from mcp_approval.approval.persistence.schema import (
    approval_counts_table,
    approval_intents_table,
    approval_workflows_table,
)
from mcp_approval.approval.persistence.states import (
    IN_FLIGHT_INTENTS,
    UNSETTLED_INTENTS,
    IntentState,
    Phase,
    intent_sources,
)
from mcp_approval.backends.contract import EarlierCall
from mcp_approval.clock import iso8601
from mcp_approval.protocol import META_TOOL_APPROVAL_DEADLINE
from mcp_approval.storage.counts import ScopedCounts
from mcp_approval.tasks.sql_store import TaskRows, check_task_limits
from mcp_approval.tasks.store import MAX_TASKS, TaskLimitReachedError

__all__ = [
    "APPROVAL_COUNTS",
    "BIND_INTENT",
    "EARLIER_ENDED",
    "INSERT_INTENT",
    "INSERT_WORKFLOW",
    "IN_FLIGHT",
    "LIVE_PHASES",
    "LOOK_AGAIN",
    "LOOK_AGAIN_UNLEASED",
    "MOVE_INTENT",
    "TAKE_LEASE",
    "TAKE_LEASE_NOW",
    "UNSETTLED",
    "earlier_call",
    "fold_counts",
    "live_match",
    "rate_bound",
    "rate_scope",
    "refusal",
    "reschedule_one",
]

_W = approval_workflows_table
_I = approval_intents_table
#: Workflow phases in which a call is still live (a duplicate joins it).
LIVE_PHASES = sorted(phase.value for phase in (Phase.PENDING, Phase.CLAIMED))
#: Intent states of a submission whose task does not exist yet.
IN_FLIGHT = sorted(state.value for state in IN_FLIGHT_INTENTS)
#: Intent states reconciliation still has to settle.
UNSETTLED = sorted(state.value for state in UNSETTLED_INTENTS)

_ONE: ColumnClause[Any] = literal_column("1")  # a constant column: a bounded count reads index entries only
INSERT_INTENT = _I.insert()
INSERT_WORKFLOW = _W.insert()
#: A live workflow of the call ``call`` (:func:`~.records.call_scope`).
LIVE_WORKFLOW = (
    select(_W.c.task_id)
    .where(
        _W.c.call_scope == bindparam("call"),
        _W.c.phase.in_(LIVE_PHASES),
    )
    .limit(1)
)
#: The oldest ended request made without tasks whose outcome is still owed to the call ``call``:
#: what an admission finds first and what the identical retry takes.
OWED_WORKFLOW = (
    select(_W.c.task_id)
    .where(
        _W.c.call_scope == bindparam("call"),
        _W.c.owed_to_retry == 1,
        _W.c.phase.in_(sorted(phase.value for phase in (Phase.FINISHED, Phase.FENCED))),
    )
    .order_by(_W.c.updated_at)
    .limit(1)
)
#: The latest ended request of the call ``call`` that reviewers saw (it has a handle) and that
#: ended with a disposition (it ran, or was decided not to: not cancelled or failed): a new
#: request for the same call may duplicate it. Read on the call index.
EARLIER_ENDED = (
    select(_W.c.task_id, _W.c.handle, _W.c.phase, _W.c.disposition, _W.c.updated_at)
    .where(
        _W.c.call_scope == bindparam("call"),
        _W.c.phase.in_(sorted(phase.value for phase in (Phase.FINISHED, Phase.FENCED))),
        _W.c.disposition.is_not(None),
        _W.c.handle.is_not(None),
    )
    .order_by(_W.c.updated_at.desc(), _W.c.task_id.desc())
    .limit(1)
)
#: A first-generation intent in flight for the call ``call``.
IN_FLIGHT_INTENT = (
    select(_I.c.task_id)
    .where(
        _I.c.call_scope == bindparam("call"),
        _I.c.state.in_(IN_FLIGHT),
        _I.c.generation == 1,
    )
    .limit(1)
)
#: Intents ``owner`` recorded after ``since`` (the per-minute limit), counted up to ``cap``: an
#: admission check reads at most the limit's worth of index entries, however many requests pile up.
RECENT_SUBMISSIONS = select(func.count()).select_from(
    select(_ONE)
    .where(_I.c.principal_digest == bindparam("owner"), _I.c.created_at > bindparam("since"))
    .limit(bindparam("cap"))
    .subquery()
)
#: The admission counts the database keeps (revision approval_0003).
APPROVAL_COUNTS = ScopedCounts(approval_counts_table)
_LAST_MINUTE = 10**12 - 1  # the largest minute a scope's 12 digits can name
#: Per-minute counts kept this many minutes past the window, so a worker whose clock lags still finds them.
RATE_KEPT_MINUTES = 5
#: ``submitted → bound``: the intent's task now exists.
BIND_INTENT = (
    update(_I)
    .where(_I.c.idempotency_key == bindparam("key"), _I.c.state == IntentState.SUBMITTED.value)
    .values(state=IntentState.BOUND.value, updated_at=bindparam("now"))
)

#: Release a pending workflow's lease and set its next check (``t``, ``g``, ``n``).
LOOK_AGAIN = (
    update(_W)
    .where(_W.c.task_id == bindparam("t"), _W.c.generation == bindparam("g"), _W.c.phase == Phase.PENDING.value)
    .values(next_check_at=bindparam("n"), lease_owner=None, lease_expires_at=None, version=_W.c.version + 1)
)

_LEASE_FREE = or_(_W.c.lease_owner.is_(None), _W.c.lease_expires_at < bindparam("now"))
_LEASE_VALUES = {
    "lease_owner": bindparam("worker"),
    "lease_expires_at": bindparam("until"),
    "version": _W.c.version + 1,
}
#: Lease one due pending workflow (``t``) to ``worker`` until ``until``, if still free at ``now``.
TAKE_LEASE = (
    update(_W)
    .where(
        _W.c.task_id == bindparam("t"),
        _W.c.phase == Phase.PENDING.value,
        _LEASE_FREE,
        _W.c.next_check_at <= bindparam("now"),
    )
    .values(**_LEASE_VALUES)
)
#: :data:`TAKE_LEASE` for a wake-up: the workflow is checked now, whenever its next check was due.
TAKE_LEASE_NOW = (
    update(_W)
    .where(_W.c.task_id == bindparam("t"), _W.c.phase == Phase.PENDING.value, _LEASE_FREE)
    .values(**_LEASE_VALUES)
)

#: Set a due, unleased pending workflow's next check (``t``, ``g``, ``n``) if it is still due and
#: free at ``now``: a "look again later" written without a lease (see ``ApprovalStore.look_again_unleased``);
#: a lapsed lease it finds is cleared, as :data:`LOOK_AGAIN` clears the lease it releases.
LOOK_AGAIN_UNLEASED = (
    update(_W)
    .where(
        _W.c.task_id == bindparam("t"),
        _W.c.generation == bindparam("g"),
        _W.c.phase == Phase.PENDING.value,
        _LEASE_FREE,
        _W.c.next_check_at <= bindparam("now"),
    )
    .values(next_check_at=bindparam("n"), lease_owner=None, lease_expires_at=None, version=_W.c.version + 1)
)


def _move_intent_statement(target: IntentState) -> Any:
    sources = sorted(state.value for state in intent_sources(target))
    return (
        update(_I)
        .where(_I.c.idempotency_key == bindparam("key"), _I.c.state.in_(sources))
        .values(state=target.value, updated_at=bindparam("now"), handle=func.coalesce(bindparam("handle"), _I.c.handle))
    )


#: ``intent → target`` from any state that may move there (``key``, ``now``, optional ``handle``).
MOVE_INTENT = {target: _move_intent_statement(target) for target in IntentState}


def lock_dedup_scope(conn: Connection, call: str) -> None:
    """Serialize the admissions of one call (principal, tool, arguments) until this transaction ends.

    Two identical calls admitted at once must not both find no live request and both open one.
    SQLite's write transactions are serial already; on PostgreSQL (read committed) each would read
    before the other's insert committed, so they take a transaction-scoped advisory lock on the
    call's dedup scope first. Other calls are not held up.
    """
    if conn.dialect.name != "postgresql":
        return
    key = int.from_bytes(bytes.fromhex(call[:16]), "big", signed=True)
    conn.execute(_ADVISORY_XACT_LOCK, {"key": key})


_ADVISORY_XACT_LOCK = text("SELECT pg_advisory_xact_lock(:key)")


def refusal(
    conn: Connection,
    intent: Intent,
    now: int,
    per_minute: int,
    max_pending: int,
    task_limits: tuple[int | None, int | None] = (None, None),
    *,
    owed_first: bool = False,
) -> tuple[Admission, str | None] | None:
    """Why ``intent`` may not be recorded (an owed outcome, a live duplicate, or a limit), or ``None``.

    ``task_limits`` are the tasks extension's ``(max_tasks, max_per_principal)``: an approval task
    is a task like any other. ``owed_first``: a call without tasks, which an ended request of the
    same call still owes its outcome (read in this transaction, so a request that ended since the
    caller last looked is answered, not asked again).
    """
    call = call_scope(intent.principal_digest, intent.tool_name, intent.arguments_digest)
    lock_dedup_scope(conn, call)
    owed = owed_match(conn, call) if owed_first else None
    if owed is not None:
        return Admission.OUTCOME_OWED, owed
    existing = live_match(conn, call)
    if existing is not None:
        return Admission.DUPLICATE, existing
    # An ending takes no dedup lock: on PostgreSQL a request may end between the two reads above,
    # after the first saw it live and before the second did, so neither found it. Its ending
    # committed before this read starts, which therefore sees it.
    owed = owed_match(conn, call) if owed_first else None
    if owed is not None:
        return Admission.OUTCOME_OWED, owed
    owner = intent.principal_digest
    since = now - 60_000
    # The exact count of the window is read only when the minutes it spans hold enough intents.
    if rate_bound(conn, owner, since) >= per_minute:
        recent = {"owner": owner, "since": since, "cap": per_minute}
        if int(conn.execute(RECENT_SUBMISSIONS, recent).scalar_one()) >= per_minute:
            return Admission.RATE_LIMITED, None
    # Counts kept by the database's triggers: a few rows each, however many requests are pending.
    pending = f"pending:{owner}"
    if APPROVAL_COUNTS.read(conn, [pending]).get(pending, 0) >= max_pending:
        return Admission.TOO_MANY_PENDING, None
    try:
        check_task_limits(conn, intent.principal_digest, *task_limits)
    except TaskLimitReachedError as reached:
        return (Admission.TASK_LIMIT if reached.limit == MAX_TASKS else Admission.PRINCIPAL_TASK_LIMIT), None
    return None


def rate_scope(owner: str, minute: int) -> str:
    """The scope counting the intents ``owner`` recorded in ``minute`` (since the epoch)."""
    return f"rate:{owner}:{minute:012d}"


def rate_bound(conn: Connection, owner: str, since: int) -> int:
    """At least how many intents ``owner`` recorded after ``since``: those of its minute and later."""
    # Both ends share the prefix and differ in equal-length digits only, so the range holds exactly
    # this principal's minutes in any collation (PostgreSQL's may ignore the punctuation).
    low, high = rate_scope(owner, since // 60_000), rate_scope(owner, _LAST_MINUTE)
    return sum(APPROVAL_COUNTS.read_range(conn, low, high).values())


def fold_counts(conn: Connection, now: int) -> None:
    """Drop the per-minute counts of minutes long past; fold every scope spread over more than one row.

    Folding here reaches the scopes of principals that stopped asking.
    """
    table = APPROVAL_COUNTS.table
    stale = f"{now // 60_000 - 1 - RATE_KEPT_MINUTES:012d}"
    minute = func.substr(table.c.scope, func.length(table.c.scope) - 11)
    conn.execute(delete(table).where(table.c.scope.like("rate:%"), minute < stale))
    APPROVAL_COUNTS.fold_all(conn)


def owed_match(conn: Connection, call: str) -> str | None:
    """The oldest ended request made without tasks that owes its outcome in this scope (:data:`OWED_WORKFLOW`)."""
    row = conn.execute(OWED_WORKFLOW, {"call": call}).first()
    return None if row is None else str(row.task_id)


def earlier_call(conn: Connection, call: str) -> EarlierCall | None:
    """The identical call in this scope whose request ended latest (:data:`EARLIER_ENDED`), or ``None``."""
    row = conn.execute(EARLIER_ENDED, {"call": call}).first()
    if row is None:
        return None
    return EarlierCall(
        request_id=str(row.handle),
        task_id=str(row.task_id),
        outcome=str(row.disposition),
        ran=row.phase == Phase.FINISHED.value,
        ended_at_ms=int(row.updated_at),
    )


def live_match(conn: Connection, call: str) -> str | None:
    """An in-flight intent, else a live workflow, in the same (principal, tool, arguments) scope.

    In that order: a task's creation binds its intent and inserts its workflow in one commit, but
    on PostgreSQL (read committed) each statement here sees the commits made before it started.
    Read workflow first, and a creation committing between the two reads is in neither; read the
    intent first, and a commit before that read leaves the workflow for the second one to find.
    """
    scope = {"call": call}
    row = conn.execute(IN_FLIGHT_INTENT, scope).first() or conn.execute(LIVE_WORKFLOW, scope).first()
    return None if row is None else str(row.task_id)


def reschedule_one(conn: Connection, item: Reschedule, tasks: TaskRows, now: int) -> bool:
    """Move a pending workflow's next check (and the counters ``item`` sets); ``False`` if it moved on.

    A moved request deadline is restated in the task's status message and ``_meta`` too.
    """
    values: dict[str, Any] = {"next_check_at": item.next_check_at, "lease_owner": None, "lease_expires_at": None}
    for name in ("attempts", "request_deadline", "approval_expires_at"):
        if getattr(item, name) is not None:
            values[name] = getattr(item, name)
    guard = and_(_W.c.task_id == item.task_id, _W.c.generation == item.generation, _W.c.phase == Phase.PENDING.value)
    if item.min_ttl_end is not None or item.request_deadline is not None:
        # The task row is written too: lock it first, as the claim and the fence do. The other order
        # deadlocks on PostgreSQL against a fence (a tasks/cancel) of the same task.
        tasks.lock(conn, item.task_id)
    moved = conn.execute(update(_W).where(guard).values(**values, version=_W.c.version + 1)).rowcount == 1
    if moved and item.min_ttl_end is not None:
        tasks.retain_until(conn, item.task_id, item.min_ttl_end)
    if moved and item.request_deadline is not None:
        _restate_deadline(conn, item.task_id, item.request_deadline, now, tasks)
    return moved


def _restate_deadline(conn: Connection, task_id: str, deadline_ms: int, now_ms: int, tasks: TaskRows) -> None:
    """A moved request deadline, in the task's status message and ``_meta`` (a tasks client waits by it)."""
    record = tasks.lock(conn, task_id)
    meta = dict(record.meta or {}) if record is not None else {}
    stated = meta.get(META_TOOL_APPROVAL_DEADLINE)
    if record is None or not isinstance(stated, str):
        return  # not an approval task that states its deadline
    deadline = iso8601(deadline_ms)
    message = (record.status_message or "").replace(stated, deadline)
    tasks.restate(conn, task_id, now_ms, status_message=message, meta={**meta, META_TOOL_APPROVAL_DEADLINE: deadline})
