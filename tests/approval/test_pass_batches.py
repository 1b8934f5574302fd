"""The store steps a workflow driver pass over many pending approvals is made of.

A pass reads due workflows without leasing them and writes "look again later" for the requests
still pending as a compare-and-set: it must never touch a workflow that was leased, decided,
chained or rescheduled since the read. The orphan purge walks the workflows a page at a time and
still reaches every orphan.
"""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, delete, func, select

from mcp_approval.approval.persistence.records import Reschedule
from mcp_approval.approval.persistence.schema import approval_intents_table, approval_workflows_table
from mcp_approval.approval.persistence.states import Phase
from mcp_approval.approval.persistence.store import ApprovalStore
from mcp_approval.tasks.schema import tasks_table
from tests.approval.test_claim_race import CANCELLED, create_workflows

pytestmark = pytest.mark.anyio

LATER = 10**15  # a next check far in the future


async def next_checks(store: ApprovalStore) -> dict[str, int]:
    query = select(approval_workflows_table.c.task_id, approval_workflows_table.c.next_check_at)
    return {row.task_id: int(row.next_check_at) for row in await store.database.read(lambda c: c.execute(query).all())}


async def test_look_again_unleased_writes_only_workflows_still_due_free_and_at_the_read_generation(
    store: ApprovalStore,
) -> None:
    quiet, leased, fenced, chained_away, rescheduled = await create_workflows(store, "cas", 5)
    due = {item.task_id: item for item in await store.due_checks(100)}
    assert set(due) == {quiet, leased, fenced, chained_away, rescheduled}
    # What other workers do between the pass's read and its write:
    assert [w.task_id for w in await store.lease_due("worker-B", 60_000, 1, task_id=leased)] == [leased]
    assert await store.fence(fenced, CANCELLED)
    assert await store.reschedule(Reschedule(rescheduled, 1, LATER - 1))
    items = [Reschedule(task_id, due[task_id].generation, LATER) for task_id in due if task_id != chained_away]
    items.append(Reschedule(chained_away, due[chained_away].generation + 1, LATER))  # another generation
    await store.look_again_unleased(items)
    checks = await next_checks(store)
    assert checks[quiet] == LATER
    assert [checks[leased], checks[fenced], checks[chained_away]] == [0, 0, 0]
    assert checks[rescheduled] == LATER - 1
    assert [item.task_id for item in await store.due_checks(100)] == [chained_away]  # leased: not offered
    fenced_row = await store.get(fenced)
    assert fenced_row is not None
    assert fenced_row.phase is Phase.FENCED


async def test_lease_among_takes_only_the_listed_workflows_still_due(store: ApprovalStore) -> None:
    first, second, third = await create_workflows(store, "among", 3)
    assert await store.reschedule(Reschedule(second, 1, LATER))
    leased = await store.lease_due("worker-A", 60_000, 3, among=[first, second])
    assert [workflow.task_id for workflow in leased] == [first]
    assert [item.task_id for item in await store.due_checks(100)] == [third]


async def test_the_paged_orphan_purge_reaches_every_orphan(store: ApprovalStore) -> None:
    task_ids = await create_workflows(store, "purge", 7)
    gone = set(task_ids[::2])
    await store.database.write(lambda c: c.execute(delete(tasks_table).where(tasks_table.c.task_id.in_(gone))))
    after, pages = "", 0
    while True:
        pages += 1
        after = await store.purge_orphans(after, limit=2) or ""
        if not after:
            break
    assert pages == 4  # 7 workflows, 2 a page: the last page is short

    def left(conn: Connection) -> tuple[set[str], set[str]]:
        workflows = set(conn.execute(select(approval_workflows_table.c.task_id)).scalars())
        intents = set(conn.execute(select(approval_intents_table.c.task_id)).scalars())
        return workflows, intents

    workflows, intents = await store.database.read(left)
    assert workflows == set(task_ids) - gone
    assert intents == set(task_ids) - gone
    count = select(func.count()).select_from(approval_workflows_table)
    assert await store.database.read(lambda c: c.execute(count).scalar_one()) == len(task_ids) - len(gone)
