"""Who was told about a request, when, on which channel: its reminders and escalations, from the audit log.

A pending request is told about again when its template says so (``remind_after_s``: its
reviewers, on the template's channels; ``escalate_after_s``: the ``escalate_to`` role, on its
channels). Each step is an audit event (:data:`REMINDED_EVENT`, :data:`ESCALATED_EVENT`) and each
channel that delivered it another (:data:`TOLD_EVENT`), so what a request page shows of them is
read from the hash-chained log that ``audit verify`` checks, not from a table anyone could edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from mcp_approval.clock import iso8601
from mcp_approval.storage.audit import AuditEvent

__all__ = [
    "ESCALATED_EVENT",
    "REMINDED_EVENT",
    "STEP_EVENTS",
    "TOLD_EVENT",
    "Step",
    "ToldRecord",
    "told_about",
    "told_from_events",
]

#: A request's reviewers are reminded (the event that claimed the step; its channels send it).
REMINDED_EVENT: Final = "approval.reminded"
#: A request escalated to another role.
ESCALATED_EVENT: Final = "approval.escalated"
#: One channel delivered a reminder or an escalation.
TOLD_EVENT: Final = "approval.told"
#: A step of telling again.
Step = Literal["remind", "escalate"]
#: Each step's audit event.
STEP_EVENTS: Final[dict[str, str]] = {"remind": REMINDED_EVENT, "escalate": ESCALATED_EVENT}
#: The most audit events read to find a request's (its own events are few).
_EVENTS_READ = 1000


class _EventReader(Protocol):
    async def events(self, subject: str | None = None, limit: int = 100) -> list[AuditEvent]: ...


@dataclass(frozen=True)
class ToldRecord:
    """One channel delivering one reminder or escalation of a request.

    Attributes:
        step: ``remind`` or ``escalate``.
        role: who it told (the role whose holders read the channel).
        channel: the ``[notifications.channels]`` name.
        at: when the channel accepted it (epoch ms).
    """

    step: str
    role: str
    channel: str
    at: int

    def to_json(self) -> dict[str, Any]:
        """The delivery as JSON (time as ISO 8601)."""
        return {"step": self.step, "role": self.role, "channel": self.channel, "at": iso8601(self.at)}

    def line(self) -> str:
        """One line for people: ``2026-12-07 21:30:05 UTC  reminder to approver on ops-hook``."""
        what = "reminder to" if self.step == "remind" else "escalation to"
        return f"{iso8601(self.at)[:19].replace('T', ' ')} UTC  {what} {self.role} on {self.channel}"


def told_from_events(events: list[AuditEvent]) -> tuple[ToldRecord, ...]:
    """The deliveries among a request's audit events, oldest first."""
    found = [
        ToldRecord(
            step=str(event.data.get("step")),
            role=str(event.data.get("role")),
            channel=str(event.data.get("channel")),
            at=event.at,
        )
        for event in events
        if event.kind == TOLD_EVENT
    ]
    return tuple(sorted(found, key=lambda told: (told.at, told.channel)))


async def told_about(audit: _EventReader, request_id: str) -> tuple[ToldRecord, ...]:
    """The reminders and escalations delivered about ``request_id``, oldest first."""
    return told_from_events(await audit.events(subject=request_id, limit=_EVENTS_READ))
