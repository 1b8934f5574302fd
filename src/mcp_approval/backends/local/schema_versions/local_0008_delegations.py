"""Delegations: a reviewer handing their role for one template to another reviewer for a period.

One row per delegation, sealed under the binding key with its delegator, delegate, template and
period (the revocation changes after it is written and is also an audit event). A decision made
under a delegation names it and the delegator in two new columns of ``approval_decisions``,
covered by the decision's seal.

Revision ID: local_0008
Revises: local_0007
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "local_0008"
down_revision: str | None = "local_0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``approval_delegations``; add ``on_behalf_of`` and ``delegation_id`` to ``approval_decisions``."""
    op.create_table(
        "approval_delegations",
        sa.Column("delegation_id", sa.String(64), primary_key=True),
        sa.Column("delegator", sa.String(256), nullable=False),
        sa.Column("delegate", sa.String(256), nullable=False),
        sa.Column("template", sa.String(256), nullable=False),
        sa.Column("starts_at", sa.BigInteger(), nullable=False),
        sa.Column("ends_at", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("revoked_at", sa.BigInteger(), nullable=True),
        sa.Column("revoked_by", sa.String(256), nullable=True),
        sa.Column("seal", sa.Text(), nullable=False),
    )
    op.create_index("ix_approval_delegations_delegate", "approval_delegations", ["delegate", "template"])
    with op.batch_alter_table("approval_decisions") as batch:
        batch.add_column(sa.Column("on_behalf_of", sa.String(256), nullable=True))
        batch.add_column(sa.Column("delegation_id", sa.String(64), nullable=True))


def downgrade() -> None:
    """Drop what :func:`upgrade` added."""
    with op.batch_alter_table("approval_decisions") as batch:
        batch.drop_column("delegation_id")
        batch.drop_column("on_behalf_of")
    op.drop_index("ix_approval_delegations_delegate", table_name="approval_delegations")
    op.drop_table("approval_delegations")
