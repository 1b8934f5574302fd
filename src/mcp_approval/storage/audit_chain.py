"""The audit chain's tables, the hash of an event, and linking committed events into the chain.

See :mod:`mcp_approval.storage.audit` for the log built on them; this module holds what a
linking transaction does, so that the log's reading and verifying stay apart from it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import BigInteger, Column, Connection, Index, Integer, MetaData, String, Table, Text, bindparam, select

__all__ = [
    "GENESIS_HASH",
    "LINK_BATCH",
    "audit_chain_head_table",
    "audit_events_table",
    "canonical_json",
    "event_hash",
    "has_unlinked",
    "head",
    "link_batch",
]

#: The ``prev_hash`` of the chain's first event.
GENESIS_HASH = "0" * 64

_metadata = MetaData()

audit_events_table = Table(
    "audit_events",
    _metadata,
    Column("event_id", Integer, primary_key=True, autoincrement=True),
    Column("at", BigInteger, nullable=False),
    Column("kind", String(64), nullable=False),
    # The approval request or task the event is about.
    Column("subject", String(128), nullable=True),
    Column("actor", String(256), nullable=True),
    Column("data_json", Text, nullable=False, default="{}"),
    # The chain: empty until a linker links the committed event (AuditLog.link).
    Column("seq", BigInteger, nullable=True),
    Column("prev_hash", String(64), nullable=True),
    Column("hash", String(64), nullable=True),
)

Index("ix_audit_events_subject", audit_events_table.c.subject, audit_events_table.c.event_id)
Index("ux_audit_events_seq", audit_events_table.c.seq, unique=True)
# The events the linker has yet to link, in the order it links them (revision audit_0004).
Index(
    "ix_audit_events_unlinked",
    audit_events_table.c.event_id,
    postgresql_where=audit_events_table.c.seq.is_(None),
    sqlite_where=audit_events_table.c.seq.is_(None),
)

#: One row (``id`` 1): the chain's last position and hash.
audit_chain_head_table = Table(
    "audit_chain_head",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("seq", BigInteger, nullable=False),
    Column("hash", String(64), nullable=False),
)

_A = audit_events_table
_H = audit_chain_head_table


def event_hash(
    *,
    seq: int,
    prev_hash: str,
    event_id: int,
    at: int,
    kind: str,
    subject: str | None,
    actor: str | None,
    data: Mapping[str, Any],
) -> str:
    """The SHA-256 (hex) of an event's canonical JSON: keys sorted, no spaces, UTF-8.

    The object hashed has exactly the keys ``seq``, ``prev_hash``, ``event_id``, ``at``,
    ``kind``, ``subject``, ``actor`` and ``data``; anyone holding an export can recompute it.
    """
    event = {
        "seq": seq,
        "prev_hash": prev_hash,
        "event_id": event_id,
        "at": at,
        "kind": kind,
        "subject": subject,
        "actor": actor,
        "data": dict(data),
    }
    return hashlib.sha256(canonical_json(event).encode("utf-8")).hexdigest()


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON: keys sorted, no spaces, non-ASCII kept."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


#: At most this many events are linked in one linking transaction.
LINK_BATCH = 500


def has_unlinked(conn: Connection) -> bool:
    """Whether a committed event waits to be linked (a read: the linker's write runs only if one does)."""
    return conn.execute(select(_A.c.event_id).where(_A.c.seq.is_(None)).limit(1)).first() is not None


def link_batch(conn: Connection, *, yield_to_others: bool = False) -> int:
    """Link the oldest committed unlinked events (up to :data:`LINK_BATCH`); how many were linked.

    ``yield_to_others``: when another linker holds the head row, link nothing at once instead of
    waiting for it (PostgreSQL): a background linker leaves the batch to the one at work, which
    links what had committed when it looked; what commits later is the next batch's.

    The head row's lock serializes linkers (a no-op on SQLite, whose writers exclude each other).
    It is taken first: on PostgreSQL the select below then runs after any other linker's commit
    and sees its links, so no event is linked twice, and the unique index on ``seq`` refuses a fork.
    The events come in ``event_id`` order among those committed when the select runs: an event
    whose transaction saw another's committed effect has a larger ``event_id`` (PostgreSQL's
    serial sequence hands out values in call order, with no per-session cache; SQLite's writers
    take turns) and is never visible first, so it is never linked first.
    """
    locked = select(_H.c.seq, _H.c.hash).where(_H.c.id == 1).with_for_update(skip_locked=yield_to_others)
    found = conn.execute(locked).one_or_none()
    if found is None:  # held by another linker, or deleted (verify names what lies past "no head")
        return 0
    seq, last = found
    rows = conn.execute(select(_A).where(_A.c.seq.is_(None)).order_by(_A.c.event_id).limit(LINK_BATCH)).mappings()
    links: list[dict[str, Any]] = []
    for row in rows:
        seq += 1
        digest = _row_hash(dict(row), seq, last)
        links.append({"b_id": row["event_id"], "b_seq": seq, "b_prev": last, "b_hash": digest})
        last = digest
    if not links:
        return 0
    link = _A.update().where(_A.c.event_id == bindparam("b_id"), _A.c.seq.is_(None))
    conn.execute(link.values(seq=bindparam("b_seq"), prev_hash=bindparam("b_prev"), hash=bindparam("b_hash")), links)
    conn.execute(_H.update().where(_H.c.id == 1).values(seq=seq, hash=last))
    return len(links)


def _row_hash(row: Mapping[str, Any], seq: int, prev_hash: str) -> str:
    """The hash of a stored row; ``data`` that is not a JSON object (a row written outside the
    log) is hashed as ``{}``, so the linker never stalls on it and verify names it instead."""
    return event_hash(
        seq=seq,
        prev_hash=prev_hash,
        event_id=row["event_id"],
        at=row["at"],
        kind=row["kind"],
        subject=row["subject"],
        actor=row["actor"],
        data=_object(row["data_json"]),
    )


def _object(text: str | None) -> Mapping[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def head(conn: Connection) -> tuple[int, str]:
    """The head row's last position and hash (``(0, GENESIS_HASH)`` without one)."""
    row = conn.execute(select(_H.c.seq, _H.c.hash).where(_H.c.id == 1)).one_or_none()
    return (0, GENESIS_HASH) if row is None else (row[0], row[1])
