"""The approval workflow tables, as release schema version 2 created them.

Revision ID: approval_0001
Revises: (none)
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "approval_0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``approval_workflows`` and ``approval_intents`` with their indexes."""
    op.create_table(
        "approval_workflows",
        sa.Column("task_id", sa.String(64), primary_key=True),
        sa.Column("principal_digest", sa.String(64), nullable=False),
        sa.Column("tool_name", sa.String(256), nullable=False),
        sa.Column("arguments_digest", sa.String(64), nullable=False),
        sa.Column("binding_ciphertext", sa.Text(), nullable=True),
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("tool_fingerprint", sa.String(64), nullable=True),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("backend", sa.String(64), nullable=False),
        sa.Column("handle", sa.String(512), nullable=True),
        sa.Column("template", sa.String(256), nullable=True),
        sa.Column("request_deadline", sa.BigInteger(), nullable=True),
        sa.Column("approval_expires_at", sa.BigInteger(), nullable=True),
        sa.Column("next_check_at", sa.BigInteger(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(64), nullable=True),
        sa.Column("lease_expires_at", sa.BigInteger(), nullable=True),
        sa.Column("execution_deadline", sa.BigInteger(), nullable=True),
        sa.Column("disposition", sa.String(32), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
    )
    op.create_index(
        "ix_approval_workflows_dedup", "approval_workflows", ["principal_digest", "tool_name", "arguments_digest"]
    )
    op.create_index("ix_approval_workflows_due", "approval_workflows", ["phase", "next_check_at"])
    op.create_index("ix_approval_workflows_pending", "approval_workflows", ["principal_digest", "phase"])
    op.create_table(
        "approval_intents",
        sa.Column("idempotency_key", sa.String(64), primary_key=True),
        sa.Column("task_id", sa.String(64), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("principal_digest", sa.String(64), nullable=False),
        sa.Column("tool_name", sa.String(256), nullable=False),
        sa.Column("arguments_digest", sa.String(64), nullable=False),
        sa.Column("body_ciphertext", sa.Text(), nullable=False),
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("handle", sa.String(512), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_approval_intents_task", "approval_intents", ["task_id", "generation"], unique=True)
    op.create_index("ix_approval_intents_state", "approval_intents", ["state"])
    op.create_index("ix_approval_intents_handle", "approval_intents", ["handle"])
    op.create_index("ix_approval_intents_rate", "approval_intents", ["principal_digest", "created_at"])
    op.create_index(
        "ix_approval_intents_dedup", "approval_intents", ["principal_digest", "tool_name", "arguments_digest"]
    )


def downgrade() -> None:
    """Drop both tables."""
    op.drop_table("approval_intents")
    op.drop_table("approval_workflows")
