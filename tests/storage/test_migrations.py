"""Each layer's migration history: head DDL matches the tables the code queries, a database holds
only the tables of what uses it, and a database migrated by a newer release is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, MetaData, create_engine, inspect

import mcp_approval.notify.email_links  # noqa: F401 (declares email_links on the notify metadata)
from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS
from mcp_approval.approval.persistence.schema import metadata as approval_metadata
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.backends.local.schema import metadata as local_metadata
from mcp_approval.notify.chat_messages import NOTIFY_MIGRATIONS
from mcp_approval.notify.chat_messages import metadata as notify_metadata
from mcp_approval.notify.reminders import REMINDER_MIGRATIONS
from mcp_approval.notify.reminders import metadata as reminder_metadata
from mcp_approval.reference.ars_schema import ARS_MIGRATIONS
from mcp_approval.reference.ars_schema import metadata as ars_metadata
from mcp_approval.reviewers.passkey_store import PASSKEY_MIGRATIONS
from mcp_approval.reviewers.passkey_store import metadata as passkey_metadata
from mcp_approval.storage import AUDIT_MIGRATIONS, SHARED_MIGRATIONS, SchemaTooNewError, migrate, open_database
from mcp_approval.storage.audit import audit_events_table
from mcp_approval.storage.worker_guards import metadata as shared_metadata
from mcp_approval.tasks.schema import TASKS_MIGRATIONS
from mcp_approval.tasks.schema import metadata as tasks_metadata
from tests.support.arap import arap_deployment
from tests.support.treasury import TreasuryServer, deployment_dir

pytestmark = pytest.mark.anyio

ALL = (
    TASKS_MIGRATIONS,
    AUDIT_MIGRATIONS,
    SHARED_MIGRATIONS,
    APPROVAL_MIGRATIONS,
    LOCAL_BACKEND_MIGRATIONS,
    ARS_MIGRATIONS,
    NOTIFY_MIGRATIONS,
    PASSKEY_MIGRATIONS,
    REMINDER_MIGRATIONS,
)
VERSION_TABLES = {history.version_table for history in ALL}


def _declared() -> MetaData:
    """Every table the code queries, as declared beside its layer's history."""
    combined = MetaData()
    layers = (
        tasks_metadata,
        approval_metadata,
        local_metadata,
        ars_metadata,
        shared_metadata,
        notify_metadata,
        passkey_metadata,
        reminder_metadata,
    )
    for metadata in (*layers, audit_events_table.metadata):
        for table in metadata.tables.values():
            table.to_metadata(combined)
    return combined


def _drift(conn: Connection) -> list[object]:
    context = MigrationContext.configure(conn, opts={"compare_type": True})
    declared = _declared()
    return [diff for diff in compare_metadata(context, declared) if not _is_version_table(diff)]


def _is_version_table(diff: object) -> bool:
    return isinstance(diff, tuple) and diff[0] == "remove_table" and diff[1].name in VERSION_TABLES


async def test_the_head_revisions_create_exactly_the_tables_the_code_declares(db_url: str) -> None:
    database = open_database(db_url)
    try:
        await migrate(database, *ALL)
        drift = await database.read(_drift)
    finally:
        await database.close()
    assert drift == []


async def test_migrating_again_changes_nothing_and_reports_the_heads(db_url: str) -> None:
    database = open_database(db_url)
    try:
        first = await migrate(database, TASKS_MIGRATIONS)
        second = await migrate(database, TASKS_MIGRATIONS)
    finally:
        await database.close()
    assert first == {"tasks": ()}
    assert second == {"tasks": ("tasks_0004",)}


async def test_a_database_migrated_by_a_newer_release_is_refused(db_url: str) -> None:
    database = open_database(db_url)
    try:
        await migrate(database, TASKS_MIGRATIONS)
        await database.write(
            lambda conn: conn.exec_driver_sql("UPDATE alembic_version_tasks SET version_num = 'tasks_9999'")
        )
        with pytest.raises(SchemaTooNewError, match=r"'tasks' tables are at revision .*tasks_9999.*newer release"):
            await migrate(database, TASKS_MIGRATIONS, APPROVAL_MIGRATIONS)
        tables = await database.read(lambda conn: set(inspect(conn).get_table_names()))
    finally:
        await database.close()
    assert "approval_workflows" not in tables  # the refusal rolled the whole migration back


