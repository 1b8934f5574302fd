"""Delivery cursors: the audit chain read as an outbox by each notification channel.

Revision ID: audit_0003
Revises: audit_0002

Adds ``audit_delivery_cursors``: per consumer (a notification channel), the last chain position
it delivered, its retry schedule and the lease of the worker delivering for it.
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "audit_0003"
down_revision: str | None = "audit_0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``audit_delivery_cursors``."""
    op.create_table(
        "audit_delivery_cursors",
        sa.Column("consumer", sa.String(128), primary_key=True),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.BigInteger(), nullable=False),
        sa.Column("lease_owner", sa.String(64), nullable=True),
        sa.Column("lease_expires_at", sa.BigInteger(), nullable=True),
        sa.Column("delivered", sa.BigInteger(), nullable=False),
        sa.Column("failures", sa.BigInteger(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    """Drop ``audit_delivery_cursors``."""
    op.drop_table("audit_delivery_cursors")
