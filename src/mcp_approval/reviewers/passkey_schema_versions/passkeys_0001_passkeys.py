"""Reviewers' passkeys and the single-use WebAuthn challenges issued to them.

Revision ID: passkeys_0001
Revises: (none)
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "passkeys_0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``reviewer_passkeys`` and ``passkey_challenges``."""
    op.create_table(
        "reviewer_passkeys",
        sa.Column("credential_id", sa.String(1400), primary_key=True),
        sa.Column("reviewer", sa.String(256), nullable=False),
        sa.Column("public_key", sa.Text(), nullable=False),
        sa.Column("sign_count", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("used_at", sa.BigInteger(), nullable=True),
    )
    op.create_index("ix_reviewer_passkeys_reviewer", "reviewer_passkeys", ["reviewer"])
    op.create_table(
        "passkey_challenges",
        sa.Column("challenge_key", sa.String(64), primary_key=True),
        sa.Column("nonce", sa.String(64), nullable=False),
        sa.Column("reviewer", sa.String(256), nullable=False),
        sa.Column("purpose", sa.String(16), nullable=False),
        sa.Column("request_id", sa.String(64), nullable=True),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_passkey_challenges_expires", "passkey_challenges", ["expires_at"])


def downgrade() -> None:
    """Drop both tables."""
    op.drop_table("passkey_challenges")
    op.drop_table("reviewer_passkeys")
