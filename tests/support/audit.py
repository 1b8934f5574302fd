"""The audit chain as a test writes it: a store opened for one operation, and a tail rewritten as an attacker would."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy import Connection, select, text

from mcp_approval.storage import AUDIT_MIGRATIONS, Database, migrate, open_database
from mcp_approval.storage.audit import GENESIS_HASH, audit_events_table, event_hash

T = TypeVar("T")


def on_audit_store(url: str, operation: Callable[[Database], Awaitable[T]]) -> T:
    """Open the store at ``url`` (its audit tables migrated), run ``operation`` on it, close it."""

    async def run() -> T:
        database = open_database(url)
        try:
            await migrate(database, AUDIT_MIGRATIONS)
            return await operation(database)
        finally:
            await database.close()

    return asyncio.run(run())


def rewrite_from(conn: Connection, seq: int) -> None:
    """Edit the linked event at ``seq`` and recompute every hash after it, and the head's: the chain alone holds.

    What someone with write access to the database can do; only a head kept elsewhere (an anchor) tells.
    """
    conn.execute(text("UPDATE audit_events SET actor = 'mallory' WHERE seq = :seq"), {"seq": seq})
    rows = conn.execute(select(audit_events_table).order_by(audit_events_table.c.seq)).mappings().all()
    previous = rows[seq - 2]["hash"] if seq > 1 else GENESIS_HASH
    for row in rows[seq - 1 :]:
        fields = {key: row[key] for key in ("event_id", "at", "kind", "subject", "actor")}
        digest = event_hash(seq=row["seq"], prev_hash=previous, data=json.loads(row["data_json"]), **fields)
        update = "UPDATE audit_events SET prev_hash = :p, hash = :h WHERE event_id = :id"
        conn.execute(text(update), {"p": previous, "h": digest, "id": row["event_id"]})
        previous = digest
    conn.execute(text("UPDATE audit_chain_head SET hash = :h"), {"h": previous})