async def test_migrate_needs_the_histories_to_apply() -> None:
    database = open_database("sqlite://")
    try:
        with pytest.raises(TypeError, match="TASKS_MIGRATIONS"):
            await migrate(database)
    finally:
        await database.close()


def _tables(path: Path) -> set[str]:
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


@pytest.mark.slow
def test_each_deployment_holds_only_the_tables_it_uses(tmp_path: Path) -> None:
    local = TreasuryServer(deployment_dir(tmp_path / "local")).start()
    local.kill()
    pair = arap_deployment(tmp_path / "arap").start()
    pair.kill()
    assert _tables(local.directory / "treasury.db") == {
        "tasks",
        "task_workers",
        "task_counts",
        "approval_workflows",
        "approval_intents",
        "approval_counts",
        "approval_executions",
        "approval_requests",
        "approval_decisions",
        "approval_seal_manifests",
        "similar_call_rules",
        "approval_delegations",
        "console_sessions",
        "audit_events",
        "audit_chain_head",
        "audit_delivery_cursors",
        "rate_events",
        "seen_once",
        "alembic_version_tasks",
        "alembic_version_approval",
        "alembic_version_local_backend",
        "alembic_version_audit",
        "alembic_version_shared",
    }
    # The PEP with the ARAP backend: no local-backend tables, no ARS tables.
    assert _tables(pair.directory / "treasury-arap.db") == {
        "tasks",
        "task_workers",
        "task_counts",
        "approval_workflows",
        "approval_intents",
        "approval_counts",
        "approval_executions",
        "audit_events",
        "audit_chain_head",
        "audit_delivery_cursors",
        "rate_events",
        "seen_once",
        "alembic_version_tasks",
        "alembic_version_approval",
        "alembic_version_audit",
        "alembic_version_shared",
    }
    # The arap-server: the reviewer workflow, the audit log and its own tables; no tasks.
    assert _tables(pair.directory / "arap-server.db") == {
        "approval_requests",
        "approval_decisions",
        "approval_seal_manifests",
        "similar_call_rules",
        "approval_delegations",
        "console_sessions",
        "audit_events",
        "audit_chain_head",
        "audit_delivery_cursors",
        "rate_events",
        "seen_once",
        "arap_evaluations",
        "arap_tasks",
        "arap_approvals",
        "arap_jti",
        "arap_callbacks",
        "alembic_version_local_backend",
        "alembic_version_audit",
        "alembic_version_ars",
        "alembic_version_shared",
    }


def _migration_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "alembic" in line or "mcp_approval.storage" in line]


def test_a_start_logs_one_line_for_migrations_and_a_restart_none(tmp_path: Path, db_url: str) -> None:
    first = TreasuryServer(deployment_dir(tmp_path), db_url=db_url).start()
    first.kill()
    lines = _migration_lines(first.log())
    assert len(lines) == 1, lines
    assert " INFO mcp_approval.storage: schema migrated: tasks (none) -> tasks_" in lines[0]
    assert "local_backend (none) -> local_" in lines[0]
    again = TreasuryServer(deployment_dir(tmp_path, name="again"), db_url=db_url).start()
    again.kill()
    assert _migration_lines(again.log()) == []


async def test_alembic_details_are_logged_only_at_debug(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO")
    database = open_database(f"sqlite:///{tmp_path / 'info.db'}")
    try:
        await migrate(database, TASKS_MIGRATIONS, AUDIT_MIGRATIONS)
    finally:
        await database.close()
    assert [(r.name, r.levelname) for r in caplog.records] == [("mcp_approval.storage", "INFO")]
    assert caplog.records[0].getMessage().startswith("schema migrated: tasks (none) -> tasks_")

    caplog.clear()
    caplog.set_level("DEBUG")
    database = open_database(f"sqlite:///{tmp_path / 'debug.db'}")
    try:
        await migrate(database, TASKS_MIGRATIONS)
        await migrate(database, TASKS_MIGRATIONS)
    finally:
        await database.close()
    upgrades = [r for r in caplog.records if r.name.startswith("alembic") and "Running upgrade" in r.getMessage()]
    assert upgrades, "alembic's steps are shown at DEBUG"
    assert [r.getMessage().split(":")[0] for r in caplog.records if r.name == "mcp_approval.storage"] == [
        "schema migrated",
        "schema already current",
    ]
