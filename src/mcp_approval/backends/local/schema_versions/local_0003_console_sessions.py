"""Reviewer console sessions in the store, so every worker knows a sign-in.

Revision ID: local_0003
Revises: local_0002
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "local_0003"
down_revision: str | None = "local_0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``console_sessions``."""
    op.create_table(
        "console_sessions",
        sa.Column("session_key", sa.String(64), primary_key=True),
        sa.Column("principal", sa.String(256), nullable=False),
        sa.Column("sealed_token", sa.Text(), nullable=False),
        sa.Column("csrf", sa.String(64), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("seen_ms", sa.BigInteger(), nullable=False),
        sa.Column("flashes_json", sa.Text(), nullable=False),
    )
    op.create_index("ix_console_sessions_seen", "console_sessions", ["seen_ms"])


def downgrade() -> None:
    """Drop ``console_sessions``."""
    op.drop_table("console_sessions")
