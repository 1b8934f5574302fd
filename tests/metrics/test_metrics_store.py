""":class:`ApprovalMetrics` against the store itself, on SQLite and on PostgreSQL: the pending gauge
counts waiting workflows by template, a workflow without a template under the empty label."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import Connection, insert

from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS, approval_workflows_table
from mcp_approval.metrics import ApprovalMetrics
from mcp_approval.storage import AUDIT_MIGRATIONS, SHARED_MIGRATIONS, AuditLog, Database, migrate, open_database
from tests.support.metrics import parse_samples, sample_value

pytestmark = pytest.mark.anyio


@pytest.fixture
async def database(db_url: str) -> AsyncIterator[Database]:
    """A migrated store of each kind."""
    database = open_database(db_url)
    try:
        for history in (AUDIT_MIGRATIONS, SHARED_MIGRATIONS, APPROVAL_MIGRATIONS):
            await migrate(database, history)
        yield database
    finally:
        await database.close()


def _workflow(task_id: str, *, phase: str, template: str | None) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "principal_digest": "p" * 64,
        "tool_name": "wire_transfer",
        "arguments_digest": task_id.ljust(64, "0"),
        "key_id": "k1",
        "phase": phase,
        "generation": 1,
        "backend": "local",
        "template": template,
        "next_check_at": 0,
        "attempts": 0,
        "created_at": 0,
        "updated_at": 0,
        "version": 0,
    }


async def test_pending_approvals_are_counted_by_template(database: Database) -> None:
    rows = [
        _workflow("t1", phase="pending", template="treasury"),
        _workflow("t2", phase="pending", template="treasury"),
        _workflow("t3", phase="pending", template=None),
        _workflow("t4", phase="pending", template=""),
        _workflow("t5", phase="done", template="treasury"),
    ]

    def seed(conn: Connection) -> None:
        conn.execute(insert(approval_workflows_table), rows)

    await database.write(seed)
    metrics = ApprovalMetrics(database, AuditLog(database))
    await metrics.refresh()

    samples = parse_samples(metrics.exposition().decode())
    assert sample_value(samples, "mcp_approval_pending_approvals", template="treasury") == 2
    assert sample_value(samples, "mcp_approval_pending_approvals", template="") == 2
