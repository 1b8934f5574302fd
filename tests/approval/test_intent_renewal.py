"""An in-flight intent counts as stale from its writer's last renewal, on every store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS
from mcp_approval.approval.persistence.states import IntentState
from mcp_approval.approval.persistence.store import Admission, ApprovalStore, Intent
from mcp_approval.clock import ManualClock
from mcp_approval.storage import migrate, open_database
from mcp_approval.tasks.schema import TASKS_MIGRATIONS

pytestmark = pytest.mark.anyio

GRACE_MS = 200


@pytest.fixture
async def clocked(db_url: str) -> AsyncIterator[tuple[ApprovalStore, ManualClock]]:
    """An approval store on a fresh database of each kind, with a hand-driven clock."""
    database = open_database(db_url)
    await migrate(database, TASKS_MIGRATIONS, APPROVAL_MIGRATIONS)
    clock = ManualClock()
    try:
        yield ApprovalStore(database, result_retention_ms=60_000, clock=clock), clock
    finally:
        await database.close()


async def recorded(store: ApprovalStore, key: str) -> Intent:
    intent = Intent(
        key=key,
        task_id=f"task-{key}",
        generation=1,
        principal_digest="ab" * 32,
        tool_name="deploy",
        arguments_digest=f"{key:0>64}"[-64:],
        body_sealed="k1:body",
        state=IntentState.OPEN,
        handle=None,
        created_at=0,
    )
    admission, _ = await store.record_intent(intent, submissions_per_minute=10**9, max_pending=10**9)
    assert admission is Admission.RECORDED
    return intent


async def stale_keys(store: ApprovalStore, clock: ManualClock) -> set[str]:
    return {intent.key for intent in await store.stale_intents(clock.now_ms() - GRACE_MS)}


async def test_a_renewed_intent_is_not_stale_until_the_grace_passes_again(
    clocked: tuple[ApprovalStore, ManualClock],
) -> None:
    store, clock = clocked
    await recorded(store, "open")
    await recorded(store, "submitted")
    assert await store.mark_submitted("submitted", "handle-1")
    clock.advance(10_000)
    assert await stale_keys(store, clock) == {"open", "submitted"}
    await store.renew_intents(["open", "submitted"])
    assert await stale_keys(store, clock) == set()
    clock.advance(GRACE_MS + 1)
    assert await stale_keys(store, clock) == {"open", "submitted"}


async def test_renewal_leaves_a_claimed_orphan_to_its_reconciliation(
    clocked: tuple[ApprovalStore, ManualClock],
) -> None:
    store, clock = clocked
    intent = await recorded(store, "orphan")
    clock.advance(10_000)
    assert await store.claim_orphan(intent)
    clock.advance(GRACE_MS + 1)
    await store.renew_intents(["orphan"])  # a withdrawal is not a creation in flight: not renewed
    assert await stale_keys(store, clock) == {"orphan"}
