"""Dedup reads look a call up by its one-column ``call_scope``, whatever plan PostgreSQL caches.

asyncpg prepares each statement once per connection, and PostgreSQL may keep a generic plan for
it, built while the tables were small and never analyzed. The dedup reads filtered on principal,
tool and arguments digest, and such a plan could as well take the pending count's index on the
principal alone: then each admission read every row its principal had stored (seen as 0.3 to
0.7 ms of database time per read once a principal had a few hundred ended requests). Reading by
``call_scope`` leaves one index to use. Rows inserted without it (by a worker of the previous
release, during a rolling upgrade) are given it by a trigger, so an identical call still finds them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy import Select
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect

from mcp_approval.approval.persistence import statements as sql
from mcp_approval.approval.persistence.records import call_scope
from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS
from mcp_approval.approval.persistence.store import ApprovalStore
from mcp_approval.storage import Database, migrate, open_database
from mcp_approval.tasks.schema import TASKS_MIGRATIONS

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

OWNER, TOOL, DIGEST = "a" * 64, "deploy", "d" * 64
DEDUP_READS = {
    "LIVE_WORKFLOW": "ix_approval_workflows_call_scope",
    "OWED_WORKFLOW": "ix_approval_workflows_call_scope",
    "EARLIER_ENDED": "ix_approval_workflows_call_scope",
    "IN_FLIGHT_INTENT": "ix_approval_intents_call_scope",
}


@pytest.fixture
async def database(postgres_url: str) -> AsyncIterator[Database]:
    database = open_database(postgres_url)
    await migrate(database, TASKS_MIGRATIONS, APPROVAL_MIGRATIONS)
    try:
        yield database
    finally:
        await database.close()


@pytest.fixture
async def raw(postgres_url: str, database: Database) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(postgres_url.replace("postgresql://", "postgres://"))
    try:
        yield conn
    finally:
        await conn.close()


def _prepared(statement: Select[Any]) -> tuple[str, list[Any]]:
    """The statement as asyncpg sends it (``$n`` placeholders, IN lists expanded) and its arguments."""
    compiled = statement.compile(dialect=asyncpg_dialect())
    state = compiled.construct_expanded_state({"call": call_scope(OWNER, TOOL, DIGEST)})
    return state.statement, [state.parameters[name] for name in state.positiontup or ()]


def _indexes(plan: dict[str, Any]) -> set[str]:
    found = {plan["Index Name"]} if "Index Name" in plan else set()
    for child in plan.get("Plans", []):
        found |= _indexes(child)
    return found


@pytest.mark.parametrize("name", sorted(DEDUP_READS))
async def test_a_dedup_read_planned_on_empty_tables_reads_the_call_index(raw: asyncpg.Connection, name: str) -> None:
    # Empty and never analyzed, as a new deployment's tables are when its connections prepare.
    text, args = _prepared(getattr(sql, name))
    await raw.execute("SET plan_cache_mode = force_generic_plan")
    plan = json.loads(await raw.fetchval(f"EXPLAIN (FORMAT JSON) {text}", *args))[0]["Plan"]
    assert _indexes(plan) == {DEDUP_READS[name]}, plan


async def test_a_workflow_inserted_without_its_call_scope_is_found_by_an_identical_call(
    database: Database, raw: asyncpg.Connection
) -> None:
    # The previous release's insert names no call_scope: the trigger computes it as records does.
    await raw.execute(
        "INSERT INTO approval_workflows (task_id, principal_digest, tool_name, arguments_digest, key_id, phase,"
        " generation, backend, next_check_at, attempts, created_at, updated_at, version)"
        " VALUES ('old-worker', $1, $2, $3, 'k1', 'pending', 1, 'local', 0, 0, 0, 0, 0)",
        OWNER,
        TOOL,
        DIGEST,
    )
    stored = await raw.fetchval("SELECT call_scope FROM approval_workflows WHERE task_id = 'old-worker'")
    assert stored == call_scope(OWNER, TOOL, DIGEST)
    store = ApprovalStore(database, result_retention_ms=60_000)
    assert await store.find_live(OWNER, TOOL, DIGEST) == "old-worker"
    assert await store.find_live(OWNER, TOOL, "e" * 64) is None
