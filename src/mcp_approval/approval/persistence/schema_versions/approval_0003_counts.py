"""Admission counts kept by the database: pending approvals per principal, intents per minute.

Approval admission compared a count of live rows with each limit, reading up to the limit's worth
of index entries per request: with 10,000 pending approvals every new request read 10,000
entries. Triggers now append a ``+1``/``-1`` row to ``approval_counts`` whenever a row enters or
leaves a counted set, whatever statement moved it (a creation, a transition, a purge); a count is
the sum of its scope's rows, which admission folds into one row now and then. Appending never
updates a shared row, so concurrent writers on PostgreSQL take no lock on a counter. (The
unfinished tasks are counted by the tasks layer's own revision, tasks_0004.)

Scopes: ``pending:<principal digest>`` (approval workflows in phase ``pending``), and
``rate:<principal digest>:<minute>`` (intents recorded in that minute since the epoch, 12 digits:
an upper bound for the per-minute limit, so its exact count is read only near the limit). The
upgrade counts the rows already there, so pending requests keep counting against their
principals' limits.

Revision ID: approval_0003
Revises: approval_0002
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "approval_0003"
down_revision: str | None = "approval_0002"
branch_labels: str | None = None
depends_on: str | None = None

# Kept literally here (not imported) so this step never changes when the code's phases do.
_PENDING = "phase = 'pending'"
_SCOPE = "'pending:' || {row}.principal_digest"


def upgrade() -> None:
    """Create ``approval_counts``, install the triggers, and fill it with today's counts."""
    op.create_table(
        "approval_counts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("scope", sa.String(100), nullable=False),
        sa.Column("delta", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_approval_counts_scope", "approval_counts", ["scope", "delta"])
    postgresql = op.get_bind().dialect.name == "postgresql"
    _pending_counts(postgresql)
    _rate_counts(postgresql)


def _pending_counts(postgresql: bool) -> None:
    """Pending workflows per principal: one ``+1``/``-1`` as a workflow enters or leaves ``pending``."""
    old, new = _PENDING.replace("phase", "OLD.phase"), _PENDING.replace("phase", "NEW.phase")
    if postgresql:
        op.execute(
            f"""
            CREATE FUNCTION approval_count_pending() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE
                before_pending boolean := false;
                after_pending boolean := false;
                r approval_workflows%ROWTYPE;
            BEGIN
                IF TG_OP <> 'INSERT' THEN before_pending := {old}; r := OLD; END IF;
                IF TG_OP <> 'DELETE' THEN after_pending := {new}; r := NEW; END IF;
                IF before_pending <> after_pending AND r.principal_digest IS NOT NULL THEN
                    INSERT INTO approval_counts (scope, delta)
                    VALUES ({_SCOPE.format(row="r")}, CASE WHEN after_pending THEN 1 ELSE -1 END);
                END IF;
                RETURN NULL;
            END $$
            """  # noqa: S608
        )
        op.execute(
            "CREATE TRIGGER approval_count_pending AFTER INSERT OR DELETE OR UPDATE OF phase ON approval_workflows "
            "FOR EACH ROW EXECUTE FUNCTION approval_count_pending()"
        )
    else:

        def rows(row: str, delta: str) -> str:
            return (
                f"INSERT INTO approval_counts (scope, delta) SELECT {_SCOPE.format(row=row)}, {delta} "
                f"WHERE {row}.principal_digest IS NOT NULL;"
            )

        entered = f"CASE WHEN {new} THEN 1 ELSE -1 END"
        for event, when, row, delta in (
            ("insert", new, "NEW", "1"),
            ("delete", old, "OLD", "-1"),
            ("update", f"({old}) <> ({new})", "NEW", entered),
        ):
            timing = "UPDATE OF phase" if event == "update" else event.upper()
            op.execute(
                f"CREATE TRIGGER approval_count_pending_{event} AFTER {timing} ON approval_workflows "
                f"WHEN {when} BEGIN {rows(row, delta)} END"
            )
    op.execute(
        f"INSERT INTO approval_counts (scope, delta) SELECT {_SCOPE.format(row='approval_workflows')}, COUNT(*) "  # noqa: S608
        f"FROM approval_workflows WHERE {_PENDING} AND principal_digest IS NOT NULL GROUP BY principal_digest"
    )


def _rate_counts(postgresql: bool) -> None:
    """Intents per principal and minute: today's rows, then one ``+1`` per intent recorded."""
    minute = (
        "lpad(({row}.created_at / 60000)::text, 12, '0')" if postgresql else "printf('%012d', {row}.created_at / 60000)"
    )
    scope = "'rate:' || {row}.principal_digest || ':' || " + minute
    op.execute(
        f"INSERT INTO approval_counts (scope, delta) SELECT {scope.format(row='approval_intents')}, COUNT(*) "  # noqa: S608
        f"FROM approval_intents GROUP BY principal_digest, created_at / 60000"
    )
    insert = f"INSERT INTO approval_counts (scope, delta) VALUES ({scope.format(row='NEW')}, 1);"  # noqa: S608
    if not postgresql:
        op.execute(
            f"CREATE TRIGGER approval_count_approval_intents_insert AFTER INSERT ON approval_intents BEGIN {insert} END"
        )
        return
    op.execute(
        "CREATE FUNCTION approval_count_approval_intents() RETURNS trigger LANGUAGE plpgsql AS $$ "
        f"BEGIN {insert} RETURN NULL; END $$"
    )
    op.execute(
        "CREATE TRIGGER approval_count_approval_intents_insert AFTER INSERT ON approval_intents "
        "FOR EACH ROW EXECUTE FUNCTION approval_count_approval_intents()"
    )


def downgrade() -> None:
    """Drop the triggers and the counts."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER approval_count_approval_intents_insert ON approval_intents")
        op.execute("DROP FUNCTION approval_count_approval_intents()")
        op.execute("DROP TRIGGER approval_count_pending ON approval_workflows")
        op.execute("DROP FUNCTION approval_count_pending()")
    else:
        op.execute("DROP TRIGGER approval_count_approval_intents_insert")
        for event in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER approval_count_pending_{event}")
    op.drop_index("ix_approval_counts_scope", table_name="approval_counts")
    op.drop_table("approval_counts")
