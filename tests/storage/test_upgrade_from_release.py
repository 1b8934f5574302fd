"""A database made by the first release (commit d16cd99) upgrades to head, and its pending approval completes.

The release's database is rebuilt from ``tests/data/release_d16cd99``: the release's own DDL for
each dialect and the rows its treasury deployment wrote for one call waiting for approval (a
``working`` approval task, its workflow, the bound intent, the local backend's pending request,
two audit events, ``schema_version`` 1 to 3); ``generate.py`` there says how they were made.
The release stored no seals: its pending request waits, unverifiable, for the operator's one-time
``mcp-approval upgrade seal-requests``.
Times in the rows are moved forward by the fixture's age, so the request is as fresh as when it
was written.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Boolean, Connection, MetaData, inspect, text

from mcp_approval.approval.persistence.records import call_scope
from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.storage import AUDIT_MIGRATIONS, AuditLog, Database, migrate, open_database
from mcp_approval.storage.audit import GENESIS_HASH
from mcp_approval.tasks.schema import TASKS_MIGRATIONS
from tests.support.stored_schema import row_counts, version_heads
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.support.upgrade_step import seal_requests
from tests.treasury.helpers import approval_for, assert_approved_executed, settled

pytestmark = pytest.mark.anyio

RELEASE = Path(__file__).parents[1] / "data" / "release_d16cd99"
FIXTURE = json.loads((RELEASE / "rows.json").read_text())
#: What a local-backend deployment opens: the tables it uses, each at its head.
DEPLOYMENT = (TASKS_MIGRATIONS, AUDIT_MIGRATIONS, APPROVAL_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS)
HEADS = {"tasks": "tasks_0004", "audit": "audit_0004", "approval": "approval_0005", "local_backend": "local_0008"}


def _is_time(column: str) -> bool:
    return column == "at" or column.endswith(("_at", "_until", "deadline"))


def _release_database(conn: Connection) -> None:
    """The release's tables and rows (times moved forward by the fixture's age)."""
    ddl = (RELEASE / f"schema.{conn.dialect.name}.sql").read_text()
    for statement in filter(None, (part.strip() for part in ddl.split(";"))):
        conn.exec_driver_sql(statement)
    tables = MetaData()
    tables.reflect(conn)
    age = int(time.time() * 1000) - FIXTURE["written_at"]
    for name, rows in FIXTURE["rows"].items():
        table = tables.tables[name]
        booleans = {column.name for column in table.columns if isinstance(column.type, Boolean)}
        shifted = [
            {
                key: (bool(value) if key in booleans else value + age if value is not None and _is_time(key) else value)
                for key, value in row.items()
            }
            for row in rows
        ]
        if shifted:
            conn.execute(table.insert(), shifted)
    if conn.dialect.name == "postgresql":
        # The rows came with their ids; a database the release filled itself has its sequence past them.
        conn.exec_driver_sql(
            "SELECT setval(pg_get_serial_sequence('audit_events', 'event_id'), MAX(event_id)) FROM audit_events"
        )


def _call_scopes(conn: Connection) -> list[tuple[tuple[str, str, str], str]]:
    """(principal, tool, arguments digest) and the stored ``call_scope`` of each workflow and intent."""
    found = []
    for table in ("approval_workflows", "approval_intents"):
        query = f"SELECT principal_digest, tool_name, arguments_digest, call_scope FROM {table}"
        found += [((row[0], row[1], row[2]), row[3]) for row in conn.exec_driver_sql(query)]
    return found


async def _loaded(url: str) -> Database:
    database = open_database(url)
    await database.write(_release_database)
    return database


async def test_the_release_database_upgrades_to_head_without_losing_a_row(db_url: str) -> None:
    database = await _loaded(db_url)
    try:
        before = await database.read(row_counts)
        found = await migrate(database, *DEPLOYMENT)
        after = await database.read(row_counts)
        heads = await database.read(version_heads)
        columns = await database.read(lambda conn: {c["name"] for c in inspect(conn).get_columns("tasks")})
        scopes = await database.read(_call_scopes)
    finally:
        await database.close()
    # Recognised from schema_version 3: stamped where the release left each history, nothing re-created.
    assert found == {"tasks": (), "audit": (), "approval": (), "local_backend": ()}
    assert heads == {name: [revision] for name, revision in HEADS.items()}
    # The audit log gained its chain head and an empty table of delivery cursors, the console its
    # (empty) session table, the local backend its (empty) tables of seal manifests and similar-call
    # rules, the tasks layer
    # its worker leases and its counts of unfinished tasks, the approval layer its admission
    # counts and its (empty) table of execution records; every other table holds exactly what it held. The
    # counts hold the release's pending request: unfinished tasks in all and its principal's, its
    # principal's pending approvals, and its intent in the minute it was recorded.
    assert after == before | {
        "audit_chain_head": 1,
        "audit_delivery_cursors": 0,
        "console_sessions": 0,
        "approval_seal_manifests": 0,
        "similar_call_rules": 0,
        "approval_delegations": 0,
        "task_workers": 0,
        "task_counts": 2,
        "approval_counts": 2,
        "approval_executions": 0,
    }
    assert after["tasks"] == after["approval_workflows"] == after["approval_requests"] == 1
    assert {"handler", "meta_json"} <= columns
    # The stored workflow and intent gained the dedup key an identical call is looked up by.
    assert len(scopes) == 2
    assert all(stored == call_scope(*call) for call, stored in scopes)
    # The reference ARS's tables the release created stay (nothing stored is lost), unversioned:
    # only an arap-server opening this database would take them over.
    assert after["arap_tasks"] == 0


async def test_workers_upgrading_the_release_database_together_apply_each_step_once(db_url: str) -> None:
    setup = await _loaded(db_url)
    await setup.close()
    workers = [open_database(db_url) for _ in range(4)]
    try:
        results = await asyncio.gather(*(migrate(worker, *DEPLOYMENT) for worker in workers))
        heads = await workers[0].read(version_heads)
    finally:
        for worker in workers:
            await worker.close()
    # Exactly one worker found the histories unversioned; the others found them at head.
    at_head = {name: (revision,) for name, revision in HEADS.items()}
    unversioned = {name: () for name in HEADS}
    assert sorted(results, key=lambda found: found["tasks"]) == [unversioned] + [at_head] * 3
    assert heads == {name: [revision] for name, revision in HEADS.items()}


@pytest.mark.slow
async def test_a_pending_approval_of_the_release_completes_after_the_operator_seals_it(
    db_url: str, tmp_path: Path
) -> None:
    """The release stored its request without a seal: it is an integrity failure (nothing runs on it)
    until the operator's one-time step (docs/deployment.md, upgrading) seals it; then it completes."""
    database = await _loaded(db_url)
    await database.close()
    task_id: str = FIXTURE["task_id"]
    directory = deployment_dir(tmp_path)
    server = TreasuryServer(directory, db_url=db_url).start()
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            alice = principals(http)["alice"]
            task: dict[str, Any] = (await alice.get(task_id)).result
            assert task["status"] == "working"
            # The identical call finds the request stored before the upgrade (by its filled call_scope).
            again = (await alice.call_tool("wire_transfer", {"to": "acct-upgrade", "amount": 26_000})).result
            assert again.get("taskId") == task_id, again
            carol = Reviewer(http, "carol-token")
            (listed,) = await carol.pending()
            # Without the step: flagged, its content withheld, and nobody may approve it.
            assert listed["integrity_failure"] == "the stored request carries no seal", listed
            assert listed["arguments"] == {}
            refused = await carol.decide(listed["id"], "approve")
            assert refused.status_code == 409, refused.text
            assert (await alice.get(task_id)).result["status"] == "working"
            assert server.ledger() == []

            step = await asyncio.to_thread(seal_requests, directory / "config.toml", "--db", db_url, "--as", "ops")
            assert step.returncode == 0, step.stdout + step.stderr
            assert "sealed 1 approval request stored before sealing, as found" in step.stdout
            assert listed["id"] in step.stdout

            approval = await approval_for(carol, "wire_transfer", to="acct-upgrade")
            assert approval["integrity_failure"] is None
            decided = await carol.decide(approval["id"], "approve")
            assert decided.status_code == 200, decided.text
            assert_approved_executed(await settled(alice, task_id))
        assert [(entry["to"], entry["amount"]) for entry in server.ledger()] == [("acct-upgrade", 26_000)]
    finally:
        server.kill()
    again_step = await asyncio.to_thread(seal_requests, directory / "config.toml", "--db", db_url)
    assert again_step.returncode == 1
    assert "the step runs once" in again_step.stderr


