"""A database made by release 0.2.0 (commit 6854340) upgrades to head, and its pending approvals complete exactly once.

That commit's schema is already Alembic-managed (one ``alembic_version_*`` table per history) and
its local backend already seals each request's content (``approval_requests.content_seal``). The
database is rebuilt from ``tests/data/release_6854340``: that commit's own DDL for each dialect
and every row its treasury deployment wrote for three approvals (``generate.py`` there says how
they were made):

- ``one_approver``: alice's ``wire_transfer`` of 26,000, one approver needed, none given;
- ``two_approvers``: bob's ``close_quarter`` of 2026-Q3, two distinct approvers needed, carol's
  approval given;
- ``executed``: alice's ``wire_transfer`` of 30,000, approved and run.

The commit sealed no rules or decisions: its requests wait, unverifiable, for the operator's
one-time ``mcp-approval upgrade seal-requests``.

Times in the rows are moved forward by the fixture's age, so the requests are as fresh as when
they were written, except the times under a seal or a hash: a request's deadline (sealed with its
content; the fixture's deadlines are a century away) and an audit event's time (hashed into the
audit chain).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Boolean, Connection, MetaData, select, text

from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.storage import AUDIT_MIGRATIONS, SHARED_MIGRATIONS, AuditLog, Database, migrate, open_database
from mcp_approval.tasks.schema import TASKS_MIGRATIONS
from tests.support.stored_schema import row_counts, version_heads
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.support.upgrade_step import seal_requests
from tests.treasury.helpers import assert_approved_executed, settled, shown

pytestmark = pytest.mark.anyio

RELEASE = Path(__file__).parents[1] / "data" / "release_6854340"
FIXTURE = json.loads((RELEASE / "rows.json").read_text())
APPROVALS: dict[str, dict[str, str]] = FIXTURE["approvals"]
#: What a local-backend deployment opens: the histories of the tables it uses.
DEPLOYMENT = (TASKS_MIGRATIONS, AUDIT_MIGRATIONS, SHARED_MIGRATIONS, APPROVAL_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS)
#: Where head takes each history (read from the revisions this code ships, so a new revision is included).
HEADS = {history.name: history.script().get_current_head() for history in DEPLOYMENT}
#: Where commit 6854340 left each history (its ``alembic_version_*`` rows).
RELEASED = {
    name.removeprefix("alembic_version_"): tuple(row["version_num"] for row in rows)
    for name, rows in FIXTURE["rows"].items()
    if name.startswith("alembic_version_")
}
#: What the commit's requests read as until the operator seals them.
NO_SEALED_RULES = "the stored request carries no sealed rules"
#: Times kept as written: a request's deadline is under its seal (the workflow holds a copy), and
#: an audit event's time under its hash.
UNMOVED = {("approval_requests", "expires_at"), ("approval_workflows", "request_deadline"), ("audit_events", "at")}
#: The line before each statement of ``schema.*.sql`` (bodies of triggers and functions hold semicolons).
STATEMENT = re.compile(r"^-- object (\S+) .*\n", re.MULTILINE)


def _is_time(table: str, column: str) -> bool:
    moved = column == "at" or column.endswith(("_at", "_until", "deadline"))
    return moved and (table, column) not in UNMOVED


def _statements(dialect: str) -> list[tuple[str, str]]:
    """``(kind, statement)`` in the order of ``schema.<dialect>.sql``."""
    parts = STATEMENT.split((RELEASE / f"schema.{dialect}.sql").read_text())
    return list(zip(parts[1::2], (part.strip() for part in parts[2::2]), strict=True))


def _release_database(conn: Connection) -> None:
    """The commit's tables and rows (times moved forward by the fixture's age).

    The triggers are created after the rows: the rows already hold the counts the triggers kept.
    """
    statements = _statements(conn.dialect.name)
    if conn.dialect.name == "postgresql":
        # As a restore of pg_dump's output does: the functions come before the tables their bodies name.
        conn.exec_driver_sql("SET LOCAL check_function_bodies = false")
    _run(conn, statements, triggers=False)
    tables = MetaData()
    tables.reflect(conn)
    age = int(time.time() * 1000) - FIXTURE["written_at"]
    for name, rows in FIXTURE["rows"].items():
        if rows:
            conn.execute(tables.tables[name].insert(), [_shifted(tables, name, row, age) for row in rows])
    _run(conn, statements, triggers=True)
    if conn.dialect.name == "postgresql":
        _sequences_past_the_rows(conn)


def _run(conn: Connection, statements: list[tuple[str, str]], *, triggers: bool) -> None:
    for kind, statement in statements:
        if (kind == "trigger") == triggers:
            conn.exec_driver_sql(statement)


def _shifted(tables: MetaData, name: str, row: dict[str, Any], age: int) -> dict[str, Any]:
    booleans = {column.name for column in tables.tables[name].columns if isinstance(column.type, Boolean)}
    return {
        key: (bool(value) if key in booleans else value + age if value is not None and _is_time(name, key) else value)
        for key, value in row.items()
    }


def _sequences_past_the_rows(conn: Connection) -> None:
    """The rows came with their ids; a database the commit filled itself has its sequences past them."""
    serials = conn.execute(
        text(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND column_default LIKE :serial"
        ),
        {"serial": "nextval(%"},
    ).all()
    for table, column in serials:
        if FIXTURE["rows"][table]:
            conn.execute(
                text(f"SELECT setval(pg_get_serial_sequence(:table, :column), MAX({column})) FROM {table}"),
                {"table": table, "column": column},
            )


def _contents(conn: Connection) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table but the version tables."""
    tables = MetaData()
    tables.reflect(conn)
    return {
        name: [dict(row) for row in conn.execute(select(table)).mappings()]
        for name, table in tables.tables.items()
        if not name.startswith("alembic_version_")
    }


