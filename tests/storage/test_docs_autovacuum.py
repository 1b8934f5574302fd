"""docs/deployment.md's autovacuum settings run on the tables a local-backend deployment migrates.

The section's table names every table of such a deployment (so a new table cannot be left out
unnoticed), each ``ALTER TABLE`` of its first SQL block runs on PostgreSQL and leaves exactly
the settings it spells out, and its monitoring query runs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import Connection, inspect, text

from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.storage import AUDIT_MIGRATIONS, SHARED_MIGRATIONS, migrate, open_database
from mcp_approval.tasks.schema import TASKS_MIGRATIONS

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"
#: What ``serve`` with the local backend migrates.
DEPLOYMENT = (TASKS_MIGRATIONS, AUDIT_MIGRATIONS, SHARED_MIGRATIONS, APPROVAL_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS)
ALTER = re.compile(r"^ALTER TABLE (\w+) SET \((.*)\);$", re.MULTILINE)


def section() -> str:
    """The "Autovacuum" section of the page."""
    text_ = PAGE.read_text(encoding="utf-8")
    start = text_.index("### Autovacuum\n")
    return text_[start : text_.index("\n#", start + 1)]


def sql_blocks() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", section(), re.DOTALL)


def documented_tables() -> set[str]:
    """The tables the section's table names (first column, possibly several per row)."""
    rows = [line for line in section().splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])}


def each_statement(block: str) -> list[str]:
    """The block's statements, one by one (the driver runs one per call), comment lines left out."""
    code = "\n".join(line for line in block.splitlines() if not line.startswith("--"))
    return [statement.strip() for statement in code.split(";") if statement.strip()]


def settings(body: str) -> dict[str, str]:
    return dict(part.strip().split(" = ") for part in body.split(","))


def reloptions(conn: Connection, table: str) -> dict[str, str]:
    options = conn.execute(text("SELECT reloptions FROM pg_class WHERE oid = CAST(:t AS regclass)"), {"t": table})
    return dict(option.split("=", 1) for option in options.scalar_one() or [])


def tables(conn: Connection) -> set[str]:
    return {name for name in inspect(conn).get_table_names() if not name.startswith("alembic_version_")}


async def test_the_documented_settings_apply_to_the_migrated_tables(postgres_url: str) -> None:
    alter, monitor = sql_blocks()
    statements = ALTER.findall(alter)
    assert len(statements) == len([line for line in alter.splitlines() if line.startswith("ALTER")])
    database = open_database(postgres_url)
    try:
        await migrate(database, *DEPLOYMENT)
        assert documented_tables() == await database.read(tables)
        for statement in each_statement(alter):
            await database.write(lambda conn, statement=statement: conn.exec_driver_sql(statement))
        stored = {name: await database.read(lambda conn, name=name: reloptions(conn, name)) for name, _ in statements}
        watched = await database.read(lambda conn: conn.exec_driver_sql(monitor).mappings().all())
    finally:
        await database.close()
    assert stored == {name: settings(body) for name, body in statements}
    assert {row["relname"] for row in watched} >= {name for name, _ in statements}
    assert list(watched[0]) == ["relname", "n_live_tup", "n_dead_tup", "last_autovacuum"]
