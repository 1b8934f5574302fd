"""An explicit, versioned migration scheme.

Each migration is a numbered function that moves the schema from ``n - 1`` to ``n``. The
applied version lives in ``schema_version``. Migrating runs in one write transaction that holds
a database-wide lock (an advisory lock on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite), so several
workers starting together apply each step exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import Connection, func, select, text

from mcp_approval.storage.database import Database
from mcp_approval.storage.schema import schema_version_table, tasks_table

Migration = Callable[[Connection], None]

# An arbitrary constant naming this project's migration lock on PostgreSQL.
_PG_MIGRATION_LOCK = 0x6D6370_61707072


def _v1_tasks(conn: Connection) -> None:
    tasks_table.create(conn)  # with its indexes


MIGRATIONS: tuple[Migration, ...] = (_v1_tasks,)
#: The schema version this code expects.
SCHEMA_VERSION = len(MIGRATIONS)


async def migrate(database: Database) -> int:
    """Bring the database to :data:`SCHEMA_VERSION` and return the version found before.

    Raises:
        RuntimeError: if the database is newer than this code (a downgrade is never applied).
    """
    return await database.write(_apply_pending)


def _apply_pending(conn: Connection) -> int:
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
    schema_version_table.create(conn, checkfirst=True)
    current = int(conn.execute(select(func.coalesce(func.max(schema_version_table.c.version), 0))).scalar_one())
    if current > SCHEMA_VERSION:
        raise RuntimeError(
            f"database schema version {current} is newer than this mcp-approval ({SCHEMA_VERSION}); "
            "upgrade mcp-approval instead"
        )
    for version in range(current + 1, SCHEMA_VERSION + 1):
        MIGRATIONS[version - 1](conn)
        conn.execute(schema_version_table.insert().values(version=version, applied_at=time.time_ns() // 1_000_000))
    return current
