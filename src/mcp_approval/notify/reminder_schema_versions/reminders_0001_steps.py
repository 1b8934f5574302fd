"""The reminders and escalations claimed per request, and each channel's delivery of them.

Revision ID: reminders_0001
Revises: (none)
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "reminders_0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``reminder_steps`` and ``reminder_deliveries``."""
    op.create_table(
        "reminder_steps",
        sa.Column("request_id", sa.String(64), primary_key=True),
        sa.Column("step", sa.String(16), primary_key=True),
        sa.Column("role", sa.String(256), nullable=False),
        sa.Column("channels_json", sa.Text(), nullable=False),
        sa.Column("due_at", sa.BigInteger(), nullable=False),
        sa.Column("claimed_at", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "reminder_deliveries",
        sa.Column("request_id", sa.String(64), primary_key=True),
        sa.Column("step", sa.String(16), primary_key=True),
        sa.Column("channel", sa.String(100), primary_key=True),
        sa.Column("sent_at", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    """Drop both tables."""
    op.drop_table("reminder_deliveries")
    op.drop_table("reminder_steps")
