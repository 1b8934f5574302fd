"""The local backend's listing: pages of requests and single requests, each as its viewer may see it.

A principal sees the requests it may decide (by their rules' reviewer role, or their escalation
role once they escalated, or by a live delegation of their template) and, with
:data:`AUDITOR_ROLE`, every request with its reviewers; its own requests without their
reviewers' identities or comments; no other request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Literal, Protocol

from sqlalchemy import ColumnElement, Connection, func, or_, select

from mcp_approval.backends.local.queue import RequestQueue
from mcp_approval.backends.local.records import ApprovalRecord, RequestPage, RequestRecords
from mcp_approval.backends.local.rows import decision_rows
from mcp_approval.backends.local.rules import DEFAULT_TEMPLATE, ApprovalTemplate
from mcp_approval.backends.local.schema import approval_requests_table
from mcp_approval.backends.told import told_about
from mcp_approval.clock import Clock, SystemClock
from mcp_approval.storage.database import Database

__all__ = ["AUDITOR_ROLE", "DelegatedTemplates", "RequestListing"]


class DelegatedTemplates(Protocol):
    """The templates a delegate decides by delegation (:class:`~.delegations.Delegations` is one)."""

    async def refresh(self) -> None:
        """Read them now, for every delegate."""
        ...

    def delegated_templates(self, delegate: str) -> list[str]:
        """Those :meth:`refresh` last read for ``delegate`` and still live."""
        ...


_R = approval_requests_table
#: The role that lets a principal read every request and its reviewers (it decides none by itself).
AUDITOR_ROLE = "auditor"


class RequestListing:
    """Lists and reads requests for a viewer.

    Args:
        database: the database the requests are kept in.
        roles: the roles a principal holds.
        templates: the configured templates (who reviews rows stored before their rules were).
        records: makes a request's record of its rows.
        queue: expires what is due before it is listed or read.
        told: whether a request read shows who was told about it (its reminders and escalations,
            whose audit events are in ``database``).
        clock: the source of time (whether a request escalated).
        delegated: the templates a viewer decides by delegation (their requests are shown too).
    """

    def __init__(
        self,
        database: Database,
        roles: Callable[[str], frozenset[str]],
        templates: Mapping[str, ApprovalTemplate],
        records: RequestRecords,
        queue: RequestQueue,
        told: bool = False,
        clock: Clock | None = None,
        delegated: DelegatedTemplates | None = None,
    ) -> None:
        self._delegated = delegated
        self._told = told
        self._clock = clock or SystemClock()
        self._db = database
        self._roles = roles
        self._templates = templates
        self._records = records
        self._queue = queue

    async def page(
        self, status: Literal["pending", "decided"], *, viewer: str | None, offset: int, limit: int
    ) -> RequestPage:
        """One page of pending requests (oldest first) or decided ones (latest first), with the total;
        with a ``viewer``, only the requests it may see are listed or counted."""
        await self._queue.expire_due()
        if self._delegated is not None:
            await self._delegated.refresh()
        where = _R.c.status == "pending" if status == "pending" else _R.c.status != "pending"
        visible = self._visible_rows(viewer)
        if visible is not None:
            where = where & visible
        query = select(_R).where(where)
        if status == "pending":
            query = query.order_by(_R.c.created_at, _R.c.request_id)
        else:
            query = query.order_by(_R.c.updated_at.desc(), _R.c.request_id)

        def read(conn: Connection) -> RequestPage:
            total = conn.execute(select(func.count()).select_from(_R).where(where)).scalar_one()
            rows = [dict(row) for row in conn.execute(query.offset(offset).limit(limit)).mappings()]
            decisions = decision_rows(conn, [row["request_id"] for row in rows]) if rows else []
            shown = [self._shown(self._records.record(row, decisions), viewer) for row in rows]
            return RequestPage([record for record in shown if record is not None], offset, limit, total)

        return await self._db.read(read)

    async def get(self, request_id: str, *, viewer: str | None) -> ApprovalRecord | None:
        """One request as ``viewer`` may see it (without a viewer, as it is), or ``None``."""
        row = await self._queue.current(request_id)
        if row is None:
            return None
        if self._delegated is not None:
            await self._delegated.refresh()
        decisions = await self._db.read(lambda conn: decision_rows(conn, [request_id]))
        record = self._records.record(row, decisions)
        if self._told:
            record = replace(record, told=await told_about(self._db, request_id))
        return self._shown(record, viewer)

    def sees_reviewers(self, principal: str, record: ApprovalRecord) -> bool:
        """Whether ``principal`` sees who decided ``record`` (an auditor, or one of its reviewers)."""
        roles = self._roles(principal)
        if AUDITOR_ROLE in roles:
            return True
        rules = record.rules
        delegated = self._delegated.delegated_templates(principal) if self._delegated is not None else []
        if rules is not None and record.template in delegated:
            return True
        return rules is not None and rules.may_decide(roles, created_at=record.created_at, now=self._clock.now_ms())

    def _shown(self, record: ApprovalRecord, viewer: str | None) -> ApprovalRecord | None:
        """``record`` as ``viewer`` may see it, or ``None`` when it may not see it at all."""
        if viewer is None or self.sees_reviewers(viewer, record):
            return record
        return record.without_reviewers() if record.requester == viewer else None

    def _visible_rows(self, viewer: str | None) -> ColumnElement[bool] | None:
        """The rows ``viewer`` may see, as a condition (``None``: all of them)."""
        if viewer is None:
            return None
        roles = self._roles(viewer)
        if AUDITOR_ROLE in roles:
            return None
        clauses = [_R.c.requester == viewer, _R.c.reviewer_role.in_(sorted(roles))]
        # Rows stored before their rules were: decided by their template as configured now.
        legacy = _R.c.reviewer_role.is_(None)
        reviewed = [name for name, rules in self._templates.items() if rules.reviewer_role in roles]
        clauses.append(legacy & _R.c.template.in_(reviewed))
        if DEFAULT_TEMPLATE.reviewer_role in roles:
            clauses.append(legacy & _R.c.template.is_(None))
        if self._delegated is not None:
            delegated = self._delegated.delegated_templates(viewer)
            if delegated:
                clauses.append(_R.c.template.in_(delegated))
        # Requests that escalated to a role the viewer holds, as their template's rules seal it now
        # (each row's own sealed rules decide whether the viewer may decide it).
        now = self._clock.now_ms()
        for name, template in self._templates.items():
            if template.escalation_may_decide and template.escalate_to in roles and template.escalate_after_s:
                since = now - round(template.escalate_after_s * 1000)
                clauses.append((_R.c.template == name) & (_R.c.created_at <= since))
        return or_(*clauses)
