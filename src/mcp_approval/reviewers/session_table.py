"""Console sessions in the store's ``console_sessions`` table, shared by every worker on it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, delete, func, or_, select, update

from mcp_approval.backends.local.schema import console_sessions_table
from mcp_approval.reviewers.sessions import FlashKind, StoredSession
from mcp_approval.storage.database import Database

__all__ = ["SqlSessionTable"]

_S = console_sessions_table


class SqlSessionTable:
    """:class:`~mcp_approval.reviewers.sessions.SessionTable` in ``database``."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def insert(self, key: str, stored: StoredSession, *, capacity: int) -> None:
        """Add a session, first dropping the least recently used ones beyond ``capacity - 1``."""
        values = {
            "session_key": key,
            "principal": stored.principal,
            "sealed_token": stored.sealed_token,
            "csrf": stored.csrf,
            "created_ms": stored.created_ms,
            "seen_ms": stored.seen_ms,
            "flashes_json": "[]",
        }

        def write(conn: Connection) -> None:
            held = int(conn.execute(select(func.count()).select_from(_S)).scalar_one())
            if held >= capacity:
                oldest = select(_S.c.session_key).order_by(_S.c.seen_ms).limit(held - capacity + 1)
                keys = list(conn.execute(oldest).scalars())
                conn.execute(delete(_S).where(_S.c.session_key.in_(keys)))
            conn.execute(_S.insert(), values)

        await self.database.write(write)

    async def touch(self, key: str, now_ms: int, *, seen_after_ms: int, created_after_ms: int) -> StoredSession | None:
        """The live session as it was, marked used and its flashes taken (expired ones are removed)."""

        def write(conn: Connection) -> StoredSession | None:
            conn.execute(delete(_S).where(or_(_S.c.seen_ms <= seen_after_ms, _S.c.created_ms <= created_after_ms)))
            row = conn.execute(select(_S).where(_S.c.session_key == key)).mappings().first()
            if row is None:
                return None
            conn.execute(update(_S).where(_S.c.session_key == key).values(seen_ms=now_ms, flashes_json="[]"))
            return _stored(dict(row))

        return await self.database.write(write)

    async def add_flash(self, key: str, kind: FlashKind, message: str) -> None:
        """Queue a message for the session's next page."""

        def write(conn: Connection) -> None:
            current = conn.execute(select(_S.c.flashes_json).where(_S.c.session_key == key)).scalar_one_or_none()
            if current is None:
                return
            flashes = [*json.loads(current), [kind, message]]
            conn.execute(update(_S).where(_S.c.session_key == key).values(flashes_json=json.dumps(flashes)))

        await self.database.write(write)

    async def remove(self, key: str) -> None:
        """End the session under ``key``, if any."""
        await self.database.write(lambda conn: conn.execute(delete(_S).where(_S.c.session_key == key)))

    async def count(self) -> int:
        """How many sessions are held."""
        query = select(func.count()).select_from(_S)
        return int(await self.database.read(lambda conn: conn.execute(query).scalar_one()))


def _stored(row: Mapping[str, Any]) -> StoredSession:
    flashes = tuple((kind, text) for kind, text in json.loads(row["flashes_json"]) if kind in ("ok", "error"))
    return StoredSession(row["principal"], row["sealed_token"], row["csrf"], row["created_ms"], row["seen_ms"], flashes)
