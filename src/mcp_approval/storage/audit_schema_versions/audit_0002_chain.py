"""The audit log as a hash chain: each event commits to the one before it.

Revision ID: audit_0002
Revises: audit_0001

Adds ``seq`` (the event's position in the chain), ``prev_hash`` and ``hash`` to ``audit_events``,
and ``audit_chain_head``, one row naming the chain's last event. Events already stored become the
start of the chain, in ``event_id`` order: this step computes their links. The hash is spelled out
here rather than imported, so this step means the same thing whatever later code does.
"""

import hashlib
import json
from typing import Any

import sqlalchemy as sa
from alembic import op

__all__ = ["branch_labels", "depends_on", "down_revision", "downgrade", "revision", "upgrade"]

revision = "audit_0002"
down_revision: str | None = "audit_0001"
branch_labels: str | None = None
depends_on: str | None = None

_GENESIS = "0" * 64
_BATCH = 1000


def upgrade() -> None:
    """Add the chain columns and the head table, and link the events already stored."""
    op.add_column("audit_events", sa.Column("seq", sa.BigInteger(), nullable=True))
    op.add_column("audit_events", sa.Column("prev_hash", sa.String(64), nullable=True))
    op.add_column("audit_events", sa.Column("hash", sa.String(64), nullable=True))
    op.create_index("ux_audit_events_seq", "audit_events", ["seq"], unique=True)
    op.create_table(
        "audit_chain_head",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    seq, head = _link_existing_events(op.get_bind())
    op.get_bind().execute(
        sa.text("INSERT INTO audit_chain_head (id, seq, hash) VALUES (1, :seq, :hash)"), {"seq": seq, "hash": head}
    )


def _link_existing_events(conn: sa.Connection) -> tuple[int, str]:
    seq, head, after = 0, _GENESIS, -1
    while True:
        rows = (
            conn.execute(
                sa.text(
                    "SELECT event_id, at, kind, subject, actor, data_json FROM audit_events "
                    "WHERE event_id > :after ORDER BY event_id LIMIT :n"
                ),
                {"after": after, "n": _BATCH},
            )
            .mappings()
            .all()
        )
        if not rows:
            return seq, head
        for row in rows:
            seq += 1
            digest = _hash(seq, head, row)
            conn.execute(
                sa.text("UPDATE audit_events SET seq = :seq, prev_hash = :prev, hash = :hash WHERE event_id = :id"),
                {"seq": seq, "prev": head, "hash": digest, "id": row["event_id"]},
            )
            head, after = digest, row["event_id"]


def _hash(seq: int, prev_hash: str, row: Any) -> str:
    event = {
        "seq": seq,
        "prev_hash": prev_hash,
        "event_id": row["event_id"],
        "at": row["at"],
        "kind": row["kind"],
        "subject": row["subject"],
        "actor": row["actor"],
        "data": json.loads(row["data_json"] or "{}"),
    }
    canonical = json.dumps(event, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def downgrade() -> None:
    """Drop the head table and the chain columns."""
    op.drop_table("audit_chain_head")
    op.drop_index("ux_audit_events_seq", table_name="audit_events")
    with op.batch_alter_table("audit_events") as batch:
        batch.drop_column("hash")
        batch.drop_column("prev_hash")
        batch.drop_column("seq")
