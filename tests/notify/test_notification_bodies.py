"""Notifications a caller cannot forge, readable on every channel.

A call's argument names and values are the caller's: HTML tags, links, images, Markdown, a newline
followed by a fake "Decision:" line, a bidi override, a very long value. Each format keeps them
text on their own line: the plain text quotes control characters and cuts long values, the HTML
escapes them (rendered in Chromium: the visible facts, the console link as the only link, nothing
fetched), the Markdown backslash-escapes them. Real receivers (SMTP, a Slack webhook, a Teams
workflow, a Standard Webhooks endpoint) get a message each, parsed here.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from email.message import EmailMessage
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from apprise.plugins.slack import NotifySlack
from markdown_it import MarkdownIt
from playwright.async_api import async_playwright

from mcp_approval.backends.contract import EarlierCall
from mcp_approval.notify import (
    AppriseChannel,
    AppriseChannelOptions,
    Notification,
    WebhookChannel,
    WebhookChannelOptions,
)
from mcp_approval.notify.messages import markdown_escape
from tests.support.polling import eventually
from tests.support.receivers import WEBHOOK_SECRET, JsonReceiver, SmtpReceiver, WebhookReceiver
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

ATTACKER = "attacker.example"
HOSTILE_NAME = "memo\nDecision: approve by carol"
HOSTILE_VALUE = (
    f'<a href="https://{ATTACKER}/approve">APPROVE NOW</a><img src="https://{ATTACKER}/pixel.png">'
    f"<b>bold</b> *star* [md link](https://{ATTACKER}/md) ![md image](https://{ATTACKER}/md.png)"
)
LONG_VALUE = "x" * 5000
CONSOLE = "https://approvals.example.com/console/requests/req_hostile0001"
ARGUMENTS = {"to": HOSTILE_VALUE, "amount": 990_000, "note": "\u202eevil", HOSTILE_NAME: LONG_VALUE}


def hostile() -> Notification:
    data = {
        "request_id": "req_hostile0001",
        "tool": "wire_transfer",
        "arguments": ARGUMENTS,
        "arguments_summary": "not used when the arguments are shown",
        "requester": "alice",
        "template": "treasury",
        "deadline": None,
        "approvals": {"given": 1, "required": 2},
        "progress": "1 of 2 approvals",
        "console_url": CONSOLE,
        "decision": "approve",
        "reviewer": "dave",
    }
    return Notification("ntf_hostile", "approval.decided", 0, "req_hostile0001", "treasury", 3, data)


class Markup(HTMLParser):
    """The tags, link targets and image sources of an HTML text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.links: list[str | None] = []
        self.images: list[str | None] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag == "a":
            self.links.append(dict(attrs).get("href"))
        if tag == "img":
            self.images.append(dict(attrs).get("src"))


def fact_lines(notification: Notification) -> list[str]:
    return [f"{label}: {value}" for label, value in notification.facts()]


def assert_only_console_link(html: str) -> None:
    markup = Markup(html)
    assert markup.links == [CONSOLE]
    assert markup.images == []
    assert ATTACKER not in " ".join(str(link) for link in markup.links)


def assert_readable_text(text: str) -> None:
    """One line per fact, the fake decision line quoted onto the arguments line, long values cut."""
    lines = text.splitlines()
    assert [line for line in lines if line.startswith("Decision:")] == ["Decision: approve by dave"]
    (arguments,) = [line for line in lines if line.startswith("Arguments:")]
    assert "memo\\nDecision: approve by carol" in arguments
    assert "\\u202e" in arguments
    assert "\u202e" not in text
    assert LONG_VALUE not in text
    assert len(arguments) <= 1000
    assert "Requested by: alice" in lines
    assert "Progress: 1 of 2 approvals" in lines


def test_the_plain_text_keeps_each_fact_on_its_line() -> None:
    notification = hostile()
    assert_readable_text(notification.text())
    assert notification.text().splitlines()[-1] == f"Review it (sign-in required): {CONSOLE}"


