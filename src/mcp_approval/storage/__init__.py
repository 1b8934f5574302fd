"""Storage: databases, the schema and its versioned migrations.

One SQLAlchemy Core schema serves SQLite (the default, a file database in WAL mode) and
PostgreSQL. Higher layers own the meaning of the rows; this layer owns how they are kept and
how a transaction runs (:class:`Database`).
"""

from mcp_approval.storage.audit import AuditEvent, AuditLog
from mcp_approval.storage.database import (
    Database,
    PostgresDatabase,
    SqliteDatabase,
    StoreUnavailableError,
    normalize_url,
    open_database,
)
from mcp_approval.storage.migrations import SCHEMA_VERSION, migrate
from mcp_approval.storage.schema import metadata, tasks_table

__all__ = [
    "SCHEMA_VERSION",
    "AuditEvent",
    "AuditLog",
    "Database",
    "PostgresDatabase",
    "SqliteDatabase",
    "StoreUnavailableError",
    "metadata",
    "migrate",
    "normalize_url",
    "open_database",
    "tasks_table",
]
