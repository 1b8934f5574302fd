"""Where the demo's servers keep their rows: temporary SQLite files, a given SQLite file, or PostgreSQL.

The demo runs three deployments: the treasury server (local backend), and for scenario 12 the
ARAP-backed treasury server and ``arap-server``. Each needs a store of its own: two deployments
on one set of tables would run each other's tasks.

- No ``--db``: each keeps a SQLite file in the demo's temporary folder, removed at the end.
- ``--db sqlite:///PATH``: the treasury server uses that file, which is kept; the ARAP pair keeps
  its files in the temporary folder (a SQLite file serves one process).
- ``--db postgresql://...``: each deployment gets a schema of its own in that database, made for
  this run (``mcp_approval_demo_<run>_<deployment>``) and dropped with everything in it when the
  demo ends, fails or is interrupted. The database is left as it was found, so runs can repeat,
  and two runs at once never meet.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from sqlalchemy import Connection
from sqlalchemy.engine import make_url

from mcp_approval.storage import open_database

__all__ = ["DemoStores", "demo_stores", "drop_schemas", "make_schemas"]

#: The deployments that get a schema each on PostgreSQL, by the suffix of its name.
_DEPLOYMENTS = ("treasury", "arap_treasury", "arap_server")


@dataclass(frozen=True)
class DemoStores:
    """Each deployment's store URL (``None``: the SQLite file its config names, in the demo folder).

    ``schemas`` are the PostgreSQL schemas made for this run, in ``admin_url``'s database.
    """

    treasury: str
    arap_treasury: str | None = None
    arap_server: str | None = None
    admin_url: str | None = None
    schemas: tuple[str, ...] = ()


def demo_stores(db_url: str | None, default_treasury: str) -> DemoStores:
    """The stores for ``--db db_url`` (``default_treasury`` without it); nothing is created yet."""
    if db_url is None or not make_url(db_url).get_backend_name().startswith("postgresql"):
        return DemoStores(treasury=db_url or default_treasury)
    run = secrets.token_hex(4)
    schemas = {name: f"mcp_approval_demo_{run}_{name}" for name in _DEPLOYMENTS}
    return DemoStores(
        treasury=_in_schema(db_url, schemas["treasury"]),
        arap_treasury=_in_schema(db_url, schemas["arap_treasury"]),
        arap_server=_in_schema(db_url, schemas["arap_server"]),
        admin_url=db_url,
        schemas=tuple(schemas.values()),
    )


def _in_schema(url: str, schema: str) -> str:
    """``url`` whose connections look up and create tables in ``schema`` (libpq's ``options``)."""
    parsed = make_url(url)
    given = parsed.query.get("options")
    setting = f"-c search_path={schema}"
    options = f"{given} {setting}" if isinstance(given, str) and given else setting
    return parsed.update_query_dict({"options": options}).render_as_string(hide_password=False)


async def make_schemas(stores: DemoStores) -> None:
    """Create the run's schemas (none on SQLite)."""
    await _each_schema(stores, "CREATE SCHEMA {}")


async def drop_schemas(stores: DemoStores) -> None:
    """Drop the run's schemas with every table in them (none on SQLite; missing ones are skipped)."""
    await _each_schema(stores, "DROP SCHEMA IF EXISTS {} CASCADE")


async def _each_schema(stores: DemoStores, statement: str) -> None:
    if stores.admin_url is None or not stores.schemas:
        return
    schemas = stores.schemas

    def each(conn: Connection) -> None:
        for schema in schemas:
            # The names are made above from hex digits and fixed words: nothing to quote.
            conn.exec_driver_sql(statement.format(schema))

    database = open_database(stores.admin_url)
    try:
        await database.write(each)
    finally:
        await database.close()
