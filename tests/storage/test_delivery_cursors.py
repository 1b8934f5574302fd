"""Delivery cursors over the audit chain: a new consumer starts at the head, one worker holds a
consumer's lease at a time, a worker that lost its lease cannot move the cursor, and a failed
attempt waits out its backoff before anyone retries."""

from __future__ import annotations

import pytest

from mcp_approval.clock import ManualClock
from mcp_approval.notify import NotificationOptions
from mcp_approval.storage import AUDIT_MIGRATIONS, AuditLog, DeliveryCursors, migrate, open_database

pytestmark = pytest.mark.anyio
LEASE_MS = 5_000


async def test_leases_fence_workers_and_failures_wait_out_their_backoff(db_url: str) -> None:
    database = open_database(db_url)
    clock = ManualClock()
    try:
        await migrate(database, AUDIT_MIGRATIONS)
        log = AuditLog(database, clock)
        await log.record("approval.submitted", subject="before")
        first = DeliveryCursors(database, owner="worker-a", lease_ms=LEASE_MS, clock=clock)
        second = DeliveryCursors(database, owner="worker-b", lease_ms=LEASE_MS, clock=clock)
        await first.ensure("notify:hook")
        await second.ensure("notify:hook")  # a second worker starting finds it and keeps it
        await log.record("approval.submitted", subject="after")

        assert await first.claim("notify:hook") == 1, "a new consumer starts at the chain's head"
        assert await second.claim("notify:hook") is None, "the lease is held"
        clock.advance(LEASE_MS + 1)
        assert await second.claim("notify:hook") == 1, "an expired lease is taken over"
        assert not await first.advance("notify:hook", 2, delivered=1), "the lost lease fences the old worker"
        assert await second.advance("notify:hook", 2, delivered=1)

        await log.record("approval.submitted", subject="refused")
        await second.failed("notify:hook", "HTTP 503", retry_in_ms=1_000)
        assert await first.claim("notify:hook") is None, "not due before its backoff passed"
        clock.advance(1_000)
        assert await first.claim("notify:hook") == 2
        cursor = await first.get("notify:hook")
    finally:
        await database.close()
    assert cursor is not None
    assert (cursor.last_seq, cursor.attempts, cursor.delivered, cursor.failures) == (2, 1, 1, 1)
    assert cursor.last_error == "HTTP 503"


def test_the_backoff_doubles_up_to_its_cap() -> None:
    options = NotificationOptions(retry_initial_s=0.5, retry_max_s=3.0)
    assert [options.retry_delay_ms(n) for n in range(1, 7)] == [500, 1000, 2000, 3000, 3000, 3000]


def test_a_lease_shorter_than_a_delivery_is_refused() -> None:
    with pytest.raises(ValueError, match=r"notifications\.lease_s \(5\.0\) must exceed timeout_s \(10\.0\)"):
        NotificationOptions(lease_s=5.0, timeout_s=10.0)
