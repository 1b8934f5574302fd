"""One key per call for the dedup reads: ``call_scope`` on intents and workflows.

The dedup reads (a live or in-flight request of the same call, the latest ended one, an outcome
owed to a retry) filtered on principal, tool and arguments digest, which a three-column index
served. But asyncpg prepares each statement once per connection and PostgreSQL may cache a
generic plan for it; planned while the tables were small and not yet analyzed, that plan could as
well pick another index starting with the principal (the pending count's, the rate check's) and
then filtered every row the principal ever stored, on every admission. A single column holding
SHA-256 of the three leaves each read exactly one index to use, however big the tables grow.

The rows already stored get their digest from the same formula (``records.call_scope``),
computed in SQL on PostgreSQL and row by row on SQLite, so a request pending across the upgrade
is still found by an identical call. During a rolling upgrade (PostgreSQL) workers of the previous
release go on inserting rows without it: a trigger fills it for them, so an identical call made on
a new worker still finds their requests. The three-column indexes stay for those workers' own
reads; a later revision drops them.

Revision ID: approval_0004
Revises: approval_0003
"""

import hashlib

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "approval_0004"
down_revision: str | None = "approval_0003"
branch_labels: str | None = None
depends_on: str | None = None

#: (table, its primary key column): the tables that gain the column.
_TABLES = (("approval_workflows", "task_id"), ("approval_intents", "idempotency_key"))
_BATCH = 1000


#: SHA-256 of ``principal|tool|arguments digest``, hex, in PostgreSQL's SQL (``{row}``: the row).
_PG_CALL_SCOPE = (
    "encode(sha256(convert_to({row}.principal_digest || '|' || {row}.tool_name || '|' || {row}.arguments_digest, "
    "'UTF8')), 'hex')"
)


def upgrade() -> None:
    """Add and fill ``call_scope``, index it, and (PostgreSQL) fill it for rows inserted without it."""
    postgresql = op.get_bind().dialect.name == "postgresql"
    for table, key in _TABLES:
        op.add_column(table, sa.Column("call_scope", sa.String(64), nullable=True))
        if postgresql:
            op.execute(f"UPDATE {table} SET call_scope = {_PG_CALL_SCOPE.format(row=table)}")  # noqa: S608
        else:
            _fill_sqlite(table, key)
    op.create_index("ix_approval_workflows_call_scope", "approval_workflows", ["call_scope"])
    op.create_index("ix_approval_intents_call_scope", "approval_intents", ["call_scope"])
    if postgresql:
        op.execute(
            "CREATE FUNCTION approval_fill_call_scope() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF NEW.call_scope IS NULL THEN NEW.call_scope := {_PG_CALL_SCOPE.format(row='NEW')}; END IF; "
            "RETURN NEW; END $$"
        )
        for table, _ in _TABLES:
            op.execute(
                f"CREATE TRIGGER {table}_call_scope BEFORE INSERT ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION approval_fill_call_scope()"
            )


def _fill_sqlite(table: str, key: str) -> None:
    """``call_scope`` of every stored row, in batches from Python: SQLite has no SHA-256."""
    bind = op.get_bind()
    pick = sa.text(
        f"SELECT {key}, principal_digest, tool_name, arguments_digest FROM {table} "  # noqa: S608
        f"WHERE call_scope IS NULL LIMIT {_BATCH}"
    )
    put = sa.text(f"UPDATE {table} SET call_scope = :call WHERE {key} = :key")  # noqa: S608
    while rows := bind.execute(pick).all():
        bind.execute(put, [{"key": key, "call": _call_scope(*call)} for key, *call in rows])


def _call_scope(principal_digest: str, tool_name: str, arguments_digest: str) -> str:
    """``records.call_scope`` as of this revision (kept here, so this step never changes with it)."""
    return hashlib.sha256(f"{principal_digest}|{tool_name}|{arguments_digest}".encode()).hexdigest()


def downgrade() -> None:
    """Drop the trigger, the indexes and the column."""
    if op.get_bind().dialect.name == "postgresql":
        for table, _ in _TABLES:
            op.execute(f"DROP TRIGGER {table}_call_scope ON {table}")
        op.execute("DROP FUNCTION approval_fill_call_scope()")
    op.drop_index("ix_approval_workflows_call_scope", table_name="approval_workflows")
    op.drop_index("ix_approval_intents_call_scope", table_name="approval_intents")
    for table, _ in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("call_scope")
