"""The local backend's decisions: who may decide a request under its rules, and recording a
decision (N-of-M approvals, one denial ends it) as a compare-and-set on the request."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from mcp_approval.backends.contract import StatusListener, UnknownRequestError
from mcp_approval.backends.local.delegations import Delegations, Grant
from mcp_approval.backends.local.endings import RequestEndings
from mcp_approval.backends.local.errors import (
    AlreadyDecidedError,
    NotEligibleError,
    RequestExpiredError,
    ReviewError,
    UnverifiedRequestError,
)
from mcp_approval.backends.local.records import ApprovalRecord, RequestRecords
from mcp_approval.backends.local.rows import (
    Row,
    StaleError,
    cas,
    decision_rows,
    due,
    event_data,
    fetch,
    insert_decision,
    resulting_status,
)
from mcp_approval.backends.local.rules import ApprovalTemplate, RequestRules, decided_by
from mcp_approval.backends.local.sealing import RequestSealing
from mcp_approval.backends.local.step_up import StepUp, check_step_up
from mcp_approval.clock import Clock, iso8601
from mcp_approval.storage.audit import AuditLog
from mcp_approval.storage.database import Database

__all__ = ["DecisionHook", "Decisions", "Wakeups"]

#: Runs inside a decision's transaction (the connection, the locked request row, the time): what it
#: returns is added to the decision's audit events; what it raises rolls the decision back.
DecisionHook = Callable[[Connection, Row, int], Mapping[str, Any]]

_log = logging.getLogger(__name__)
#: How often a decision transaction is retried when a concurrent one won the compare-and-set.
_CAS_ATTEMPTS = 5


class Wakeups:
    """Wakes the listener the backend was started with when a decision ends a request."""

    def __init__(self) -> None:
        self.listener: StatusListener | None = None

    async def wake(self, request_id: str) -> None:
        """Tell the listener ``request_id`` changed; a failing listener is logged, never raised."""
        if self.listener is None:
            return
        try:
            await self.listener(request_id)
        except Exception:  # a wake-up failing must not undo or hide a committed decision
            _log.exception("approval status listener failed for %s…", request_id[:8])


@dataclass(frozen=True)
class _Outcome:
    record: ApprovalRecord
    terminal: bool
    expired: bool = False


class Decisions:
    """Records reviewers' (and resolvers') decisions.

    Args:
        database: the database the requests are kept in.
        clock: the source of time.
        audit: where audit events go.
        roles: the roles a reviewer holds.
        templates: the configured templates (the rules of rows stored before rules were).
        sealing: seals each decision, and refuses to approve a request whose rows fail their seals.
        endings: expires a request found past its deadline, and runs the hook when a decision ends one.
        records: the request as it stands after the decision.
        wakeups: woken when a decision ends a request.
    """

    def __init__(
        self,
        database: Database,
        clock: Clock,
        audit: AuditLog,
        roles: Callable[[str], frozenset[str]],
        templates: Mapping[str, ApprovalTemplate],
        sealing: RequestSealing,
        endings: RequestEndings,
        records: RequestRecords,
        wakeups: Wakeups,
    ) -> None:
        self._db = database
        self._clock = clock
        self._audit = audit
        self._roles = roles
        self._templates = templates
        self._sealing = sealing
        self._endings = endings
        self._records = records
        self._wakeups = wakeups
        #: The delegations a reviewer lacking a template's role may decide under (none: nobody may).
        self.delegations: Delegations | None = None

    async def decide(
        self,
        request_id: str,
        reviewer: str,
        decision: Literal["approve", "deny"],
        comment: str | None,
        *,
        automatic: bool = False,
        step_up: StepUp | None = None,
        within: DecisionHook | None = None,
    ) -> ApprovalRecord:
        """Record ``reviewer``'s decision and return the request as it now stands (``automatic``: a
        resolver's, which no role, self-approval or step-up rule limits; ``step_up``: the verified
        second factor a template with ``step_up`` needs, recorded in the decision's audit event).

        ``within`` runs in the decision's transaction once the request is found decidable, just
        before the decision is written; what it returns is added to the decision's audit events,
        and what it raises rolls the transaction back (a similar-call rule consumes a use so).

        Raises:
            UnknownRequestError: no such request.
            NotEligibleError: the reviewer lacks the template's role, or is the requester.
            StepUpRequiredError: the template needs a step-up this decision lacks, or it was bound to
                another request or decision.
            AlreadyDecidedError: the request is terminal, or this reviewer already decided it.
            RequestExpiredError: the deadline passed (the request is now expired).
            UnverifiedRequestError: an approval of a request whose rows fail their seals.
            ReviewError: the request kept changing under the decision, or is sealed and this backend has no seal.
        """
        if decision not in ("approve", "deny"):
            raise ValueError(f"decision must be 'approve' or 'deny', not {decision!r}")
        for _ in range(_CAS_ATTEMPTS):
            now = self._clock.now_ms()

            def write(conn: Connection, now: int = now) -> _Outcome:
                return self._decide_in(conn, now, request_id, reviewer, decision, comment, automatic, step_up, within)

            try:
                outcome = await self._db.write(write)
                break
            except UnverifiedRequestError as refused:
                # Told, as a resolver's refusal is: the audit trail and mcp_approval_integrity_failures.
                data = {"why": refused.why, "decision": decision}
                await self._audit.record("approval.unverified", subject=request_id, actor=reviewer, data=data)
                raise
            except IntegrityError:
                # The same reviewer's concurrent decision committed first.
                raise AlreadyDecidedError(f"{reviewer} already decided request {request_id[:8]}…") from None
            except StaleError:
                continue
        else:
            raise ReviewError(f"request {request_id[:8]}… kept changing; try again")
        if outcome.terminal:
            await self._wakeups.wake(request_id)
        if outcome.expired:
            raise RequestExpiredError(f"request {request_id[:8]}… expired before the decision")
        return outcome.record

    def check_eligible(self, row: Row, reviewer: str) -> None:
        """Refuse ``reviewer`` on the request ``row`` by the rules stored with it (before anything
        else about the decision is looked at; :meth:`decide` checks again as it records it).

        Raises:
            NotEligibleError: the reviewer lacks the template's role, or is the requester.
        """
        self._check_eligible(row, decided_by(row, self._templates), reviewer, self._clock.now_ms())

    def why_ineligible(self, reviewer: str, record: ApprovalRecord) -> str | None:
        """Why ``reviewer`` may not decide ``record`` by the rules stored with it, or ``None``."""
        when = (record.created_at, self._clock.now_ms())
        reason = _why_ineligible(reviewer, self._roles(reviewer), record.requester, record.template, record.rules, when)
        if (
            reason is not None
            and reviewer != record.requester
            and record.rules is not None
            and self.delegations is not None
            and self.delegations.delegated(reviewer, record.template)
        ):
            return None  # a delegate, as last read: the decision checks the delegation itself
        return reason

    def _decide_in(
        self,
        conn: Connection,
        now: int,
        request_id: str,
        reviewer: str,
        decision: str,
        comment: str | None,
        automatic: bool,
        step_up: StepUp | None = None,
        within: DecisionHook | None = None,
    ) -> _Outcome:
        row = fetch(conn, request_id, lock=True)
        if row is None:
            raise UnknownRequestError(f"no approval request {request_id[:8]}…")
        if row["status"] != "pending":
            raise AlreadyDecidedError(f"request {request_id[:8]}… is already {row['status']}")
        self._sealing.check_decidable(row)
        rules = decided_by(row, self._templates)
        behalf: Grant | None = None
        if not automatic:
            behalf = self._authority(conn, row, rules, reviewer, now)
            # Checked against the locked row: the step-up confirmed this request as it stands, and this decision.
            check_step_up(row, rules.step_up if rules is not None else None, decision, step_up)
        failure = self._sealing.failure(row, decision_rows(conn, [request_id]))
        if failure is not None and decision == "approve":
            raise UnverifiedRequestError(f"request {request_id[:8]}… cannot be approved: {failure}", why=failure)
        if due(row, now):
            # The expiry must commit, so it is returned, not raised (raising rolls back).
            self._endings.expire_in(conn, row, now)
            return _Outcome(self._reload(conn, request_id), terminal=True, expired=True)
        about: dict[str, Any] = {**event_data(row), **(within(conn, row, now) if within is not None else {})}
        if behalf is not None:
            about = {**about, "on_behalf_of": behalf.delegator, "delegation": behalf.delegation_id}
        insert_decision(
            conn,
            request_id,
            reviewer,
            decision,
            comment,
            now,
            seal=self._sealing.seal,
            on_behalf_of=None if behalf is None else behalf.delegator,
            delegation_id=None if behalf is None else behalf.delegation_id,
        )
        data: dict[str, Any] = {"decision": decision, **about}
        if step_up is not None and not automatic:
            data["step_up"] = step_up.to_json()
        self._audit.record_in(conn, now, "approval.decision", subject=request_id, actor=reviewer, data=data)
        target = resulting_status(conn, row, decision)
        values: dict[str, Any] = {}
        if target is not None:
            values = {"status": target, "decided_at": now}
            if target == "approved" and rules is not None:
                values["approved_until"] = now + rules.approval_valid_ms
        cas(conn, row, now, **values)  # bumps the version even when the request stays pending
        if target is not None:
            self._audit.record_in(conn, now, f"approval.{target}", subject=request_id, actor=reviewer, data=about)
            self._endings.ended_in(conn, request_id, target, now)
        return _Outcome(self._reload(conn, request_id), terminal=target is not None)

    def _check_eligible(self, row: Row, rules: RequestRules | None, reviewer: str, now: int) -> None:
        when = (int(row["created_at"]), now)
        reason = _why_ineligible(reviewer, self._roles(reviewer), row["requester"], row["template"], rules, when)
        if reason is not None:
            raise NotEligibleError(reason)

    def _authority(
        self, conn: Connection, row: Row, rules: RequestRules | None, reviewer: str, now: int
    ) -> Grant | None:
        """The delegation ``reviewer`` decides ``row`` under (``None``: in their own right).

        Raises:
            NotEligibleError: neither their own roles nor a live delegation let them decide it.
        """
        when = (int(row["created_at"]), now)
        requester = row["requester"]
        reason = _why_ineligible(reviewer, self._roles(reviewer), requester, row["template"], rules, when)
        if reason is None:
            return None
        if self.delegations is None or rules is None or (reviewer == requester and not rules.allow_self_approval):
            raise NotEligibleError(reason)
        grants = self.delegations.grants_in(conn, reviewer, row["template"], now)
        for grant in grants:
            if requester in (reviewer, grant.delegator):
                continue  # delegated authority never decides the delegate's or the delegator's own request
            roles = self._roles(grant.delegator)
            if _why_ineligible(grant.delegator, roles, requester, row["template"], rules, when) is None:
                return grant
        if grants:
            names = ", ".join(grant.delegator for grant in grants)
            raise NotEligibleError(
                f"{reviewer} decides template {row['template']!r} only on behalf of {names}, and a delegated "
                "decision never decides a request its delegate or delegator made"
            )
        raise NotEligibleError(reason)

    def _reload(self, conn: Connection, request_id: str) -> ApprovalRecord:
        row = fetch(conn, request_id)
        assert row is not None  # it was locked in this transaction
        return self._records.record(row, decision_rows(conn, [request_id]))


def _why_ineligible(
    reviewer: str,
    roles: frozenset[str],
    requester: str,
    template: str | None,
    rules: RequestRules | None,
    when: tuple[int, int],
) -> str | None:
    """Why a reviewer holding ``roles`` may not decide a request of ``requester`` decided by ``rules``
    (``when``: the request's creation and now, which say whether it escalated)."""
    name = template or "(default)"
    if rules is None:
        # Stored before rules were, and its template has left the configuration: nobody may decide it.
        return f"template {name!r} is not configured, so nobody may decide this request"
    if reviewer == requester and not rules.allow_self_approval:
        return f"{reviewer} made this request and template {name!r} forbids self-approval"
    created_at, now = when
    if not rules.may_decide(roles, created_at=created_at, now=now):
        escalates_at = rules.escalates_at(created_at)
        if escalates_at is not None and rules.escalation_role in roles:
            return (
                f"{reviewer} holds the escalation role {rules.escalation_role!r}, "
                f"which decides only once the request escalated (at {iso8601(escalates_at)})"
            )
        return f"{reviewer} lacks the role {rules.reviewer_role!r} template {name!r} requires"
    return None
