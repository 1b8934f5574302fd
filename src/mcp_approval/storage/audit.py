"""An append-only audit log of approval events, kept in the ``audit_events`` table.

The audit log belongs to the storage layer (every layer above records into it); its table has
its own migration history (:data:`AUDIT_MIGRATIONS`, revisions in ``audit_schema_versions/``).

Events are only ever inserted. :meth:`AuditLog.record_in` writes inside a transaction the
caller already holds, so a state change and the event describing it commit (or roll back)
together; :meth:`AuditLog.record` is the stand-alone form.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import BigInteger, Column, Connection, Index, Integer, MetaData, String, Table, Text, select

from mcp_approval.clock import Clock, SystemClock
from mcp_approval.storage.database import Database
from mcp_approval.storage.migrations import Migrations

__all__ = ["AUDIT_MIGRATIONS", "AuditEvent", "AuditLog", "audit_events_table"]

#: The audit table's history; release schema version 2 created it.
AUDIT_MIGRATIONS = Migrations("audit", Path(__file__).with_name("audit_schema_versions"), legacy=((2, "audit_0001"),))

_metadata = MetaData()

audit_events_table = Table(
    "audit_events",
    _metadata,
    Column("event_id", Integer, primary_key=True, autoincrement=True),
    Column("at", BigInteger, nullable=False),
    Column("kind", String(64), nullable=False),
    # The approval request or task the event is about.
    Column("subject", String(128), nullable=True),
    Column("actor", String(256), nullable=True),
    Column("data_json", Text, nullable=False, default="{}"),
)

Index("ix_audit_events_subject", audit_events_table.c.subject, audit_events_table.c.event_id)

_A = audit_events_table


@dataclass(frozen=True)
class AuditEvent:
    """One recorded event.

    Attributes:
        event_id: the event's position in the log (increasing).
        at: when it happened (epoch ms).
        kind: what happened, e.g. ``approval.submitted``.
        subject: the approval request or task it is about.
        actor: who caused it (a principal, a reviewer, ``resolver:<template>``), if anyone.
        data: further details.
    """

    event_id: int
    at: int
    kind: str
    subject: str | None
    actor: str | None
    data: Mapping[str, Any] = field(default_factory=dict)


class AuditLog:
    """Appends audit events to a database and reads them back.

    Args:
        database: a database migrated with :data:`AUDIT_MIGRATIONS`.
        clock: the source of event times for :meth:`record`.
    """

    def __init__(self, database: Database, clock: Clock | None = None) -> None:
        self._database = database
        self._clock = clock or SystemClock()

    async def record(
        self, kind: str, *, subject: str | None = None, actor: str | None = None, data: Mapping[str, Any] | None = None
    ) -> None:
        """Append one event in its own transaction."""
        now = self._clock.now_ms()
        await self._database.write(
            lambda conn: self.record_in(conn, now, kind, subject=subject, actor=actor, data=data)
        )

    def record_in(
        self,
        conn: Connection,
        now_ms: int,
        kind: str,
        *,
        subject: str | None = None,
        actor: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        """Append one event inside the caller's transaction (it commits with the caller's writes)."""
        conn.execute(
            _A.insert(),
            {
                "at": now_ms,
                "kind": kind,
                "subject": subject,
                "actor": actor,
                "data_json": json.dumps(dict(data or {}), separators=(",", ":"), sort_keys=True, ensure_ascii=False),
            },
        )

    async def events(self, subject: str | None = None, limit: int = 100) -> list[AuditEvent]:
        """The latest ``limit`` events (about ``subject``, if given), oldest first."""

        def read(conn: Connection) -> list[AuditEvent]:
            query = select(_A).order_by(_A.c.event_id.desc()).limit(limit)
            if subject is not None:
                query = query.where(_A.c.subject == subject)
            rows = conn.execute(query).mappings().all()
            return [_event(dict(row)) for row in reversed(rows)]

        return await self._database.read(read)


def _event(row: Mapping[str, Any]) -> AuditEvent:
    return AuditEvent(
        event_id=row["event_id"],
        at=row["at"],
        kind=row["kind"],
        subject=row["subject"],
        actor=row["actor"],
        data=json.loads(row["data_json"] or "{}"),
    )
