"""Approval requests opened for clients without tasks: their outcome is owed to the retry.

Revision ID: approval_0002
Revises: approval_0001
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "approval_0002"
down_revision: str | None = "approval_0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Add ``owed_to_retry``: 1 while a request made without tasks has not answered its retry."""
    op.add_column("approval_workflows", sa.Column("owed_to_retry", sa.Integer(), nullable=True))


def downgrade() -> None:
    """Drop the column."""
    with op.batch_alter_table("approval_workflows") as batch:
        batch.drop_column("owed_to_retry")
