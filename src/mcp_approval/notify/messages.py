"""What a notification says: an audit event of an approval request, made into a message.

The event kinds notified and the type each becomes (:data:`EVENT_TYPES`): a request opened, each
reviewer's decision (with the N-of-M progress after it), the request approved, denied, expired or
cancelled, and the call executed or not (with its disposition). A message is built from the
request's stored content and the events up to the one notified, so every attempt to deliver it
carries the same content and the same id (:attr:`Notification.id`, the event's chain hash).

A message carries the tool, the arguments as the console shows them (redacted names replaced by
``"[redacted]"``, a request whose stored content fails its seal not shown at all), the requester,
template, deadline, progress and a link to the request's console page. The link only shows the
request: deciding needs the reviewer to sign in, and the same eligibility rules apply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import Connection, select

from mcp_approval.approval.persistence.schema import approval_workflows_table
from mcp_approval.backends.local import ApprovalRecord, LocalApprovalBackend
from mcp_approval.clock import iso8601
from mcp_approval.reviewers.views import RequestView
from mcp_approval.storage import AuditEvent, AuditLog, Database

__all__ = ["EVENT_TYPES", "MessageBuilder", "Notification"]

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
}
#: The events whose subject is the approval task (the others are about the request itself).
_TASK_EVENTS = frozenset({"approval.execution_finished", "approval.fenced"})
_W = approval_workflows_table
_HEADLINES: Final[Mapping[str, str]] = {
    "approval.requested": "Approval requested",
    "approval.decided": "Decision recorded",
    "approval.approved": "Approved",
    "approval.denied": "Denied",
    "approval.expired": "Expired without a decision",
    "approval.cancelled": "Cancelled by the requester",
    "approval.executed": "Call finished",
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
        """A one-line subject for people."""
        return f"{_HEADLINES.get(self.type, self.type)}: {self.data.get('tool')} ({self.request_id[:12]}…)"

    def text(self) -> str:
        """The message for people: what happened, to which call, and where to look."""
        data = self.data
        lines = [self.title(), ""]
        if "decision" in data:
            lines.append(f"Decision: {data['decision']} by {data.get('reviewer')}")
        if "outcome" in data:
            lines.append(f"Outcome: {data['outcome']}" + (f" ({data['reason']})" if data.get("reason") else ""))
        lines += [
            f"Tool: {data.get('tool')}",
            f"Arguments: {data.get('arguments_summary')}",
            f"Requested by: {data.get('requester')}",
            f"Template: {data.get('template') or '(default)'}",
            f"Deadline: {data.get('deadline') or 'none'}",
            f"Progress: {data.get('progress')}",
        ]
        if data.get("console_url"):
            lines += ["", f"Review it (sign-in required): {data['console_url']}"]
        return "\n".join(lines)


class MessageBuilder:
    """Makes the notification of an audit event, or says the event is not notified.

    Args:
        backend: the local backend holding the requests.
        database: the store of the approval workflows (for events about a request's task).
        audit: the audit log (for the decisions up to an event).
        console_url: the console's public base URL (``None``: messages carry no link).
    """

    def __init__(
        self, backend: LocalApprovalBackend, database: Database, audit: AuditLog, console_url: str | None
    ) -> None:
        self._backend = backend
        self._database = database
        self._audit = audit
        self._console_url = console_url.rstrip("/") if console_url else None

    async def build(self, event: AuditEvent) -> Notification | None:
        """The notification of ``event``, or ``None`` (not a notified kind, or its request is gone)."""
        kind = EVENT_TYPES.get(event.kind)
        if kind is None or event.subject is None or event.seq is None or event.hash is None:
            return None
        request_id = event.subject
        if event.kind in _TASK_EVENTS:
            found = await self._database.read(lambda conn: _handle_of(conn, event.subject or ""))
            if found is None:
                return None
            request_id = found
        record = await self._backend.get_request(request_id)
        if record is None:
            return None
        approvals = await self._approvals_through(request_id, event.seq)
        data = _content(record, approvals, self._link(request_id)) | _specifics(event)
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


def _handle_of(conn: Connection, task_id: str) -> str | None:
    """The approval request a task's workflow currently waits on (or waited on)."""
    return conn.execute(select(_W.c.handle).where(_W.c.task_id == task_id)).scalar_one_or_none()


def _content(record: ApprovalRecord, approvals: int, link: str | None) -> dict[str, Any]:
    """What every message about ``record`` carries (the arguments only as the console shows them)."""
    view = RequestView(record, record.created_at)
    withheld = record.integrity_failure is not None
    noun = "approval" if record.approvals_required == 1 else "approvals"
    return {
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
    }


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
    return {}
