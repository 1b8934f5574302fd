"""``kind = "teams"``: each event as an Adaptive Card posted to a Microsoft Teams workflow.

A Teams workflow ("When a Teams webhook request is received", then "Post card in a chat or
channel") takes a message activity whose one attachment is the card (:func:`workflow_message`),
as Apprise's Teams workflow channel sends it. The card (:func:`request_card`, schema version
1.4, which Teams renders) has a heading, one line per fact every channel shows, where the
request stands, and one action, ``Action.OpenUrl``, to the request's page in the console: the
reviewer signs in there and decides by the console's rules. Nothing on the card decides.

Teams reads Markdown in a ``TextBlock`` and in a ``FactSet``'s facts, but not in a
``RichTextBlock``: every line is a ``RichTextBlock`` of ``TextRun`` elements, so the values a
caller, reviewer or policy chose (already kept to their line and cut by
:meth:`~mcp_approval.notify.messages.Notification.facts`) are shown as they are and can add no
link, emphasis or list.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import httpx2

from mcp_approval.notify.delivery_error import DeliveryError
from mcp_approval.notify.messages import Notification
from mcp_approval.notify.options import TeamsChannelOptions

__all__ = ["CARD_CONTENT_TYPE", "CARD_SCHEMA", "CARD_VERSION", "TeamsChannel", "request_card", "workflow_message"]

#: The Adaptive Card schema and version the cards declare.
CARD_SCHEMA: Final = "http://adaptivecards.io/schemas/adaptive-card.json"
CARD_VERSION: Final = "1.4"
#: The attachment content type of an Adaptive Card.
CARD_CONTENT_TYPE: Final = "application/vnd.microsoft.card.adaptive"
#: Where the request stands after each notification type (the card's own words).
_STANDING: Final[Mapping[str, tuple[str, str]]] = {
    "approval.requested": ("Waiting for a decision.", "Attention"),
    "approval.decided": ("Waiting for more decisions.", "Attention"),
    "approval.reminder": ("Still waiting for a decision (a reminder).", "Attention"),
    "approval.escalated": ("Still waiting for a decision: escalated.", "Attention"),
    "approval.approved": ("Approved. The call is checked against policy once more, then runs.", "Good"),
    "approval.denied": ("Denied. The call will not run.", "Warning"),
    "approval.expired": ("Expired: nobody decided by the deadline. The call will not run.", "Warning"),
    "approval.cancelled": ("Cancelled by the requester.", "Default"),
    "approval.executed": ("Finished: see the outcome above.", "Default"),
}
#: The button's title.
OPEN_TITLE: Final = "Review and decide (sign-in required)"


def request_card(notification: Notification) -> dict[str, Any]:
    """The Adaptive Card of ``notification``."""
    standing, colour = _STANDING.get(notification.type, ("", "Default"))
    body: list[dict[str, Any]] = [
        _rich([_run(notification.title(), size="Large", weight="Bolder")]),
        *(_rich([_run(f"{label}: ", weight="Bolder"), _run(value)]) for label, value in notification.facts()),
        _rich([_run(standing, weight="Bolder", color=colour)]),
    ]
    card: dict[str, Any] = {"$schema": CARD_SCHEMA, "type": "AdaptiveCard", "version": CARD_VERSION, "body": body}
    link = notification.link()
    if link:
        card["actions"] = [{"type": "Action.OpenUrl", "title": OPEN_TITLE, "url": link}]
    card["msteams"] = {"width": "Full"}
    return card


def workflow_message(card: Mapping[str, Any]) -> dict[str, Any]:
    """The message activity a Teams workflow posts: ``card`` as its one attachment."""
    return {
        "type": "message",
        "attachments": [{"contentType": CARD_CONTENT_TYPE, "contentUrl": None, "content": dict(card)}],
    }


def _text_card(title: str, text: str) -> dict[str, Any]:
    """A card with a heading and one block of text (an audit anchor, an alert)."""
    body = [_rich([_run(title, weight="Bolder")]), _rich([_run(text, fontType="Monospace")])]
    return {"$schema": CARD_SCHEMA, "type": "AdaptiveCard", "version": CARD_VERSION, "body": body}


def _rich(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``RichTextBlock`` of ``runs``: text shown as it is, never read as Markdown."""
    return {"type": "RichTextBlock", "inlines": runs}


def _run(text: str, **style: str) -> dict[str, Any]:
    """A ``TextRun`` of ``text`` with ``style`` (``weight``, ``size``, ``color``, ``fontType``)."""
    return {"type": "TextRun", "text": text, **style}


class TeamsChannel:
    """POSTs each notification's card to the workflow URL; any answer but 2xx is a failed attempt.

    Args:
        options: the channel's options.
        timeout_s: how long one POST may take.
    """

    def __init__(self, options: TeamsChannelOptions, *, timeout_s: float) -> None:
        self._url = options.url.get_secret_value()
        self._timeout_s = timeout_s
        self._http: httpx2.AsyncClient | None = None

    async def send(self, notification: Notification) -> None:
        """Post the card of ``notification``."""
        await self._post(workflow_message(request_card(notification)))

    async def send_text(self, title: str, text: str) -> None:
        """Post ``title`` and ``text`` as a card of their own."""
        await self._post(workflow_message(_text_card(title, text)))

    async def _post(self, message: Mapping[str, Any]) -> None:
        if self._http is None:  # opened on first use, so a server started again after aclose() still sends
            self._http = httpx2.AsyncClient(timeout=self._timeout_s, follow_redirects=False)
        body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        try:
            response = await self._http.post(self._url, content=body, headers={"content-type": "application/json"})
        except httpx2.HTTPError as exc:  # the URL holds a credential: never repeated
            raise DeliveryError(f"Teams workflow unreachable: {type(exc).__name__}") from None
        if not 200 <= response.status_code < 300:
            raise DeliveryError(f"Teams workflow answered HTTP {response.status_code}")

    async def aclose(self) -> None:
        """Close the HTTP client."""
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()
