"""The local approval backend: requests kept durably in the server's own database.

Reviewers decide through the reviewer HTTP API (:mod:`mcp_approval.reviewers.api`) or
the ``mcp-approval review`` CLI; automatic resolvers (:class:`~mcp_approval.backends.RuleResolver`,
:class:`~mcp_approval.backends.CallableResolver`) may decide first. Every status change is a
compare-and-set UPDATE on ``status`` and ``version``, committed in the same transaction as its
decision row and audit event.

:class:`LocalApprovalBackend` composes the package's parts, each built here once: the queue
(:mod:`.queue`, :mod:`.endings`), the listing (:mod:`.listing`), decisions (:mod:`.decisions`),
the seal (:mod:`.sealing`) and the automatic resolvers (:mod:`.resolving`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Literal

from sqlalchemy import Connection

from mcp_approval.backends.contract import ApprovalState, ApprovalSubmission, SealedRequest, StatusListener
from mcp_approval.backends.local.decisions import Decisions, Wakeups
from mcp_approval.backends.local.delegation_rows import Delegation, delegation_findings
from mcp_approval.backends.local.delegations import Delegations
from mcp_approval.backends.local.endings import RequestEndings, TerminalHook
from mcp_approval.backends.local.listing import RequestListing
from mcp_approval.backends.local.queue import RequestQueue
from mcp_approval.backends.local.records import ApprovalRecord, RequestPage, RequestRecords
from mcp_approval.backends.local.resolvers import AutoResolver
from mcp_approval.backends.local.resolving import AutomaticResolution
from mcp_approval.backends.local.rules import ApprovalTemplate
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.backends.local.seal_manifest import SealManifest
from mcp_approval.backends.local.sealing import RequestSealing
from mcp_approval.backends.local.seals import RequestSeal
from mcp_approval.backends.local.similar_rows import RuleDecision, SimilarCallRule
from mcp_approval.backends.local.similar_store import SimilarCallRules, SimilarRuleSpec
from mcp_approval.backends.local.step_up import StepUp
from mcp_approval.clock import Clock, SystemClock
from mcp_approval.storage.audit import AuditLog
from mcp_approval.storage.database import Database
from mcp_approval.storage.migrations import Migrations

__all__ = ["LocalApprovalBackend"]

#: Handles looked at in a transaction that never committed are forgotten past this many.
_LOOKED_AT_MOST = 10_000


class LocalApprovalBackend:
    """An :class:`~mcp_approval.backends.contract.ApprovalBackend` kept in the server's database.

    Args:
        database: an already migrated database.
        templates: approval templates by name (who decides, how many approvers).
        roles: the roles a reviewer holds.
        resolvers: automatic deciders, at most one per template, each for a configured template.
        redact: argument names reviewers see as ``"[redacted]"``.
        audit: where audit events go (by default, the same database).
        clock: the source of time.
        seal: seals what reviewers see of each request (tool, arguments, requester, template,
            approvals required, deadline) under the server's binding key when it is stored. A
            request whose row no longer matches its seal is flagged (``integrity_failure``), shown
            without its content, and cannot be approved, by a reviewer or a resolver; so is one
            without its seals. Without a seal nothing is checked. Rows stored before sealing existed
            are sealed by the operator, once (:meth:`seal_requests_stored_before_sealing`), never by
            :meth:`start`.
            :class:`~mcp_approval.server.Approvals` replaces a backend built without one by a copy
            sealed under its binding key (:meth:`sealed_with`), so a server always checks.
        on_terminal: runs in every transaction that ends a request (see
            :data:`~mcp_approval.backends.TerminalHook`); an exception it raises rolls the change back.

    Raises:
        ValueError: a resolver decides a template that is not in ``templates``.
    """

    name = "local"
    supports_cancel = True

    def __init__(
        self,
        database: Database,
        *,
        templates: Mapping[str, ApprovalTemplate],
        roles: Callable[[str], frozenset[str]],
        resolvers: Sequence[AutoResolver] = (),
        redact: Collection[str] = (),
        audit: AuditLog | None = None,
        clock: Clock | None = None,
        seal: RequestSeal | None = None,
        on_terminal: TerminalHook | None = None,
    ) -> None:
        by_template = {resolver.template: resolver for resolver in resolvers}
        unknown = sorted(set(by_template) - set(templates))
        if unknown:
            raise ValueError(f"resolvers for templates that are not configured: {', '.join(unknown)}")
        self._db = database
        self._templates = dict(templates)
        self._roles = roles
        self._resolvers = tuple(by_template.values())
        self._redact = frozenset(redact)
        self._clock = clock or SystemClock()
        self._audit = audit or AuditLog(database, self._clock)
        self._seal = seal
        self._on_terminal = on_terminal
        # The parts, each given what it uses.
        self._sealing = RequestSealing(database, seal, self._audit, self._clock)
        endings = RequestEndings(self._audit, on_terminal)
        records = RequestRecords(self._templates, self._redact, self._sealing)
        self._queue = RequestQueue(database, self._clock, self._audit, self._templates, self._sealing, endings)
        self._delegations = Delegations(database, self._clock, self._audit, self._templates, roles, seal)
        self._listing = RequestListing(
            database, roles, self._templates, records, self._queue, True, self._clock, self._delegations
        )
        self._wakeups = Wakeups()
        self._decisions = Decisions(
            database, self._clock, self._audit, roles, self._templates, self._sealing, endings, records, self._wakeups
        )
        self._decisions.delegations = self._delegations
        self._similar = SimilarCallRules(
            database, self._clock, self._audit, self._templates, roles, seal, self._decisions, self._redact
        )
        self._resolution = AutomaticResolution(
            database, self._audit, by_template, self._sealing, self._decisions, self._similar
        )
        # Per handle opened by submit_in and not yet committed: whether a resolver or a rule could decide it.
        self._looked: dict[str, bool] = {}

    def sealed_with(self, seal: RequestSeal) -> LocalApprovalBackend:
        """This backend if it was built with a seal, else a new one like it that seals with ``seal``."""
        if self._seal is not None:
            return self
        return LocalApprovalBackend(
            self._db,
            templates=self._templates,
            roles=self._roles,
            resolvers=self._resolvers,
            redact=self._redact,
            audit=self._audit,
            clock=self._clock,
            seal=seal,
            on_terminal=self._on_terminal,
        )

    @property
    def templates(self) -> Mapping[str, ApprovalTemplate]:
        """The configured templates, by name."""
        return dict(self._templates)

    @property
    def migrations(self) -> tuple[Migrations, ...]:
        """The history of the tables this backend keeps in the server's database (``approval_requests``,
        ``approval_decisions``, ``console_sessions``): the server migrates it before :meth:`start`."""
        return (LOCAL_BACKEND_MIGRATIONS,)

    def approval_page_id(self, handle: str) -> str:
        """The id reviewers know the request by: its handle (``/approvals/{id}``, the console's page)."""
        return handle

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self, listener: StatusListener | None = None) -> None:
        """Remember ``listener``, report open requests that lack their seals, and resume resolver
        work left pending by a previous process.

        A start never seals, re-seals or repairs a row: an open request without its seals (one of
        an earlier release, or one a database writer unsealed) is logged at ERROR and recorded as an
        ``approval.unverified`` audit event, and stays an integrity failure.
        """
        self._wakeups.listener = listener
        await self._sealing.report_unsealed()
        await self._resolution.resume()

    async def stop(self) -> None:
        """Cancel resolver work in progress (it is resumed by the next :meth:`start`)."""
        await self._resolution.stop()

    # -- the operator's one-time sealing ------------------------------------------------------

    async def seal_requests_stored_before_sealing(self, *, actor: str, dry_run: bool = False) -> SealManifest:
        """Seal, as found, the requests an earlier release stored without seals; the manifest of it.

        The one-time operator step (``mcp-approval upgrade seal-requests``), to run once the last
        worker of the earlier release stopped. A request stored before its rules were is sealed with
        its template's rules as configured now; its decisions are sealed as recorded. The manifest
        (what was sealed, and what was left as it is, with why) is stored sealed beside the requests,
        and each sealed request gets an ``approval.sealed_as_found`` audit event. ``dry_run`` finds
        and checks the same requests and writes nothing.

        Raises:
            ReviewError: this backend holds no seal.
            SealStepDoneError: the step already ran on this database (a :class:`ReviewError`).
        """
        return await self._sealing.seal_requests(self._templates, actor=actor, dry_run=dry_run)

    async def seal_manifest(self) -> SealManifest | None:
        """The manifest :meth:`seal_requests_stored_before_sealing` stored, checked against its seal,
        or ``None`` when the step never ran here.

        Raises:
            ReviewError: this backend holds no seal, or the stored manifest does not authenticate.
        """
        return await self._sealing.manifest()

    # -- the backend contract -------------------------------------------------------------------

    async def submit(self, key: str, submission: ApprovalSubmission) -> str:
        """Open a request under ``key``, or return the one an equivalent earlier submission opened.

        Raises:
            SubmissionRejectedError: the submission names a template that is not configured.
        """
        request_id, created = await self._queue.submit(key, submission)
        if created:
            self.submitted(request_id, submission)
        return request_id

    def shares_database(self, database: object) -> bool:
        """Whether ``database`` is the one this backend keeps its requests in (creation is then one transaction)."""
        return database is self._db

    def submit_in(self, conn: Connection, key: str, submission: ApprovalSubmission) -> str:
        """:meth:`submit` inside the caller's write transaction on this backend's database.

        Call :meth:`submitted` once that transaction committed.

        Raises:
            SubmissionRejectedError: the submission names a template that is not configured.
        """
        handle = self._queue.submit_in(conn, key, submission)
        if len(self._looked) >= _LOOKED_AT_MOST:  # only transactions that rolled back leave entries behind
            self._looked.clear()
        self._looked[handle] = self._resolution.decides_in(conn, submission)
        return handle

    def submitted(self, handle: str, submission: ApprovalSubmission) -> None:
        """The request ``handle`` committed: its template's automatic resolver, if it has one, or a
        similar-call rule, if one may, decides it."""
        # A request opened by submit_in was looked at in its own transaction; others are put to the rules.
        worth_it = self._looked.pop(handle, None)
        if worth_it is None:
            worth_it = self._resolution.decides(submission.template)
        if worth_it:
            self._resolution.spawn(handle, submission.template)

    async def find(self, key: str) -> str | None:
        """The handle of the request submitted under ``key``, if any."""
        return await self._queue.find(key)

    async def status(self, handle: str) -> ApprovalState:
        """The request's state; a pending request past its deadline is expired now.

        An approved request's state comes from its sealed decisions under its sealed rules, never
        from its status column alone: rows that do not match their seals make it ``failed``.

        Raises:
            UnknownRequestError: no such request.
        """
        return await self._queue.status(handle)

    async def status_many(self, handles: Sequence[str]) -> dict[str, ApprovalState]:
        """:meth:`status` of many requests with one read; unknown handles are left out."""
        return await self._queue.status_many(handles)

    async def changed_since(self, since_ms: int) -> list[tuple[str, int]]:
        """``(handle, changed at)`` of the requests decided, expired or withdrawn at or after ``since_ms``.

        One range read per terminal status on ``ix_approval_requests_changed``: its cost follows
        the changes in the window, not the number of pending requests.
        """
        return await self._queue.changed_since(since_ms)

    async def sealed_request(self, handle: str) -> SealedRequest | None:
        """What the request was submitted as, checked against its seals (``None`` without a seal).

        Raises:
            RequestIntegrityError: the request's rows do not match their seals.
            UnknownRequestError: no such request.
        """
        return await self._sealing.sealed_request(handle)

    async def approval_failure(self, handle: str) -> str | None:
        """Why the request carries no approval its sealed decisions give, or ``None`` when it does.

        For ``audit verify``: a call that ran on this request must have had one. Without the
        binding keys only what the rows say can be read (an approve decision, the status).
        """
        return await self._sealing.approval_failure(handle)

    async def cancel(self, handle: str) -> None:
        """Withdraw a pending request; a terminal one is left as it is."""
        await self._queue.cancel(handle)

    async def expire_due(self) -> None:
        """Expire every pending request past its deadline now (listing calls this; so may a sweep)."""
        await self._queue.expire_due()

    # -- reviewer operations --------------------------------------------------------------------

    async def list_requests(
        self, status: Literal["pending", "decided"] = "pending", *, limit: int = 200
    ) -> list[ApprovalRecord]:
        """Pending requests (oldest first) or decided ones (latest first), every one of them."""
        return (await self.page_requests(status, limit=limit)).records

    async def page_requests(
        self,
        status: Literal["pending", "decided"] = "pending",
        *,
        viewer: str | None = None,
        offset: int = 0,
        limit: int = 200,
    ) -> RequestPage:
        """One page of pending requests (oldest first) or decided ones (latest first), with the total.

        With a ``viewer``, only the requests it may see (see :meth:`get_request`) are listed or counted.
        """
        return await self._listing.page(status, viewer=viewer, offset=offset, limit=limit)

    async def get_request(self, request_id: str, *, viewer: str | None = None) -> ApprovalRecord | None:
        """One request as ``viewer`` may see it (without a viewer, as it is), or ``None``.

        A principal sees the requests it may decide (by its template's reviewer role) and every
        request with :data:`~mcp_approval.backends.AUDITOR_ROLE`; its own requests without their
        reviewers' identities or comments; no other request.
        """
        return await self._listing.get(request_id, viewer=viewer)

    def sees_reviewers(self, principal: str, record: ApprovalRecord) -> bool:
        """Whether ``principal`` sees who decided ``record`` (an auditor, or one of its reviewers)."""
        return self._listing.sees_reviewers(principal, record)

    async def decide(
        self,
        request_id: str,
        reviewer: str,
        decision: Literal["approve", "deny"],
        comment: str | None = None,
        *,
        step_up: StepUp | None = None,
    ) -> ApprovalRecord:
        """Record ``reviewer``'s decision and return the request as it now stands.

        ``step_up`` is the verified second factor a template with ``step_up`` requires
        (:mod:`~mcp_approval.backends.local.step_up`); without it such a request is refused.

        Raises:
            UnknownRequestError: no such request.
            NotEligibleError: the reviewer lacks the template's role, or is the requester
                (:class:`StepUpRequiredError`: the template's step-up is missing or bound elsewhere).
            AlreadyDecidedError: the request is terminal, or this reviewer already decided it.
            RequestExpiredError: the deadline passed (the request is now expired).
        """
        return await self._decisions.decide(request_id, reviewer, decision, comment, step_up=step_up)

    def why_ineligible(self, reviewer: str, record: ApprovalRecord) -> str | None:
        """Why ``reviewer`` may not decide ``record``, or ``None``.

        The rules stored with the request only (reviewer role, self-approval); :meth:`decide`
        applies them again, together with the request's current state, when the decision is recorded.
        """
        return self._decisions.why_ineligible(reviewer, record)

    # -- similar-call rules (see backends.local.similar) ----------------------------------------

    async def approve_similar(
        self, request_id: str, reviewer: str, spec: SimilarRuleSpec, comment: str | None = None
    ) -> tuple[ApprovalRecord, SimilarCallRule]:
        """Approve the request as ``reviewer`` and write a similar-call rule deciding later calls like it.

        The approval and the rule are one transaction: a refused approval writes no rule.

        Raises:
            SimilarRuleError: the template forbids rules, the scope does not fit the request, or the
                expiry or use count is above the template's limits (a :class:`ReviewError`).
            UnknownRequestError, ReviewError: as :meth:`decide`.
        """
        return await self._similar.approve_similar(request_id, reviewer, spec, comment)

    async def revoke_similar_rule(self, rule_id: str, principal: str) -> SimilarCallRule:
        """Revoke a similar-call rule at once (its author, or a reviewer of its template, may).

        Raises:
            SimilarRuleError: no such rule, or already revoked.
            NotEligibleError: ``principal`` may not revoke it.
        """
        return await self._similar.revoke(rule_id, principal)

    async def similar_rules(self, *, viewer: str | None = None, active_only: bool = False) -> list[SimilarCallRule]:
        """The similar-call rules ``viewer`` may see (every one without a viewer), newest first."""
        return await self._similar.listed(viewer=viewer, active_only=active_only)

    async def similar_rule(self, rule_id: str, *, viewer: str | None = None) -> SimilarCallRule | None:
        """One similar-call rule as ``viewer`` may see it, or ``None``."""
        return await self._similar.get(rule_id, viewer=viewer)

    def similar_rule_limits(self, record: ApprovalRecord) -> tuple[float, int] | None:
        """How long (seconds) and for how many calls a similar-call rule written while approving
        ``record`` may last, as its template allows now; ``None`` when it allows no rule."""
        return self._similar.limits(record.template, record.rules)

    async def similar_rule_decisions(self, rule_id: str, *, viewer: str | None = None) -> list[RuleDecision] | None:
        """The calls a similar-call rule decided, newest first; ``None`` when ``viewer`` may not see the rule."""
        return await self._similar.decided(rule_id, viewer=viewer)

    async def decide_by_similar_rules(self, request_id: str) -> str | None:
        """Put a pending request to the similar-call rules now; the id of the rule that approved it, or ``None``.

        Submission does this already; this is for a request left pending (a restart does it too).
        """
        return await self._similar.decide(request_id)

    # -- delegations (see backends.local.delegations) -------------------------------------------

    async def delegate(self, delegator: str, delegate: str, template: str, duration_s: float) -> Delegation:
        """Hand ``delegator``'s role for ``template`` to ``delegate`` from now for ``duration_s`` seconds
        (raises :class:`DelegationError` or :class:`NotEligibleError`, as :meth:`Delegations.create`)."""
        return await self._delegations.create(delegator, delegate, template, duration_s)

    async def revoke_delegation(self, delegation_id: str, principal: str) -> Delegation:
        """Revoke a delegation at once; its delegator may (as :meth:`Delegations.revoke`)."""
        return await self._delegations.revoke(delegation_id, principal)

    async def delegations(self, *, viewer: str | None = None, active_only: bool = False) -> list[Delegation]:
        """The delegations ``viewer`` made or received (every one without a viewer, or to an auditor), newest first."""
        return await self._delegations.listed(viewer=viewer, active_only=active_only)

    async def delegation(self, delegation_id: str, *, viewer: str | None = None) -> Delegation | None:
        """One delegation as ``viewer`` may see it, or ``None``."""
        return await self._delegations.get(delegation_id, viewer=viewer)

    async def delegation_findings(self) -> list[str]:
        """For ``audit verify``: each delegation row failing its seal, and each delegated decision no
        live delegation from its delegator to its reviewer covered, one line each."""
        return await self._db.read(lambda conn: delegation_findings(conn, self._seal))
