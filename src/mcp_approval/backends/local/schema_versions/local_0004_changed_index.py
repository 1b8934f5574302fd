"""An index for the change feed: the requests that left ``pending`` since a time, by status.

Revision ID: local_0004
Revises: local_0003
"""

from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "local_0004"
down_revision: str | None = "local_0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``ix_approval_requests_changed`` on ``approval_requests (status, updated_at)``."""
    op.create_index("ix_approval_requests_changed", "approval_requests", ["status", "updated_at"])


def downgrade() -> None:
    """Drop ``ix_approval_requests_changed``."""
    op.drop_index("ix_approval_requests_changed", table_name="approval_requests")
