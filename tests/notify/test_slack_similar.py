"""Slack's "Approve similar…": a real ``serve`` against the Slack stand-in on 127.0.0.1.

The button opens a dialog (Bolt's ``views_open``); its signed ``view_submission`` approves the
request and writes a similar-call rule through the backend's ``approve_similar``, which then
decides the next equal call. Bad values are shown on the dialog and decide nothing; a forged
submission is refused like a forged click. SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from mcp_approval.demo.slack_standin import SlackStandIn, signed_headers
from mcp_approval.notify.slack_blocks import SIMILAR
from mcp_approval.notify.slack_similar import (
    SIMILAR_CALLBACK,
    SIMILAR_COMMENT,
    SIMILAR_EXPIRES,
    SIMILAR_PRINCIPAL,
    SIMILAR_USES,
)
from tests.notify.slack_rig import APPROVE, DENY, OPEN, buttons, latest_message, replies
from tests.notify.test_slack import _audit_verifies, _click, _decisions, _record, _serving, _url
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer
from tests.treasury.helpers import approval_for, settled

pytestmark = pytest.mark.anyio

WIRE = {"to": "acct-s9", "amount": 30_000}


def entered(minutes: str, uses: str, principal: str = "same", comment: str | None = None) -> dict[str, Any]:
    """What a reviewer typed into the dialog, as Slack reports each input's state."""
    option = {"value": principal, "text": {"type": "plain_text", "text": principal}}
    return {
        SIMILAR_PRINCIPAL: {"selected_option": option},
        SIMILAR_EXPIRES: {"value": minutes},
        SIMILAR_USES: {"value": uses},
        SIMILAR_COMMENT: {"value": comment},
    }


async def _dialog(stand_in: SlackStandIn, server: TreasuryServer, user: str, message: dict[str, Any]) -> str:
    """Click Approve similar… as ``user``; the trigger of the dialog it opened."""
    click, _ = await _click(stand_in, server, user, message, SIMILAR)
    trigger = str(click["trigger_id"])
    await eventually(
        lambda: asyncio.sleep(0, stand_in.called("views.open")),
        lambda calls: any(c.arguments.get("trigger_id") == trigger for c in calls),
        timeout_s=scaled(20),
    )
    return trigger


async def test_approve_similar_in_slack_writes_a_rule_that_decides_the_next_equal_call(
    tmp_path: Path, db_url: str
) -> None:
    async with _serving(tmp_path, db_url=db_url) as (stand_in, server, alice, carol):
        first_task = (await alice.call_tool("wire_transfer", WIRE)).result["taskId"]
        pending = await approval_for(carol, "wire_transfer", to="acct-s9")
        opened = await latest_message(stand_in, pending["id"])
        assert buttons(opened) == [APPROVE, DENY, SIMILAR, OPEN]
        trigger = await _dialog(stand_in, server, "U0CAROL", opened)
        (opening,) = [c for c in stand_in.called("views.open") if c.arguments["trigger_id"] == trigger]
        view = opening.arguments["view"]
        assert view["callback_id"] == SIMILAR_CALLBACK
        assert "arguments are all equal to this one's" in view["blocks"][0]["text"]["text"]
        assert "at most 1440" in json.dumps(view)  # the template's 24 hours, in minutes

        # Out of bounds: shown on the dialog's inputs, nothing recorded.
        bad = stand_in.view_submission("U0CAROL", trigger, None, entered("0", "5000"))
        refused = await asyncio.to_thread(stand_in.send, _url(server), bad)
        assert refused.status == 200
        answer = json.loads(refused.answer)
        assert answer["response_action"] == "errors"
        assert set(answer["errors"]) == {SIMILAR_EXPIRES, SIMILAR_USES}
        assert (await _record(carol, pending["id"]))["status"] == "pending"

        good = stand_in.view_submission("U0CAROL", trigger, None, entered("30", "2", comment="payroll run"))
        sent = await asyncio.to_thread(stand_in.send, _url(server), good)
        assert (sent.status, sent.answer) == (200, "")
        told = (await replies(stand_in, "U0CAROL"))[0]
        assert told.startswith("Recorded: approved.")
        assert "approves up to 2 similar calls" in told
        assert (await settled(alice, first_task))["status"] == "completed"
        record = await _record(carol, pending["id"])
        rules = (await carol.http.get("/similar-rules", headers=carol.headers)).json()["rules"]

        # The next equal call is decided by the rule, and runs.
        second_task = (await alice.call_tool("wire_transfer", WIRE)).result["taskId"]
        assert (await settled(alice, second_task))["status"] == "completed"
        after = (await carol.http.get(f"/similar-rules/{rules[0]['id']}", headers=carol.headers)).json()
    assert _decisions(record) == [("carol", "approve", "payroll run")]
    assert [(r["author"], r["principal"], r["max_uses"], r["source_request"]) for r in rules] == [
        ("carol", "alice", 2, pending["id"])
    ]
    assert after["uses"] == 1
    assert len(server.ledger()) == 2
    _audit_verifies(server, db_url)


async def test_a_template_needing_two_approvals_offers_no_approve_similar(tmp_path: Path) -> None:
    async with _serving(tmp_path) as (stand_in, _server, alice, carol):
        await alice.call_tool("close_quarter", {"quarter": "2026-Q4"})
        pending = await approval_for(carol, "close_quarter")
        opened = await latest_message(stand_in, pending["id"])
    assert buttons(opened) == [APPROVE, DENY, OPEN]


async def test_the_requester_gets_no_dialog_and_a_forged_submission_decides_nothing(tmp_path: Path) -> None:
    async with _serving(tmp_path) as (stand_in, server, alice, carol):
        await alice.call_tool("wire_transfer", WIRE)
        pending = await approval_for(carol, "wire_transfer", to="acct-s9")
        opened = await latest_message(stand_in, pending["id"])
        await _click(stand_in, server, "U0ALICE", opened, SIMILAR)  # alice made the request
        assert "You may not decide this request" in (await replies(stand_in, "U0ALICE"))[0]
        assert stand_in.called("views.open") == []
        trigger = await _dialog(stand_in, server, "U0CAROL", opened)
        submission = stand_in.view_submission("U0CAROL", trigger, None, entered("30", "2"))
        body = f"payload={json.dumps(submission)}".encode()
        forged = await asyncio.to_thread(
            stand_in.post, _url(server), body, signed_headers("not-the-signing-secret", body)
        )
        still = await _record(carol, pending["id"])
        rules = (await carol.http.get("/similar-rules", headers=carol.headers)).json()["rules"]
    assert forged.status == 401
    assert (still["status"], still["decisions"]) == ("pending", [])
    assert rules == []
