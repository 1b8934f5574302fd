"""Crash consistency in ARAP mode: SIGKILL ``serve`` at each named point, restart it, beside a live arap-server.

The same two promises as ``test_crash_points.py``, with the Access Request Service remote:

- at most once: the ledger holds at most one entry, a claimed execution that cannot be
  confirmed ends ``outcome-unknown`` and is never re-invoked;
- no orphan: after reconciliation every pending Access Request at the ARS belongs to a live
  task of ``serve`` (an orphan is found again by resubmitting its exact body under its key, then
  withdrawn through ``links.cancel``), and no submission intent is left in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_approval.crashpoints import CRASH_ENV, CRASH_POINTS
from tests.support.arap import ArapDeployment, arap_deployment, ars_store, serve_store
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, call_until_crash, principals, store_rows
from tests.treasury.helpers import DISPOSITION, approval_for, assert_approved_executed, settled

pytestmark = pytest.mark.anyio

#: Runs per point (each starts two processes, so it has its own knob, not ``MCP_APPROVAL_CRASH_RUNS``).
RUNS = int(os.environ.get("MCP_APPROVAL_ARAP_CRASH_RUNS", "1"))
CREATION_POINTS = ("after_intent", "after_submit", "after_handle", "after_task")
ARGUMENTS = {"to": "acct-crash", "amount": 30_000}


def orphans(directory: Path) -> dict[str, int]:
    """ARS requests still pending without a live ``serve`` task, and ``serve`` intents in flight."""
    pending_at_ars = {
        row[0]
        for row in store_rows(
            ars_store(directory),
            "SELECT t.task_id FROM arap_tasks t JOIN approval_requests r ON r.request_id = t.request_id"
            " WHERE r.status = 'pending'",
        )
    }
    live = {
        json.loads(row[0])["id"]
        for row in store_rows(
            serve_store(directory),
            "SELECT handle FROM approval_workflows WHERE phase = 'pending' AND handle IS NOT NULL",
        )
    }
    ((in_flight,),) = store_rows(
        serve_store(directory), "SELECT count(*) FROM approval_intents WHERE state IN ('open', 'submitted')"
    )
    return {"pending_without_task": len(pending_at_ars - live), "intents_in_flight": in_flight}


async def one_run(point: str, pair: ArapDeployment) -> None:
    await asyncio.to_thread(pair.ars.start)
    crashing = TreasuryServer(pair.directory, env={CRASH_ENV: point})
    crashing.port = pair.serve.port  # the ARS's callback allowlist names this origin
    await asyncio.to_thread(crashing.start)
    async with (
        httpx.AsyncClient(base_url=crashing.base_url, timeout=scaled(60)) as http,
        httpx.AsyncClient(base_url=pair.ars.base_url, timeout=scaled(20)) as reviewers,
    ):
        reply = await call_until_crash(crashing, principals(http)["alice"], "wire_transfer", ARGUMENTS)
        created = None if reply is None else reply.result
        if point in CREATION_POINTS:
            assert created is None, f"{point}: the server answered instead of crashing"
        else:
            assert created is not None
            carol = Reviewer(reviewers, "carol-token")
            approval = await approval_for(carol, "wire_transfer", to="acct-crash")
            assert (await carol.decide(approval["id"], "approve")).status_code == 200
    assert await asyncio.to_thread(crashing.wait_exit) == -9, f"{point}: not killed at the crash point"
    restarted = TreasuryServer(pair.directory)
    restarted.port = pair.serve.port
    pair.serve = restarted
    await asyncio.to_thread(restarted.start)
    async with (
        httpx.AsyncClient(base_url=restarted.base_url, timeout=scaled(20)) as http,
        httpx.AsyncClient(base_url=pair.ars.base_url, timeout=scaled(20)) as reviewers,
    ):
        await check_recovery(point, pair, http, Reviewer(reviewers, "carol-token"), created)


async def check_recovery(
    point: str, pair: ArapDeployment, http: httpx.AsyncClient, carol: Reviewer, created: dict[str, Any] | None
) -> None:
    alice = principals(http)["alice"]

    async def reconciled() -> dict[str, int]:
        return orphans(pair.directory)

    await eventually(
        reconciled, lambda found: found == {"pending_without_task": 0, "intents_in_flight": 0}, timeout_s=scaled(30)
    )
    if point in ("after_claim", "after_side_effect"):
        assert created is not None
        task = await settled(alice, created["taskId"])
        assert task["result"]["_meta"][DISPOSITION] == "outcome-unknown"
        assert len(pair.serve.ledger()) == (1 if point == "after_side_effect" else 0)  # never re-invoked
        return
    retried = (await alice.call_tool("wire_transfer", ARGUMENTS)).result
    assert retried["status"] == "working"
    approval = await approval_for(carol, "wire_transfer", to="acct-crash")
    assert (await carol.decide(approval["id"], "approve")).status_code == 200
    assert_approved_executed(await settled(alice, retried["taskId"], timeout_s=scaled(30)))
    assert len(pair.serve.ledger()) == 1
    assert orphans(pair.directory) == {"pending_without_task": 0, "intents_in_flight": 0}


@pytest.mark.parametrize("point", CRASH_POINTS)
@pytest.mark.sep_check(
    "sep-2848-intent-before-backend",
    "sep-2848-handle-before-create-result",
    "sep-2848-reconcile-orphaned-intents",
    "sep-2848-at-most-once",
)
async def test_arap_crash_point_keeps_at_most_once_and_leaves_no_orphan(point: str, tmp_path: Path) -> None:
    for index in range(RUNS):
        pair = arap_deployment(tmp_path, name=f"run-{index}")
        try:
            await one_run(point, pair)
        finally:
            with contextlib.suppress(Exception):
                pair.kill()