def _release_v1_tasks(conn: Connection) -> None:
    """A database at the release's schema version 1: the tasks table before ``handler``/``meta_json``."""
    ddl = (RELEASE / f"schema.{conn.dialect.name}.sql").read_text()
    tasks_ddl = [part.strip() for part in ddl.split(";") if " tasks " in part or "TABLE tasks " in part]
    for statement in tasks_ddl:
        conn.exec_driver_sql("\n".join(line for line in statement.splitlines() if not _v2_column(line)))
    conn.exec_driver_sql("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)")
    conn.exec_driver_sql("INSERT INTO schema_version VALUES (1, 0)")
    row = {key: value for key, value in FIXTURE["rows"]["tasks"][0].items() if key not in ("handler", "meta_json")}
    names, binds = ", ".join(row), ", ".join(f":{key}" for key in row)
    insert = text(f"INSERT INTO tasks ({names}) VALUES ({binds})")
    conn.execute(insert, {**row, "cancel_requested": bool(row["cancel_requested"])})


def _v2_column(line: str) -> bool:
    return line.strip().startswith(("handler ", "meta_json "))


async def test_a_database_at_release_version_1_gains_the_later_columns_and_tables(db_url: str) -> None:
    database = open_database(db_url)
    try:
        await database.write(_release_v1_tasks)
        found = await migrate(database, *DEPLOYMENT)
        heads = await database.read(version_heads)
        counts = await database.read(row_counts)
        columns = await database.read(lambda conn: {c["name"] for c in inspect(conn).get_columns("tasks")})
    finally:
        await database.close()
    assert found == {name: () for name in HEADS}
    assert heads == {name: [revision] for name, revision in HEADS.items()}
    # tasks stamped at tasks_0001 and upgraded (the row kept); the tables version 2 added, created.
    assert {"handler", "meta_json"} <= columns
    assert counts["tasks"] == 1
    assert counts["approval_workflows"] == counts["approval_requests"] == counts["audit_events"] == 0


async def test_the_release_audit_events_become_the_start_of_the_hash_chain(db_url: str) -> None:
    database = await _loaded(db_url)
    try:
        stored = (await database.read(row_counts))["audit_events"]
        await migrate(database, *DEPLOYMENT)
        log = AuditLog(database)
        await log.record("approval.submitted", subject="after-upgrade")
        found = await log.verify()
        events = await log.events()
    finally:
        await database.close()
    assert stored == 2
    assert found.ok, found.broken
    assert found.checked == stored + 1
    # Linked in the order they were stored, the first to the genesis hash.
    assert [event.seq for event in events] == [1, 2, 3]
    assert events[0].prev_hash == GENESIS_HASH
    assert events[-1].subject == "after-upgrade"
