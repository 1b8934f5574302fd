"""An explicit, versioned migration scheme.

Each migration is a numbered function that moves the schema from ``n - 1`` to ``n``. The
applied version lives in ``schema_version``. Migrating runs in one write transaction that holds
a database-wide lock (an advisory lock on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite), so several
workers starting together apply each step exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import Connection, Index, MetaData, Table, func, select, text

from mcp_approval.storage.database import Database
from mcp_approval.storage.schema import (
    approval_decisions_table,
    approval_intents_table,
    approval_requests_table,
    approval_workflows_table,
    arap_approvals_table,
    arap_evaluations_table,
    arap_jti_table,
    arap_tasks_table,
    audit_events_table,
    schema_version_table,
    tasks_table,
)

Migration = Callable[[Connection], None]

# An arbitrary constant naming this project's migration lock on PostgreSQL.
_PG_MIGRATION_LOCK = 0x6D6370_61707072


#: Columns added to ``tasks`` by version 2; version 1 creates the table without them.
_TASKS_V2_COLUMNS = ("handler", "meta_json")


def _as_created_by_v1(table: Table) -> Table:
    """``table`` as version 1 created it: without the columns later versions add."""
    copy = Table(table.name, MetaData(), *(c._copy() for c in table.columns if c.name not in _TASKS_V2_COLUMNS))
    for index in table.indexes:
        Index(index.name, *(copy.c[column.name] for column in index.columns), unique=index.unique)
    return copy


def _v1_tasks(conn: Connection) -> None:
    _as_created_by_v1(tasks_table).create(conn)  # with its indexes


def _v2_tool_approval(conn: Connection) -> None:
    # Which component drives a task no in-process execution runs, and the _meta it repeats.
    conn.execute(text("ALTER TABLE tasks ADD COLUMN handler VARCHAR(32)"))
    conn.execute(text("ALTER TABLE tasks ADD COLUMN meta_json TEXT"))
    for table in (
        approval_workflows_table,
        approval_intents_table,
        approval_requests_table,
        approval_decisions_table,
        audit_events_table,
    ):
        table.create(conn)


def _v3_arap_service(conn: Connection) -> None:
    # The reference ARAP Access Request Service's own state (mcp_approval.reference).
    for table in (arap_evaluations_table, arap_tasks_table, arap_approvals_table, arap_jti_table):
        table.create(conn)


MIGRATIONS: tuple[Migration, ...] = (_v1_tasks, _v2_tool_approval, _v3_arap_service)
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