def test_the_html_is_escaped_and_links_only_the_console() -> None:
    html = hostile().html()
    assert_only_console_link(html)
    assert Markup(html).tags <= {"html", "head", "meta", "body", "h2", "div", "b", "br", "a"}
    assert "&lt;a href=" in html


def test_the_markdown_renders_no_link_image_or_emphasis_from_the_caller() -> None:
    rendered = MarkdownIt("commonmark").render(hostile().markdown())
    assert_only_console_link(rendered)
    assert Markup(rendered).tags <= {"p", "strong", "a"}


# -- received messages ------------------------------------------------------------------------


@pytest.fixture
def smtp() -> Iterator[SmtpReceiver]:
    receiver = SmtpReceiver().start()
    yield receiver
    receiver.stop()


async def _emailed(smtp: SmtpReceiver, notification: Notification) -> EmailMessage:
    channel = AppriseChannel(AppriseChannelOptions.model_validate({"urls": [smtp.url()]}))
    await channel.send(notification)
    (message,) = await eventually(lambda: asyncio.sleep(0, list(smtp.messages)), lambda found: len(found) == 1)
    return message


def _part(message: EmailMessage, subtype: str) -> str:
    part = message.get_body(preferencelist=(subtype,))
    assert part is not None
    assert part.get_content_subtype() == subtype
    return str(part.get_content())


async def test_an_email_has_the_same_lines_as_text_and_as_escaped_html(smtp: SmtpReceiver) -> None:
    notification = hostile()
    message = await _emailed(smtp, notification)
    assert message["subject"] == notification.title()
    plain = _part(message, "plain")
    assert_readable_text(plain)
    assert [line for line in plain.splitlines() if line] == [line for line in notification.text().splitlines() if line]
    html = _part(message, "html")
    assert_only_console_link(html)
    for line in fact_lines(notification):  # the same facts in both parts
        assert line in plain


async def test_the_html_email_in_chromium_shows_the_facts_and_only_the_console_link(
    smtp: SmtpReceiver, chromium: Path, tmp_path: Path
) -> None:
    notification = hostile()
    html = _part(await _emailed(smtp, notification), "html")
    fetched: list[str] = []
    artifacts = Path(os.environ.get("MCP_APPROVAL_ARTIFACTS") or tmp_path)
    await asyncio.to_thread(artifacts.mkdir, parents=True, exist_ok=True)
    async with async_playwright() as playwright:
        args = ["--disable-dev-shm-usage", "--disable-gpu"] + (["--no-sandbox"] if os.geteuid() == 0 else [])
        browser = await playwright.chromium.launch(executable_path=str(chromium), args=args)
        try:
            page = await browser.new_page()

            async def record(route: Any) -> None:
                fetched.append(route.request.url)
                await route.abort()

            await page.route("**/*", record)
            await page.set_content(html, wait_until="load")
            visible = await page.inner_text("body")
            links = await page.eval_on_selector_all("a", "anchors => anchors.map(a => [a.href, a.innerText])")
            images = await page.eval_on_selector_all("img", "images => images.length")
            await page.screenshot(path=str(artifacts / "notification-email.png"), full_page=True)
        finally:
            await browser.close()
    lines = visible.splitlines()
    for line in fact_lines(notification):
        assert line in lines, (line, lines)
    assert [line for line in lines if line.startswith("Decision:")] == ["Decision: approve by dave"]
    assert 'APPROVE NOW</a><img src=\\"https://attacker.example/pixel.png\\">' in visible  # shown as text
    assert links == [[CONSOLE, CONSOLE]]
    assert images == 0
    assert fetched == []


