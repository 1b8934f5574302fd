"""What a Slack channel shows: a request's message in Block Kit, the deny dialog, and the replies to a click.

The message is rebuilt whole from each notification (:func:`request_message`): a header, the
facts every channel shows (:meth:`~mcp_approval.notify.messages.Notification.facts`: each value
a caller, reviewer or policy chose already on one line and cut), where the request stands, and,
while it waits for decisions, the Approve, Deny and Open buttons (and Approve similar… where the
request's template allows similar-call rules, :mod:`~mcp_approval.notify.slack_similar`). Every fact is a ``plain_text``
object with emoji codes off, so nothing a caller sent becomes a mention, a link, formatting or an
emoji; the only ``mrkdwn`` is this module's own text. The fallback ``text`` (notifications, screen
readers) is the title with Slack's three control characters escaped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from mcp_approval.notify.messages import Notification
from mcp_approval.reviewers.limits import MAX_COMMENT_CHARS

__all__ = [
    "APPROVE",
    "DENY",
    "DENY_CALLBACK",
    "DENY_INPUT",
    "OPEN",
    "PENDING_TYPES",
    "SIMILAR",
    "deny_dialog",
    "escaped",
    "request_message",
]

#: The ``action_id`` of each button.
APPROVE: Final = "mcp_approval.approve"
DENY: Final = "mcp_approval.deny"
OPEN: Final = "mcp_approval.open"
SIMILAR: Final = "mcp_approval.similar"
#: The deny dialog's ``callback_id``, and its comment input's ``block_id`` / ``action_id``.
DENY_CALLBACK: Final = "mcp_approval.deny_dialog"
DENY_INPUT: Final = "mcp_approval.comment"
#: Notification types after which a request still takes decisions (the message keeps its buttons).
PENDING_TYPES: Final = frozenset({"approval.requested", "approval.decided", "approval.reminder", "approval.escalated"})
#: Where the request stands after each notification type, in the message's own words.
_STANDING: Final[Mapping[str, str]] = {
    "approval.requested": ":hourglass: *Waiting for a decision.*",
    "approval.decided": ":hourglass: *Waiting for more decisions.*",
    "approval.reminder": ":bell: *Still waiting for a decision* (a reminder).",
    "approval.escalated": ":rotating_light: *Still waiting for a decision:* escalated.",
    "approval.approved": ":white_check_mark: *Approved.* The call is checked against policy once more, then runs.",
    "approval.denied": ":no_entry: *Denied.* The call will not run.",
    "approval.expired": ":alarm_clock: *Expired.* Nobody decided by the deadline; the call will not run.",
    "approval.cancelled": ":leftwards_arrow_with_hook: *Cancelled* by the requester.",
    "approval.executed": ":checkered_flag: *Finished.* See the outcome above.",
}
#: Slack's limits: a header's text, a field's text.
_HEADER_CHARS: Final = 150
_FIELD_CHARS: Final = 2000


def escaped(text: str) -> str:
    """``text`` with ``&``, ``<`` and ``>`` escaped, as Slack's formatting rules ask of any text it parses."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def request_message(notification: Notification) -> tuple[str, list[dict[str, Any]]]:
    """The fallback text and the blocks of the request's message after ``notification``."""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": _plain(notification.title(), _HEADER_CHARS)},
        {
            "type": "section",
            "fields": [_plain(f"{label}: {value}", _FIELD_CHARS) for label, value in _facts(notification)],
        },
        {"type": "context", "elements": [{"type": "mrkdwn", "text": _STANDING.get(notification.type, "")}]},
    ]
    actions = _buttons(notification)
    if actions:
        blocks.append({"type": "actions", "block_id": "decide", "elements": actions})
    return escaped(notification.title()), blocks


def deny_dialog(request_id: str, title: str, where: Mapping[str, str]) -> dict[str, Any]:
    """The ``views.open`` modal that asks a reviewer who clicked Deny for a comment.

    ``where`` (the message's conversation and ``ts``) travels in ``private_metadata`` with the
    request id, so the submission can be checked against the request's message like a click.
    """
    metadata = json.dumps({"request_id": request_id, **where}, separators=(",", ":"))
    comment = {
        "type": "plain_text_input",
        "action_id": DENY_INPUT,
        "multiline": True,
        "max_length": MAX_COMMENT_CHARS,
        "placeholder": _plain("Why not? The requester sees your comment.", 150),
    }
    return {
        "type": "modal",
        "callback_id": DENY_CALLBACK,
        "private_metadata": metadata,
        "title": _plain("Deny the request", 24),
        "submit": _plain("Deny", 24),
        "close": _plain("Cancel", 24),
        "blocks": [
            {"type": "section", "text": _plain(title, 3000)},
            {
                "type": "input",
                "block_id": DENY_INPUT,
                "optional": True,
                "label": _plain("Comment", 2000),
                "element": comment,
            },
        ],
    }


def _facts(notification: Notification) -> list[tuple[str, str]]:
    """The notification's facts, at most ten (a section's limit): the first ones, which matter most."""
    return notification.facts()[:10]


def _buttons(notification: Notification) -> list[dict[str, Any]]:
    """Approve and Deny while the request takes decisions (unless only a passkey in the console may
    decide it), and a link to its console page."""
    buttons: list[dict[str, Any]] = []
    step_up = notification.data.get("step_up") is not None
    if notification.type in PENDING_TYPES and not step_up:
        request = notification.request_id
        buttons += [
            {
                "type": "button",
                "action_id": APPROVE,
                "text": _plain("Approve", 75),
                "style": "primary",
                "value": request,
                "confirm": {
                    "title": _plain("Approve this call?", 100),
                    "text": _plain("Once approved by enough reviewers, the call runs.", 300),
                    "confirm": _plain("Approve", 30),
                    "deny": _plain("Back", 30),
                },
            },
            {"type": "button", "action_id": DENY, "text": _plain("Deny…", 75), "style": "danger", "value": request},
        ]
        if notification.data.get("similar_rules") is True:  # its template lets a reviewer write a rule
            buttons.append(
                {"type": "button", "action_id": SIMILAR, "text": _plain("Approve similar…", 75), "value": request}
            )
    link = notification.link()
    if link:
        label = "Decide with your passkey in the console" if step_up else "Open in the console"
        buttons.append({"type": "button", "action_id": OPEN, "text": _plain(label, 75), "url": link})
    return buttons


def _plain(text: str, limit: int) -> dict[str, Any]:
    """A ``plain_text`` object of ``text`` (cut to ``limit`` characters), emoji codes left as typed."""
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return {"type": "plain_text", "text": shown, "emoji": False}
