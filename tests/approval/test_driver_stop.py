"""Stopping the workflow driver lets a check in flight finish instead of cutting it off.

A check cancelled mid-query leaves asyncpg cancelling the query on a connection of its own, which
outlives the stop (and, cut short by a closing event loop, surfaced as an unretrieved
``ConnectionError``). So a stop waits a bounded grace for the pass and the checks in flight.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mcp_approval.backends import ApprovalState
from tests.approval.inprocess import inprocess_treasury
from tests.approval.test_retention import SettableBackend
from tests.support.polling import eventually

pytestmark = pytest.mark.anyio


class GatedStatusBackend(SettableBackend):
    """Its ``status`` waits for the test's go-ahead while the gate is closed, and says how each wait ended.

    Only calls that found the gate closed count: a pass already running when the stop began may
    finish by checking the workflow again once its next look is due (on a loaded machine the
    stop can take longer than the 1 s poll), and that call never waits.
    """

    def __init__(self) -> None:
        super().__init__()
        self.gate: asyncio.Event | None = None
        self.waited = 0
        self.answered = 0
        self.cut_off = 0

    async def is_waiting(self) -> bool:
        return self.waited > 0

    async def status(self, handle: str) -> ApprovalState:
        if self.gate is not None and not self.gate.is_set():
            self.waited += 1
            try:
                await self.gate.wait()
            except asyncio.CancelledError:
                self.cut_off += 1
                raise
            self.answered += 1
        return await super().status(handle)


async def test_a_check_in_flight_finishes_before_the_driver_stops(tmp_path: Path) -> None:
    backend = GatedStatusBackend()
    async with inprocess_treasury(tmp_path, backend=backend) as harness:
        created = (await harness.alice.call_tool("wire_transfer", {"to": "acct-stop", "amount": 30_000})).result
        driver = harness.deployment.approval.driver
        backend.gate = gate = asyncio.Event()
        driver.nudge(created["taskId"])
        await eventually(backend.is_waiting, bool)  # the check is asking the backend
        stopping = asyncio.create_task(driver.stop())
        await asyncio.sleep(0)  # one turn of the loop: the stop has begun (it cancelled, before the grace)
        gate.set()
        await stopping
        assert (backend.answered, backend.cut_off) == (backend.waited, 0)
        workflow = await harness.deployment.approval.store.get(created["taskId"])
        assert workflow is not None
        assert workflow.lease_owner is None  # the check let its lease go
