"""The reference Access Request Service's tables, as release schema version 3 created them.

Revision ID: ars_0001
Revises: (none)
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "ars_0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``arap_evaluations``, ``arap_tasks``, ``arap_approvals`` and ``arap_jti``."""
    op.create_table(
        "arap_evaluations",
        sa.Column("evaluation_id", sa.String(64), primary_key=True),
        sa.Column("binding_hash", sa.String(64), nullable=False),
        sa.Column("members_json", sa.Text(), nullable=False),
        sa.Column("template", sa.String(256), nullable=True),
        sa.Column("display_json", sa.Text(), nullable=True),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_arap_evaluations_expires_at", "arap_evaluations", ["expires_at"])
    op.create_table(
        "arap_tasks",
        sa.Column("task_id", sa.String(64), primary_key=True),
        sa.Column("caller", sa.String(256), nullable=False),
        sa.Column("idempotency_key", sa.String(256), nullable=True),
        sa.Column("body_digest", sa.String(64), nullable=False),
        sa.Column("request_id", sa.String(64), nullable=False, unique=True),
        sa.Column("binding_hash", sa.String(64), nullable=False),
        sa.Column("members_json", sa.Text(), nullable=False),
        sa.Column("evaluation_id", sa.String(64), nullable=True),
        sa.Column("callback_endpoint", sa.Text(), nullable=True),
        sa.Column("callback_state", sa.Text(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.Column("retain_until", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_arap_tasks_idempotency", "arap_tasks", ["caller", "idempotency_key"], unique=True)
    op.create_table(
        "arap_approvals",
        sa.Column("approval_id", sa.String(64), primary_key=True),
        sa.Column("task_id", sa.String(64), nullable=False, unique=True),
        sa.Column("binding_hash", sa.String(64), nullable=False),
        sa.Column("members_json", sa.Text(), nullable=False),
        sa.Column("approved_at", sa.BigInteger(), nullable=False),
        sa.Column("approved_until", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("revoked_at", sa.BigInteger(), nullable=True),
    )
    op.create_table(
        "arap_jti",
        sa.Column("jti", sa.String(256), primary_key=True),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_arap_jti_expires_at", "arap_jti", ["expires_at"])


def downgrade() -> None:
    """Drop the four tables."""
    for table in ("arap_jti", "arap_approvals", "arap_tasks", "arap_evaluations"):
        op.drop_table(table)
