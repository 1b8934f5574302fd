"""A URL-linked approval task across two ``serve`` workers sharing one PostgreSQL database.

Worker A creates the task; worker B serves ``tasks/get`` and ``tasks/update`` for it (the link
answer is a row change, so any worker takes it); a reviewer on B approves; A or B executes it once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from tests.product_page.conftest import APPROVAL_URL, approval_link
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import approval_for, assert_approved_executed, settled

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.slow]


@asynccontextmanager
async def linked_workers(tmp_path: Path, postgres_url: str) -> AsyncIterator[tuple[TreasuryServer, TreasuryServer]]:
    directory = deployment_dir(tmp_path, {"tasks": {"approval_url": APPROVAL_URL}})
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


async def test_any_worker_serves_the_link_and_only_the_store_decides(tmp_path: Path, postgres_url: str) -> None:
    async with (
        linked_workers(tmp_path, postgres_url) as (a, b),
        httpx.AsyncClient(base_url=a.base_url, timeout=scaled(20)) as http_a,
        httpx.AsyncClient(base_url=b.base_url, timeout=scaled(20)) as http_b,
    ):
        alice_a, alice_b = principals(http_a)["alice"], principals(http_b)["alice"]
        created = (await alice_a.call_tool("wire_transfer", {"to": "acct-pg-link", "amount": 30_000})).result
        assert created["status"] == "input_required"
        on_b = (await alice_b.get(created["taskId"])).result
        ((key, request),) = on_b["inputRequests"].items()
        carol_b = Reviewer(http_b, "carol-token")
        approval = await approval_for(carol_b, "wire_transfer", to="acct-pg-link")
        assert request["params"]["url"] == approval_link(approval["id"])
        assert (await alice_b.update(created["taskId"], {key: {"action": "accept"}})).status == 200
        assert (await alice_a.get(created["taskId"])).result["status"] == "working"
        assert await carol_b.pending()
        assert approval["id"] in {item["id"] for item in await carol_b.pending()}
        assert (await carol_b.decide(approval["id"], "approve")).status_code == 200
        done = await settled(alice_a, created["taskId"])
        assert_approved_executed(done)
        assert (await alice_b.get(created["taskId"])).result == done
    assert len([entry for entry in a.ledger() if entry.get("to") == "acct-pg-link"]) == 1
