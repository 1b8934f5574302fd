"""The chat messages a channel posted about each request, so later events rewrite the same message.

Revision ID: notify_0001
Revises: (none)
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "notify_0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``chat_messages``."""
    op.create_table(
        "chat_messages",
        sa.Column("channel", sa.String(100), primary_key=True),
        sa.Column("request_id", sa.String(64), primary_key=True),
        sa.Column("conversation", sa.String(100), nullable=False),
        sa.Column("message", sa.String(100), nullable=False),
        sa.Column("posted_at", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    """Drop ``chat_messages``."""
    op.drop_table("chat_messages")
