"""The sealed record of an operator's one-time sealing of requests stored before sealing.

Requests stored by a release before their content (local_0002) or their rules and decisions
(local_0005) were sealed are no longer sealed when a server starts: they fail their integrity
check until the operator seals them once (``mcp-approval upgrade seal-requests``). That step
writes one row here, naming every request it sealed as found, sealed under the binding key; its
primary key makes the step one-time.

Revision ID: local_0006
Revises: local_0005
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "local_0006"
down_revision: str | None = "local_0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``approval_seal_manifests``."""
    op.create_table(
        "approval_seal_manifests",
        sa.Column("step", sa.String(64), primary_key=True),
        sa.Column("sealed_at", sa.BigInteger(), nullable=False),
        sa.Column("actor", sa.String(256), nullable=False),
        sa.Column("manifest_json", sa.Text(), nullable=False),
        sa.Column("seal", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    """Drop ``approval_seal_manifests``."""
    op.drop_table("approval_seal_manifests")
