"""The local backend's requests and decisions, as release schema version 2 created them.

Revision ID: local_0001
Revises: (none)
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "local_0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``approval_requests`` and ``approval_decisions``."""
    op.create_table(
        "approval_requests",
        sa.Column("request_id", sa.String(64), primary_key=True),
        sa.Column("idempotency_key", sa.String(64), nullable=False, unique=True),
        sa.Column("body_digest", sa.String(64), nullable=False),
        sa.Column("body_json", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("tool_name", sa.String(256), nullable=False),
        sa.Column("requester", sa.String(256), nullable=False),
        sa.Column("template", sa.String(256), nullable=True),
        sa.Column("approvals_required", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=True),
        sa.Column("approved_until", sa.BigInteger(), nullable=True),
        sa.Column("decided_at", sa.BigInteger(), nullable=True),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
    )
    op.create_index("ix_approval_requests_status", "approval_requests", ["status", "created_at"])
    op.create_table(
        "approval_decisions",
        sa.Column("request_id", sa.String(64), primary_key=True),
        sa.Column("reviewer", sa.String(256), primary_key=True),
        sa.Column("decision", sa.String(16), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("decided_at", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    """Drop both tables."""
    op.drop_table("approval_decisions")
    op.drop_table("approval_requests")
