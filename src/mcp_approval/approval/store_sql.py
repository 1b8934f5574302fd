"""The approval store's SQL: statements built once, and the steps it runs inside a transaction.

Statements take bound parameters, so SQLAlchemy compiles each only once and a task creation
costs little more than its SQL. Functions here run on a connection the caller's transaction holds.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnClause, Connection, and_, bindparam, delete, func, literal_column, select, update

from mcp_approval.approval.records import Admission, Intent, Reschedule
from mcp_approval.approval.schema import approval_counts_table, approval_intents_table, approval_workflows_table
from mcp_approval.approval.states import IN_FLIGHT_INTENTS, UNSETTLED_INTENTS, IntentState, Phase, intent_sources
from mcp_approval.tasks.sql_store import TaskRows

__all__ = [
    "BIND_INTENT",
    "COUNTS",
    "FOLD_AT",
    "INSERT_INTENT",
    "INSERT_WORKFLOW",
    "IN_FLIGHT",
    "LIVE_PHASES",
    "LOOK_AGAIN",
    "MOVE_INTENT",
    "RATE_COUNTS",
    "UNSETTLED",
    "fold_counts",
    "fold_scope",
    "live_match",
    "rate_bound",
    "rate_scope",
    "read_counts",
    "refusal",
    "reschedule_one",
]

_W = approval_workflows_table
_I = approval_intents_table
_C = approval_counts_table
#: Workflow phases in which a call is still live (a duplicate joins it).
LIVE_PHASES = sorted(phase.value for phase in (Phase.PENDING, Phase.CLAIMED))
#: Intent states of a submission whose task does not exist yet.
IN_FLIGHT = sorted(state.value for state in IN_FLIGHT_INTENTS)
#: Intent states reconciliation still has to settle.
UNSETTLED = sorted(state.value for state in UNSETTLED_INTENTS)

_ONE: ColumnClause[Any] = literal_column("1")  # a constant column: a bounded count reads index entries only
INSERT_INTENT = _I.insert()
INSERT_WORKFLOW = _W.insert()
#: A live workflow for (``owner``, ``tool``, ``digest``).
LIVE_WORKFLOW = (
    select(_W.c.task_id)
    .where(
        _W.c.principal_digest == bindparam("owner"),
        _W.c.tool_name == bindparam("tool"),
        _W.c.arguments_digest == bindparam("digest"),
        _W.c.phase.in_(LIVE_PHASES),
    )
    .limit(1)
)
#: A first-generation intent in flight for (``owner``, ``tool``, ``digest``).
IN_FLIGHT_INTENT = (
    select(_I.c.task_id)
    .where(
        _I.c.principal_digest == bindparam("owner"),
        _I.c.tool_name == bindparam("tool"),
        _I.c.arguments_digest == bindparam("digest"),
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
#: The counts of ``scopes`` (see :data:`~mcp_approval.approval.schema.approval_counts_table`): each
#: scope's sum and how many rows it is spread over (a few, since admission folds them).
COUNTS = (
    select(_C.c.scope, func.sum(_C.c.delta).label("total"), func.count().label("rows"))
    .where(_C.c.scope.in_(bindparam("scopes", expanding=True)))
    .group_by(_C.c.scope)
)
#: The per-minute intent counts of one principal from a minute on (``low`` to ``high``, inclusive).
RATE_COUNTS = (
    select(_C.c.scope, func.sum(_C.c.delta).label("total"), func.count().label("rows"))
    .where(_C.c.scope >= bindparam("low"), _C.c.scope <= bindparam("high"))
    .group_by(_C.c.scope)
)
_LAST_MINUTE = 10**12 - 1  # the largest minute a scope's 12 digits can name
#: Per-minute counts kept this many minutes past the window, so a worker whose clock lags still finds them.
RATE_KEPT_MINUTES = 5
#: The rows of one scope that no concurrent fold holds (PostgreSQL; SQLite's writer is alone anyway).
_SCOPE_ROWS = select(_C.c.id, _C.c.delta).where(_C.c.scope == bindparam("scope")).with_for_update(skip_locked=True)
#: Scopes spread over more than one row.
_UNFOLDED = select(_C.c.scope).group_by(_C.c.scope).having(func.count() > 1)
#: A scope spread over more rows than this is folded by the admission that reads it.
FOLD_AT = 32
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


def _move_intent_statement(target: IntentState) -> Any:
    sources = sorted(state.value for state in intent_sources(target))
    return (
        update(_I)
        .where(_I.c.idempotency_key == bindparam("key"), _I.c.state.in_(sources))
        .values(state=target.value, updated_at=bindparam("now"), handle=func.coalesce(bindparam("handle"), _I.c.handle))
    )


#: ``intent → target`` from any state that may move there (``key``, ``now``, optional ``handle``).
MOVE_INTENT = {target: _move_intent_statement(target) for target in IntentState}


def refusal(
    conn: Connection,
    intent: Intent,
    now: int,
    per_minute: int,
    max_pending: int,
    task_limits: tuple[int | None, int | None] = (None, None),
) -> tuple[Admission, str | None] | None:
    """Why ``intent`` may not be recorded (a live duplicate, or a limit), or ``None``.

    ``task_limits`` are the tasks extension's ``(max_tasks, max_per_principal)``: an approval task
    is a task like any other.
    """
    existing = live_match(conn, intent.principal_digest, intent.tool_name, intent.arguments_digest)
    if existing is not None:
        return Admission.DUPLICATE, existing
    owner = intent.principal_digest
    since = now - 60_000
    # The exact count of the window is read only when the minutes it spans hold enough intents.
    if rate_bound(conn, owner, since) >= per_minute:
        recent = {"owner": owner, "since": since, "cap": per_minute}
        if int(conn.execute(RECENT_SUBMISSIONS, recent).scalar_one()) >= per_minute:
            return Admission.RATE_LIMITED, None
    # Counts kept by the database's triggers: a few rows each, however many requests are pending.
    pending, tasks, own_tasks = f"pending:{owner}", "tasks", f"tasks:{owner}"
    counts = read_counts(conn, (pending, tasks, own_tasks))
    if counts.get(pending, 0) >= max_pending:
        return Admission.TOO_MANY_PENDING, None
    max_tasks, max_own = task_limits
    if (max_tasks is not None and counts.get(tasks, 0) >= max_tasks) or (
        max_own is not None and counts.get(own_tasks, 0) >= max_own
    ):
        return Admission.TASK_LIMIT, None
    return None


def rate_scope(owner: str, minute: int) -> str:
    """The scope counting the intents ``owner`` recorded in ``minute`` (since the epoch)."""
    return f"rate:{owner}:{minute:012d}"


def rate_bound(conn: Connection, owner: str, since: int) -> int:
    """At least how many intents ``owner`` recorded after ``since``: those of its minute and later."""
    # Both ends share the prefix and differ in equal-length digits only, so the range holds exactly
    # this principal's minutes in any collation (PostgreSQL's may ignore the punctuation).
    span = {"low": rate_scope(owner, since // 60_000), "high": rate_scope(owner, _LAST_MINUTE)}
    total = 0
    for row in conn.execute(RATE_COUNTS, span):
        total += int(row.total)
        if row.rows > FOLD_AT:
            fold_scope(conn, row.scope)
    return total


def read_counts(conn: Connection, scopes: tuple[str, ...]) -> dict[str, int]:
    """The counts of ``scopes`` (absent: 0), folding a scope spread over more than :data:`FOLD_AT` rows."""
    counts: dict[str, int] = {}
    for row in conn.execute(COUNTS, {"scopes": list(scopes)}):
        counts[row.scope] = int(row.total)
        if row.rows > FOLD_AT:
            fold_scope(conn, row.scope)
    return counts


def fold_scope(conn: Connection, scope: str) -> None:
    """Replace the rows of ``scope`` with one row holding their sum (none when it is 0).

    On PostgreSQL, rows another transaction is folding are skipped, so two folds never wait for
    each other and each moves only rows it holds; rows appended meanwhile stay for the next fold.
    """
    rows = conn.execute(_SCOPE_ROWS, {"scope": scope}).all()
    if len(rows) < 2:
        return
    conn.execute(delete(_C).where(_C.c.id.in_([row.id for row in rows])))
    total = sum(int(row.delta) for row in rows)
    if total:
        conn.execute(_C.insert(), {"scope": scope, "delta": total})


def fold_counts(conn: Connection, now: int) -> None:
    """Drop the per-minute counts of minutes long past; fold every scope spread over more than one row.

    Folding here reaches the scopes of principals that stopped asking (whose tasks still move).
    """
    stale = f"{now // 60_000 - 1 - RATE_KEPT_MINUTES:012d}"
    minute = func.substr(_C.c.scope, func.length(_C.c.scope) - 11)
    conn.execute(delete(_C).where(_C.c.scope.like("rate:%"), minute < stale))
    for scope in conn.execute(_UNFOLDED).scalars().all():
        fold_scope(conn, scope)


def live_match(conn: Connection, principal_digest: str, tool: str, digest: str) -> str | None:
    """A live workflow, else an in-flight intent, in the same (principal, tool, arguments) scope."""
    scope = {"owner": principal_digest, "tool": tool, "digest": digest}
    row = conn.execute(LIVE_WORKFLOW, scope).first() or conn.execute(IN_FLIGHT_INTENT, scope).first()
    return None if row is None else str(row.task_id)


def reschedule_one(conn: Connection, item: Reschedule, tasks: TaskRows) -> bool:
    """Move a pending workflow's next check (and the counters ``item`` sets); ``False`` if it moved on."""
    values: dict[str, Any] = {"next_check_at": item.next_check_at, "lease_owner": None, "lease_expires_at": None}
    for name in ("attempts", "request_deadline", "approval_expires_at"):
        if getattr(item, name) is not None:
            values[name] = getattr(item, name)
    guard = and_(_W.c.task_id == item.task_id, _W.c.generation == item.generation, _W.c.phase == Phase.PENDING.value)
    moved = conn.execute(update(_W).where(guard).values(**values, version=_W.c.version + 1)).rowcount == 1
    if moved and item.min_ttl_end is not None:
        tasks.retain_until(conn, item.task_id, item.min_ttl_end)
    return moved
