"""A Slack click while the store is cut or locked: Slack still gets its answer in time, and the decision is
either recorded once or the user is told it was not.

PostgreSQL: a proxy (``tests/support/store_proxy.py``) cuts every connection at the decision's
``INSERT`` (it never reaches the server) or once its ``COMMIT`` ran (only the answer is lost),
and refuses new connections for a moment. SQLite: another connection holds the write lock for
the whole click.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_approval.demo.slack_standin import SlackStandIn
from mcp_approval.notify.slack_deciding import NOT_RECORDED
from mcp_approval.notify.slack_interactions import INTERACTIONS_PATH
from tests.notify.slack_rig import APPROVE, BOT_TOKEN, SIGNING_SECRET, USERS, latest_message, replies, slack_deployment
from tests.support.store_proxy import StoreFault, StoreProxy
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, principals
from tests.treasury.helpers import approval_for

pytestmark = pytest.mark.anyio

SLACK_ANSWER_S = 3.0
_INSERT_DECISION = r"^\s*INSERT INTO approval_decisions"


async def _decisions(carol: Reviewer, request_id: str) -> list[tuple[str, str]]:
    response = await carol.http.get(f"/approvals/{request_id}", headers=carol.headers)
    assert response.status_code == 200, response.text
    return [(d["reviewer"], d["decision"]) for d in response.json()["decisions"]]


async def _click(stand_in: SlackStandIn, server: TreasuryServer, message: dict[str, Any]) -> float:
    url = server.base_url + INTERACTIONS_PATH.replace("{channel}", "slack")
    sent = await asyncio.to_thread(stand_in.send, url, stand_in.block_actions("U0CAROL", message, APPROVE))
    assert sent.status == 200, sent.answer
    return sent.seconds


@pytest.mark.postgres
@pytest.mark.parametrize("answered", [False, True], ids=["cut-before-the-insert", "commit-answer-lost"])
async def test_a_store_cut_mid_decision_is_answered_in_time_and_told_truly(
    tmp_path: Path, postgres_url: str, answered: bool
) -> None:
    stand_in = SlackStandIn(BOT_TOKEN, SIGNING_SECRET, users=dict(USERS)).start()
    proxy = StoreProxy().start()
    server = TreasuryServer(slack_deployment(tmp_path, stand_in), db_url=proxy.url(postgres_url))
    await asyncio.to_thread(server.start)
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            alice, carol = principals(http)["alice"], Reviewer(http, "carol-token")
            await alice.call_tool("close_quarter", {"quarter": "2026-Q4"})
            pending = await approval_for(carol, "close_quarter")
            message = await latest_message(stand_in, pending["id"])
            fault = StoreFault("cut", _INSERT_DECISION, answered=answered)
            if answered:  # the COMMIT of the transaction that inserted the decision: it runs, its answer is lost
                fault = StoreFault("cut", r"^\s*COMMIT\b", after=_INSERT_DECISION, answered=True)
            proxy.arm(fault)
            seconds = await _click(stand_in, server, message)
            await asyncio.to_thread(fault.fired.wait, scaled(20))
            assert fault.fired.is_set()
            proxy.come_back()  # a brief outage: the decider's second look finds the store again
            (told,) = await replies(stand_in, "U0CAROL")
            recorded = await _decisions(carol, pending["id"])
    finally:
        server.kill()
        proxy.stop()
        stand_in.stop()
    assert seconds < SLACK_ANSWER_S, f"Slack waited {seconds:.2f} s"
    if answered:
        assert recorded == [("carol", "approve")], "the commit ran"
        assert told.startswith("Recorded: your approval (1 of 2 approvals)")
    else:
        assert recorded == []
        assert told == NOT_RECORDED


@pytest.mark.sqlite_store
async def test_a_locked_sqlite_store_is_answered_in_time_and_decides_nothing(tmp_path: Path) -> None:
    stand_in = SlackStandIn(BOT_TOKEN, SIGNING_SECRET, users=dict(USERS)).start()
    store = tmp_path / "locked.db"
    server = TreasuryServer(slack_deployment(tmp_path, stand_in), db_url=f"sqlite:///{store}")
    await asyncio.to_thread(server.start)
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            alice, carol = principals(http)["alice"], Reviewer(http, "carol-token")
            await alice.call_tool("close_quarter", {"quarter": "2027-Q1"})
            pending = await approval_for(carol, "close_quarter")
            message = await latest_message(stand_in, pending["id"])
            holder = sqlite3.connect(store, timeout=scaled(10), isolation_level=None)
            try:
                holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock for the whole click
                seconds = await _click(stand_in, server, message)
                (told,) = await replies(stand_in, "U0CAROL")
            finally:
                holder.execute("ROLLBACK")
                holder.close()
            during = await _decisions(carol, pending["id"])
            again = await _click(stand_in, server, message)  # once the store is free, the same reviewer again
            _, second = await replies(stand_in, "U0CAROL", 2)
            after = await _decisions(carol, pending["id"])
    finally:
        server.kill()
        stand_in.stop()
    assert seconds < SLACK_ANSWER_S, f"Slack waited {seconds:.2f} s"
    assert again < SLACK_ANSWER_S
    assert told == NOT_RECORDED
    assert during == []
    assert second.startswith("Recorded: your approval (1 of 2 approvals)")
    assert after == [("carol", "approve")], "recorded once"
