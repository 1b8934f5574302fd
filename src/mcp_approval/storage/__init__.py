"""Storage: database engines, the schema and its versioned migrations.

One SQLAlchemy Core schema serves SQLite (the default, a file database in WAL mode) and
PostgreSQL. Higher layers own the meaning of the rows; this layer owns how they are kept.
"""

from mcp_approval.storage.engine import StoreUnavailableError, connect, normalize_url
from mcp_approval.storage.migrations import SCHEMA_VERSION, migrate
from mcp_approval.storage.schema import metadata, tasks_table

__all__ = [
    "SCHEMA_VERSION",
    "StoreUnavailableError",
    "connect",
    "metadata",
    "migrate",
    "normalize_url",
    "tasks_table",
]
