"""How ``schema.*.sql`` and ``rows.json`` beside this file were made (kept for the record; not a test).

Run once, from an export of commit 6854340 (``git archive 6854340 | tar -x -C REL``), with that
export's own code (its ``src`` and its ``tests`` first on the path; the dependencies it needs are a
subset of the current ones), and a PostgreSQL server to make a scratch database on::

    PYTHONPATH=REL/src:REL python /path/to/generate.py /path/to/this/folder postgresql://postgres@127.0.0.1:5432/test

It starts that commit's treasury deployment (its ``serve``, its migrations) on a fresh SQLite file
and, over HTTP, leaves three approvals behind. The only change to the deployment: its policy's
``@deadline`` annotations, and the longest pending window it accepts (``[approval]
max_pending_s``), are lengthened to 100 years. A request's deadline (``expires_at``) is under the
request's seal, so a test cannot move it forward with the other times; requests that stay open
for a century are still open whenever the test runs.

- ``one_approver``: alice's ``wire_transfer`` of 26,000 (template ``treasury``, one approver),
  pending with no decision;
- ``two_approvers``: bob's ``close_quarter`` of 2026-Q3 (template ``close_quarter``, two distinct
  approvers), pending with carol's approval given;
- ``executed``: alice's ``wire_transfer`` of 30,000, approved by carol and executed (its ledger
  entry is in the deployment's ledger, which the test does not reuse).

It stops the server (SIGKILL, as a crashed or replaced deployment would) and writes:

- ``schema.sqlite.sql``: the ``CREATE TABLE``/``INDEX``/``TRIGGER`` statements SQLite holds for the
  file (``sqlite_master``), i.e. exactly what that commit's Alembic revisions created;
- ``schema.postgresql.sql``: the same histories migrated by that commit's :func:`migrate` into a
  scratch database made on the given server, read back with ``pg_dump --schema-only`` (its
  session settings and the ``public.`` qualification dropped, so the statements run in any
  database's default schema); the scratch database is dropped afterwards.

  In both, each statement follows a ``-- object <type> <name>`` line: trigger and function bodies
  hold semicolons of their own, so a reader splits at those lines. A reader that loads rows runs
  the triggers after them (the rows already hold the counts the triggers kept);
- ``rows.json``: every row of every table of the SQLite file (the ``alembic_version_*`` ones
  included), when they were written (``written_at``), and each approval's task and request ids.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from mcp_approval.approval.schema import APPROVAL_MIGRATIONS
from mcp_approval.backends.local_schema import LOCAL_BACKEND_MIGRATIONS
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import approval_for, assert_approved_executed, settled

from mcp_approval.storage import AUDIT_MIGRATIONS, SHARED_MIGRATIONS, migrate, open_database
from mcp_approval.tasks.schema import TASKS_MIGRATIONS

COMMIT = "6854340"
#: What that commit's treasury deployment opens, by name (``alembic_version_<name>``).
DEPLOYMENT = (TASKS_MIGRATIONS, AUDIT_MIGRATIONS, SHARED_MIGRATIONS, APPROVAL_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS)
HISTORIES = {history.name: history for history in DEPLOYMENT}
SCRATCH = "release_6854340_scratch"
#: What replaces every ``@deadline`` of the deployment's policy, and its longest pending window
#: (see the module's docstring).
LONG_DEADLINE = '@deadline("P36500D")'
LONG_WINDOW = {"approval": {"max_pending_s": 36_500 * 86_400.0}}


async def scenario(server: TreasuryServer) -> dict[str, dict[str, str]]:
    """The three approvals; each one's task id and request id."""
    async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
        wires = principals(http)
        carol = Reviewer(http, "carol-token")
        one = (await wires["alice"].call_tool("wire_transfer", {"to": "acct-upgrade", "amount": 26_000})).result
        one_request = await approval_for(carol, "wire_transfer", to="acct-upgrade")
        two = (await wires["bob"].call_tool("close_quarter", {"quarter": "2026-Q3"})).result
        two_request = await approval_for(carol, "close_quarter", quarter="2026-Q3")
        approved = await carol.decide(two_request["id"], "approve")
        assert approved.status_code == 200, approved.text
        done = (await wires["alice"].call_tool("wire_transfer", {"to": "acct-done", "amount": 30_000})).result
        done_request = await approval_for(carol, "wire_transfer", to="acct-done")
        approved = await carol.decide(done_request["id"], "approve")
        assert approved.status_code == 200, approved.text
        assert_approved_executed(await settled(wires["alice"], done["taskId"]))
        # Left as they are: the first without a decision, the second one approval short.
        for wire, created in ((wires["alice"], one), (wires["bob"], two)):
            assert (await wire.get(created["taskId"])).result["status"] == "working"
    assert [entry.get("to") or entry.get("quarter") for entry in server.ledger()] == ["acct-done"]
    return {
        "one_approver": {"task_id": one["taskId"], "request_id": one_request["id"]},
        "two_approvers": {"task_id": two["taskId"], "request_id": two_request["id"]},
        "executed": {"task_id": done["taskId"], "request_id": done_request["id"]},
    }


