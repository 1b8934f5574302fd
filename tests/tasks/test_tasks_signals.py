"""Change signals between workers: in process, PostgreSQL LISTEN/NOTIFY and Redis pub/sub (real servers)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from mcp_approval.tasks.signals import (
    LocalTaskSignals,
    PostgresTaskSignals,
    RedisTaskSignals,
    SignalKind,
    TaskChange,
    TaskSignals,
)
from mcp_approval.tasks.states import TaskStatus
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio


class Inbox:
    """What one worker's listener received."""

    def __init__(self, signals: TaskSignals) -> None:
        self.changes: list[TaskChange] = []
        self._arrived = asyncio.Event()
        signals.subscribe(self._on_change)

    def _on_change(self, change: TaskChange) -> None:
        self.changes.append(change)
        self._arrived.set()

    async def wait_for(self, change: TaskChange, timeout_s: float | None = None) -> None:
        async with asyncio.timeout(scaled(5) if timeout_s is None else timeout_s):
            while change not in self.changes:
                self._arrived.clear()
                await self._arrived.wait()


@asynccontextmanager
async def pair(make: Callable[[], TaskSignals]) -> AsyncIterator[tuple[TaskSignals, TaskSignals]]:
    first, second = make(), make()
    await first.open()
    await second.open()
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


def test_the_wire_form_round_trips_and_foreign_payloads_are_ignored():
    change = TaskChange("t-1", SignalKind.CANCEL)
    assert TaskChange.decode(change.encode()) == change
    resumed = TaskChange("t-2", SignalKind.STATUS, TaskStatus.WORKING)
    assert TaskChange.decode(resumed.encode()) == resumed
    assert TaskChange.decode('{"t": "x", "k": "status", "s": "asleep"}') is None
    assert TaskChange.decode("not json") is None
    assert TaskChange.decode('{"t": "x", "k": "explode"}') is None
    assert TaskChange.decode("[]") is None


async def test_in_process_signals_reach_every_listener_and_unsubscribe_is_idempotent():
    signals = LocalTaskSignals()
    inbox = Inbox(signals)
    seen: list[TaskChange] = []
    unsubscribe = signals.subscribe(seen.append)
    await signals.publish(TaskChange("t", SignalKind.STATUS))
    unsubscribe()
    unsubscribe()
    await signals.publish(TaskChange("u", SignalKind.STATUS))
    assert [c.task_id for c in inbox.changes] == ["t", "u"]
    assert [c.task_id for c in seen] == ["t"]


@pytest.mark.postgres
async def test_postgres_notify_reaches_the_other_worker_and_survives_a_dropped_connection(postgres_url):
    import asyncpg

    dsn = postgres_url.replace("postgresql+asyncpg://", "postgresql://")
    async with pair(lambda: PostgresTaskSignals(dsn)) as (a, b):
        inbox_a, inbox_b = Inbox(a), Inbox(b)
        change = TaskChange("task-1", SignalKind.CANCEL)
        await a.publish(change)
        await inbox_b.wait_for(change)
        await inbox_a.wait_for(change)  # the publisher's own listeners hear it too
        # The server drops B's listening connection; B's next heartbeat reconnects it.
        admin = await asyncpg.connect(dsn)
        try:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND query LIKE 'LISTEN%'"
            )
        finally:
            await admin.close()
        assert isinstance(b, PostgresTaskSignals)
        again = TaskChange("task-2", SignalKind.INPUT)
        async with asyncio.timeout(scaled(10)):
            while again not in inbox_b.changes:
                await b.reconnect_if_lost()
                await a.publish(again)
                await asyncio.sleep(0.1)


@pytest.mark.redis
async def test_redis_pubsub_reaches_the_other_worker(redis_url):
    from redis.asyncio import Redis

    from tests.conftest import REDIS_URL

    async with pair(lambda: RedisTaskSignals(lambda: Redis.from_url(REDIS_URL), prefix="sig-test:")) as (a, b):
        inbox_b = Inbox(b)
        change = TaskChange("task-1", SignalKind.STATUS)
        async with asyncio.timeout(scaled(10)):  # the subscription is made in the background: publish until heard
            while change not in inbox_b.changes:
                await a.publish(change)
                await asyncio.sleep(0.05)
