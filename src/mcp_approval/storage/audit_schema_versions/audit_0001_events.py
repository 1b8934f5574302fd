"""The audit log, as release schema version 2 created it.

Revision ID: audit_0001
Revises: (none)
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "audit_0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``audit_events``."""
    op.create_table(
        "audit_events",
        sa.Column("event_id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("subject", sa.String(128), nullable=True),
        sa.Column("actor", sa.String(256), nullable=True),
        sa.Column("data_json", sa.Text(), nullable=False),
    )
    op.create_index("ix_audit_events_subject", "audit_events", ["subject", "event_id"])


def downgrade() -> None:
    """Drop ``audit_events``."""
    op.drop_table("audit_events")
