"""Creating async engines for the supported databases."""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


class StoreUnavailableError(RuntimeError):
    """The database could not be reached or answered with an operational error."""


def normalize_url(url: str) -> str:
    """Map a user-facing database URL onto the async driver SQLAlchemy needs.

    ``sqlite:///path`` becomes ``sqlite+aiosqlite:///path`` and ``postgresql://...``
    becomes ``postgresql+asyncpg://...``. URLs that already name a driver pass unchanged.

    Raises:
        ValueError: for a scheme other than SQLite or PostgreSQL.
    """
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return str(parsed.set(drivername="sqlite+aiosqlite"))
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)
    raise ValueError(f"unsupported database URL scheme {parsed.drivername!r}: use sqlite:/// or postgresql://")


def connect(url: str, *, echo: bool = False) -> AsyncEngine:
    """Create an :class:`AsyncEngine` for ``url`` with settings suited to a durable store.

    SQLite files run in WAL mode with ``synchronous=FULL`` (every commit reaches the disk) and a
    busy timeout, so several processes can share one file. ``sqlite://`` (no path) is a private
    database in a temporary file that is removed with the engine: it behaves exactly like a file
    database, with one connection per concurrent user, but lives only as long as the process.
    """
    async_url = normalize_url(url)
    parsed = make_url(async_url)
    if parsed.get_backend_name() != "sqlite":
        return create_async_engine(async_url, echo=echo, pool_pre_ping=True)
    scratch: str | None = None
    if parsed.database in (None, "", ":memory:"):
        scratch = tempfile.mkdtemp(prefix="mcp-approval-")
        parsed = parsed.set(database=os.path.join(scratch, "store.db"))
    engine = create_async_engine(parsed, echo=echo)
    event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    if scratch is not None:
        weakref.finalize(engine.sync_engine, shutil.rmtree, scratch, True)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
