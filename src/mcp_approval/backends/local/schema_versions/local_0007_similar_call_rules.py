"""Similar-call rules: what a reviewer approving one request lets decide later calls like it.

One row per rule, sealed under the binding key with its author and scope (``uses``, and the
revocation, change after it is written and are checked otherwise: see ``similar_store``). An index
on the decisions' reviewer counts a rule's decisions.

Revision ID: local_0007
Revises: local_0006
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "local_0007"
down_revision: str | None = "local_0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``similar_call_rules`` and ``ix_approval_decisions_reviewer``."""
    op.create_table(
        "similar_call_rules",
        sa.Column("rule_id", sa.String(64), primary_key=True),
        sa.Column("template", sa.String(256), nullable=True),
        sa.Column("tool_name", sa.String(256), nullable=False),
        sa.Column("author", sa.String(256), nullable=False),
        sa.Column("source_request", sa.String(64), nullable=False),
        sa.Column("scope_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.Column("max_uses", sa.Integer(), nullable=False),
        sa.Column("uses", sa.Integer(), nullable=False),
        sa.Column("revoked_at", sa.BigInteger(), nullable=True),
        sa.Column("revoked_by", sa.String(256), nullable=True),
        sa.Column("seal", sa.Text(), nullable=False),
    )
    op.create_index("ix_similar_call_rules_tool", "similar_call_rules", ["tool_name", "expires_at"])
    op.create_index("ix_approval_decisions_reviewer", "approval_decisions", ["reviewer"])


def downgrade() -> None:
    """Drop ``similar_call_rules`` and ``ix_approval_decisions_reviewer``."""
    op.drop_index("ix_approval_decisions_reviewer", table_name="approval_decisions")
    op.drop_index("ix_similar_call_rules_tool", table_name="similar_call_rules")
    op.drop_table("similar_call_rules")