def _cut(contents: dict[str, list[dict[str, Any]]], like: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    """``contents``' rows of the tables ``like`` has, each cut to ``like``'s columns (canonical, sorted).

    Columns and tables a later revision adds are left out: only what the commit stored is compared.
    """

    def cut(table: str) -> list[str]:
        columns = list(like[table][0]) if like[table] else []
        return sorted(json.dumps({key: row[key] for key in columns}, sort_keys=True) for row in contents.get(table, []))

    return {table: cut(table) for table in like}


async def _loaded(url: str) -> Database:
    database = open_database(url)
    await database.write(_release_database)
    return database


async def test_the_0_2_0_database_upgrades_to_head_without_losing_a_row(db_url: str) -> None:
    database = await _loaded(db_url)
    try:
        before = await database.read(_contents)
        found = await migrate(database, *DEPLOYMENT)
        after = await database.read(_contents)
        heads = await database.read(version_heads)
    finally:
        await database.close()
    # Recognised where the commit left each history; only the revisions after it run.
    assert found == RELEASED
    assert heads == {name: [revision] for name, revision in HEADS.items()}
    # Every row the commit stored is still there, with the values it stored (columns added since
    # are not compared), and no table holds a row more.
    assert _cut(after, before) == _cut(before, before)
    assert {len(after[table]) for table in ("tasks", "approval_workflows", "approval_requests")} == {3}
    assert len(after["approval_decisions"]) == 2
    assert sum(1 for row in after["approval_requests"] if row["status"] == "pending") == 2


async def test_workers_upgrading_the_0_2_0_database_together_apply_each_step_once(db_url: str) -> None:
    setup = await _loaded(db_url)
    try:
        before = await setup.read(row_counts)
    finally:
        await setup.close()
    workers = [open_database(db_url) for _ in range(4)]
    try:
        results = await asyncio.gather(*(migrate(worker, *DEPLOYMENT) for worker in workers))
        heads = await workers[0].read(version_heads)
        after = await workers[0].read(row_counts)
    finally:
        for worker in workers:
            await worker.close()
    # Exactly one worker found the histories where the commit left them; the others found them at head.
    at_head = {name: (revision,) for name, revision in HEADS.items()}
    assert sorted(results, key=lambda found: found == at_head) == [RELEASED] + [at_head] * 3
    assert heads == {name: [revision] for name, revision in HEADS.items()}
    # A step applied twice would have failed or doubled what it wrote; the commit's tables hold their rows.
    assert {name: after[name] for name in before} == before


@pytest.mark.slow
async def test_the_pending_approvals_of_0_2_0_complete_once_after_the_operator_seals_them(
    db_url: str, tmp_path: Path
) -> None:
    """The commit sealed content but not rules or decisions: its requests are integrity failures
    (nothing runs on them) until the operator's one-time step seals them; then they complete."""
    database = await _loaded(db_url)
    await database.close()
    one, two, executed = (APPROVALS[name] for name in ("one_approver", "two_approvers", "executed"))
    directory = deployment_dir(tmp_path)
    server = TreasuryServer(directory, db_url=db_url).start()
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            wires = principals(http)
            carol, dave = Reviewer(http, "carol-token"), Reviewer(http, "dave-token")
            # Without the step: both pending requests flagged, and nobody may approve them.
            listed = {item["id"]: item for item in await dave.pending()}
            assert set(listed) == {one["request_id"], two["request_id"]}
            assert {item["integrity_failure"] for item in listed.values()} == {NO_SEALED_RULES}
            refused = await carol.decide(one["request_id"], "approve")
            assert refused.status_code == 409, refused.text
            refused = await dave.decide(two["request_id"], "approve")
            assert refused.status_code == 409, refused.text
            assert (await wires["alice"].get(one["task_id"])).result["status"] == "working"
            assert (await wires["bob"].get(two["task_id"])).result["status"] == "working"
            assert server.ledger() == []

            dry = await asyncio.to_thread(seal_requests, directory / "config.toml", "--db", db_url, "--dry-run")
            assert dry.returncode == 0, dry.stdout + dry.stderr
            assert "would seal 3 approval requests" in dry.stdout
            assert "nothing was written" in dry.stdout
            assert (await shown(http, "dave-token", one["request_id"])).json()["integrity_failure"] == NO_SEALED_RULES
            step = await asyncio.to_thread(seal_requests, directory / "config.toml", "--db", db_url, "--json")
            assert step.returncode == 0, step.stdout + step.stderr
            manifest = json.loads(step.stdout)
            # The two pending requests and the executed one (a request stays approved once its call ran).
            sealed = {entry["request_id"]: entry for entry in manifest["sealed"]}
            assert set(sealed) == {one["request_id"], two["request_id"], executed["request_id"]}
            assert sealed[two["request_id"]]["decisions"] == [["carol", "approve"]]
            assert manifest["left"] == []

            # Shown whole now: their seals still matched what the commit stored.
            listed = {item["id"]: item for item in await dave.pending()}
            for request_id in listed:
                detail = await shown(http, "dave-token", request_id)
                assert detail.status_code == 200, detail.text
                assert detail.json()["integrity_failure"] is None, detail.text
                assert listed[request_id]["integrity_failure"] is None
            assert listed[one["request_id"]]["arguments"] == {"to": "acct-upgrade", "amount": 26_000}
            assert listed[two["request_id"]]["approvals_required"] == 2
            assert [(d["reviewer"], d["decision"]) for d in listed[two["request_id"]]["decisions"]] == [
                ("carol", "approve")
            ]

            decided = await carol.decide(one["request_id"], "approve")
            assert decided.status_code == 200, decided.text
            assert_approved_executed(await settled(wires["alice"], one["task_id"]))

            # carol's approval, given before the upgrade, still counts: she cannot give a second one,
            # and the call waits for exactly one more approver.
            again = await carol.decide(two["request_id"], "approve")
            assert again.status_code == 409, again.text
            assert (await wires["bob"].get(two["task_id"])).result["status"] == "working"
            assert not [entry for entry in server.ledger() if entry.get("quarter") == "2026-Q3"]
            decided = await dave.decide(two["request_id"], "approve")
            assert decided.status_code == 200, decided.text
            assert_approved_executed(await settled(wires["bob"], two["task_id"]))

            # The call run before the upgrade keeps its outcome and does not run again.
            assert_approved_executed((await wires["alice"].get(executed["task_id"])).result)
    finally:
        server.kill()
    ledger = [(entry["op"], entry.get("to") or entry.get("quarter")) for entry in server.ledger()]
    assert sorted(ledger) == [("close_quarter", "2026-Q3"), ("wire_transfer", "acct-upgrade")]

    database = open_database(db_url)
    try:
        verified = await AuditLog(database).verify()
    finally:
        await database.close()
    # The commit's events and head's continue one intact chain, every execution after the
    # decisions its request needed (carol's from before the upgrade, dave's after it).
    assert verified.ok, verified.broken
    assert verified.checked > len(FIXTURE["rows"]["audit_events"])
