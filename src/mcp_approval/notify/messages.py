"""What a notification says: an audit event of an approval request, made into a message.

The event kinds notified and the type each becomes (:data:`EVENT_TYPES`): a request opened, each
reviewer's decision (with the N-of-M progress after it), the request approved, denied, expired or
cancelled, and the call executed or not (with its disposition). A message is built from the
request's stored content and the events up to the one notified, so every attempt to deliver it
carries the same content and the same id (:attr:`Notification.id`, the event's chain hash).

A message carries the tool, the arguments as the console shows them (redacted names replaced by
``"[redacted]"``, a request whose stored content fails its seal not shown at all), the requester,
template, deadline, progress and a link to the request's console page, and, when the same call
already ran (or was decided not to) under an earlier request, a warning naming it
(``possible_duplicate_of``). The link only shows the request: deciding needs the reviewer to sign
in, and the same eligibility rules apply.

People read a message as plain text, HTML or Markdown (:meth:`Notification.text`,
:meth:`~Notification.html`, :meth:`~Notification.markdown`): the same lines in each, every value a
caller chose quoted onto its line (:func:`printable`) and escaped for the format, so argument
names and values can neither add lines nor links, images or markup.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from markupsafe import escape

from mcp_approval.approval.persistence.outcomes import WorkflowOutcomes
from mcp_approval.backends import ApprovalRecord, SupportsReview, SupportsSimilarRules
from mcp_approval.clock import iso8601
from mcp_approval.reviewers.views import RequestView, json_value
from mcp_approval.storage import AuditEvent, AuditLog, Database

__all__ = [
    "EVENT_TYPES",
    "MAX_VALUE_CHARS",
    "STEP_TYPES",
    "MessageBuilder",
    "Notification",
    "markdown_escape",
    "printable",
]

#: Audit event kind -> notification type.
EVENT_TYPES: Final[Mapping[str, str]] = {
    "approval.submitted": "approval.requested",
    "approval.decision": "approval.decided",
    "approval.approved": "approval.approved",
    "approval.denied": "approval.denied",
    "approval.expired": "approval.expired",
    "approval.cancelled": "approval.cancelled",
    "approval.execution_finished": "approval.executed",
    "approval.fenced": "approval.executed",
    "approval.reminded": "approval.reminder",
    "approval.escalated": "approval.escalated",
}
#: The notification types of a step of telling again (sent only to the channels their event names).
STEP_TYPES: Final = frozenset({"approval.reminder", "approval.escalated"})
#: The events whose subject is the approval task (the others are about the request itself).
_TASK_EVENTS = frozenset({"approval.execution_finished", "approval.fenced"})
_HEADLINES: Final[Mapping[str, str]] = {
    "approval.requested": "Approval requested",
    "approval.decided": "Decision recorded",
    "approval.approved": "Approved",
    "approval.denied": "Denied",
    "approval.expired": "Expired without a decision",
    "approval.cancelled": "Cancelled by the requester",
    "approval.executed": "Call finished",
    "approval.reminder": "Reminder: still waiting for a decision",
    "approval.escalated": "Escalated: still waiting for a decision",
}


@dataclass(frozen=True)
class Notification:
    """One event about one approval request, as every channel sends it.

    Attributes:
        id: stable across attempts and workers (the Standard Webhooks ``webhook-id``).
        type: what happened (a value of :data:`EVENT_TYPES`).
        at: when it happened (epoch ms).
        request_id: the approval request.
        template: the request's template (``None``: the default template).
        seq: the event's audit chain position.
        data: the message's content (see :func:`_content`).
    """

    id: str
    type: str
    at: int
    request_id: str
    template: str | None
    seq: int
    data: Mapping[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        """The Standard Webhooks payload: ``type``, ``timestamp`` and ``data``."""
        return {"type": self.type, "timestamp": iso8601(self.at), "data": dict(self.data)}

    def body(self) -> str:
        """The payload as the JSON text that is signed and sent."""
        return json.dumps(self.payload(), separators=(",", ":"), sort_keys=True, ensure_ascii=False)

    def title(self) -> str:
        """A one-line subject for people (the tool name quoted as :func:`printable` does)."""
        tool = printable(str(self.data.get("tool")), limit=_MAX_NAME_CHARS)
        return f"{_HEADLINES.get(self.type, self.type)}: {tool} ({self.request_id[:12]}…)"

    @property
    def channels(self) -> frozenset[str] | None:
        """The only channels a reminder or an escalation goes to (``None``: the template's, as any other event)."""
        if self.type not in STEP_TYPES:
            return None
        named = self.data.get("channels")
        return frozenset(str(name) for name in named) if isinstance(named, list) else frozenset()

    def facts(self) -> list[tuple[str, str]]:
        """What the message says, as ``(label, value)`` lines every format shows alike.

        Every value a caller, a reviewer or a policy chose (argument names and values, the
        requester, the reviewer, the reason) has its control characters quoted and is cut, so it
        stays on its line; each format escapes it for its own markup.
        """
        data = self.data
        facts: list[tuple[str, str]] = []
        if "decision" in data:
            facts.append(("Decision", f"{printable(str(data['decision']))} by {printable(str(data.get('reviewer')))}"))
        if "outcome" in data:
            reason = f" ({printable(str(data['reason']))})" if data.get("reason") else ""
            facts.append(("Outcome", printable(str(data["outcome"])) + reason))
        if self.type in STEP_TYPES:
            told = "Reminder to" if self.type == "approval.reminder" else "Escalated to"
            facts.append((told, printable(str(data.get("told")))))
        earlier = data.get("possible_duplicate_of")
        if isinstance(earlier, Mapping):
            facts.append(("Warning", printable(str(earlier.get("text")), limit=_MAX_WARNING_CHARS)))
        facts += [
            ("Tool", printable(str(data.get("tool")), limit=_MAX_NAME_CHARS)),
            ("Arguments", _arguments_line(data)),
            ("Requested by", printable(str(data.get("requester")))),
            ("Template", printable(str(data.get("template") or "(default)"))),
            ("Deadline", printable(str(data.get("deadline") or "none"))),
            ("Progress", printable(str(data.get("progress")))),
        ]
        return facts

    def link(self) -> str | None:
        """The request's console page (this server's own configured URL), if messages carry one."""
        url = self.data.get("console_url")
        return url if isinstance(url, str) and url else None

    def text(self) -> str:
        """The message as plain text: the title, one line per fact, then where to look."""
        lines = [self.title(), "", *(f"{label}: {value}" for label, value in self.facts())]
        link = self.link()
        if link:
            lines += ["", f"{_LINK_TEXT}: {link}"]
        return "\n".join(lines)

    def html(self) -> str:
        """The message as an HTML document: the same lines as :meth:`text`, every value escaped.

        Nothing a caller sent can add markup: the only link is the console's.
        """
        parts = [f"<h2>{escape(self.title())}</h2>"]
        parts += [f"<div><b>{escape(label)}:</b> {escape(value)}</div>" for label, value in self.facts()]
        link = self.link()
        if link:
            parts.append(f'<br><div>{escape(_LINK_TEXT)}: <a href="{escape(link)}">{escape(link)}</a></div>')
        head = '<!DOCTYPE html><html><head><meta charset="utf-8"></head>'
        return f'{head}<body style="overflow-wrap: anywhere">{"".join(parts)}</body></html>'

    def markdown(self) -> str:
        """The message as CommonMark: the same lines as :meth:`text`, every value backslash-escaped."""
        lines = [f"**{markdown_escape(self.title())}**"]
        lines += [f"**{markdown_escape(label)}:** {markdown_escape(value)}" for label, value in self.facts()]
        link = self.link()
        if link:
            lines.append(f"{markdown_escape(_LINK_TEXT)}: <{link}>")
        return "\n\n".join(lines)


#: The longest caller-chosen value shown on a line of a message (longer ones are cut with ``…``).
MAX_VALUE_CHARS: Final = 200
_MAX_NAME_CHARS: Final = 64
#: The possible-duplicate warning's bound (two ids and a time: longer than a caller's value may be).
_MAX_WARNING_CHARS: Final = 400
#: The most characters the arguments line shows (the console shows them whole).
_MAX_ARGUMENTS_CHARS: Final = 1000
_LINK_TEXT: Final = "Review it (sign-in required)"
#: Characters that would end a line, reorder text (bidi controls) or hide in it.
_UNPRINTABLE: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_NAMED_ESCAPES: Final[Mapping[str, str]] = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_MARKDOWN_SPECIAL: Final = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def printable(text: str, *, limit: int = MAX_VALUE_CHARS) -> str:
    """``text`` on one line: control, format and separator characters quoted (``\\n``,
    ``\\u202e``), cut at ``limit`` characters with ``…``."""
    shown = "".join(_quoted(ch) if unicodedata.category(ch) in _UNPRINTABLE else ch for ch in text)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def markdown_escape(text: str) -> str:
    """``text`` as literal CommonMark: every ASCII punctuation character backslash-escaped."""
    return "".join(f"\\{ch}" if ch in _MARKDOWN_SPECIAL else ch for ch in text)


def _quoted(ch: str) -> str:
    return _NAMED_ESCAPES.get(ch) or f"\\u{ord(ch):04x}"


def _arguments_line(data: Mapping[str, Any]) -> str:
    """``name: value, ...`` as the console shows them, each name and value printable and cut."""
    arguments = data.get("arguments")
    if not isinstance(arguments, Mapping):  # withheld (the stored request fails its seal)
        return printable(str(data.get("arguments_summary")))
    shown = ", ".join(
        f"{printable(str(name), limit=_MAX_NAME_CHARS)}: {printable(json_value(value))}"
        for name, value in arguments.items()
    )
    return shown if len(shown) <= _MAX_ARGUMENTS_CHARS else shown[: _MAX_ARGUMENTS_CHARS - 1] + "…"


class MessageBuilder:
    """Makes the notification of an audit event, or says the event is not notified.

    Args:
        backend: the backend holding the requests (the local one).
        database: the store of the approval workflows (for events about a request's task).
        audit: the audit log (for the decisions up to an event).
        console_url: the console's public base URL (``None``: messages carry no link).
    """

    def __init__(self, backend: SupportsReview, database: Database, audit: AuditLog, console_url: str | None) -> None:
        self._backend = backend
        self._workflows = WorkflowOutcomes(database, audit)
        self._audit = audit
        self._console_url = console_url.rstrip("/") if console_url else None

    async def build(self, event: AuditEvent) -> Notification | None:
        """The notification of ``event``, or ``None`` (not a notified kind, or its request is gone)."""
        kind = EVENT_TYPES.get(event.kind)
        if kind is None or event.subject is None or event.seq is None or event.hash is None:
            return None
        request_id = event.subject
        if event.kind in _TASK_EVENTS:
            found = await self._workflows.request_of(event.subject)
            if found is None:
                return None
            request_id = found
        record = await self._backend.get_request(request_id)
        if record is None:
            return None
        approvals = await self._approvals_through(request_id, event.seq)
        data = _content(record, approvals, self._link(request_id)) | _specifics(event)
        if isinstance(self._backend, SupportsSimilarRules) and self._backend.similar_rule_limits(record) is not None:
            data["similar_rules"] = True  # a reviewer may approve it with a similar-call rule (a chat button)
        return Notification(
            id=f"ntf_{event.hash[:32]}",
            type=kind,
            at=event.at,
            request_id=request_id,
            template=record.template,
            seq=event.seq,
            data=data,
        )

    def _link(self, request_id: str) -> str | None:
        return f"{self._console_url}/console/requests/{request_id}" if self._console_url else None

    async def _approvals_through(self, request_id: str, seq: int) -> int:
        """The approvals recorded for the request up to chain position ``seq``."""
        events = await self._audit.events(subject=request_id, limit=1000)
        return sum(
            1
            for e in events
            if e.kind == "approval.decision"
            and e.seq is not None
            and e.seq <= seq
            and e.data.get("decision") == "approve"
        )


def _content(record: ApprovalRecord, approvals: int, link: str | None) -> dict[str, Any]:
    """What every message about ``record`` carries (the arguments only as the console shows them)."""
    view = RequestView(record, record.created_at)
    withheld = record.integrity_failure is not None
    noun = "approval" if record.approvals_required == 1 else "approvals"
    content = {
        "request_id": record.id,
        "tool": record.tool,
        "arguments": None if withheld else dict(record.arguments),
        "arguments_summary": view.summary,
        "requester": record.requester,
        "template": record.template,
        "deadline": view.deadline_at or None,
        "approvals": {"given": approvals, "required": record.approvals_required},
        "progress": f"{approvals} of {record.approvals_required} {noun}",
        "console_url": link,
        # An identical earlier call whose request ended: approving this one may run the call twice.
        "possible_duplicate_of": earlier.for_reviewers() if (earlier := record.possible_duplicate_of) else None,
    }
    if record.rules is not None and record.rules.step_up is not None:
        # Decided only with the reviewer's passkey, in the console: chat buttons would only be refused.
        content["step_up"] = record.rules.step_up
    return content


def _specifics(event: AuditEvent) -> dict[str, Any]:
    """What only this kind of event adds: the decision and its reviewer, or the call's outcome."""
    if event.kind == "approval.decision":
        return {"decision": event.data.get("decision"), "reviewer": event.actor}
    if event.kind in _TASK_EVENTS:
        outcome = event.data.get("disposition") or (
            "cancelled" if event.data.get("status") == "cancelled" else "failed"
        )
        specifics: dict[str, Any] = {"outcome": outcome}
        if event.data.get("reason"):
            specifics["reason"] = event.data["reason"]
        return specifics
    if EVENT_TYPES.get(event.kind) in STEP_TYPES:
        # Whom it tells (a role) and where: only these channels send it.
        return {"step": event.data.get("step"), "told": event.data.get("role"), "channels": event.data.get("channels")}
    return {}
