"""Slack's "Approve similar…" dialog: approve a request and write a similar-call rule from Slack.

The dialog (a ``views.open`` modal) asks for what a rule needs and a chat message can show: whose
calls (the same requester, or any), how long the rule lasts (minutes, capped by the template) and
how many calls it may decide (capped too), and an optional comment. Every argument stays equal to
the request's, as the dialog says: the conditions that widen an argument (one of, a range, a
prefix) are chosen in the console, where the arguments are shown whole. The submission goes
through the backend's ``approve_similar``, as the reviewer API's and the console's do; the
backend checks the template's limits again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Final

from mcp_approval.backends import SimilarRuleSpec
from mcp_approval.reviewers.limits import MAX_COMMENT_CHARS

__all__ = [
    "SIMILAR_CALLBACK",
    "SIMILAR_COMMENT",
    "SIMILAR_EXPIRES",
    "SIMILAR_PRINCIPAL",
    "SIMILAR_USES",
    "similar_dialog",
    "similar_submission",
]

#: The dialog's ``callback_id``, and the ``block_id`` (= ``action_id``) of each of its inputs.
SIMILAR_CALLBACK: Final = "mcp_approval.similar_dialog"
SIMILAR_PRINCIPAL: Final = "mcp_approval.similar.principal"
SIMILAR_EXPIRES: Final = "mcp_approval.similar.expires_min"
SIMILAR_USES: Final = "mcp_approval.similar.max_uses"
SIMILAR_COMMENT: Final = "mcp_approval.similar.comment"


def _plain(text: str, limit: int) -> dict[str, Any]:
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return {"type": "plain_text", "text": shown, "emoji": False}


def _option(value: str, text: str) -> dict[str, Any]:
    return {"text": _plain(text, 75), "value": value}


def similar_dialog(
    request_id: str, tool: str, requester: str, limits: tuple[float, int], where: Mapping[str, str]
) -> dict[str, Any]:
    """The modal of a request of ``tool`` by ``requester`` whose template allows rules of at most
    ``limits`` (seconds, uses); ``where`` (the message) travels in ``private_metadata`` as the deny dialog's does."""
    max_minutes = max(1, math.floor(limits[0] / 60))
    metadata = json.dumps(
        {"request_id": request_id, "max_minutes": max_minutes, "max_uses": limits[1], **where}, separators=(",", ":")
    )
    same = _option("same", f"Only {requester}'s calls")
    scope = (
        f"Approves this request, and later calls of {tool} whose arguments are all equal to this one's, "
        "until the rule expires, is used up or is revoked. Each such call is still checked against policy. "
        "To let an argument vary (one of several values, a range, a prefix), approve similar calls in the console."
    )
    return {
        "type": "modal",
        "callback_id": SIMILAR_CALLBACK,
        "private_metadata": metadata,
        "title": _plain("Approve similar calls", 24),
        "submit": _plain("Approve", 24),
        "close": _plain("Cancel", 24),
        "blocks": [
            {"type": "section", "text": _plain(scope, 3000)},
            {
                "type": "input",
                "block_id": SIMILAR_PRINCIPAL,
                "label": _plain("Whose calls", 2000),
                "element": {
                    "type": "radio_buttons",
                    "action_id": SIMILAR_PRINCIPAL,
                    "initial_option": same,
                    "options": [same, _option("any", "Any requester's calls")],
                },
            },
            {
                "type": "input",
                "block_id": SIMILAR_EXPIRES,
                "label": _plain(f"Expires after (minutes, at most {max_minutes})", 2000),
                "element": {
                    "type": "number_input",
                    "action_id": SIMILAR_EXPIRES,
                    "is_decimal_allowed": False,
                    "min_value": "1",
                    "max_value": str(max_minutes),
                },
            },
            {
                "type": "input",
                "block_id": SIMILAR_USES,
                "label": _plain(f"Decides at most (calls, at most {limits[1]})", 2000),
                "element": {
                    "type": "number_input",
                    "action_id": SIMILAR_USES,
                    "is_decimal_allowed": False,
                    "min_value": "1",
                    "max_value": str(limits[1]),
                },
            },
            {
                "type": "input",
                "block_id": SIMILAR_COMMENT,
                "optional": True,
                "label": _plain("Comment", 2000),
                "element": {
                    "type": "plain_text_input",
                    "action_id": SIMILAR_COMMENT,
                    "multiline": True,
                    "max_length": MAX_COMMENT_CHARS,
                },
            },
        ],
    }


def similar_submission(view: Mapping[str, Any]) -> tuple[SimilarRuleSpec, str | None] | dict[str, str]:
    """The rule and comment a submitted dialog asks for, or the errors to show on its inputs
    (``block_id`` → message), as Slack's ``response_action: errors`` takes them."""
    values = view.get("state", {}).get("values", {})
    values = values if isinstance(values, dict) else {}
    try:
        metadata = json.loads(str(view.get("private_metadata", "")))
    except ValueError:
        metadata = {}
    metadata = metadata if isinstance(metadata, dict) else {}
    errors: dict[str, str] = {}
    principal = _selected(values, SIMILAR_PRINCIPAL)
    if principal not in ("same", "any"):
        errors[SIMILAR_PRINCIPAL] = "Choose whose calls the rule decides."
    max_minutes, max_uses = metadata.get("max_minutes"), metadata.get("max_uses")
    minutes = _whole(_text(values, SIMILAR_EXPIRES))
    if minutes is None or minutes < 1:
        errors[SIMILAR_EXPIRES] = "A whole number of minutes, at least 1."
    elif isinstance(max_minutes, int) and minutes > max_minutes:
        errors[SIMILAR_EXPIRES] = f"At most {max_minutes} minutes for this template."
    uses = _whole(_text(values, SIMILAR_USES))
    if uses is None or uses < 1:
        errors[SIMILAR_USES] = "A whole number of calls, at least 1."
    elif isinstance(max_uses, int) and uses > max_uses:
        errors[SIMILAR_USES] = f"At most {max_uses} calls for this template."
    comment = (_text(values, SIMILAR_COMMENT) or "").strip() or None
    if comment is not None and (len(comment) > MAX_COMMENT_CHARS or "\x00" in comment):
        errors[SIMILAR_COMMENT] = f"At most {MAX_COMMENT_CHARS} characters."
    if errors or minutes is None or uses is None:
        return errors
    return SimilarRuleSpec(float(minutes * 60), uses, principal == "same", {}), comment


def _state(values: Mapping[str, Any], block: str) -> Mapping[str, Any]:
    entered = values.get(block, {})
    found = entered.get(block, {}) if isinstance(entered, dict) else {}
    return found if isinstance(found, dict) else {}


def _text(values: Mapping[str, Any], block: str) -> str | None:
    value = _state(values, block).get("value")
    return value if isinstance(value, str) else None


def _selected(values: Mapping[str, Any], block: str) -> str | None:
    option = _state(values, block).get("selected_option")
    value = option.get("value") if isinstance(option, dict) else None
    return value if isinstance(value, str) else None


def _whole(text: str | None) -> int | None:
    text = (text or "").strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else None
