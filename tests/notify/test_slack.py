"""The interactive Slack channel of a real ``serve``, against a stand-in of Slack's Web API on 127.0.0.1.

Reviewers approve and deny from the message (Bolt routes the signed clicks, the decision goes
through the backend's ``decide``); the message shows the N-of-M progress, then the outcome;
unsigned, wrongly signed, stale and replayed interactions are refused; an unmapped user and the
requester are told, alone, that nothing was recorded. SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_approval.checks.wire import Wire
from mcp_approval.config import ConfigError, load_config
from mcp_approval.demo.slack_standin import SlackStandIn, signed_headers
from mcp_approval.notify.slack_interactions import INTERACTIONS_PATH
from mcp_approval.server.deployment import build_deployment
from tests.notify.slack_rig import (
    APPROVE,
    BOT_TOKEN,
    CHANNEL,
    DENY,
    OPEN,
    SIGNING_SECRET,
    USERS,
    buttons,
    fields,
    latest_message,
    replies,
    slack_deployment,
    standing,
)
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, principals
from tests.treasury.helpers import approval_for, settled

pytestmark = pytest.mark.anyio

#: Slack's limit for the answer to an interaction request.
SLACK_ANSWER_S = 3.0


@asynccontextmanager
async def _serving(
    tmp_path: Path, db_url: str | None = None, *, match_email: bool = False
) -> AsyncIterator[tuple[SlackStandIn, TreasuryServer, Wire, Reviewer]]:
    """The Slack stand-in and a serve whose slack channel calls it; alice to call, carol on the reviewer API."""
    stand_in = SlackStandIn(BOT_TOKEN, SIGNING_SECRET, users=dict(USERS)).start()
    server = TreasuryServer(slack_deployment(tmp_path, stand_in, match_email=match_email), db_url=db_url)
    try:
        await asyncio.to_thread(server.start)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            yield stand_in, server, principals(http)["alice"], Reviewer(http, "carol-token")
    finally:
        server.kill()
        stand_in.stop()


def _url(server: TreasuryServer, channel: str = "slack") -> str:
    return server.base_url + INTERACTIONS_PATH.replace("{channel}", channel)


async def _click(stand_in: SlackStandIn, server: TreasuryServer, user: str, message: dict[str, Any], action: str):
    payload = stand_in.block_actions(user, message, action)
    sent = await asyncio.to_thread(stand_in.send, _url(server), payload)
    assert sent.status == 200, sent.answer
    assert sent.seconds < SLACK_ANSWER_S, f"Slack waited {sent.seconds:.2f} s"
    return payload, sent


async def _record(reviewer: Reviewer, request_id: str) -> dict[str, Any]:
    response = await reviewer.http.get(f"/approvals/{request_id}", headers=reviewer.headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _decisions(record: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(d["reviewer"], d["decision"], d["comment"]) for d in record["decisions"]]


def _audit_verifies(server: TreasuryServer, db_url: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcp_approval",
            "audit",
            "verify",
            "--config",
            str(server.directory / "config.toml"),
            "--db",
            db_url,
        ],
        capture_output=True,
        text=True,
        timeout=scaled(120),
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


async def test_two_reviewers_approve_in_slack_and_the_message_follows_to_the_outcome(
    tmp_path: Path, db_url: str
) -> None:
    async with _serving(tmp_path, db_url=db_url) as (stand_in, server, alice, carol):
        task = (await alice.call_tool("close_quarter", {"quarter": "2026-Q2"})).result["taskId"]
        pending = await approval_for(carol, "close_quarter")
        opened = await latest_message(stand_in, pending["id"])
        assert "Progress: 0 of 2 approvals" in fields(opened)
        assert any(text.startswith("Deadline: ") for text in fields(opened))
        assert buttons(opened) == [APPROVE, DENY, OPEN]

        await _click(stand_in, server, "U0CAROL", opened, APPROVE)
        assert (await replies(stand_in, "U0CAROL"))[0].startswith("Recorded: your approval (1 of 2 approvals)")
        halfway = await latest_message(stand_in, pending["id"], lambda m: "Progress: 1 of 2 approvals" in fields(m))
        assert "Decision: approve by carol" in fields(halfway)
        assert buttons(halfway) == [APPROVE, DENY, OPEN]

        await _click(stand_in, server, "U0DAVE", halfway, APPROVE)
        assert (await replies(stand_in, "U0DAVE"))[0].startswith("Recorded: approved.")
        assert (await settled(alice, task))["status"] == "completed"
        done = await latest_message(stand_in, pending["id"], lambda m: "Outcome: approved-executed" in fields(m))
        record = await _record(carol, pending["id"])
    assert buttons(done) == [OPEN], "no decision buttons once the request ended"
    assert "Finished" in standing(done)
    assert "Progress: 2 of 2 approvals" in fields(done)
    assert sorted(_decisions(record)) == [("carol", "approve", None), ("dave", "approve", None)]
    assert len(server.ledger()) == 1
    posted = stand_in.called("chat.postMessage")
    assert len(posted) == 1, "one message per request, rewritten after"
    assert posted[0].arguments["channel"] == CHANNEL
    assert posted[0].arguments["mrkdwn"] is False
    assert all(call.answer["ok"] for call in stand_in.calls), [c for c in stand_in.calls if not c.answer["ok"]]
    assert all(c.arguments["response_type"] == "ephemeral" for c in stand_in.called("response_url"))
    _audit_verifies(server, db_url)


async def test_a_denial_asks_for_a_comment_and_hostile_arguments_stay_plain_text(tmp_path: Path, db_url: str) -> None:
    hostile = {"to": "acct-s2", "amount": 30_000, "memo <!channel> *now*": "<https://attacker.example|Approve>"}
    async with _serving(tmp_path, db_url=db_url) as (stand_in, server, alice, carol):
        task = (await alice.call_tool("wire_transfer", hostile)).result["taskId"]
        pending = await approval_for(carol, "wire_transfer", to="acct-s2")
        opened = await latest_message(stand_in, pending["id"])
        click, _ = await _click(stand_in, server, "U0CAROL", opened, DENY)
        await _eventually_called(stand_in, "views.open")
        dialog = stand_in.called("views.open")[0].arguments
        assert dialog["trigger_id"] == click["trigger_id"]
        submitted = stand_in.view_submission("U0CAROL", click["trigger_id"], "not this quarter")
        sent = await asyncio.to_thread(stand_in.send, _url(server), submitted)
        assert (sent.status, sent.answer) == (200, "")
        assert sent.seconds < SLACK_ANSWER_S
        await _eventually_called(stand_in, "chat.postEphemeral")
        assert (await settled(alice, task))["status"] == "completed"
        done = await latest_message(stand_in, pending["id"], lambda m: "denied-not-executed" in " ".join(fields(m)))
        record = await _record(carol, pending["id"])
    told = stand_in.called("chat.postEphemeral")[0].arguments
    assert (told["user"], told["channel"]) == ("U0CAROL", CHANNEL)
    assert told["text"].startswith("Recorded: denied.")
    assert _decisions(record) == [("carol", "deny", "not this quarter")]
    assert buttons(done) == [OPEN]
    assert "Denied" in standing(done) or "Finished" in standing(done)
    assert server.ledger() == []
    # The caller's text is plain text: no mention, link or formatting reaches Slack's parser.
    (arguments,) = [
        f for b in opened["blocks"] if b["type"] == "section" for f in b["fields"] if "Arguments" in f["text"]
    ]
    assert arguments["type"] == "plain_text"
    assert arguments["emoji"] is False
    assert "memo <!channel> *now*" in arguments["text"]
    assert all(e["type"] == "plain_text" for b in opened["blocks"] if b["type"] == "section" for e in b["fields"])
    assert "<!channel>" not in opened["text"]


async def test_forged_stale_and_replayed_interactions_are_refused_and_decide_nothing(
    tmp_path: Path, db_url: str
) -> None:
    async with _serving(tmp_path, db_url=db_url) as (stand_in, server, alice, carol):
        await alice.call_tool("close_quarter", {"quarter": "2026-Q3"})
        pending = await approval_for(carol, "close_quarter")
        opened = await latest_message(stand_in, pending["id"])
        payload = stand_in.block_actions("U0CAROL", opened, APPROVE)
        body = f"payload={json.dumps(payload)}".encode()
        unsigned = {"content-type": "application/x-www-form-urlencoded"}
        wrong = signed_headers("not-the-signing-secret", body)
        stale = signed_headers(SIGNING_SECRET, body, int(time.time()) - 6 * 60)
        future = signed_headers(SIGNING_SECRET, body, int(time.time()) + 6 * 60)
        tampered = signed_headers(SIGNING_SECRET, body) | {"x-slack-request-timestamp": str(int(time.time()) - 1)}
        refused = [
            await asyncio.to_thread(stand_in.post, _url(server), body, headers)
            for headers in (unsigned, wrong, stale, future, tampered)
        ]
        still = await _record(carol, pending["id"])
        # A real click, then the same request again (a replay within Slack's five minutes).
        first = await asyncio.to_thread(stand_in.send, _url(server), payload)
        await replies(stand_in, "U0CAROL")
        replayed = await asyncio.to_thread(stand_in.post, _url(server), first.body, first.headers)
        other_worker_name = await asyncio.to_thread(stand_in.post, _url(server, "no-such"), first.body, first.headers)
        await asyncio.sleep(0.5)  # a replay accepted would have been told to carol by now
        after = await _record(carol, pending["id"])
    assert [r.status for r in refused] == [401] * 5
    assert (still["status"], still["decisions"]) == ("pending", [])
    assert first.status == 200
    assert replayed.status == 401
    assert "replayed" in replayed.answer
    assert other_worker_name.status == 404
    assert _decisions(after) == [("carol", "approve", None)]
    assert len(stand_in.replies_to("U0CAROL")) == 1, "the replay was not even answered"


async def test_an_unmapped_user_the_requester_and_a_click_naming_another_request_decide_nothing(
    tmp_path: Path, db_url: str
) -> None:
    async with _serving(tmp_path, db_url=db_url) as (stand_in, server, alice, carol):
        await alice.call_tool("wire_transfer", {"to": "acct-s4", "amount": 30_000})
        await alice.call_tool("wire_transfer", {"to": "acct-s4-other", "amount": 30_000})
        pending = await approval_for(carol, "wire_transfer", to="acct-s4")
        other = await approval_for(carol, "wire_transfer", to="acct-s4-other")
        opened = await latest_message(stand_in, pending["id"])
        await latest_message(stand_in, other["id"])
        # A validly signed click whose button names another request than its message's.
        swapped = stand_in.block_actions("U0CAROL", opened, APPROVE)
        swapped["actions"][0]["value"] = other["id"]
        assert (await asyncio.to_thread(stand_in.send, _url(server), swapped)).status == 200
        (carol_told,) = await replies(stand_in, "U0CAROL")
        await _click(stand_in, server, "U0MALLORY", opened, APPROVE)
        await _click(stand_in, server, "U0ALICE", opened, APPROVE)
        await _click(stand_in, server, "U0ALICE", opened, DENY)
        (mallory,) = await replies(stand_in, "U0MALLORY")
        approved, denied = await replies(stand_in, "U0ALICE", 2)
        record = await _record(carol, pending["id"])
        untouched = await _record(carol, other["id"])
    assert carol_told == "Nothing was recorded: this message is not the one this request was posted as."
    assert (untouched["status"], untouched["decisions"]) == ("pending", [])
    assert mallory == "Nothing was recorded: your Slack account is not mapped to a reviewer of these requests."
    assert approved.startswith("Nothing was recorded: you may not decide this request (alice made this request")
    assert denied.startswith("You may not decide this request (alice made this request")
    assert stand_in.called("views.open") == [], "no deny dialog for someone who may not decide"
    assert (record["status"], record["decisions"]) == ("pending", [])
    told = stand_in.called("response_url")
    assert {c.arguments["response_type"] for c in told} == {"ephemeral"}
    assert {c.arguments["replace_original"] for c in told} == {False}
    assert stand_in.called("users.info") == [], "without match_email nobody is looked up"


async def test_a_confirmed_email_maps_a_user_when_match_email_is_on(tmp_path: Path) -> None:
    async with _serving(tmp_path, match_email=True) as (stand_in, server, alice, carol):
        task = (await alice.call_tool("wire_transfer", {"to": "acct-s5", "amount": 30_000})).result["taskId"]
        pending = await approval_for(carol, "wire_transfer", to="acct-s5")
        opened = await latest_message(stand_in, pending["id"])
        await _click(stand_in, server, "U0GRACE", opened, APPROVE)  # e-mail not confirmed
        await _click(stand_in, server, "U0MALLORY", opened, APPROVE)  # no principal with her address
        (grace,) = await replies(stand_in, "U0GRACE")
        (mallory,) = await replies(stand_in, "U0MALLORY")
        await _click(stand_in, server, "U0FRANK", opened, APPROVE)
        (frank,) = await replies(stand_in, "U0FRANK")
        assert (await settled(alice, task))["status"] == "completed"
        record = await _record(carol, pending["id"])
    assert grace.startswith("Nothing was recorded: your Slack account is not mapped")
    assert mallory.startswith("Nothing was recorded: you may not decide this request (mallory@example.com lacks")
    assert frank.startswith("Recorded: approved.")
    assert _decisions(record) == [("frank@example.com", "approve", None)]
    assert {c.arguments["user"] for c in stand_in.called("users.info")} == {"U0GRACE", "U0MALLORY", "U0FRANK"}


async def _eventually_called(stand_in: SlackStandIn, method: str) -> None:
    await eventually(lambda: asyncio.sleep(0, stand_in.called(method)), bool, timeout_s=scaled(20))


def _built(directory: Path) -> None:
    build_deployment(load_config(directory / "config.toml"), base_url="http://127.0.0.1:1")


def test_a_missing_token_file_or_an_empty_signing_secret_is_refused_at_startup(tmp_path: Path) -> None:
    stand_in = SlackStandIn(BOT_TOKEN, SIGNING_SECRET)  # never started: nothing is called
    directory = slack_deployment(tmp_path, stand_in)
    (directory / "slack-bot-token").unlink()
    with pytest.raises(
        ConfigError, match=r"notifications\.channels\.slack\.bot_token_file: cannot read .*slack-bot-token"
    ):
        _built(directory)
    (directory / "slack-bot-token").write_text(BOT_TOKEN)
    (directory / "slack-signing-secret").write_text("  \n")
    with pytest.raises(ConfigError, match=r"notifications\.channels\.slack\.signing_secret_file: .* is empty"):
        _built(directory)


def test_a_slack_channel_s_options_are_checked(tmp_path: Path) -> None:
    stand_in = SlackStandIn(BOT_TOKEN, SIGNING_SECRET)
    directory = slack_deployment(tmp_path, stand_in, api_url="slack.com/api", reviewers={"U0X": ""})
    with pytest.raises(ConfigError) as caught:
        load_config(directory / "config.toml")
    assert "notifications.channels.slack.slack.api_url" in str(caught.value)
    assert "notifications.channels.slack.slack.reviewers" in str(caught.value)
