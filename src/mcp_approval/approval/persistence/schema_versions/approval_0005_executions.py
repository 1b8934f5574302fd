"""The sealed record of each execution: ``approval_executions``.

A workflow row says whether its call ran (``finished``), but a database writer can roll that row
back to ``pending``, or point another task of the same call at a request that already ran. The
claim now writes one row here first, in its own transaction, keyed by the task's generation and
by the request it followed, and sealed under the binding key; the claim refuses any call whose
generation or request already has one, whatever the workflow row says. Rows are never updated
or deleted by the server (a task purged at the end of its retention leaves its row here).

Revision ID: approval_0005
Revises: approval_0004
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "approval_0005"
down_revision: str | None = "approval_0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``approval_executions`` and its unique index on the request."""
    op.create_table(
        "approval_executions",
        sa.Column("task_id", sa.String(64), primary_key=True),
        sa.Column("generation", sa.Integer(), primary_key=True),
        sa.Column("request_key", sa.String(64), nullable=False),
        sa.Column("backend", sa.String(64), nullable=False),
        sa.Column("handle", sa.String(512), nullable=False),
        sa.Column("call_scope", sa.String(64), nullable=True),
        sa.Column("worker", sa.String(64), nullable=False),
        sa.Column("claimed_at", sa.BigInteger(), nullable=False),
        sa.Column("seal", sa.Text(), nullable=False),
    )
    op.create_index("ix_approval_executions_request", "approval_executions", ["request_key"], unique=True)


def downgrade() -> None:
    """Drop ``approval_executions``."""
    op.drop_index("ix_approval_executions_request", table_name="approval_executions")
    op.drop_table("approval_executions")
