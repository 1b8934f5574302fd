"""Storage: databases, transactions, the migration runner, and the audit log.

One SQLAlchemy Core calling convention serves SQLite (the default, a file database in WAL mode)
and PostgreSQL. Higher layers own their tables and the meaning of their rows; this layer owns
how a transaction runs (:class:`Database`) and how each layer's migration history is applied
(:func:`migrate`).
"""

from mcp_approval.storage.audit import (
    AUDIT_MIGRATIONS,
    AuditEvent,
    AuditFilter,
    AuditLog,
    ChainBreak,
    ChainVerification,
)
from mcp_approval.storage.cursors import DeliveryCursor, DeliveryCursors, all_cursors
from mcp_approval.storage.database import (
    Database,
    PostgresDatabase,
    SqliteDatabase,
    normalize_url,
    open_database,
)
from mcp_approval.storage.errors import (
    BUSY_RETRY_AFTER_S,
    JsonRpcStoreError,
    StoreBusyError,
    StoreUnavailableError,
    jsonrpc_error,
)
from mcp_approval.storage.migrations import Migrations, SchemaTooNewError, migrate
from mcp_approval.storage.worker_guards import (
    SHARED_MIGRATIONS,
    EventWindow,
    MemoryEventWindow,
    MemoryOnceGuard,
    OnceGuard,
    SqlEventWindow,
    SqlOnceGuard,
)

__all__ = [
    "AUDIT_MIGRATIONS",
    "BUSY_RETRY_AFTER_S",
    "SHARED_MIGRATIONS",
    "AuditEvent",
    "AuditFilter",
    "AuditLog",
    "ChainBreak",
    "ChainVerification",
    "Database",
    "DeliveryCursor",
    "DeliveryCursors",
    "EventWindow",
    "JsonRpcStoreError",
    "MemoryEventWindow",
    "MemoryOnceGuard",
    "Migrations",
    "OnceGuard",
    "PostgresDatabase",
    "SchemaTooNewError",
    "SqlEventWindow",
    "SqlOnceGuard",
    "SqliteDatabase",
    "StoreBusyError",
    "StoreUnavailableError",
    "all_cursors",
    "jsonrpc_error",
    "migrate",
    "normalize_url",
    "open_database",
]
