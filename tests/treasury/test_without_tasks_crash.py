"""Crash consistency of approval requests opened for clients without tasks.

``serve`` (``without_tasks = "request"``) is SIGKILLed at each named crash point of a request made
by a client that did not declare tasks, and, separately, after the request was opened and again
after it was approved while no server ran. After a restart on the same database, the identical
retry collects the outcome: the approved call ran exactly once (or, killed mid-execution, ends
``outcome-unknown`` and is never re-invoked), and no backend request or intent is orphaned.

``MCP_APPROVAL_CRASH_RUNS`` sets the runs per point (CI: 20); runs of one point go in parallel.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_approval.checks.wire import Wire, envelope
from mcp_approval.crashpoints import CRASH_ENV, ONE_TRANSACTION_CRASH_POINTS
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, deployment_store, principals
from tests.treasury.helpers import AUTHORIZATION, DISPOSITION, approval_for, text_of
from tests.treasury.test_crash_points import CALL_TIMEOUT_S, CREATION_POINTS, PARALLEL, RUNS, orphans

pytestmark = pytest.mark.anyio

# An intent grace that a loaded machine's submissions fit in (the suite's 0.2 s lets reconciliation
# withdraw a live submission as an orphan when two cores serve several servers at once).
REQUEST_MODE = {"approval": {"without_tasks": "request", "intent_grace_s": scaled(2.0)}}
ARGUMENTS = {"to": "acct-crash-nt", "amount": 30_000}
NO_TASKS = envelope(tasks=False, elicitation=False)
NO_ORPHANS = {"pending_without_task": 0, "intents_in_flight": 0}


async def call(alice: Wire) -> dict[str, Any]:
    return (await alice.call_tool("wire_transfer", ARGUMENTS, meta=NO_TASKS)).result


async def call_until_crash(server: TreasuryServer, alice: Wire) -> dict[str, Any] | None:
    """The answer, or ``None`` when the connection died with the server."""
    try:
        return await call(alice)
    except httpx.TimeoutException:
        server.dump_stacks()
        raise AssertionError(f"the server neither answered nor died; its log:\n{server.log()[-12000:]}") from None
    except httpx.TransportError as exc:
        server.notes.append(f"tools/call: {type(exc).__name__}: {exc}")
        return None


def assert_pending(result: dict[str, Any]) -> None:
    assert result["isError"] is True
    assert result["_meta"][AUTHORIZATION]["remediation"] == "undisclosed"
    assert DISPOSITION not in result["_meta"]
    assert "did not run" in text_of(result)


async def outcome(alice: Wire) -> dict[str, Any]:
    """Retry the identical call until it answers an outcome (before that it only answers pending)."""
    return await eventually(lambda: call(alice), lambda result: DISPOSITION in result.get("_meta", {}))


async def approve(http: httpx.AsyncClient) -> None:
    carol = Reviewer(http, "carol-token")
    approval = await approval_for(carol, "wire_transfer", to=ARGUMENTS["to"])
    try:
        decided = await carol.decide(approval["id"], "approve")
    except httpx.TransportError:  # the execution may kill the server before the answer is sent
        return
    assert decided.status_code == 200


async def crash(point: str, directory: Path) -> None:
    crashing = TreasuryServer(directory, env={CRASH_ENV: point})
    try:
        await asyncio.to_thread(crashing.start)
        async with httpx.AsyncClient(base_url=crashing.base_url, timeout=CALL_TIMEOUT_S) as http:
            answer = await call_until_crash(crashing, principals(http)["alice"])
            if point in CREATION_POINTS:
                assert answer is None, f"{point}: the server answered instead of crashing"
            else:
                assert answer is not None
                assert_pending(answer)
                await approve(http)
        assert await asyncio.to_thread(crashing.wait_exit) == -9, f"{point}: not killed at the crash point"
    finally:
        crashing.kill()


async def recover(point: str, directory: Path) -> None:
    server = TreasuryServer(directory)
    await asyncio.to_thread(server.start)
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            alice = principals(http)["alice"]
            await eventually(lambda: _orphans(directory), lambda found: found == NO_ORPHANS)
            if point in CREATION_POINTS:
                assert_pending(await call(alice))  # the retry opens (or joins) one request
                await approve(http)
                result = await outcome(alice)
                assert result["_meta"][DISPOSITION] == "approved-executed"
                assert len(server.ledger()) == 1
            else:
                result = await outcome(alice)
                assert result["_meta"][DISPOSITION] == "outcome-unknown"
                assert len(server.ledger()) == (1 if point == "after_side_effect" else 0)  # never re-invoked
            assert_pending(await call(alice))  # spent: a further identical call is a new request
            assert len(server.ledger()) <= 1
            assert _sync_orphans(directory) == NO_ORPHANS
    finally:
        server.kill()


async def _orphans(directory: Path) -> dict[str, int]:
    return _sync_orphans(directory)


def _sync_orphans(directory: Path) -> dict[str, int]:
    return orphans(deployment_store(directory))


@pytest.mark.parametrize("point", ONE_TRANSACTION_CRASH_POINTS)
@pytest.mark.sep_check("sep-2848-at-most-once", "sep-2848-outcome-unknown-not-reinvoked")
async def test_a_request_without_tasks_survives_a_crash_at_each_point(point: str, tmp_path: Path) -> None:
    limit = asyncio.Semaphore(PARALLEL)

    async def run(index: int) -> None:
        async with limit:
            directory = deployment_dir(tmp_path, REQUEST_MODE, name=f"run-{index}")
            await crash(point, directory)
            await recover(point, directory)

    await asyncio.gather(*(run(index) for index in range(RUNS)))


def review(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mcp_approval", "review", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=scaled(60), check=False)


async def test_killed_after_opening_and_approved_while_down_the_retry_runs_it_once(tmp_path: Path) -> None:
    async def run(index: int) -> None:
        directory = deployment_dir(tmp_path, REQUEST_MODE, name=f"down-{index}")
        first = TreasuryServer(directory)
        await asyncio.to_thread(first.start)
        try:
            async with httpx.AsyncClient(base_url=first.base_url, timeout=scaled(20)) as http:
                assert_pending(await call(principals(http)["alice"]))
                pending = await approval_for(Reviewer(http, "carol-token"), "wire_transfer", to=ARGUMENTS["to"])
        finally:
            first.kill()  # SIGKILL with the request open
        config = str(directory / "config.toml")
        decided = await asyncio.to_thread(review, "approve", pending["id"], "--config", config, "--as", "carol")
        assert decided.returncode == 0, decided.stderr
        assert first.ledger() == []
        second = TreasuryServer(directory)
        await asyncio.to_thread(second.start)
        try:
            async with httpx.AsyncClient(base_url=second.base_url, timeout=scaled(20)) as http:
                alice = principals(http)["alice"]
                result = await outcome(alice)
                assert result["_meta"][DISPOSITION] == "approved-executed"
                assert len(second.ledger()) == 1
                assert_pending(await call(alice))
                assert len(second.ledger()) == 1
        finally:
            second.kill()

    limit = asyncio.Semaphore(PARALLEL)

    async def limited(index: int) -> None:
        async with limit:
            await run(index)

    await asyncio.gather(*(limited(index) for index in range(RUNS)))
