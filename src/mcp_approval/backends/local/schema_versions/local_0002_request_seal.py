"""A keyed seal over each approval request's stored content, so an edited row is detected.

Revision ID: local_0002
Revises: local_0001
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "local_0002"
down_revision: str | None = "local_0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Add ``approval_requests.content_seal`` (rows stored earlier are sealed when a sealing backend starts)."""
    with op.batch_alter_table("approval_requests") as batch:
        batch.add_column(sa.Column("content_seal", sa.Text(), nullable=True))


def downgrade() -> None:
    """Drop ``approval_requests.content_seal``."""
    with op.batch_alter_table("approval_requests") as batch:
        batch.drop_column("content_seal")
