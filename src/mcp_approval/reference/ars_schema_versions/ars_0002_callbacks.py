"""The callback outbox: a row per task that ended with a callback owed, written with the change.

Revision ID: ars_0002
Revises: ars_0001
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "ars_0002"
down_revision: str | None = "ars_0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``arap_callbacks`` and ``ix_arap_callbacks_due``."""
    op.create_table(
        "arap_callbacks",
        sa.Column("task_id", sa.String(64), primary_key=True),
        sa.Column("endpoint", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.BigInteger(), nullable=True),
        sa.Column("lease_owner", sa.String(64), nullable=True),
        sa.Column("lease_expires_at", sa.BigInteger(), nullable=True),
        sa.Column("delivered_at", sa.BigInteger(), nullable=True),
        sa.Column("abandoned_at", sa.BigInteger(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
    )
    op.create_index("ix_arap_callbacks_due", "arap_callbacks", ["next_attempt_at"])


def downgrade() -> None:
    """Drop ``arap_callbacks``."""
    op.drop_table("arap_callbacks")
