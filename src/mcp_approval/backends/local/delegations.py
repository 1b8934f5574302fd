"""Delegations at work: a reviewer handing their role for one template to another reviewer for a
period, revoking it, listing them, and finding the delegation a decision is made under.

Only a reviewer who holds the template's ``reviewer_role`` in their own right may delegate it:
a delegation gives its delegate no role, only authority over one template's requests, so a
delegate cannot hand it on (no chains). A delegated decision names its delegate (``reviewer``)
and its delegator (``on_behalf_of``); it stands for both of them, so neither may decide the
request again, and it never decides a request either of them made. A delegation needs a period
(at most the template's ``delegation_max_s``); a template with ``delegation = false`` forbids
them. A delegation whose row fails its seal, or whose revocation is on record, delegates nothing.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sqlalchemy import Connection, func, select, update

from mcp_approval.backends.local.delegation_rows import (
    DELEGATION_CREATED,
    DELEGATION_REVOKED,
    Delegation,
    DelegationError,
    delegation_failure,
    fetch_delegation,
    seal_delegation,
)
from mcp_approval.backends.local.errors import NotEligibleError
from mcp_approval.backends.local.listing import AUDITOR_ROLE
from mcp_approval.backends.local.rules import ApprovalTemplate
from mcp_approval.backends.local.schema import approval_delegations_table
from mcp_approval.backends.local.seals import RequestSeal
from mcp_approval.clock import Clock
from mcp_approval.storage.audit import AuditLog
from mcp_approval.storage.audit_chain import audit_events_table
from mcp_approval.storage.database import Database

__all__ = ["Delegations", "Grant"]

_G = approval_delegations_table
_A = audit_events_table


@dataclass(frozen=True)
class Grant:
    """A live delegation a decision may be made under: its id, its delegator, its end and its template."""

    delegation_id: str
    delegator: str
    ends_at: int
    template: str


class Delegations:
    """Writes, revokes and lists delegations, and finds the live ones of a delegate.

    Args:
        database: the database the requests and delegations are kept in.
        clock: the source of time.
        audit: where delegations' lives are recorded.
        templates: the configured templates (whether, and how long, they may be delegated).
        roles: the roles a reviewer holds in their own right.
        seal: seals each delegation row; without it none is written, and none delegates.
    """

    def __init__(
        self,
        database: Database,
        clock: Clock,
        audit: AuditLog,
        templates: Mapping[str, ApprovalTemplate],
        roles: Callable[[str], frozenset[str]],
        seal: RequestSeal | None,
    ) -> None:
        self._db = database
        self._clock = clock
        self._audit = audit
        self._templates = templates
        self._roles = roles
        self._seal = seal
        # The templates each delegate was last found to decide by delegation, and until when: what
        # the synchronous eligibility hint (buttons, links) reads; a decision always reads the rows.
        self._seen: dict[str, dict[str, int]] = {}

    # -- writing, revoking, listing ------------------------------------------------------------

    async def create(self, delegator: str, delegate: str, template: str, duration_s: float) -> Delegation:
        """Hand ``delegator``'s role for ``template`` to ``delegate`` from now for ``duration_s`` seconds.

        Raises:
            DelegationError: the template is not configured or forbids delegation, the period is
                missing or above the template's ``delegation_max_s``, the delegate is the delegator,
                or there is no binding key.
            NotEligibleError: ``delegator`` does not hold the template's role in their own right.
        """
        configured = self._templates.get(template)
        if configured is None:
            raise DelegationError(f"template {template!r} is not configured")
        if not configured.delegation:
            raise DelegationError(f"template {template!r} forbids delegation (delegation = false)")
        if not delegate or delegate == delegator:
            raise DelegationError("a delegation needs a delegate other than the delegator")
        if not duration_s > 0:
            raise DelegationError("a delegation needs a period: a positive number of seconds")
        if duration_s > configured.delegation_max_s:
            raise DelegationError(
                f"a delegation of template {template!r} lasts at most {configured.delegation_max_s:g} seconds "
                f"(delegation_max_s), not {duration_s:g}"
            )
        if configured.reviewer_role not in self._roles(delegator):
            raise NotEligibleError(
                f"{delegator} does not hold the role {configured.reviewer_role!r} template {template!r} requires "
                "in their own right, so has no role of it to delegate (a delegated role cannot be handed on)"
            )
        seal = self._seal
        if seal is None:
            raise DelegationError("delegations are sealed with the server's binding keys, which were not given here")
        now = self._clock.now_ms()
        row = {
            "delegation_id": "dlg_" + secrets.token_hex(12),
            "delegator": delegator,
            "delegate": delegate,
            "template": template,
            "starts_at": now,
            "ends_at": now + round(duration_s * 1000),
            "created_at": now,
            "revoked_at": None,
            "revoked_by": None,
        }
        stored = {**row, "seal": seal_delegation(seal, row)}

        def write(conn: Connection) -> None:
            conn.execute(_G.insert(), stored)
            data = {"delegate": delegate, "template": template, "starts_at": now, "ends_at": row["ends_at"]}
            subject = str(row["delegation_id"])
            self._audit.record_in(conn, now, DELEGATION_CREATED, subject=subject, actor=delegator, data=data)

        await self._db.write(write)
        await self.refresh()
        return Delegation.of(stored, None, now)

    async def revoke(self, delegation_id: str, principal: str) -> Delegation:
        """Revoke a delegation at once (its delegator may).

        Raises:
            DelegationError: no such delegation, or already revoked.
            NotEligibleError: ``principal`` is not its delegator.
        """
        now = self._clock.now_ms()

        def write(conn: Connection) -> Delegation:
            row = fetch_delegation(conn, delegation_id, lock=True)
            if row is None:
                raise DelegationError(f"no delegation {delegation_id}")
            if principal != row["delegator"]:
                who = row["delegator"]
                raise NotEligibleError(f"only {who}, who delegated it, may revoke delegation {delegation_id}")
            if row["revoked_at"] is not None or _revocation_on_record(conn, delegation_id):
                raise DelegationError(f"delegation {delegation_id} is already revoked")
            conn.execute(
                update(_G).where(_G.c.delegation_id == delegation_id).values(revoked_at=now, revoked_by=principal)
            )
            data = {"delegate": row["delegate"], "template": row["template"]}
            self._audit.record_in(conn, now, DELEGATION_REVOKED, subject=delegation_id, actor=principal, data=data)
            revoked = {**row, "revoked_at": now, "revoked_by": principal}
            return Delegation.of(revoked, delegation_failure(self._seal, revoked), now)

        revoked = await self._db.write(write)
        await self.refresh()
        return revoked

    async def get(self, delegation_id: str, *, viewer: str | None = None) -> Delegation | None:
        """One delegation, checked against its seal, as ``viewer`` may see it (``None`` if not)."""
        row = await self._db.read(lambda conn: fetch_delegation(conn, delegation_id))
        if row is None or (viewer is not None and not self._may_see(viewer, row)):
            return None
        return Delegation.of(row, delegation_failure(self._seal, row), self._clock.now_ms())

    async def listed(self, *, viewer: str | None = None, active_only: bool = False) -> list[Delegation]:
        """The delegations (newest first) ``viewer`` made or received (every one to an auditor, or without a viewer)."""
        query = select(_G).order_by(_G.c.created_at.desc(), _G.c.delegation_id)
        if viewer is not None and AUDITOR_ROLE not in self._roles(viewer):
            query = query.where((_G.c.delegator == viewer) | (_G.c.delegate == viewer))
        rows = await self._db.read(lambda conn: [dict(row) for row in conn.execute(query).mappings()])
        now = self._clock.now_ms()
        found = [Delegation.of(row, delegation_failure(self._seal, row), now) for row in rows]
        return [item for item in found if not active_only or item.state() == "active"]

    def _may_see(self, principal: str, row: Mapping[str, object]) -> bool:
        return principal in (row["delegator"], row["delegate"]) or AUDITOR_ROLE in self._roles(principal)

    # -- deciding under a delegation -----------------------------------------------------------

    def grants_in(self, conn: Connection, delegate: str, template: str | None, now: int) -> list[Grant]:
        """The delegations ``delegate`` may decide a request of ``template`` under at ``now``, oldest
        first: live, sealed as written, not revoked on record, of a template that allows delegation,
        and by a delegator who holds its role in their own right now."""
        return [grant for who, grant in self._live(conn, now, delegate, template) if who == delegate]

    def _live(self, conn: Connection, now: int, delegate: str | None, template: str | None) -> list[tuple[str, Grant]]:
        """``(delegate, grant)`` of the usable delegations at ``now`` (of ``delegate`` and ``template``
        if given), oldest first."""
        if self._seal is None:
            return []
        usable = {name: rules for name, rules in self._templates.items() if rules.delegation}
        names = sorted(usable) if template is None else [template] if template in usable else []
        if not names:
            return []
        query = select(_G).where(
            _G.c.template.in_(names), _G.c.revoked_at.is_(None), _G.c.starts_at <= now, _G.c.ends_at > now
        )
        if delegate is not None:
            # Deciding: a revocation committing meanwhile waits for the decision, or the decision for it.
            query = query.where(_G.c.delegate == delegate).with_for_update(read=True)
        found: list[tuple[str, Grant]] = []
        for item in conn.execute(query.order_by(_G.c.created_at, _G.c.delegation_id)).mappings():
            row = dict(item)
            configured = usable[row["template"]]
            if delegation_failure(self._seal, row) is not None or _revocation_on_record(conn, row["delegation_id"]):
                continue  # an edited or revoked delegation delegates nothing
            if row["ends_at"] - row["starts_at"] > round(configured.delegation_max_s * 1000):
                continue  # longer than the template allows now
            if configured.reviewer_role not in self._roles(row["delegator"]):
                continue  # the delegator lost the role: there is nothing left to delegate
            grant = Grant(row["delegation_id"], row["delegator"], int(row["ends_at"]), row["template"])
            found.append((row["delegate"], grant))
        return found

    async def refresh(self) -> None:
        """Read which templates each delegate may decide by delegation now (for :meth:`delegated`).

        Every read of a request does this (a few rows: the live delegations), so the synchronous
        eligibility hint of the channels that read a request first (console, Slack, e-mail) sees
        delegations written or revoked by any worker.
        """
        if self._seal is None or not any(rules.delegation for rules in self._templates.values()):
            self._seen = {}  # nothing can be delegated here: no read
            return
        now = self._clock.now_ms()
        live = await self._db.read(lambda conn: self._live(conn, now, None, None))
        seen: dict[str, dict[str, int]] = {}
        for delegate, grant in live:
            mine = seen.setdefault(delegate, {})
            mine[grant.template] = max(mine.get(grant.template, 0), grant.ends_at)
        self._seen = seen

    def delegated(self, delegate: str, template: str | None) -> bool:
        """Whether ``delegate`` was last found (:meth:`refresh`) to decide ``template`` by delegation, still now."""
        until = self._seen.get(delegate, {}).get(template or "")
        return until is not None and self._clock.now_ms() < until

    def delegated_templates(self, delegate: str) -> list[str]:
        """The templates :meth:`delegated` says ``delegate`` decides by delegation."""
        return sorted(name for name in self._seen.get(delegate, {}) if self.delegated(delegate, name))


def _revocation_on_record(conn: Connection, delegation_id: str) -> bool:
    # A revocation is an audit event too: clearing the column does not bring a delegation back.
    query = select(func.count()).where(_A.c.subject == delegation_id, _A.c.kind == DELEGATION_REVOKED)
    return int(conn.execute(query).scalar_one()) > 0
