"""The decision links an e-mail channel sent: a hash of each token, bound to a reviewer and a request.

Revision ID: notify_0002
Revises: notify_0001
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "notify_0002"
down_revision: str | None = "notify_0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``email_links``."""
    op.create_table(
        "email_links",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column("channel", sa.String(100), nullable=False),
        sa.Column("request_id", sa.String(64), nullable=False),
        sa.Column("reviewer", sa.String(200), nullable=False),
        sa.Column("content_digest", sa.String(64), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.Column("sent_at", sa.BigInteger(), nullable=True),
        sa.Column("used_at", sa.BigInteger(), nullable=True),
        sa.UniqueConstraint("channel", "request_id", "reviewer", name="uq_email_links_reviewer"),
    )
    op.create_index("ix_email_links_request", "email_links", ["request_id"])


def downgrade() -> None:
    """Drop ``email_links``."""
    op.drop_index("ix_email_links_request", table_name="email_links")
    op.drop_table("email_links")
