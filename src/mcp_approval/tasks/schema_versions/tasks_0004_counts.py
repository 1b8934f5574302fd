"""The numbers of unfinished tasks kept by the database, so a limit check does not count them.

Revision ID: tasks_0004
Revises: tasks_0003

Triggers on ``tasks`` append +1 or -1 rows to ``task_counts`` whenever a row enters or leaves the
unfinished statuses (insert, status change, delete), for the scope ``tasks`` (all of them) and
``tasks:<principal digest>`` (a principal's). A count is the sum of its scope's rows, which the
sweeper and the reads fold now and then. Appending never waits for another transaction (no
shared counter row is locked), and a count reads only the rows since its last fold, however many
tasks are unfinished.
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "tasks_0004"
down_revision: str | None = "tasks_0003"
branch_labels: str | None = None
depends_on: str | None = None

# The unfinished statuses are spelled out in each statement (not imported) so this step never
# changes when the code's statuses do.
_ACTIVE = "('input_required', 'working')"

_POSTGRESQL = (
    f"""
CREATE FUNCTION task_counts_delta() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  before_active boolean := false;
  after_active boolean := false;
  d integer;
  r tasks%ROWTYPE;
BEGIN
  IF TG_OP <> 'INSERT' THEN before_active := OLD.status IN {_ACTIVE}; r := OLD; END IF;
  IF TG_OP <> 'DELETE' THEN after_active := NEW.status IN {_ACTIVE}; r := NEW; END IF;
  IF before_active = after_active THEN RETURN NULL; END IF;
  d := CASE WHEN after_active THEN 1 ELSE -1 END;
  INSERT INTO task_counts (scope, delta) VALUES ('tasks', d);
  IF r.principal_digest IS NOT NULL THEN
    INSERT INTO task_counts (scope, delta) VALUES ('tasks:' || r.principal_digest, d);
  END IF;
  RETURN NULL;
END $$
""",  # noqa: S608
    "CREATE TRIGGER task_counts_delta AFTER INSERT OR DELETE OR UPDATE OF status ON tasks "
    "FOR EACH ROW EXECUTE FUNCTION task_counts_delta()",
)


def _sqlite_rows(row: str, delta: str) -> str:
    return (
        f"INSERT INTO task_counts (scope, delta) SELECT 'tasks', {delta} UNION ALL "
        f"SELECT 'tasks:' || {row}.principal_digest, {delta} WHERE {row}.principal_digest IS NOT NULL;"
    )


_SQLITE = (
    f"CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks WHEN NEW.status IN {_ACTIVE} "
    f"BEGIN {_sqlite_rows('NEW', '1')} END",
    f"CREATE TRIGGER task_counts_update AFTER UPDATE OF status ON tasks "
    f"WHEN (OLD.status IN {_ACTIVE}) <> (NEW.status IN {_ACTIVE}) "
    f"BEGIN {_sqlite_rows('NEW', f'CASE WHEN NEW.status IN {_ACTIVE} THEN 1 ELSE -1 END')} END",
    f"CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks WHEN OLD.status IN {_ACTIVE} "
    f"BEGIN {_sqlite_rows('OLD', '-1')} END",
)


def upgrade() -> None:
    """Create ``task_counts`` and its triggers, then count the unfinished tasks once.

    The triggers come first: on PostgreSQL creating one locks ``tasks`` against writes until the
    migration commits, so the initial counts and the triggers see the same rows.
    """
    op.create_table(
        "task_counts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("scope", sa.String(100), nullable=False),
        sa.Column("delta", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_task_counts_scope", "task_counts", ["scope", "delta"])
    for statement in _POSTGRESQL if op.get_bind().dialect.name == "postgresql" else _SQLITE:
        op.execute(statement)
    op.execute(
        "INSERT INTO task_counts (scope, delta) "  # noqa: S608
        f"SELECT 'tasks', COUNT(*) FROM tasks WHERE status IN {_ACTIVE} HAVING COUNT(*) > 0"
    )
    op.execute(
        "INSERT INTO task_counts (scope, delta) "  # noqa: S608
        f"SELECT 'tasks:' || principal_digest, COUNT(*) FROM tasks "
        f"WHERE status IN {_ACTIVE} AND principal_digest IS NOT NULL GROUP BY principal_digest"
    )


def downgrade() -> None:
    """Drop the triggers and the counts."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER task_counts_delta ON tasks")
        op.execute("DROP FUNCTION task_counts_delta()")
    else:
        for event in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER task_counts_{event}")
    op.drop_index("ix_task_counts_scope", table_name="task_counts")
    op.drop_table("task_counts")
