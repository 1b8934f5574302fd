"""A creation slower than ``intent_grace_s`` is not failed by its own server.

``serve`` stops itself (SIGSTOP) at a point of the creation, as a starved host would stall it, and
stays stopped past the grace; then it resumes. Its own reconciler must not take the in-flight
intent for a crash leftover: the call becomes one task, approving it runs the tool once, and no
request or intent is left behind.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time
from pathlib import Path

import asyncpg
import httpx
import pytest

from mcp_approval.crashpoints import PAUSE_ENV
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import FAST, Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import approval_for, assert_approved_executed, settled

pytestmark = pytest.mark.anyio

ARGUMENTS = {"to": "acct-slow", "amount": 30_000}
#: How long the creation stays stopped: well past the grace, so every reconciliation pass due meanwhile is late.
PAUSE_S = 3 * FAST["approval"]["intent_grace_s"]
LEFTOVERS = (
    "SELECT"
    " (SELECT count(*) FROM approval_requests r WHERE r.status = 'pending' AND NOT EXISTS ("
    "   SELECT 1 FROM approval_workflows w WHERE w.handle = r.request_id AND w.phase = 'pending')),"
    " (SELECT count(*) FROM approval_intents WHERE state IN ('open', 'submitted', 'withdrawing'))"
)


async def leftovers(db_url: str) -> tuple[int, int]:
    """(pending backend requests without a live task, intents not settled)."""
    if db_url.startswith("sqlite"):
        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as conn:
            found = conn.execute(LEFTOVERS).fetchone()
        return (found[0], found[1])
    conn = await asyncpg.connect(db_url.replace("postgresql://", "postgres://"), timeout=scaled(5))
    try:
        row = await conn.fetchrow(LEFTOVERS)
    finally:
        await conn.close()
    assert row is not None
    return (row[0], row[1])


def stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal (``T`` in ``/proc/<pid>/stat``)."""
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state == "T"


async def hold_stopped(server: TreasuryServer) -> None:
    """Wait until ``server`` stopped itself, keep it stopped for :data:`PAUSE_S`, then resume it."""
    assert server.process is not None
    pid = server.process.pid
    await eventually(lambda: asyncio.to_thread(stopped, pid), bool, timeout_s=scaled(60))
    resume_at = time.monotonic() + PAUSE_S
    await eventually(
        lambda: asyncio.to_thread(time.monotonic), lambda now: now >= resume_at, timeout_s=PAUSE_S + scaled(5)
    )
    server.process.send_signal(signal.SIGCONT)


# The example's creation is one transaction (its backend shares the database): stalled inside it,
# holding the store's write lock on SQLite, or after its commit, before the answer.
@pytest.mark.parametrize("point", ["in_creation_transaction", "after_task"])
@pytest.mark.sep_check("sep-2848-reconcile-orphaned-intents", "sep-2848-at-most-once")
async def test_a_creation_stalled_past_the_grace_still_succeeds_exactly_once(
    point: str, tmp_path: Path, db_url: str
) -> None:
    directory = deployment_dir(tmp_path)
    store_url = db_url if db_url.startswith("postgres") else f"sqlite:///{directory / 'treasury.db'}"
    server = TreasuryServer(directory, db_url=store_url, env={PAUSE_ENV: point})
    await asyncio.to_thread(server.start)
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(60)) as http:
            alice = principals(http)["alice"]
            call = asyncio.create_task(alice.call_tool("wire_transfer", ARGUMENTS))
            await hold_stopped(server)
            reply = await call
            assert "result" in reply.body, f"the stalled creation failed: {reply.body}\n{server.log()[-6000:]}"
            created = reply.result
            assert created["status"] == "working"
            carol = Reviewer(http, "carol-token")
            approval = await approval_for(carol, "wire_transfer", to="acct-slow")
            assert (await carol.decide(approval["id"], "approve")).status_code == 200
            assert_approved_executed(await settled(alice, created["taskId"]))
            assert len(server.ledger()) == 1
            assert await leftovers(store_url) == (0, 0)
    finally:
        server.kill()
