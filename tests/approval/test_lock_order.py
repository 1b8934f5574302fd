"""Writers of a task row and its workflow row take the task row first, so none deadlocks another.

The claim and the fence (``tasks/cancel``, expiry, denial) lock the task row, then update the
workflow. A driver pass that moves a workflow's next look and, with it, the task's retention did
it the other way round: on PostgreSQL, racing a fence of the same task, one of the two was
aborted as a deadlock (a ``tasks/cancel`` answered "Task store unavailable").
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from mcp_approval.approval.persistence.records import Reschedule
from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS
from mcp_approval.approval.persistence.store import ApprovalStore
from mcp_approval.storage import migrate, open_database
from mcp_approval.tasks.schema import TASKS_MIGRATIONS
from tests.approval.test_claim_race import _create_one
from tests.support.polling import eventually
from tests.support.timing import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


async def test_a_reschedule_moving_the_retention_waits_behind_a_fence_instead_of_deadlocking(postgres_url: str) -> None:
    database = open_database(postgres_url)
    await migrate(database, TASKS_MIGRATIONS, APPROVAL_MIGRATIONS)
    store = ApprovalStore(database, result_retention_ms=60_000)
    fence = await asyncpg.connect(postgres_url.replace("postgresql://", "postgres://"))
    try:
        await _create_one(store, "locked")
        name = await fence.fetchval("SELECT current_database()")
        transaction = fence.transaction()
        await transaction.start()
        await fence.execute("SELECT 1 FROM tasks WHERE task_id = 'locked' FOR UPDATE")  # a fence's first lock
        later = store.clock.now_ms() + 60_000
        moving = asyncio.ensure_future(
            store.reschedule(Reschedule("locked", 1, next_check_at=later, min_ttl_end=later + 60_000))
        )
        waiting = "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'"
        await eventually(lambda: fence.fetchval(waiting, name), lambda count: count >= 1)
        # The fence goes on to its workflow: it must not wait for the reschedule, which waits for it.
        await asyncio.wait_for(
            fence.execute("UPDATE approval_workflows SET version = version + 1 WHERE task_id = 'locked'"), scaled(10)
        )
        await transaction.commit()
        assert await asyncio.wait_for(moving, scaled(20))
    finally:
        await fence.close()
        await database.close()
