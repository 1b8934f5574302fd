"""Reconciliation against a task creation that is merely slow (not crashed).

A creation records its intent, submits, persists the handle, then creates the task. Its own
worker never reconciles it (tests/treasury/test_slow_creation.py), but if the whole worker stalls
past ``intent_grace_s`` (a loaded host) it stops renewing the intent, and another worker's
reconciliation sees an intent with no task. Exactly one of the two may win, decided by a
compare-and-set on the intent:

- the creation binds the intent first: reconciliation withdraws nothing, the task waits for approval;
- reconciliation claims it first: the creation fails (nothing runs) and the request is withdrawn.

The interleavings are forced at the store's seams; time is a :class:`ManualClock`. The creating
worker's driver is stopped (it renews nothing, as a stalled worker would), and the reconciliation
is another worker's :class:`Resubmission` on the same store and backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from mcp_approval.approval.engine.resubmission import Resubmission
from mcp_approval.approval.persistence.records import NewWorkflow
from mcp_approval.backends import ApprovalStatus, ApprovalSubmission
from mcp_approval.clock import ManualClock
from tests.approval.inprocess import inprocess_treasury
from tests.approval.test_retention import SettableBackend

pytestmark = pytest.mark.anyio

ARGUMENTS = {"to": "acct-slow", "amount": 30_000}
GRACE = {"approval": {"intent_grace_s": 0.2}}


async def another_worker(harness: Any) -> Resubmission:
    """Stall the harness's worker (its driver stops renewing) and return a second worker's reconciler."""
    driver = harness.deployment.approval.driver
    await driver.stop()
    deps = driver.deps
    return Resubmission(deps.store, deps.backend, deps.cipher, deps.clock, intent_grace_ms=200)


@pytest.mark.sep_check("sep-2848-reconcile-orphaned-intents")
async def test_a_creation_that_binds_first_keeps_its_request(tmp_path: Path) -> None:
    clock = ManualClock()
    backend = SettableBackend()
    async with inprocess_treasury(tmp_path, GRACE, clock=clock, backend=backend) as harness:
        approval = harness.deployment.approval
        store = approval.store
        stalled, landed = asyncio.Event(), asyncio.Event()
        release = asyncio.Event()
        create_task = store.create_task
        get = store.get

        async def slow_create(new: NewWorkflow) -> bool:
            stalled.set()
            await release.wait()
            try:
                return await create_task(new)
            finally:
                landed.set()

        async def read_then_let_the_creation_land(task_id: str) -> Any:
            found = await get(task_id)
            release.set()  # the creation commits between reconciliation's read and its claim
            await landed.wait()
            return found

        store.create_task = slow_create  # type: ignore[method-assign]
        other = await another_worker(harness)
        call = asyncio.create_task(harness.alice.call_tool("wire_transfer", ARGUMENTS))
        await stalled.wait()
        clock.advance(1_000)  # the intent is now older than the grace period
        store.get = read_then_let_the_creation_land  # type: ignore[method-assign]
        await other.reconcile()
        store.get = get  # type: ignore[method-assign]
        created = (await call).result
        assert created["status"] == "working"
        (handle,) = backend.requests
        assert backend.requests[handle].status is ApprovalStatus.PENDING  # nothing was withdrawn
        assert (await harness.alice.get(created["taskId"])).result["status"] == "working"


@pytest.mark.sep_check("sep-2848-reconcile-orphaned-intents")
async def test_a_creation_that_loses_to_reconciliation_fails_and_its_request_is_withdrawn(tmp_path: Path) -> None:
    clock = ManualClock()
    backend = SettableBackend()
    async with inprocess_treasury(tmp_path, GRACE, clock=clock, backend=backend) as harness:
        submitting, release = asyncio.Event(), asyncio.Event()
        submit: Callable[[str, ApprovalSubmission], Awaitable[str]] = backend.submit

        async def slow_submit(key: str, submission: ApprovalSubmission) -> str:
            submitting.set()
            await release.wait()  # the request reaches the backend only after reconciliation looked
            return await submit(key, submission)

        backend.submit = slow_submit  # type: ignore[method-assign]
        other = await another_worker(harness)
        call = asyncio.create_task(harness.alice.call_tool("wire_transfer", ARGUMENTS))
        await submitting.wait()
        clock.advance(1_000)
        await other.reconcile()  # claims the open intent; the backend has nothing yet
        assert backend.requests == {}
        release.set()
        answer = await call
        assert answer.error["code"] == -32603  # the call did not become a task, and nothing runs
        (handle,) = backend.requests
        assert backend.requests[handle].status is ApprovalStatus.CANCELLED  # no orphan left pending
    assert harness.ledger() == []


@pytest.mark.sep_check("sep-2848-reconcile-orphaned-intents")
async def test_a_workers_own_slow_creation_is_never_its_orphan(tmp_path: Path) -> None:
    clock = ManualClock()
    backend = SettableBackend()
    async with inprocess_treasury(tmp_path, GRACE, clock=clock, backend=backend) as harness:
        approval = harness.deployment.approval
        submitting, release = asyncio.Event(), asyncio.Event()
        submit: Callable[[str, ApprovalSubmission], Awaitable[str]] = backend.submit

        async def slow_submit(key: str, submission: ApprovalSubmission) -> str:
            submitting.set()
            await release.wait()
            return await submit(key, submission)

        backend.submit = slow_submit  # type: ignore[method-assign]
        call = asyncio.create_task(harness.alice.call_tool("wire_transfer", ARGUMENTS))
        await submitting.wait()
        clock.advance(10_000)  # far past the grace, with no renewal written meanwhile
        await approval.driver.reconcile()  # this worker's own creation in flight: left alone
        release.set()
        created = (await call).result
        assert created["status"] == "working"
        (handle,) = backend.requests
        assert backend.requests[handle].status is ApprovalStatus.PENDING


@pytest.mark.sep_check("sep-2848-reconcile-orphaned-intents")
async def test_a_live_workers_slow_creation_is_left_alone_by_another_worker(tmp_path: Path) -> None:
    clock = ManualClock()
    backend = SettableBackend()
    async with inprocess_treasury(tmp_path, GRACE, clock=clock, backend=backend) as harness:
        driver = harness.deployment.approval.driver
        submitting, release = asyncio.Event(), asyncio.Event()
        submit: Callable[[str, ApprovalSubmission], Awaitable[str]] = backend.submit

        async def slow_submit(key: str, submission: ApprovalSubmission) -> str:
            submitting.set()
            await release.wait()
            return await submit(key, submission)

        backend.submit = slow_submit  # type: ignore[method-assign]
        other = await another_worker(harness)  # the creating worker's passes are now driven by hand
        call = asyncio.create_task(harness.alice.call_tool("wire_transfer", ARGUMENTS))
        await submitting.wait()
        clock.advance(10_000)  # far past the grace since the intent was recorded
        await driver.tick()  # the creating worker is alive: its pass renews the intent
        await other.reconcile()  # so the other worker finds no orphan
        release.set()
        created = (await call).result
        assert created["status"] == "working"
        (handle,) = backend.requests
        assert backend.requests[handle].status is ApprovalStatus.PENDING
