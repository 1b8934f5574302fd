"""Two ``mcp-approval serve`` workers on one PostgreSQL database (and one ledger file).

Any worker may create, decide, execute, answer ``tasks/get`` for and cancel any task: the
database is the only shared state. Each test runs its own pair of processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import approval_for, assert_approved_executed, settled

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


@asynccontextmanager
async def workers(tmp_path: Path, postgres_url: str) -> AsyncIterator[tuple[TreasuryServer, TreasuryServer]]:
    """Workers A and B on one database and one deployment copy, started together (both migrate at once)."""
    directory = deployment_dir(tmp_path)
    a = TreasuryServer(directory, db_url=postgres_url)
    b = TreasuryServer(directory, db_url=postgres_url)
    a.log_path = directory / "server-a.log"
    b.log_path = directory / "server-b.log"
    try:
        await asyncio.gather(asyncio.to_thread(a.start), asyncio.to_thread(b.start))
        yield a, b
    finally:
        a.kill()
        b.kill()


def transfers_to(server: TreasuryServer, account: str) -> list[dict[str, Any]]:
    return [entry for entry in server.ledger() if entry.get("to") == account]


async def gated_transfer(http: httpx.AsyncClient, account: str, amount: float = 30_000) -> str:
    """alice's transfer above the approval threshold; the id of the working task it created."""
    created = (await principals(http)["alice"].call_tool("wire_transfer", {"to": account, "amount": amount})).result
    assert created["resultType"] == "task", created
    assert created["status"] == "working"
    return str(created["taskId"])


async def approve(http: httpx.AsyncClient, account: str, reviewer: str = "carol-token") -> None:
    carol = Reviewer(http, reviewer)
    approval = await approval_for(carol, "wire_transfer", to=account)
    decided = await carol.decide(approval["id"], "approve")
    assert decided.status_code == 200, decided.text


async def test_a_task_created_on_one_worker_is_decided_executed_and_cancelled_through_the_other(
    tmp_path: Path, postgres_url: str
) -> None:
    async with (
        workers(tmp_path, postgres_url) as (a, b),
        httpx.AsyncClient(base_url=a.base_url, timeout=scaled(20)) as http_a,
        httpx.AsyncClient(base_url=b.base_url, timeout=scaled(20)) as http_b,
    ):
        alice_a, alice_b = principals(http_a)["alice"], principals(http_b)["alice"]

        task_id = await gated_transfer(http_a, "acct-pg-shared")
        assert (await alice_b.get(task_id)).result["status"] == "working"  # B reads A's task from the store
        await approve(http_b, "acct-pg-shared")  # B's reviewer API lists A's request
        on_b = await settled(alice_b, task_id)
        assert_approved_executed(on_b)
        assert (await alice_a.get(task_id)).result == on_b
        executed = {"op": "wire_transfer", "to": "acct-pg-shared", "amount": 30000.0}
        assert transfers_to(a, "acct-pg-shared") == [executed]

        cancelled_id = await gated_transfer(http_a, "acct-pg-cancel")
        carol_b = Reviewer(http_b, "carol-token")
        approval = await approval_for(carol_b, "wire_transfer", to="acct-pg-cancel")
        assert "taskId" not in (await alice_b.cancel(cancelled_id)).result  # an empty acknowledgement
        assert (await alice_b.get(cancelled_id)).result["status"] == "cancelled"
        assert (await alice_a.get(cancelled_id)).result["status"] == "cancelled"
        for reviewer_http in (http_b, http_a):
            late = await Reviewer(reviewer_http, "carol-token").decide(approval["id"], "approve")
            assert late.status_code == 409, late.text

        # A later approval round trip through both workers shows both workflow drivers have run since.
        marker_id = await gated_transfer(http_b, "acct-pg-marker")
        await approve(http_a, "acct-pg-marker")
        assert_approved_executed(await settled(alice_a, marker_id))
        assert_approved_executed(await settled(alice_b, marker_id))
        for alice in (alice_a, alice_b):
            assert (await alice.get(cancelled_id)).result["status"] == "cancelled"
        assert transfers_to(a, "acct-pg-cancel") == []
        assert len(transfers_to(a, "acct-pg-shared")) == 1
        assert len(transfers_to(a, "acct-pg-marker")) == 1


async def test_a_worker_killed_while_pending_leaves_the_task_to_the_other(tmp_path: Path, postgres_url: str) -> None:
    async with workers(tmp_path, postgres_url) as (a, b):
        async with httpx.AsyncClient(base_url=a.base_url, timeout=scaled(20)) as http_a:
            task_id = await gated_transfer(http_a, "acct-pg-restart", 26_000)
        a.kill()  # SIGKILL while the approval is pending on A's task
        async with httpx.AsyncClient(base_url=b.base_url, timeout=scaled(20)) as http_b:
            alice_b = principals(http_b)["alice"]
            assert (await alice_b.get(task_id)).result["status"] == "working"
            await approve(http_b, "acct-pg-restart")
            completed = await settled(alice_b, task_id)
        assert_approved_executed(completed)
        assert len(transfers_to(b, "acct-pg-restart")) == 1

        a.start()
        async with httpx.AsyncClient(base_url=a.base_url, timeout=scaled(20)) as http_a:
            alice_a = principals(http_a)["alice"]
            assert (await alice_a.get(task_id)).result == completed
            # A full approval round trip on the restarted worker: its workflow driver has run by now.
            marker_id = await gated_transfer(http_a, "acct-pg-restart-marker")
            await approve(http_a, "acct-pg-restart-marker")
            assert_approved_executed(await settled(alice_a, marker_id))
            assert (await alice_a.get(task_id)).result == completed
        assert len(transfers_to(a, "acct-pg-restart")) == 1
        assert len(transfers_to(a, "acct-pg-restart-marker")) == 1
