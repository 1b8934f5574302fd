"""Admission counts kept by the database: unfinished tasks and pending approvals, per principal and in all.

Approval admission compared a count of live rows with each limit, reading up to the limit's worth
of index entries per request: with 10,000 pending approvals (or ``max_tasks`` at its default of
10,000) every new request read 10,000 entries. Triggers now append a ``+1``/``-1`` row to
``approval_counts`` whenever a row enters or leaves a counted set, whatever statement moved it
(a creation, a transition, a bulk lapse, a purge); a count is the sum of its scope's rows, which
admission folds into one row now and then. Appending never updates a shared row, so concurrent
writers on PostgreSQL take no lock on a counter.

Scopes: ``tasks`` (tasks in ``working`` or ``input_required``), ``tasks:<principal digest>`` and
``pending:<principal digest>`` (approval workflows in phase ``pending``), and
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

# Kept literally here (not imported) so this step never changes when the code's sets do.
_ACTIVE = "('working', 'input_required')"
_PENDING = "('pending')"
# (table, counted column, counted set, scopes as SQL of a row alias: the global one may be None)
_COUNTED = (
    ("tasks", "status", _ACTIVE, "'tasks'", "'tasks:' || {row}.principal_digest"),
    ("approval_workflows", "phase", _PENDING, None, "'pending:' || {row}.principal_digest"),
)


def upgrade() -> None:
    """Create ``approval_counts``, fill it with today's counts, and install the triggers."""
    op.create_table(
        "approval_counts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("scope", sa.String(100), nullable=False),
        sa.Column("delta", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_approval_counts_scope", "approval_counts", ["scope", "delta"])
    for table, column, counted, whole, own in _COUNTED:
        if whole is not None:
            op.execute(
                f"INSERT INTO approval_counts (scope, delta) SELECT {whole}, COUNT(*) FROM {table} "  # noqa: S608
                f"WHERE {column} IN {counted} HAVING COUNT(*) > 0"
            )
        op.execute(
            f"INSERT INTO approval_counts (scope, delta) SELECT {own.format(row=table)}, COUNT(*) FROM {table} "  # noqa: S608
            f"WHERE {column} IN {counted} AND principal_digest IS NOT NULL GROUP BY principal_digest"
        )
        if op.get_bind().dialect.name == "postgresql":
            _postgresql_triggers(table, column, counted, whole, own)
        else:
            _sqlite_triggers(table, column, counted, whole, own)
    _rate_counts(op.get_bind().dialect.name == "postgresql")


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
    postgresql = op.get_bind().dialect.name == "postgresql"
    op.execute(
        "DROP TRIGGER IF EXISTS approval_count_approval_intents_insert" + (" ON approval_intents" if postgresql else "")
    )
    if postgresql:
        op.execute("DROP FUNCTION IF EXISTS approval_count_approval_intents()")
    for table, *_ in _COUNTED:
        for event in ("insert", "update", "delete"):
            suffix = f" ON {table}" if postgresql else ""
            op.execute(f"DROP TRIGGER IF EXISTS approval_count_{table}_{event}{suffix}")
        if postgresql:
            op.execute(f"DROP FUNCTION IF EXISTS approval_count_{table}()")
    op.drop_index("ix_approval_counts_scope", table_name="approval_counts")
    op.drop_table("approval_counts")


def _sqlite_triggers(table: str, column: str, counted: str, whole: str | None, own: str) -> None:
    def rows(row: str, delta: str) -> str:
        selects = [f"SELECT {whole}, {delta}"] if whole is not None else []
        selects.append(f"SELECT {own.format(row=row)}, {delta} WHERE {row}.principal_digest IS NOT NULL")
        return f"INSERT INTO approval_counts (scope, delta) {' UNION ALL '.join(selects)};"

    moved = f"(OLD.{column} IN {counted}) <> (NEW.{column} IN {counted})"
    entered = f"CASE WHEN NEW.{column} IN {counted} THEN 1 ELSE -1 END"
    op.execute(
        f"CREATE TRIGGER approval_count_{table}_insert AFTER INSERT ON {table} "
        f"WHEN NEW.{column} IN {counted} BEGIN {rows('NEW', '1')} END"
    )
    op.execute(
        f"CREATE TRIGGER approval_count_{table}_delete AFTER DELETE ON {table} "
        f"WHEN OLD.{column} IN {counted} BEGIN {rows('OLD', '-1')} END"
    )
    # A moved principal (never done) would need both scopes; the count follows the new row's.
    op.execute(
        f"CREATE TRIGGER approval_count_{table}_update AFTER UPDATE OF {column} ON {table} "
        f"WHEN {moved} BEGIN {rows('NEW', entered)} END"
    )


def _postgresql_triggers(table: str, column: str, counted: str, whole: str | None, own: str) -> None:
    insert = "INSERT INTO approval_counts (scope, delta) VALUES"
    whole_row = f"{insert} ({whole}, d);" if whole is not None else ""
    own_row = f"{insert} ({own.format(row='r')}, d);"
    op.execute(
        f"""
        CREATE FUNCTION approval_count_{table}() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            d integer;
            r {table}%ROWTYPE;
        BEGIN
            IF TG_OP = 'DELETE' THEN
                d := -1;
                r := OLD;
            ELSE
                r := NEW;
                IF NEW.{column} IN {counted} THEN d := 1; ELSE d := -1; END IF;
            END IF;
            {whole_row}
            IF r.principal_digest IS NOT NULL THEN
                {own_row}
            END IF;
            RETURN NULL;
        END
        $$
        """
    )
    moved = f"(OLD.{column} IN {counted}) IS DISTINCT FROM (NEW.{column} IN {counted})"
    for event, when in (
        ("insert", f"NEW.{column} IN {counted}"),
        ("delete", f"OLD.{column} IN {counted}"),
        ("update", moved),
    ):
        timing = f"UPDATE OF {column}" if event == "update" else event.upper()
        op.execute(
            f"CREATE TRIGGER approval_count_{table}_{event} AFTER {timing} ON {table} "
            f"FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION approval_count_{table}()"
        )
