"""Sealed decision rules and sealed decisions.

``approval_requests`` gains the rules a request was submitted under (``rules_json``, covered by
its content seal) and their reviewer role; ``approval_decisions`` gains each decision's seal.
Rows stored before this revision have neither: a server sealing under its binding key fills
them in at start for the requests still open, trusted as found then (as revision local_0002's
content seal was), so a request pending across the upgrade still completes.

Revision ID: local_0005
Revises: local_0004
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "local_0005"
down_revision: str | None = "local_0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Add ``approval_requests.rules_json``, ``approval_requests.reviewer_role`` and ``approval_decisions.seal``."""
    with op.batch_alter_table("approval_requests") as table:
        table.add_column(sa.Column("rules_json", sa.Text(), nullable=True))
        table.add_column(sa.Column("reviewer_role", sa.String(256), nullable=True))
    with op.batch_alter_table("approval_decisions") as table:
        table.add_column(sa.Column("seal", sa.Text(), nullable=True))


def downgrade() -> None:
    """Drop the three columns."""
    with op.batch_alter_table("approval_decisions") as table:
        table.drop_column("seal")
    with op.batch_alter_table("approval_requests") as table:
        table.drop_column("reviewer_role")
        table.drop_column("rules_json")
