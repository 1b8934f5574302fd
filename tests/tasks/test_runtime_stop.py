"""Stopping the tasks runtime ends its background loops even when the store eats the cancellation.

Some store clients (redis-py, on a connection cut mid-command) turn the ``CancelledError`` that
stops a loop into a connection error, which the loop suppresses as a store outage. The runtime
must still stop instead of waiting for that loop for ever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from mcp_approval.storage import StoreUnavailableError
from mcp_approval.tasks import TaskOptions
from mcp_approval.tasks.runtime import TaskRuntime
from mcp_approval.tasks.sql_store import SqlTaskStore
from mcp_approval.tasks.store import TaskSignal
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio


class CancellationEatingStore(SqlTaskStore):
    """A real store whose heartbeat blocks, and reports a cancellation as an outage."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.heartbeat_started = asyncio.Event()

    async def heartbeat(self, owner: str, task_ids: Sequence[str], lease_ms: int) -> list[TaskSignal]:
        self.heartbeat_started.set()
        try:
            await asyncio.Event().wait()  # a command that never answers
        except asyncio.CancelledError:
            raise StoreUnavailableError("store unavailable: connection closed") from None
        return []


async def test_stop_ends_a_loop_whose_store_turned_the_cancellation_into_an_outage(tmp_path: Path) -> None:
    store = CancellationEatingStore(f"sqlite:///{tmp_path / 'tasks.db'}")
    runtime = TaskRuntime(store, TaskOptions(poll_interval_s=0.05))
    await runtime.start()
    await store.heartbeat_started.wait()
    with anyio.fail_after(scaled(10)):  # a bound that fails the test, not a synchronization
        await runtime.stop()
