"""State several workers share: rate-limit events and once-only tokens.

Revision ID: shared_0001
Revises: (none)
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "shared_0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``rate_events`` and ``seen_once``."""
    op.create_table(
        "rate_events",
        sa.Column("event_id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(320), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_rate_events_key_at", "rate_events", ["key", "at"])
    op.create_index("ix_rate_events_at", "rate_events", ["at"])
    op.create_table(
        "seen_once",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_seen_once_expires_at", "seen_once", ["expires_at"])


def downgrade() -> None:
    """Drop ``rate_events`` and ``seen_once``."""
    op.drop_table("seen_once")
    op.drop_table("rate_events")
