"""Scenarios 17 and 18: reviewers told in Slack (and deciding there) and in Microsoft Teams.

Neither service is reachable from the demo, so the demo starts stand-ins the packaged deployment
points at: Slack's Web API (:class:`~mcp_approval.demo.slack_standin.SlackStandIn`, which also
plays carol and dave clicking, with requests signed as Slack signs them) and a Teams workflow
(:class:`~mcp_approval.demo.teams_inbox.WorkflowInbox`).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx2

from mcp_approval.demo.clients import disposition_of
from mcp_approval.demo.context import TOKENS, Demo, ScenarioFailed, ScenarioState, is_task
from mcp_approval.demo.scenarios import LARGE, tasks_client
from mcp_approval.demo.slack_standin import SlackStandIn, SlackUser
from mcp_approval.demo.teams_inbox import card_lines
from mcp_approval.protocol import DISPOSITION_APPROVED_EXECUTED

__all__ = [
    "DEMO_SLACK_SECRET",
    "DEMO_SLACK_TOKEN",
    "SLACK_ADDRESS",
    "SLACK_CHANNEL",
    "decided_in_slack",
    "demo_slack",
    "teams_card",
]

T = TypeVar("T")

#: The address the packaged Slack channel's ``api_url`` names; the runner points it at the stand-in.
SLACK_ADDRESS = "127.0.0.1:8098"
#: The packaged channel's files hold these demo values (like the demo's static tokens).
DEMO_SLACK_TOKEN = "xoxb-demo-0000000000-standin-bot-token"  # noqa: S105 (demo-only, as in slack-bot-token)
DEMO_SLACK_SECRET = "demo-slack-signing-secret-0123456789"  # noqa: S105 (demo-only, as in slack-signing-secret)
#: The packaged Slack channel's name, and the conversation it posts to.
SLACK_CHANNEL = "demo-slack"
_CONVERSATION = "C0APPROVALS"
#: How long a message, a card or a reply may take to arrive.
ARRIVAL_S = 20.0


def demo_slack() -> SlackStandIn:
    """The Slack stand-in with the packaged channel's token and secret, and carol and dave as members."""
    users = {"U0CAROL": SlackUser("U0CAROL", "carol"), "U0DAVE": SlackUser("U0DAVE", "dave")}
    return SlackStandIn(DEMO_SLACK_TOKEN, DEMO_SLACK_SECRET, conversations=(_CONVERSATION,), users=users)


async def decided_in_slack(demo: Demo, state: ScenarioState) -> str:
    """17. A quarter close is posted to Slack; carol, then dave, click Approve there; the message shows
    1 of 2, then the outcome, and loses its buttons."""
    slack = _needed(demo.slack, "the Slack stand-in")
    quarter = f"Q-{demo.run_id}-slack"
    state.watch(op="close_quarter", quarter=quarter)
    tasks = tasks_client()
    async with demo.client("bob", extensions=[tasks]) as bob, demo.reviewers("carol") as (carol,):
        created = await demo.call(bob, "bob", "close_quarter", {"quarter": quarter})
        demo.expect(is_task(created), "a working task")
        record = await carol.find("close_quarter", quarter=quarter)
        message = await _arrival(lambda: _message(slack, record["id"]), "the Slack message")
        demo.narrator.note(f"Slack message posted: {_fact(message, 'Progress')}, buttons {_buttons(message)}")
        for given, (user, name) in enumerate((("U0CAROL", "carol"), ("U0DAVE", "dave")), start=1):
            await _click(demo, slack, user, name, message)
            reply = await _arrival(functools.partial(slack.replies_to, user), f"{name}'s reply")
            demo.narrator.got(f"only {name} sees: {reply[0]}")
            demo.expect(reply[0].startswith("Recorded"), f"{name}'s approval is recorded")
            updated = functools.partial(_message, slack, record["id"], _progress(given))
            message = await _arrival(updated, "the updated message")
            demo.narrator.note(f"message updated: {_fact(message, 'Progress')}")
        result = await demo.wait(tasks, bob, "bob", created.task_id)
        state.disposition = disposition_of(result)
        final = await _arrival(lambda: _message(slack, record["id"], _finished), "the outcome in the message")
    demo.expect(state.disposition == DISPOSITION_APPROVED_EXECUTED, "disposition approved-executed")
    demo.expect(_fact(final, "Outcome") == "approved-executed", "the message ends with the outcome")
    demo.expect(_buttons(final) == ["Open in the console"], "no decision buttons left")
    demo.expect(demo.executions(op="close_quarter", quarter=quarter) == 1, "one ledger entry")
    return "carol and dave approved from Slack (signed clicks); the message went 0 → 1 → 2 of 2 → approved-executed"