def long_deadlines(directory: Path) -> None:
    """Every request of the deployment ``directory`` open for a century."""
    policy = directory / "policy.cedar"
    policy.write_text(re.sub(r'@deadline\("[^"]*"\)', LONG_DEADLINE, policy.read_text()))


def sqlite_contents(db_path: Path) -> tuple[str, dict[str, list[dict[str, Any]]]]:
    """The file's DDL as SQLite stores it, and every row of every table."""
    connection = sqlite3.connect(db_path)
    connection.row_factory = sqlite3.Row
    try:
        objects = connection.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' "
            "ORDER BY CASE type WHEN 'table' THEN 0 ELSE 1 END, tbl_name, name"
        ).fetchall()
        tables = [row["name"] for row in objects if row["type"] == "table"]
        rows = {name: [dict(row) for row in connection.execute(f'SELECT * FROM "{name}"')] for name in tables}
    finally:
        connection.close()
    return script([(row["type"], row["name"], row["sql"]) for row in objects]), rows


def script(statements: list[tuple[str, str, str]]) -> str:
    """One ``-- object <type> <name>`` line before each statement, so a reader can split them.

    Statements hold semicolons of their own (trigger and function bodies); the marker lines,
    not the semicolons, are where one ends.
    """
    return "\n\n".join(f"-- object {kind.lower()} {name}\n{sql.strip().rstrip(';')};" for kind, name, sql in statements)


async def postgresql_ddl(server_url: str, histories: list[str]) -> str:
    """``histories`` migrated by this commit's code into a scratch database, dumped as DDL."""
    admin = await asyncpg.connect(server_url.replace("postgresql://", "postgres://"))
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {SCRATCH}")
        await admin.execute(f"CREATE DATABASE {SCRATCH}")
        scratch_url = server_url.rsplit("/", 1)[0] + f"/{SCRATCH}"
        database = open_database(scratch_url)
        try:
            await migrate(database, *(HISTORIES[name] for name in histories))
        finally:
            await database.close()
        dump = ["pg_dump", "--schema-only", "--no-owner", "--no-privileges", "--no-comments", scratch_url]
        dumped = (await asyncio.to_thread(subprocess.run, dump, check=True, capture_output=True, text=True)).stdout
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {SCRATCH}")
        await admin.close()
    return portable(dumped)


#: pg_dump's comment before each object: ``--``, ``-- Name: tasks; Type: TABLE; Schema: public; ...``, ``--``.
PG_DUMP_HEADER = re.compile(r"^--\n-- Name: ([^;]*); Type: ([^;]*);.*\n--\n", re.MULTILINE)


def portable(dump: str) -> str:
    """``pg_dump``'s statements, one per object, without its session settings or schema qualification."""
    parts = PG_DUMP_HEADER.split(dump)
    statements = []
    for name, kind, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        lines = body.strip().splitlines()
        # An object's text runs into the session settings pg_dump writes before the next one, and the
        # last object's into the dump's closing lines (a comment, ``\\unrestrict``).
        while lines[-1].startswith(("--", "\\", "SET ")) or not lines[-1].strip():
            lines.pop()
        sql = re.sub(r"\bpublic\.", "", "\n".join(lines))
        statements.append((kind.replace(" ", "_"), name.replace(" ", "."), sql))
    return script(statements) + "\n"


def main(out: Path, postgres_url: str) -> None:
    work = Path(tempfile.mkdtemp(prefix="release-fixture-"))
    db_path = work / "release.db"
    directory = deployment_dir(work, LONG_WINDOW)
    long_deadlines(directory)
    server = TreasuryServer(directory, db_url=f"sqlite:///{db_path}").start()
    try:
        approvals = asyncio.run(scenario(server))
    finally:
        server.kill()
    written_at = int(time.time() * 1000)
    ddl, rows = sqlite_contents(db_path)
    histories = sorted(name.removeprefix("alembic_version_") for name in rows if name.startswith("alembic_version_"))
    (out / "schema.sqlite.sql").write_text(ddl)
    (out / "schema.postgresql.sql").write_text(asyncio.run(postgresql_ddl(postgres_url, histories)))
    document = {"release": COMMIT, "written_at": written_at, "approvals": approvals, "rows": rows}
    (out / "rows.json").write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), sys.argv[2])
