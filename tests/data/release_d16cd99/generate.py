"""How ``schema.*.sql`` and ``rows.json`` beside this file were made (kept for the record; not a test).

Run once, from an export of the release commit (``git archive d16cd99 | tar -x -C REL``), with that
export's own code::

    cd REL && PYTHONPATH=REL python /path/to/generate.py /path/to/this/folder

It starts the release's treasury deployment (its ``serve``, its migrations) on a fresh SQLite file,
has alice call ``wire_transfer`` for 26,000 (a call that needs one approver), waits until the request
is pending at the reviewer API, stops the server, and writes:

- ``schema.sqlite.sql`` and ``schema.postgresql.sql``: the release's ``CREATE TABLE``/``CREATE INDEX``
  statements (its ``storage.schema.metadata`` compiled for each dialect), plus ``schema_version``;
- ``rows.json``: every row of every table, as the release wrote them, and when (``written_at``).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import httpx
from mcp_approval.storage.schema import metadata
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.schema import CreateIndex, CreateTable
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import approval_for


def ddl(dialect: object) -> str:
    statements = []
    for table in metadata.sorted_tables:
        statements.append(str(CreateTable(table).compile(dialect=dialect)).strip() + ";")
        statements.extend(
            str(CreateIndex(index).compile(dialect=dialect)).strip() + ";"
            for index in sorted(table.indexes, key=lambda i: i.name or "")
        )
    return "\n\n".join(statements) + "\n"


async def pending_approval(server: TreasuryServer) -> str:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
        alice = principals(http)["alice"]
        created = (await alice.call_tool("wire_transfer", {"to": "acct-upgrade", "amount": 26_000})).result
        await approval_for(Reviewer(http, "carol-token"), "wire_transfer", to="acct-upgrade")
        return str(created["taskId"])


def main(out: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="release-fixture-"))
    directory = deployment_dir(work)
    db_path = work / "release.db"
    server = TreasuryServer(directory, db_url=f"sqlite:///{db_path}").start()
    try:
        task_id = asyncio.run(pending_approval(server))
    finally:
        server.kill()
    connection = sqlite3.connect(db_path)
    connection.row_factory = sqlite3.Row
    tables = [
        name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    ]
    rows = {name: [dict(row) for row in connection.execute(f'SELECT * FROM "{name}"')] for name in tables}
    (out / "schema.sqlite.sql").write_text(ddl(sqlite.dialect()))
    (out / "schema.postgresql.sql").write_text(ddl(postgresql.dialect()))
    document = {"release": "d16cd99", "written_at": int(time.time() * 1000), "task_id": task_id, "rows": rows}
    (out / "rows.json").write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
