"""A wake-up that finds the workflow still held by this worker's own pass is tried again, not lost.

A pass leases the due workflows, checks them, and writes their next looks together at its end. A
decision's wake-up in between finds the lease taken; dropped, the decision would wait for the next
look (the slow poll), however long that is.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mcp_approval.approval.persistence.records import Reschedule
from tests.approval.inprocess import inprocess_treasury
from tests.approval.test_read_your_decision import SLOW_REQUEST_MODE, decide_on_another_worker, open_request
from tests.support.polling import eventually

pytestmark = pytest.mark.anyio

AN_HOUR_MS = 3_600_000


async def test_a_wake_up_while_this_worker_holds_the_workflow_is_tried_again_once_it_lets_go(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, SLOW_REQUEST_MODE) as harness:
        service = harness.deployment.approval
        store, driver = service.store, service.driver
        reference = await open_request(harness, "acct-held")
        await decide_on_another_worker(harness, "acct-held", "approve")  # no listener here wakes this worker
        # A pass of this worker holds the workflow (it read the status before the decision).
        (held,) = await store.lease_due(driver.worker_id, driver.lease_ms, 1, task_id=reference)
        driver.nudge(reference)  # the decision's wake-up arrives now
        name = f"mcp-approval check {reference[:8]}"
        await asyncio.wait([task for task in driver._inflight if task.get_name() == name])
        # The pass ends: it writes the next look it chose from the old status, an hour away.
        later = Reschedule(reference, held.generation, next_check_at=store.clock.now_ms() + AN_HOUR_MS)
        assert await store.reschedule(later)
        finished = await eventually(lambda: store.get(reference), lambda w: w is not None and w.phase == "finished")
        assert finished is not None
