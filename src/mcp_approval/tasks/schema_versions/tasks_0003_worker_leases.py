"""One lease row per worker instead of one renewal per task, and signals read per owner.

Revision ID: tasks_0003
Revises: tasks_0002
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "tasks_0003"
down_revision: str | None = "tasks_0002"
branch_labels: str | None = None
depends_on: str | None = None

# Kept literally here (not imported) so this step never changes when the code's condition does.
_SIGNAL_PENDING = "cancel_requested OR input_responses_json <> '{}'"


def upgrade() -> None:
    """Create ``task_workers`` and the owner indexes; existing rows keep their own leases."""
    op.create_table(
        "task_workers",
        sa.Column("worker_id", sa.String(64), primary_key=True),
        sa.Column("lease_expires_at", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_task_workers_lease", "task_workers", ["lease_expires_at"])
    op.create_index("ix_tasks_owner_lease", "tasks", ["owner", "lease_expires_at"])
    op.drop_index("ix_tasks_owner", table_name="tasks")
    predicate = sa.text(_SIGNAL_PENDING)
    op.create_index("ix_tasks_owner_signals", "tasks", ["owner"], postgresql_where=predicate, sqlite_where=predicate)


def downgrade() -> None:
    """Drop the worker leases and indexes (tasks whose lease was handed over lose it)."""
    op.drop_index("ix_tasks_owner_signals", table_name="tasks")
    op.create_index("ix_tasks_owner", "tasks", ["owner"])
    op.drop_index("ix_tasks_owner_lease", table_name="tasks")
    op.drop_table("task_workers")
