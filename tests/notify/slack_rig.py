"""A treasury deployment with a ``kind = "slack"`` channel pointed at a local Slack stand-in.

The stand-in (:class:`mcp_approval.demo.slack_standin.SlackStandIn`) answers the Web API as Slack
documents it and plays the Slack users who click; the server is a real ``serve`` on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp_approval.demo.slack_standin import SlackStandIn, SlackUser
from mcp_approval.notify.slack_blocks import APPROVE, DENY, OPEN
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import deployment_dir

__all__ = [
    "APPROVE",
    "BOT_TOKEN",
    "CHANNEL",
    "DENY",
    "OPEN",
    "SIGNING_SECRET",
    "USERS",
    "buttons",
    "fields",
    "latest_message",
    "message_of",
    "replies",
    "slack_deployment",
    "standing",
]

BOT_TOKEN = "xoxb-0000000000-standin-bot-token"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CHANNEL = "C0APPROVALS"
#: Who clicks: two mapped reviewers, the requester (mapped to alice), someone unmapped, and two
#: reachable only by e-mail (one confirmed, one not).
USERS = {
    "U0CAROL": SlackUser("U0CAROL", "carol"),
    "U0DAVE": SlackUser("U0DAVE", "dave"),
    "U0ALICE": SlackUser("U0ALICE", "alice"),
    "U0MALLORY": SlackUser("U0MALLORY", "mallory", email="mallory@example.com"),
    "U0FRANK": SlackUser("U0FRANK", "frank", email="Frank@Example.com"),
    "U0GRACE": SlackUser("U0GRACE", "grace", email="grace@example.com", email_confirmed=False),
}
#: A reviewer known only by e-mail (``match_email``), with the approver role.
EMAIL_PRINCIPAL = '\n[[principals]]\ntoken = "frank-token-0000"\nid = "frank@example.com"\nroles = ["approver"]\n'


def slack_deployment(tmp_path: Path, stand_in: SlackStandIn, *, match_email: bool = False, **channel: Any) -> Path:
    """The treasury example notifying the ``slack`` channel of its ``treasury`` and ``close_quarter`` requests."""
    options = {
        "kind": "slack",
        "bot_token_file": "slack-bot-token",
        "signing_secret_file": "slack-signing-secret",
        "channel": CHANNEL,
        "api_url": stand_in.api_url,
        "reviewers": {"U0CAROL": "carol", "U0DAVE": "dave", "U0ALICE": "alice"},
        "match_email": match_email,
        **channel,
    }
    notifications = {"channels": {"slack": options}, "poll_interval_s": 0.05, "retry_initial_s": 0.05}
    notifications |= {"retry_max_s": 0.2, "lease_s": scaled(5.0), "timeout_s": scaled(2.0)}
    templates = {
        "treasury": {"approvals_required": 1, "reviewer_role": "approver", "notify": ["slack"]},
        "close_quarter": {"approvals_required": 2, "reviewer_role": "approver", "notify": ["slack"]},
    }
    directory = deployment_dir(tmp_path, {"notifications": notifications, "templates": templates})
    (directory / "slack-bot-token").write_text(BOT_TOKEN + "\n")
    (directory / "slack-signing-secret").write_text(SIGNING_SECRET + "\n")
    for name in ("slack-bot-token", "slack-signing-secret"):
        (directory / name).chmod(0o600)
    if match_email:
        with (directory / "config.toml").open("a") as config:
            config.write(EMAIL_PRINCIPAL)
    return directory


def message_of(stand_in: SlackStandIn, request_id: str) -> dict[str, Any] | None:
    """The message posted about ``request_id`` (its Open button links the request), as last written."""
    for message in stand_in.messages(CHANNEL):
        if any(e.get("url", "").endswith(f"/console/requests/{request_id}") for e in _elements(message)):
            return message
    return None


async def latest_message(
    stand_in: SlackStandIn, request_id: str, until: Callable[[dict[str, Any]], bool] = lambda _: True
) -> dict[str, Any]:
    """The request's message once it satisfies ``until`` (waits)."""

    async def look() -> dict[str, Any] | None:
        return message_of(stand_in, request_id)

    found = await eventually(look, lambda m: m is not None and until(m), timeout_s=scaled(20))
    assert found is not None
    return found


def fields(message: dict[str, Any]) -> list[str]:
    """The texts of the message's facts."""
    return [f["text"] for b in message["blocks"] if b["type"] == "section" for f in b.get("fields", [])]


def buttons(message: dict[str, Any]) -> list[str]:
    """The ``action_id`` of each button the message still has."""
    return [e["action_id"] for e in _elements(message)]


def standing(message: dict[str, Any]) -> str:
    """The message's line on where the request stands."""
    return " ".join(e["text"] for b in message["blocks"] if b["type"] == "context" for e in b["elements"])


async def replies(stand_in: SlackStandIn, user: str, count: int = 1) -> list[str]:
    """The ephemeral replies ``user`` got, once there are ``count`` (waits)."""
    return await eventually(
        lambda: asyncio.sleep(0, stand_in.replies_to(user)), lambda found: len(found) >= count, timeout_s=scaled(20)
    )


def _elements(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for b in message.get("blocks", []) if b["type"] == "actions" for e in b["elements"]]