async def teams_card(demo: Demo, state: ScenarioState) -> str:
    """18. A large transfer's Adaptive Card reaches the Teams workflow; its button opens the request's
    console page, where carol signs in and approves; the last card says it ran."""
    teams = _needed(demo.teams, "the Teams workflow stand-in")
    account = demo.account(18)
    state.watch(to=account)
    tasks = tasks_client()
    async with demo.client("alice", extensions=[tasks]) as alice, demo.reviewers("carol") as (carol,):
        created = await demo.call(alice, "alice", "wire_transfer", {"to": account, "amount": LARGE})
        demo.expect(is_task(created), "a working task")
        record = await carol.find("wire_transfer", to=account)
        suffix = f"/console/requests/{record['id']}"
        (card,) = (await _arrival(lambda: teams.cards(suffix), "the Teams card"))[:1]
        link = card["actions"][0]["url"]
        demo.narrator.note(f"Teams card: {card_lines(card)[0]!r}, button → {link}")
        page = await _console_page(demo, link)
        demo.expect(page.status_code == 200 and record["id"] in page.text, "the button opens the request's page")
        await demo.decide(carol, record, "approve")
        result = await demo.wait(tasks, alice, "alice", created.task_id)
        state.disposition = disposition_of(result)
        cards = await _arrival(lambda: [c for c in teams.cards(suffix) if _ran(c)], "the last card")
    demo.expect(state.disposition == DISPOSITION_APPROVED_EXECUTED, "disposition approved-executed")
    demo.expect(bool(cards), "the last card says approved-executed")
    demo.expect(demo.executions(to=account) == 1, "one ledger entry")
    return f"{len(teams.cards(suffix))} cards; the button opened the request's page after sign-in"


def _ran(card: dict[str, Any]) -> bool:
    return "Outcome: approved-executed" in card_lines(card)


def _needed(value: T | None, what: str) -> T:
    if value is None:
        raise ScenarioFailed(f"{what} is not running")
    return value


async def _arrival(look: Callable[[], T], what: str) -> T:
    """``look()`` once it finds something (bounded)."""
    deadline = time.monotonic() + ARRIVAL_S
    while True:
        found = look()
        if found:
            return found
        if time.monotonic() > deadline:
            raise ScenarioFailed(f"{what} did not arrive within {ARRIVAL_S:.0f} s")
        await asyncio.sleep(0.05)


async def _click(demo: Demo, slack: SlackStandIn, user: str, name: str, message: dict[str, Any]) -> None:
    url = f"{demo.treasury.base_url}/channels/{SLACK_CHANNEL}/interactions"
    demo.narrator.call(name, f"clicks Approve in Slack (POST {url.split('/', 3)[-1]}, signed v0)")
    payload = slack.block_actions(user, message, "mcp_approval.approve")
    sent = await asyncio.to_thread(slack.send, url, payload)
    demo.narrator.got(f"HTTP {sent.status} in {sent.seconds * 1000:.0f} ms")
    demo.expect(sent.status == 200 and sent.seconds < 3.0, "Slack got its answer within 3 s")


async def _console_page(demo: Demo, link: str) -> httpx2.Response:
    """The page behind a card's button, as carol sees it after signing in to the console."""
    async with httpx2.AsyncClient(base_url=demo.treasury.base_url, timeout=10.0) as browser:
        demo.narrator.call("carol", "signs in to the console, opens the card's link")
        await browser.post("/console/login", data={"token": TOKENS["carol"]})
        return await browser.get(link)


def _message(slack: SlackStandIn, request_id: str, accept: Callable[[dict[str, Any]], bool] = bool) -> dict[str, Any]:
    """The request's Slack message as last written, if it satisfies ``accept`` (else empty)."""
    for message in slack.messages(_CONVERSATION):
        links = [e.get("url", "") for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]
        if any(link.endswith(f"/console/requests/{request_id}") for link in links):
            return message if accept(message) else {}
    return {}


def _fact(message: dict[str, Any], label: str) -> str:
    for block in message["blocks"]:
        for field in block.get("fields", []):
            if field["text"].startswith(f"{label}: "):
                return str(field["text"]).removeprefix(f"{label}: ")
    return ""


def _buttons(message: dict[str, Any]) -> list[str]:
    return [e["text"]["text"] for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]


def _progress(given: int) -> Callable[[dict[str, Any]], bool]:
    return lambda message: _fact(message, "Progress").startswith(f"{given} of 2")


def _finished(message: dict[str, Any]) -> bool:
    return bool(_fact(message, "Outcome"))
