"""``notifications/tasks`` for approval tasks: the decision and the completion reach the listen stream.

On SQLite and on PostgreSQL (the stores approvals run on); the last test has two PostgreSQL workers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.listen import listening
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import approval_for

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def treasury(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    """The treasury server on each store approvals run on (a ``redis://`` store serves tasks only)."""
    db_url = None if request.param == "sqlite" else str(request.getfixturevalue("module_postgres_url"))
    server = TreasuryServer(deployment_dir(tmp_path_factory.mktemp("treasury")), db_url=db_url).start(
        timeout_s=scaled(90)
    )
    try:
        yield server
    finally:
        server.kill()


def ended(statuses: list[str]) -> bool:
    return bool(statuses) and statuses[-1] in ("completed", "failed", "cancelled")


async def _created(http: httpx.AsyncClient, account: str) -> str:
    created = (await principals(http)["alice"].call_tool("wire_transfer", {"to": account, "amount": 30_000})).result
    assert created["resultType"] == "task", created
    return str(created["taskId"])


async def test_an_approved_transfer_is_notified_when_it_completes(http: httpx.AsyncClient, treasury: TreasuryServer):
    task_id = await _created(http, "acct-notify-approve")
    async with listening(treasury.base_url, [task_id], token="alice-token") as stream:
        assert stream.frames[0]["params"]["notifications"]["taskIds"] == [task_id]
        await stream.wait_for(lambda _: stream.statuses(task_id) == ["working"])
        carol = Reviewer(http, "carol-token")
        approval = await approval_for(carol, "wire_transfer", to="acct-notify-approve")
        assert (await carol.decide(approval["id"], "approve")).status_code == 200
        await stream.wait_for(lambda _: ended(stream.statuses(task_id)))
    final = stream.task_frames(task_id)[-1]
    assert final["status"] == "completed"
    assert final["result"]["isError"] is False
    got = (await principals(http)["alice"].get(task_id)).result
    assert got["result"] == final["result"]


async def test_a_rejected_transfer_is_notified_at_the_decision(http: httpx.AsyncClient, treasury: TreasuryServer):
    task_id = await _created(http, "acct-notify-reject")
    async with listening(treasury.base_url, [task_id], token="alice-token") as stream:
        carol = Reviewer(http, "carol-token")
        approval = await approval_for(carol, "wire_transfer", to="acct-notify-reject")
        assert (await carol.decide(approval["id"], "deny", "no invoice")).status_code == 200
        await stream.wait_for(lambda _: ended(stream.statuses(task_id)))
        bob = await asyncio.wait_for(_bob_sees_nothing(treasury, task_id), 20)
    final = stream.task_frames(task_id)[-1]
    got = (await principals(http)["alice"].get(task_id)).result
    assert final["status"] == got["status"]
    assert final.get("result") == got.get("result")
    assert bob == []


async def _bob_sees_nothing(treasury: TreasuryServer, task_id: str) -> list[str]:
    async with listening(treasury.base_url, [task_id], token="bob-token") as stream:
        return list(stream.frames[0]["params"]["notifications"].get("taskIds", []))


@pytest.mark.postgres
async def test_a_decision_on_one_worker_is_notified_by_the_other(tmp_path: Path, postgres_url: str):
    directory = deployment_dir(tmp_path)
    a = TreasuryServer(directory, db_url=postgres_url)
    b = TreasuryServer(directory, db_url=postgres_url)
    a.log_path = directory / "server-a.log"
    b.log_path = directory / "server-b.log"
    try:
        await asyncio.to_thread(a.start, timeout_s=scaled(90))  # one at a time: the first one migrates
        await asyncio.to_thread(b.start, timeout_s=scaled(90))
        async with (
            httpx.AsyncClient(base_url=a.base_url, timeout=scaled(20)) as on_a,
            listening(b.base_url, [task_id := await _created(on_a, "acct-notify-two")], token="alice-token") as stream,
        ):
            carol = Reviewer(on_a, "carol-token")
            approval = await approval_for(carol, "wire_transfer", to="acct-notify-two")
            assert (await carol.decide(approval["id"], "approve")).status_code == 200
            await stream.wait_for(lambda _: ended(stream.statuses(task_id)), timeout_s=scaled(30))
    finally:
        a.kill()
        b.kill()
    assert stream.statuses(task_id)[-1] == "completed"
