"""Tasks driven by a component other than an in-process execution (release schema version 2).

Revision ID: tasks_0002
Revises: tasks_0001
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "tasks_0002"
down_revision: str | None = "tasks_0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Add ``handler`` (e.g. ``approval``) and ``meta_json`` (the ``_meta`` ``tasks/get`` repeats)."""
    op.add_column("tasks", sa.Column("handler", sa.String(32), nullable=True))
    op.add_column("tasks", sa.Column("meta_json", sa.Text(), nullable=True))


def downgrade() -> None:
    """Drop the two columns."""
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("meta_json")
        batch.drop_column("handler")
