"""The Teams card channel of a real ``serve``: an Adaptive Card POSTed to a local receiver standing in for
the workflow URL, checked against the card schema's documented shape, whose button opens the request's
console page (after sign-in)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from mcp_approval.backends import LocalApprovalBackend
from mcp_approval.config import ConfigError, load_config
from mcp_approval.notify import NotificationOptions, TeamsChannelOptions, notification_outbox
from mcp_approval.storage import AuditLog, open_database
from tests.support.polling import eventually
from tests.support.receivers import JsonReceiver
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import approval_for, settled

pytestmark = pytest.mark.anyio

WORKFLOW_PATH = "/workflows/0f1e2d/triggers/manual/paths/invoke?api-version=1&sig=workflow-signature-secret"

#: The parts of the Adaptive Card schema (adaptivecards.io/schemas/adaptive-card.json, version 1.4)
#: this channel uses: the card, its RichTextBlock elements of TextRuns and its Action.OpenUrl, and the
#: message a Teams workflow takes (its attachment's content type).
TEXT_RUN = {
    "type": "object",
    "required": ["type", "text"],
    "properties": {
        "type": {"const": "TextRun"},
        "text": {"type": "string"},
        "size": {"enum": ["Default", "Small", "Medium", "Large", "ExtraLarge"]},
        "weight": {"enum": ["Default", "Lighter", "Bolder"]},
        "color": {"enum": ["Default", "Dark", "Light", "Accent", "Good", "Warning", "Attention"]},
        "fontType": {"enum": ["Default", "Monospace"]},
    },
    "additionalProperties": False,
}
RICH_TEXT_BLOCK = {
    "type": "object",
    "required": ["type", "inlines"],
    "properties": {"type": {"const": "RichTextBlock"}, "inlines": {"type": "array", "minItems": 1, "items": TEXT_RUN}},
    "additionalProperties": False,
}
OPEN_URL = {
    "type": "object",
    "required": ["type", "url"],
    "properties": {
        "type": {"const": "Action.OpenUrl"},
        "title": {"type": "string"},
        "url": {"type": "string", "format": "uri", "pattern": "^https?://"},
    },
    "additionalProperties": False,
}
CARD = {
    "type": "object",
    "required": ["type", "version", "body"],
    "properties": {
        "$schema": {"const": "http://adaptivecards.io/schemas/adaptive-card.json"},
        "type": {"const": "AdaptiveCard"},
        "version": {"type": "string", "pattern": r"^1\.[0-6]$"},
        "body": {"type": "array", "minItems": 1, "items": RICH_TEXT_BLOCK},
        "actions": {"type": "array", "items": OPEN_URL},
        "msteams": {"type": "object"},
    },
    "additionalProperties": False,
}
WORKFLOW_MESSAGE = {
    "type": "object",
    "required": ["type", "attachments"],
    "properties": {
        "type": {"const": "message"},
        "attachments": {
            "type": "array",
            "minItems": 1,
            "maxItems": 1,
            "items": {
                "type": "object",
                "required": ["contentType", "content"],
                "properties": {
                    "contentType": {"const": "application/vnd.microsoft.card.adaptive"},
                    "contentUrl": {"type": "null"},
                    "content": CARD,
                },
            },
        },
    },
}


def _teams_deployment(tmp_path: Path, receiver: JsonReceiver) -> Path:
    channel = {"kind": "teams", "url": f"http://127.0.0.1:{receiver.port}{WORKFLOW_PATH}"}
    notifications = {"channels": {"teams": channel}, "poll_interval_s": 0.05, "retry_initial_s": 0.05}
    template = {"approvals_required": 1, "reviewer_role": "approver", "notify": ["teams"]}
    return deployment_dir(tmp_path, {"notifications": notifications, "templates": {"treasury": template}})


def _cards(receiver: JsonReceiver) -> list[dict[str, Any]]:
    return [body["attachments"][0]["content"] for _, body in list(receiver.posts)]


def _lines(card: dict[str, Any]) -> list[str]:
    """The card's lines as Teams shows them (each RichTextBlock's runs joined)."""
    return ["".join(run["text"] for run in block["inlines"]) for block in card["body"]]


def _facts(card: dict[str, Any]) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in _lines(card)[1:-1])


async def test_the_card_has_the_request_s_facts_and_a_button_that_opens_its_console_page(tmp_path: Path) -> None:
    receiver = JsonReceiver().start()
    server = await asyncio.to_thread(TreasuryServer(_teams_deployment(tmp_path, receiver)).start)
    hostile = {"to": "acct-t1", "amount": 30_000, "memo": "[APPROVE NOW](https://attacker.example) **urgent**"}
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            alice, carol = principals(http)["alice"], Reviewer(http, "carol-token")
            task = (await alice.call_tool("wire_transfer", hostile)).result["taskId"]
            pending = await approval_for(carol, "wire_transfer", to="acct-t1")
            await eventually(lambda: asyncio.sleep(0, _cards(receiver)), bool)
            (opened,) = _cards(receiver)
            link = opened["actions"][0]["url"]
            unsigned = await http.get(link, follow_redirects=False)
            signed_in = await http.post("/console/login", data={"token": "carol-token"}, follow_redirects=False)
            page = await http.get(link)
            assert (await carol.decide(pending["id"], "approve")).status_code == 200
            await settled(alice, task)
            cards = await eventually(
                lambda: asyncio.sleep(0, _cards(receiver)),
                lambda found: any("approved-executed" in _facts(c).get("Outcome", "") for c in found),
            )
    finally:
        server.kill()
        receiver.stop()
    for path, message in receiver.posts:
        jsonschema.validate(message, WORKFLOW_MESSAGE, format_checker=jsonschema.FormatChecker())
        assert path == WORKFLOW_PATH
    assert opened["version"] == "1.4"
    assert link == f"{server.base_url}/console/requests/{pending['id']}"
    assert opened["actions"][0]["type"] == "Action.OpenUrl"
    facts = _facts(opened)
    assert facts["Progress"] == "0 of 1 approval"
    assert facts["Requested by"] == "alice"
    assert facts["Deadline"] not in ("", "none")
    # The caller's Markdown is shown as typed, in a block Teams never reads as Markdown.
    assert 'memo: "[APPROVE NOW](https://attacker.example) **urgent**"' in facts["Arguments"]
    assert {block["type"] for block in opened["body"]} == {"RichTextBlock"}
    assert unsigned.status_code == 303
    assert unsigned.headers["location"].endswith("/console/login")
    assert signed_in.status_code == 303
    assert page.status_code == 200
    assert pending["id"] in page.text
    assert "wire_transfer" in page.text
    assert _lines(cards[0])[-1] == "Waiting for a decision."
    assert "Decision" in _facts(cards[1])
    assert len(cards) == 4, "requested, decided, approved, executed"
    assert "workflow-signature-secret" not in str(cards)


def test_a_teams_url_that_is_not_http_is_refused_without_repeating_it(tmp_path: Path) -> None:
    channel = {"kind": "teams", "url": "ftp://example.invalid/workflow?sig=secret-sig"}
    directory = deployment_dir(tmp_path, {"notifications": {"channels": {"teams": channel}}})
    with pytest.raises(ConfigError, match=r"notifications\.channels\.teams\.teams\.url") as caught:
        load_config(directory / "config.toml")
    assert "secret-sig" not in str(caught.value)


async def test_a_teams_channel_without_a_console_url_is_refused() -> None:
    """A library server without ``console_url`` (``serve`` defaults it to its base URL): no button to the console."""
    database = open_database("sqlite://")
    try:
        backend = LocalApprovalBackend(database, templates={}, roles=lambda _: frozenset())
        options = NotificationOptions(channels={"teams": TeamsChannelOptions(url="https://example.invalid/w?sig=x")})
        with pytest.raises(ValueError, match=r"notifications\.channels\.teams\.kind: a Teams card links") as caught:
            notification_outbox(options, backend, database, AuditLog(database))
    finally:
        await database.close()
    assert "sig=x" not in str(caught.value)
