"""Guards every worker of one deployment shares: event windows (rate limits) and once-guards (replays).

Two small interfaces, each with an in-memory implementation (one process: library defaults and
tests) and a database one (every worker on the same store sees the same rows):

- :class:`EventWindow`: timestamps of events per key (failed sign-ins per address, submissions per
  client), so a limit counts every worker's events, not N times the limit for N workers;
- :class:`OnceGuard`: a token accepted once until it expires (a callback signature), atomically,
  so a replay to another worker is refused as it is to the first.

The tables are this layer's ``shared`` history (``shared_schema_versions/``, named as when the
module was ``storage/shared.py``: the name is recorded in every store's migration table); the
objects here describe its head revision.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict, deque
from pathlib import Path
from typing import Protocol, runtime_checkable

from sqlalchemy import BigInteger, Column, Connection, Index, Integer, MetaData, String, Table, delete, func, select
from sqlalchemy.exc import IntegrityError

from mcp_approval.storage.database import Database
from mcp_approval.storage.migrations import Migrations

__all__ = [
    "SHARED_MIGRATIONS",
    "EventWindow",
    "KeyListing",
    "MemoryEventWindow",
    "MemoryOnceGuard",
    "OnceGuard",
    "SqlEventWindow",
    "SqlOnceGuard",
    "rate_events_table",
    "seen_once_table",
]

#: The shared-state history (no release before it had these tables).
SHARED_MIGRATIONS = Migrations("shared", Path(__file__).with_name("shared_schema_versions"))

metadata = MetaData()

rate_events_table = Table(
    "rate_events",
    metadata,
    Column("event_id", Integer, primary_key=True, autoincrement=True),
    # "<scope>:<key>", e.g. "auth:203.0.113.7" or "ars-submit:treasury-mcp".
    Column("key", String(320), nullable=False),
    Column("at", BigInteger, nullable=False),
)
Index("ix_rate_events_key_at", rate_events_table.c.key, rate_events_table.c.at)
Index("ix_rate_events_at", rate_events_table.c.at)

seen_once_table = Table(
    "seen_once",
    metadata,
    # SHA-256 of the token (never the token itself).
    Column("digest", String(64), primary_key=True),
    Column("expires_at", BigInteger, nullable=False),
)
Index("ix_seen_once_expires_at", seen_once_table.c.expires_at)

_EV, _SEEN = rate_events_table, seen_once_table


class EventWindow(Protocol):
    """Event times per key, read within a sliding window."""

    async def recent(self, key: str, since_ms: int, limit: int) -> list[int]:
        """The latest ``limit`` event times of ``key`` after ``since_ms``, oldest first."""
        ...

    async def add(self, key: str, at_ms: int, *, forget_before_ms: int) -> None:
        """Record an event of ``key`` at ``at_ms``; events at or before ``forget_before_ms`` may be dropped."""
        ...


@runtime_checkable
class KeyListing(Protocol):
    """An :class:`EventWindow` that can also list its keys with recent events in one query."""

    async def active_keys(self, prefix: str, since_ms: int, limit: int) -> dict[str, int]:
        """The keys starting with ``prefix`` with events after ``since_ms`` -> their latest event's time
        (at most ``limit`` keys: those with the latest events)."""
        ...


class OnceGuard(Protocol):
    """Tokens accepted at most once until they expire."""

    async def first_use(self, token: str, now_ms: int, expires_at_ms: int) -> bool:
        """Whether ``token`` is used for the first time (then it is remembered until ``expires_at_ms``)."""
        ...


class MemoryEventWindow:
    """:class:`EventWindow` in this process's memory, holding at most ``max_keys`` keys.

    Args:
        max_keys: beyond it the key whose latest event is oldest is forgotten.
        per_key: the most events kept per key (older ones no longer matter to a limit of that size).
    """

    def __init__(self, *, max_keys: int = 10_000, per_key: int = 1000) -> None:
        self._max_keys = max_keys
        self._per_key = per_key
        self._events: OrderedDict[str, deque[int]] = OrderedDict()

    async def recent(self, key: str, since_ms: int, limit: int) -> list[int]:
        """See :meth:`EventWindow.recent`."""
        events = self._events.get(key)
        if events is None:
            return []
        while events and events[0] <= since_ms:
            events.popleft()
        if not events:
            del self._events[key]
            return []
        return list(events)[-limit:]

    async def add(self, key: str, at_ms: int, *, forget_before_ms: int) -> None:
        """See :meth:`EventWindow.add`."""
        events = self._events.get(key)
        if events is None:
            if len(self._events) >= self._max_keys:
                self._events.popitem(last=False)
            events = self._events[key] = deque(maxlen=self._per_key)
        else:
            self._events.move_to_end(key)
        while events and events[0] <= forget_before_ms:
            events.popleft()
        events.append(at_ms)

    def tracked_keys(self) -> int:
        """How many keys are held (never more than ``max_keys``)."""
        return len(self._events)


class SqlEventWindow:
    """:class:`EventWindow` in the ``rate_events`` table of ``database`` (shared by every worker on it)."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def recent(self, key: str, since_ms: int, limit: int) -> list[int]:
        """See :meth:`EventWindow.recent`."""
        query = select(_EV.c.at).where(_EV.c.key == key, _EV.c.at > since_ms).order_by(_EV.c.at.desc()).limit(limit)
        times = await self.database.read(lambda conn: [int(at) for at in conn.execute(query).scalars()])
        return sorted(times)

    async def add(self, key: str, at_ms: int, *, forget_before_ms: int) -> None:
        """See :meth:`EventWindow.add` (also drops every key's events older than the window)."""

        def write(conn: Connection) -> None:
            conn.execute(delete(_EV).where(_EV.c.at <= forget_before_ms))
            conn.execute(_EV.insert(), {"key": key[:320], "at": at_ms})

        await self.database.write(write)

    async def active_keys(self, prefix: str, since_ms: int, limit: int) -> dict[str, int]:
        """See :meth:`KeyListing.active_keys`."""
        latest = func.max(_EV.c.at)
        query = (
            select(_EV.c.key, latest)
            .where(_EV.c.at > since_ms, _EV.c.key.startswith(prefix, autoescape=True))
            .group_by(_EV.c.key)
            .order_by(latest.desc())
            .limit(limit)
        )
        rows = await self.database.read(lambda conn: [(str(key), int(at)) for key, at in conn.execute(query)])
        return dict(rows)


class MemoryOnceGuard:
    """:class:`OnceGuard` in this process's memory."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    async def first_use(self, token: str, now_ms: int, expires_at_ms: int) -> bool:
        """See :meth:`OnceGuard.first_use`."""
        for digest, expires in list(self._seen.items()):
            if expires < now_ms:
                del self._seen[digest]
        digest = _digest(token)
        if digest in self._seen:
            return False
        self._seen[digest] = expires_at_ms
        return True


class SqlOnceGuard:
    """:class:`OnceGuard` in the ``seen_once`` table: the primary key makes the first use atomic across workers."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def first_use(self, token: str, now_ms: int, expires_at_ms: int) -> bool:
        """See :meth:`OnceGuard.first_use`."""
        digest = _digest(token)

        def write(conn: Connection) -> bool:
            conn.execute(delete(_SEEN).where(_SEEN.c.expires_at < now_ms))
            if conn.execute(select(_SEEN.c.digest).where(_SEEN.c.digest == digest)).first() is not None:
                return False
            conn.execute(_SEEN.insert(), {"digest": digest, "expires_at": expires_at_ms})
            return True

        try:
            return await self.database.write(write)
        except IntegrityError:  # another worker inserted it first
            return False


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
