"""A reminder on a Slack channel: the request's message is rewritten (its buttons kept) and a reply in
its thread, broadcast to the channel, pings the people a rewritten message would not."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcp_approval.demo.slack_standin import SlackStandIn
from mcp_approval.notify import Notification, SlackChannelOptions
from mcp_approval.notify.chat_messages import NOTIFY_MIGRATIONS, ChatMessages
from mcp_approval.notify.slack import SlackChannel, slack_client
from mcp_approval.notify.slack_blocks import APPROVE
from mcp_approval.storage import migrate, open_database
from tests.notify.slack_rig import BOT_TOKEN, CHANNEL, SIGNING_SECRET

pytestmark = pytest.mark.anyio

DATA = {
    "request_id": "apr_reminded0001",
    "tool": "wire_transfer",
    "arguments": {"to": "acct-1", "amount": 30000},
    "arguments_summary": "",
    "requester": "alice",
    "template": "treasury",
    "deadline": None,
    "approvals": {"given": 0, "required": 1},
    "progress": "0 of 1 approval",
    "console_url": "https://approvals.example.com/console/requests/apr_reminded0001",
}


def notification(kind: str, seq: int, **extra: object) -> Notification:
    return Notification(f"ntf_{seq}", kind, seq, "apr_reminded0001", "treasury", seq, DATA | extra)


@pytest.fixture
async def channel(tmp_path: Path) -> AsyncIterator[tuple[SlackChannel, SlackStandIn]]:
    stand_in = SlackStandIn(BOT_TOKEN, SIGNING_SECRET).start()
    (tmp_path / "token").write_text(BOT_TOKEN)
    (tmp_path / "secret").write_text(SIGNING_SECRET)
    options = SlackChannelOptions(
        bot_token_file=tmp_path / "token",
        signing_secret_file=tmp_path / "secret",
        channel=CHANNEL,
        api_url=stand_in.api_url,
    )
    database = open_database(f"sqlite:///{tmp_path / 'store.db'}")
    await migrate(database, NOTIFY_MIGRATIONS)
    try:
        yield SlackChannel(options, slack_client(options, timeout_s=5), ChatMessages(database, "slack")), stand_in
    finally:
        await database.close()
        stand_in.stop()


async def test_a_reminder_rewrites_the_message_and_replies_in_its_thread(
    channel: tuple[SlackChannel, SlackStandIn],
) -> None:
    slack, stand_in = channel
    await slack.send(notification("approval.requested", 1))
    (posted,) = stand_in.called("chat.postMessage")
    await slack.send(notification("approval.reminder", 2, step="remind", told="approver", channels=["slack"]))

    (update,) = stand_in.called("chat.update")
    assert update.arguments["ts"] == posted.answer["ts"]
    assert "(a reminder)" in str(update.arguments["blocks"])
    assert APPROVE in str(update.arguments["blocks"]), "the buttons stay: the request still takes decisions"
    first, reply = stand_in.called("chat.postMessage")
    assert first == posted
    assert reply.arguments["thread_ts"] == posted.answer["ts"]
    assert reply.arguments["reply_broadcast"] in (True, "true", "1", 1)
    assert "Reminder: still waiting for a decision" in reply.arguments["text"]
    assert "Reminder to: approver" in reply.arguments["text"]


async def test_an_ordinary_event_only_rewrites_the_message(channel: tuple[SlackChannel, SlackStandIn]) -> None:
    slack, stand_in = channel
    await slack.send(notification("approval.requested", 1))
    await slack.send(notification("approval.decided", 2, decision="approve", reviewer="carol"))
    assert len(stand_in.called("chat.postMessage")) == 1
    assert len(stand_in.called("chat.update")) == 1
