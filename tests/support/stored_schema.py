"""What an upgrade test reads of a database: each history's recorded revisions and each table's rows."""

from __future__ import annotations

from sqlalchemy import Connection, MetaData, func, inspect, select

__all__ = ["row_counts", "version_heads"]


def version_heads(conn: Connection) -> dict[str, list[str]]:
    """Each migration history's recorded revisions, by history name (``alembic_version_<name>``)."""
    names = [name for name in inspect(conn).get_table_names() if name.startswith("alembic_version_")]
    query = "SELECT version_num FROM {}"
    return {
        name.removeprefix("alembic_version_"): [row[0] for row in conn.exec_driver_sql(query.format(name))]
        for name in names
    }


def row_counts(conn: Connection) -> dict[str, int]:
    """The rows of every table but the version tables."""
    tables = MetaData()
    tables.reflect(conn)
    return {
        name: int(conn.execute(select(func.count()).select_from(table)).scalar_one())
        for name, table in tables.tables.items()
        if not name.startswith("alembic_version_")
    }