async def test_slack_gets_plain_text_with_its_markup_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    receiver = JsonReceiver().start()
    # Slack's webhook host is fixed in Apprise; here it is this receiver.
    monkeypatch.setattr(NotifySlack, "webhook_url", f"http://127.0.0.1:{receiver.port}/services")
    try:
        url = "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ/#approvals"
        await AppriseChannel(AppriseChannelOptions.model_validate({"urls": [url]})).send(hostile())
    finally:
        receiver.stop()
    ((path, payload),) = receiver.posts
    assert path == "/services/T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ"
    texts = [attachment["text"] for attachment in payload["attachments"]]
    text = "\n".join(texts)
    assert payload["mrkdwn"] is False  # plain text: Slack applies no markup
    assert "<" not in text  # Slack's link and mention syntax cannot start
    assert ">" not in text
    assert "&lt;a href=" in text
    assert_readable_text(text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))


@pytest.mark.filterwarnings("ignore:Unverified HTTPS request")  # the receiver's throwaway certificate
async def test_teams_gets_markdown_that_renders_no_caller_link_or_image() -> None:
    receiver = JsonReceiver(tls=True).start()
    try:
        url = f"workflows://127.0.0.1:{receiver.port}/abcdefg/?signature=hijklmnop&verify=no"
        await AppriseChannel(AppriseChannelOptions.model_validate({"urls": [url]})).send(hostile())
    finally:
        receiver.stop()
    ((_path, payload),) = receiver.posts
    blocks = [
        block["text"]
        for attachment in payload["attachments"]
        for block in attachment["content"]["body"]
        if block.get("type") == "TextBlock"
    ]
    (body,) = [block for block in blocks if "Arguments" in block]
    rendered = MarkdownIt("commonmark").render(body)
    assert_only_console_link(rendered)
    assert Markup(rendered).tags <= {"p", "strong", "a"}


async def test_a_webhook_carries_the_arguments_as_json_data() -> None:
    receiver = WebhookReceiver().start()
    channel = WebhookChannel(WebhookChannelOptions(url=receiver.url, secret=WEBHOOK_SECRET), timeout_s=scaled(5))
    try:
        await channel.send(hostile())
    finally:
        await channel.aclose()
        receiver.stop()
    (delivery,) = receiver.accepted()
    assert delivery.verified
    assert delivery.payload["type"] == "approval.decided"
    assert delivery.payload["data"]["arguments"] == ARGUMENTS  # data for programs, exactly as sent
    assert delivery.payload["data"]["console_url"] == CONSOLE


def warned(earlier: dict[str, Any]) -> Notification:
    """:func:`hostile` about a request whose data names an earlier identical call (``possible_duplicate_of``)."""
    notification = hostile()
    return Notification(**{**vars(notification), "data": {**notification.data, "possible_duplicate_of": earlier}})


def test_the_possible_duplicate_warning_is_a_line_of_its_own_in_every_format() -> None:
    """The warning names the earlier request; whatever it says stays text on its one line, escaped per format."""
    earlier = EarlierCall("apr_earlier0001", "task-1", "approved-executed", ran=True, ended_at_ms=1_700_000_000_000)
    said = warned(earlier.for_reviewers())
    warning = "Possible duplicate of apr_earlier0001, executed at 2023-11-14T22:13:20.000Z (approved-executed)."
    assert f"Warning: {warning}" in said.text().splitlines()
    assert f"<div><b>Warning:</b> {warning}</div>" in said.html()
    assert f"**Warning:** {markdown_escape(warning)}" in said.markdown().split("\n\n")

    forged = warned({**earlier.for_reviewers(), "text": f"dup\nDecision: approve by carol {HOSTILE_VALUE}"})
    assert_readable_text(forged.text())
    (line,) = [line for line in forged.text().splitlines() if line.startswith("Warning:")]
    assert line.startswith("Warning: dup\\nDecision: approve by carol <a href=")
    html = forged.html()
    assert_only_console_link(html)
    assert Markup(html).tags <= {"html", "head", "meta", "body", "h2", "div", "b", "br", "a"}
    rendered = MarkdownIt("commonmark").render(forged.markdown())
    assert_only_console_link(rendered)
    assert Markup(rendered).tags <= {"p", "strong", "a"}


def test_a_notification_without_an_earlier_call_has_no_warning_line() -> None:
    assert not [line for line in hostile().text().splitlines() if line.startswith("Warning")]
