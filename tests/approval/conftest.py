"""Fixtures shared by the approval layer's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS
from mcp_approval.approval.persistence.store import ApprovalStore
from mcp_approval.storage import migrate, open_database
from mcp_approval.tasks.schema import TASKS_MIGRATIONS


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[ApprovalStore]:
    """An approval store on a fresh database of each kind, its tables at their head revisions."""
    database = open_database(db_url)
    await migrate(database, TASKS_MIGRATIONS, APPROVAL_MIGRATIONS)
    try:
        yield ApprovalStore(database, result_retention_ms=60_000)
    finally:
        await database.close()
