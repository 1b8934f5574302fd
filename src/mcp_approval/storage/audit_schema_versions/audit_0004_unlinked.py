"""An index of the events waiting to be linked into the chain.

Revision ID: audit_0004
Revises: audit_0003

Requests insert their events unlinked (``seq`` NULL) and a linker links the committed ones in
``event_id`` order, off the request path. ``ix_audit_events_unlinked`` holds only the unlinked
rows (a partial index), so the linker finds them in order however long the table is, and
whatever the planner's statistics say about how many are NULL. No stored row changes: every
event the chain already holds stays linked as it was.
"""

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "audit_0004"
down_revision: str | None = "audit_0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``ix_audit_events_unlinked`` on ``event_id`` where ``seq`` is NULL."""
    unlinked = sa.text("seq IS NULL")
    op.create_index(
        "ix_audit_events_unlinked",
        "audit_events",
        ["event_id"],
        postgresql_where=unlinked,
        sqlite_where=unlinked,
    )


def downgrade() -> None:
    """Drop ``ix_audit_events_unlinked``."""
    op.drop_index("ix_audit_events_unlinked", table_name="audit_events")
