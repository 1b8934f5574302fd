"""Who was told about a request, when, on which channel: its reminders and escalations, from the audit log.

A pending request is told about again when its template says so (``remind_after_s``: its
reviewers, on the template's channels; ``escalate_after_s``: the ``escalate_to`` role, on its
channels). Each step is an audit event (:data:`REMINDED_EVENT`, :data:`ESCALATED_EVENT`) and each
channel that delivered it another (:data:`TOLD_EVENT`), so what a request page shows of them is
read from the hash-chained log that ``audit verify`` checks, not from a table anyone could edit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal

from sqlalchemy import Connection, select

from mcp_approval.clock import iso8601
from mcp_approval.storage.audit import audit_events_table
from mcp_approval.storage.database import Database

__all__ = [
    "ESCALATED_EVENT",
    "REMINDED_EVENT",
    "STEP_EVENTS",
    "TOLD_EVENT",
    "Step",
    "ToldRecord",
    "told_about",
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
#: The most deliveries shown of one request (two steps on a few channels each).
_EVENTS_READ = 100
_A = audit_events_table


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


async def told_about(database: Database, request_id: str) -> tuple[ToldRecord, ...]:
    """The reminders and escalations delivered about ``request_id``, oldest first.

    Read as committed, linked into the chain or not yet: a read of a request never writes (no
    linking here), so it works on a store opened only to read.
    """
    query = (
        select(_A.c.at, _A.c.data_json)
        .where(_A.c.subject == request_id, _A.c.kind == TOLD_EVENT)
        .order_by(_A.c.event_id)
        .limit(_EVENTS_READ)
    )

    def read(conn: Connection) -> tuple[ToldRecord, ...]:
        found = []
        for row in conn.execute(query):
            data = json.loads(row.data_json)
            found.append(ToldRecord(str(data.get("step")), str(data.get("role")), str(data.get("channel")), row.at))
        return tuple(sorted(found, key=lambda told: (told.at, told.channel)))

    return await database.read(read)
