"""The number of unfinished tasks kept by the database, so a limit check does not count them.

Revision ID: tasks_0004
Revises: tasks_0003

Triggers on ``tasks`` append +1 or -1 to ``task_active_deltas`` whenever a row enters or leaves
the unfinished statuses (insert, status change, delete); the count is the sum of the rows, which
the sweeper folds into one row now and then. Appending never waits for another transaction (no
shared counter row is locked), and the sum reads only the rows since the last fold, however many
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

_POSTGRESQL = (
    """
CREATE FUNCTION tasks_active_delta() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  before_active boolean := false;
  after_active boolean := false;
BEGIN
  IF TG_OP <> 'INSERT' THEN before_active := OLD.status IN ('input_required', 'working'); END IF;
  IF TG_OP <> 'DELETE' THEN after_active := NEW.status IN ('input_required', 'working'); END IF;
  IF before_active <> after_active THEN
    INSERT INTO task_active_deltas (delta) VALUES (CASE WHEN after_active THEN 1 ELSE -1 END);
  END IF;
  RETURN NULL;
END $$
""",
    "CREATE TRIGGER tasks_active_delta AFTER INSERT OR DELETE OR UPDATE OF status ON tasks "
    "FOR EACH ROW EXECUTE PROCEDURE tasks_active_delta()",
)
_SQLITE = (
    "CREATE TRIGGER tasks_active_insert AFTER INSERT ON tasks WHEN NEW.status IN ('input_required', 'working') "
    "BEGIN INSERT INTO task_active_deltas (delta) VALUES (1); END",
    "CREATE TRIGGER tasks_active_update AFTER UPDATE OF status ON tasks "
    "WHEN (OLD.status IN ('input_required', 'working')) <> (NEW.status IN ('input_required', 'working')) "
    "BEGIN INSERT INTO task_active_deltas (delta) "
    "VALUES (CASE WHEN NEW.status IN ('input_required', 'working') THEN 1 ELSE -1 END); END",
    "CREATE TRIGGER tasks_active_delete AFTER DELETE ON tasks WHEN OLD.status IN ('input_required', 'working') "
    "BEGIN INSERT INTO task_active_deltas (delta) VALUES (-1); END",
)


def upgrade() -> None:
    """Create ``task_active_deltas`` and its triggers, then count the unfinished tasks once.

    The triggers come first: on PostgreSQL creating one locks ``tasks`` against writes until the
    migration commits, so the initial count and the triggers see the same rows.
    """
    op.create_table(
        "task_active_deltas",
        sa.Column("delta_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("delta", sa.BigInteger(), nullable=False),
    )
    for statement in _POSTGRESQL if op.get_bind().dialect.name == "postgresql" else _SQLITE:
        op.execute(statement)
    op.execute(
        "INSERT INTO task_active_deltas (delta) "
        "SELECT COUNT(*) FROM tasks WHERE status IN ('input_required', 'working')"
    )


def downgrade() -> None:
    """Drop the triggers and the counts."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER tasks_active_delta ON tasks")
        op.execute("DROP FUNCTION tasks_active_delta()")
    else:
        for statement in ("insert", "update", "delete"):
            op.execute("DROP TRIGGER tasks_active_" + statement)
    op.drop_table("task_active_deltas")
