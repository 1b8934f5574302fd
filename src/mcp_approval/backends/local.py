"""The local approval backend: requests kept durably in the server's own database.

Reviewers decide through the reviewer HTTP API (:mod:`mcp_approval.reviewers.api`) or
the ``mcp-approval review`` CLI; automatic resolvers (:mod:`mcp_approval.backends.resolvers`)
may decide first. Every status change is a compare-and-set UPDATE on ``status`` and
``version``, committed in the same transaction as its decision row and audit event.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from sqlalchemy import ColumnElement, Connection, func, or_, select
from sqlalchemy.exc import IntegrityError

from mcp_approval.backends.contract import (
    ApprovalState,
    ApprovalStatus,
    ApprovalSubmission,
    RequestIntegrityError,
    SealedRequest,
    StatusListener,
    SubmissionRejectedError,
    UnknownRequestError,
)
from mcp_approval.backends.local_records import (
    AlreadyDecidedError,
    ApprovalRecord,
    NotEligibleError,
    RequestExpiredError,
    RequestPage,
    ReviewError,
    Row,
    StaleError,
    cas,
    decision_rows,
    due,
    existing_request,
    fetch,
    insert_decision,
    record_from_rows,
    resulting_status,
)
from mcp_approval.backends.local_rules import ApprovalTemplate, RequestRules
from mcp_approval.backends.local_schema import approval_decisions_table, approval_requests_table
from mcp_approval.backends.local_seals import (
    RequestSeal,
    approval_granted,
    request_failure,
    rules_of,
    sealed_content,
)
from mcp_approval.backends.local_upgrade import seal_found_requests
from mcp_approval.backends.resolvers import AutoResolver
from mcp_approval.clock import Clock, SystemClock, iso8601
from mcp_approval.storage.audit import AuditLog
from mcp_approval.storage.database import Database

__all__ = [
    "AUDITOR_ROLE",
    "AlreadyDecidedError",
    "ApprovalRecord",
    "LocalApprovalBackend",
    "NotEligibleError",
    "RequestExpiredError",
    "RequestPage",
    "RequestSeal",
    "ReviewError",
    "TerminalHook",
    "UnverifiedRequestError",
]

_R = approval_requests_table
_D = approval_decisions_table
_log = logging.getLogger(__name__)
#: Requests that name no template: one approver holding "approver", no self-approval. A request
#: naming a template that is not configured is refused (it never falls back to this one).
_DEFAULT_TEMPLATE = ApprovalTemplate()
#: The role that lets a principal read every request and its reviewers (it decides none by itself).
AUDITOR_ROLE = "auditor"
#: The statuses a request can change to (all terminal): what :meth:`LocalApprovalBackend.changed_since` lists.
_CHANGED = sorted(status.value for status in ApprovalStatus if status.terminal)
#: How often a decision transaction is retried when a concurrent one won the compare-and-set.
_CAS_ATTEMPTS = 5


#: Called as ``hook(conn, request_id, status, now_ms)`` inside the transaction that makes a request
#: terminal (decided, cancelled or expired), so what it writes commits, or not, with the change.
TerminalHook = Callable[[Connection, str, str, int], None]


class UnverifiedRequestError(ReviewError):
    """The request's stored content does not match its seal, so nobody may approve it."""


@dataclass(frozen=True)
class _Outcome:
    record: ApprovalRecord
    terminal: bool
    expired: bool = False


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
            without its content, and cannot be approved, by a reviewer or a resolver. Without a
            seal nothing is checked. Rows stored before sealing existed are sealed by :meth:`start`.
            :class:`~mcp_approval.server.Approvals` replaces a backend built without one by a copy
            sealed under its binding key (:meth:`sealed_with`), so a server always checks.
        on_terminal: runs in every transaction that ends a request (see :data:`TerminalHook`); an
            exception it raises rolls the change back.

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
        self._db = database
        self._seal = seal
        self._on_terminal = on_terminal
        self._templates = dict(templates)
        self._roles = roles
        self._resolvers = {resolver.template: resolver for resolver in resolvers}
        unknown = sorted(set(self._resolvers) - set(self._templates))
        if unknown:
            raise ValueError(f"resolvers for templates that are not configured: {', '.join(unknown)}")
        self._redact = frozenset(redact)
        self._clock = clock or SystemClock()
        self._audit = audit or AuditLog(database, self._clock)
        self._listener: StatusListener | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def sealed_with(self, seal: RequestSeal) -> LocalApprovalBackend:
        """This backend if it was built with a seal, else a new one like it that seals with ``seal``."""
        if self._seal is not None:
            return self
        return LocalApprovalBackend(
            self._db,
            templates=self._templates,
            roles=self._roles,
            resolvers=tuple(self._resolvers.values()),
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

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self, listener: StatusListener | None = None) -> None:
        """Remember ``listener`` and resume resolver work left pending by a previous process."""
        self._listener = listener
        await self._seal_unsealed()
        if not self._resolvers:
            return
        templates = sorted(self._resolvers)
        query = select(_R.c.request_id).where(_R.c.status == "pending", _R.c.template.in_(templates))
        pending = await self._db.read(lambda conn: list(conn.execute(query).scalars()))
        for request_id in pending:
            self._spawn_resolver(request_id)

    async def stop(self) -> None:
        """Cancel resolver work in progress (it is resumed by the next :meth:`start`)."""
        tasks, self._tasks = list(self._tasks), set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- the backend contract -------------------------------------------------------------------

    async def submit(self, key: str, submission: ApprovalSubmission) -> str:
        """Open a request under ``key``, or return the one an equivalent earlier submission opened.

        Raises:
            SubmissionRejectedError: the submission names a template that is not configured.
        """
        self._check_template(submission)
        digest = submission.digest()
        try:
            request_id, created = await self._db.write(lambda conn: self._insert(conn, key, digest, submission))
        except IntegrityError:
            # A concurrent submit with the same key committed first: its row is the answer.
            existing = await self._db.read(lambda conn: existing_request(conn, key, digest))
            if existing is None:
                raise
            request_id, created = existing, False
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
        self._check_template(submission)
        # The key was drawn for this transaction's intent: no earlier submission can hold it (and the
        # unique index on it would refuse one), so there is nothing to look up first.
        return self._insert_new(conn, key, submission.digest(), submission, body=submission.canonical_body.decode())

    def submitted(self, handle: str, submission: ApprovalSubmission) -> None:
        """The request ``handle`` committed: its template's automatic resolver, if it has one, decides it."""
        if submission.template in self._resolvers:
            self._spawn_resolver(handle)

    def _check_template(self, submission: ApprovalSubmission) -> None:
        if submission.template and submission.template not in self._templates:
            # Fail closed: no fallback to the default template's reviewers.
            raise SubmissionRejectedError(f"approval template {submission.template!r} is not configured")

    async def find(self, key: str) -> str | None:
        """The handle of the request submitted under ``key``, if any."""
        query = select(_R.c.request_id).where(_R.c.idempotency_key == key)
        return await self._db.read(lambda conn: conn.execute(query).scalar_one_or_none())

    async def status(self, handle: str) -> ApprovalState:
        """The request's state; a pending request past its deadline is expired now."""
        row = await self._current(handle)
        if row is None:
            raise UnknownRequestError(f"no approval request {handle[:8]}…")
        if row["status"] == "approved":
            return await self._approved_state(row)
        return await self._with_note(row, _state_of(row))

    async def _approved_state(self, row: Row) -> ApprovalState:
        """An approved request's state, from its sealed decisions under its sealed rules.

        The status column alone is never trusted: rows that do not match their seals, or decisions
        that do not approve the request under its rules, make it ``failed`` with the reason.
        """
        if self._seal is None:
            return _state_of(row)
        decisions = await self._db.read(lambda conn: decision_rows(conn, [row["request_id"]]))
        failure = request_failure(self._seal, row, decisions)
        if failure is not None:
            _log.error("approval request %s… failed its integrity check: %s", row["request_id"][:8], failure)
            return ApprovalState(ApprovalStatus.FAILED, integrity_failure=failure)
        if row.get("rules_json") is None:  # stored before rules were sealed: as its columns say
            return _state_of(row)
        grant = approval_granted(RequestRules.from_text(row["rules_json"]), row["requester"], decisions)
        assert grant is not None  # request_failure checked that the decisions approve it
        return _state_of({**row, "decided_at": grant.approved_at, "approved_until": grant.approved_until})

    async def sealed_request(self, handle: str) -> SealedRequest | None:
        """What the request was submitted as, checked against its seals (``None`` without a seal).

        Raises:
            RequestIntegrityError: the request's rows do not match their seals.
            UnknownRequestError: no such request.
        """
        seal = self._seal
        if seal is None:
            return None

        def read(conn: Connection) -> tuple[Row | None, list[Row]]:
            row = fetch(conn, handle)
            return row, decision_rows(conn, [handle]) if row is not None else []

        row, decisions = await self._db.read(read)
        if row is None:
            raise UnknownRequestError(f"no approval request {handle[:8]}…")
        failure = request_failure(seal, row, decisions)
        if failure is not None:
            raise RequestIntegrityError(failure)
        body = ApprovalSubmission.from_json(json.loads(row["body_json"]))
        return SealedRequest(
            key=row["idempotency_key"],
            tool=row["tool_name"],
            requester=row["requester"],
            call_digest=body.call_digest(),
        )

    async def _with_note(self, row: Row, state: ApprovalState) -> ApprovalState:
        """``state`` with the deny comment, when the request's template shares it with the requester."""
        if state.status is not ApprovalStatus.DENIED:
            return state
        rules = self._rules(row)
        if rules is None or not rules.share_deny_comment:
            return state
        query = select(_D.c.comment).where(
            _D.c.request_id == row["request_id"], _D.c.decision == "deny", _D.c.comment.is_not(None)
        )
        comment = await self._db.read(lambda conn: conn.execute(query.limit(1)).scalar_one_or_none())
        return replace(state, note=comment) if comment else state

    async def status_many(self, handles: Sequence[str]) -> dict[str, ApprovalState]:
        """:meth:`status` of many requests with one read; unknown handles are left out."""
        # Only what a state is made of: a pass over many pending requests reads no bodies or seals.
        query = select(*_STATE_COLUMNS).where(_R.c.request_id.in_(list(handles)))
        rows = await self._db.read(lambda conn: [dict(row) for row in conn.execute(query).mappings()])
        now = self._clock.now_ms()
        states: dict[str, ApprovalState] = {}
        for row in rows:
            handle = row["request_id"]
            # Due rows expire now; approved ones are checked against their seals (both rare in a pass).
            if due(row, now) or row["status"] == "approved":
                states[handle] = await self.status(handle)
            else:
                states[handle] = await self._with_note(row, _state_of(row))
        return states

    async def changed_since(self, since_ms: int) -> list[tuple[str, int]]:
        """``(handle, changed at)`` of the requests decided, expired or withdrawn at or after ``since_ms``.

        One range read per terminal status on ``ix_approval_requests_changed``: its cost follows
        the changes in the window, not the number of pending requests.
        """
        query = select(_R.c.request_id, _R.c.updated_at).where(_R.c.status.in_(_CHANGED), _R.c.updated_at >= since_ms)
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        return [(str(row.request_id), int(row.updated_at)) for row in rows]

    async def cancel(self, handle: str) -> None:
        """Withdraw a pending request; a terminal one is left as it is."""
        now = self._clock.now_ms()

        def cancel(conn: Connection) -> None:
            row = fetch(conn, handle, lock=True)
            if row is None:
                raise UnknownRequestError(f"no approval request {handle[:8]}…")
            if row["status"] == "pending":
                cas(conn, row, now, status="cancelled", decided_at=now)
                self._audit.record_in(conn, now, "approval.cancelled", subject=handle, data=_about(row))
                self._ended_in(conn, handle, "cancelled", now)

        await self._db.write(cancel)

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
        await self.expire_due()
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
            shown = [self._shown(self._record(row, decisions), viewer) for row in rows]
            return RequestPage([record for record in shown if record is not None], offset, limit, total)

        return await self._db.read(read)

    async def get_request(self, request_id: str, *, viewer: str | None = None) -> ApprovalRecord | None:
        """One request as ``viewer`` may see it (without a viewer, as it is), or ``None``.

        A principal sees the requests it may decide (by its template's reviewer role) and every
        request with :data:`AUDITOR_ROLE`; its own requests without their reviewers' identities or
        comments; no other request.
        """
        row = await self._current(request_id)
        if row is None:
            return None
        decisions = await self._db.read(lambda conn: decision_rows(conn, [request_id]))
        return self._shown(self._record(row, decisions), viewer)

    def sees_reviewers(self, principal: str, record: ApprovalRecord) -> bool:
        """Whether ``principal`` sees who decided ``record`` (an auditor, or one of its reviewers)."""
        roles = self._roles(principal)
        if AUDITOR_ROLE in roles:
            return True
        return record.rules is not None and record.rules.reviewer_role in roles

    async def decide(
        self, request_id: str, reviewer: str, decision: Literal["approve", "deny"], comment: str | None = None
    ) -> ApprovalRecord:
        """Record ``reviewer``'s decision and return the request as it now stands.

        Raises:
            UnknownRequestError: no such request.
            NotEligibleError: the reviewer lacks the template's role, or is the requester.
            AlreadyDecidedError: the request is terminal, or this reviewer already decided it.
            RequestExpiredError: the deadline passed (the request is now expired).
        """
        return await self._decide(request_id, reviewer, decision, comment, automatic=False)

    # -- internals ------------------------------------------------------------------------------

    def _template(self, name: str | None) -> ApprovalTemplate:
        """The rules of a configured template (``submit`` refused any other)."""
        return self._templates[name] if name else _DEFAULT_TEMPLATE

    def _rules(self, row: Row) -> RequestRules | None:
        """The rules the request is decided by (see :func:`rules_of`); ``None``: nobody may decide it."""
        try:
            return rules_of(row, self._templates, _DEFAULT_TEMPLATE)
        except ValueError:  # edited rules: the integrity check names it; nobody decides by them
            return None

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
        if _DEFAULT_TEMPLATE.reviewer_role in roles:
            clauses.append(legacy & _R.c.template.is_(None))
        return or_(*clauses)

    def _record(self, row: Row, decisions: Sequence[Row]) -> ApprovalRecord:
        mine = [d for d in decisions if d["request_id"] == row["request_id"]]
        failure = self._integrity_failure(row, mine)
        return record_from_rows(row, mine, self._redact, integrity_failure=failure, rules=self._rules(row))

    def _integrity_failure(self, row: Row, decisions: Sequence[Row]) -> str | None:
        """Why the request's rows cannot be trusted as this backend wrote them, or ``None`` (or without a seal)."""
        return None if self._seal is None else request_failure(self._seal, row, decisions)

    async def _seal_unsealed(self) -> None:
        """Seal what open requests stored before a revision sealed it lack (see :func:`seal_found_requests`)."""
        seal = self._seal
        if seal is None:
            return
        count = await self._db.write(
            lambda conn: seal_found_requests(conn, seal, lambda row: rules_of(row, self._templates, _DEFAULT_TEMPLATE))
        )
        if count:
            _log.info("sealed %d open approval requests stored before their rules and decisions were sealed", count)

    def _insert(self, conn: Connection, key: str, digest: str, submission: ApprovalSubmission) -> tuple[str, bool]:
        existing = existing_request(conn, key, digest)
        if existing is not None:
            return existing, False
        return self._insert_new(conn, key, digest, submission, body=submission.canonical_body.decode()), True

    def _insert_new(self, conn: Connection, key: str, digest: str, submission: ApprovalSubmission, *, body: str) -> str:
        """Store a new request under ``key`` (``body``: the submission's canonical JSON) with its audit event."""
        now = self._clock.now_ms()
        # 256 random bits; the prefix keeps an id from starting with "-" (a CLI would read an option).
        request_id = "apr_" + secrets.token_urlsafe(32)
        rules = self._template(submission.template)
        decided_by = RequestRules.of(rules)
        values: dict[str, Any] = {
            "request_id": request_id,
            "idempotency_key": key,
            "body_digest": digest,
            # The full canonical body: redaction applies when a record is presented.
            "body_json": body,
            "status": "pending",
            "tool_name": submission.tool,
            "requester": submission.requester,
            "template": submission.template,
            "approvals_required": decided_by.approvals_required,
            "rules_json": decided_by.to_text(),
            "reviewer_role": decided_by.reviewer_role,
            "created_at": now,
            "expires_at": submission.deadline_ms,
            "updated_at": now,
            "version": 0,
        }
        if self._seal is not None:
            values["content_seal"] = self._seal.seal(sealed_content(values), record=request_id)
        conn.execute(_R.insert(), values)
        data = {
            "tool": submission.tool,
            "template": submission.template,
            "call_digest": submission.call_digest(),
            # The rules the request is decided by, so `audit verify` can check its executions.
            "approvals_required": rules.approvals_required,
            "self_approval": rules.allow_self_approval,
        }
        self._audit.record_in(
            conn, now, "approval.submitted", subject=request_id, actor=submission.requester, data=data
        )
        return request_id

    async def _current(self, request_id: str) -> Row | None:
        """The request's row, expiring it first if it is pending past its deadline."""
        row = await self._db.read(lambda conn: fetch(conn, request_id))
        if row is not None and due(row, self._clock.now_ms()):
            now = self._clock.now_ms()
            row = await self._db.write(lambda conn: self._expire_locked(conn, request_id, now))
        return row

    def _expire_locked(self, conn: Connection, request_id: str, now: int) -> Row | None:
        row = fetch(conn, request_id, lock=True)
        if row is not None and due(row, now):
            self._expire_in(conn, row, now)
            row = fetch(conn, request_id)
        return row

    def _expire_in(self, conn: Connection, row: Row, now: int) -> None:
        cas(conn, row, now, status="expired", decided_at=now)
        self._audit.record_in(conn, now, "approval.expired", subject=row["request_id"], data=_about(row))
        self._ended_in(conn, row["request_id"], "expired", now)

    def _ended_in(self, conn: Connection, request_id: str, status: str, now: int) -> None:
        if self._on_terminal is not None:
            self._on_terminal(conn, request_id, status, now)

    async def expire_due(self) -> None:
        """Expire every pending request past its deadline now (listing calls this; so may a sweep)."""
        now = self._clock.now_ms()
        due = select(_R).where(_R.c.status == "pending", _R.c.expires_at <= now)

        def expire(conn: Connection) -> None:
            for row in conn.execute(due.with_for_update()).mappings().all():
                self._expire_in(conn, dict(row), now)

        # Look first, so that listing takes no write lock when nothing is due.
        if await self._db.read(lambda conn: conn.execute(due.limit(1)).first() is not None):
            await self._db.write(expire)

    async def _decide(
        self, request_id: str, reviewer: str, decision: Literal["approve", "deny"], comment: str | None, automatic: bool
    ) -> ApprovalRecord:
        if decision not in ("approve", "deny"):
            raise ValueError(f"decision must be 'approve' or 'deny', not {decision!r}")
        for _ in range(_CAS_ATTEMPTS):
            now = self._clock.now_ms()

            def write(conn: Connection, now: int = now) -> _Outcome:
                return self._decide_in(conn, now, request_id, reviewer, decision, comment, automatic)

            try:
                outcome = await self._db.write(write)
                break
            except IntegrityError:
                # The same reviewer's concurrent decision committed first.
                raise AlreadyDecidedError(f"{reviewer} already decided request {request_id[:8]}…") from None
            except StaleError:
                continue
        else:
            raise ReviewError(f"request {request_id[:8]}… kept changing; try again")
        if outcome.terminal:
            await self._notify(request_id)
        if outcome.expired:
            raise RequestExpiredError(f"request {request_id[:8]}… expired before the decision")
        return outcome.record

    def _decide_in(
        self,
        conn: Connection,
        now: int,
        request_id: str,
        reviewer: str,
        decision: str,
        comment: str | None,
        automatic: bool,
    ) -> _Outcome:
        row = fetch(conn, request_id, lock=True)
        if row is None:
            raise UnknownRequestError(f"no approval request {request_id[:8]}…")
        if row["status"] != "pending":
            raise AlreadyDecidedError(f"request {request_id[:8]}… is already {row['status']}")
        if self._seal is None and row.get("content_seal") is not None:
            # A decision written without the key would never count: say so instead of storing it.
            raise ReviewError(
                f"request {request_id[:8]}… is sealed under the server's binding key, which was not given "
                "here, so a decision recorded here would not count: give the server's binding keys, or "
                "decide through the server's reviewer API"
            )
        rules = self._rules(row)
        if not automatic:
            self._check_eligible(row, rules, reviewer)
        failure = self._integrity_failure(row, decision_rows(conn, [request_id]))
        if failure is not None and decision == "approve":
            raise UnverifiedRequestError(f"request {request_id[:8]}… cannot be approved: {failure}")
        if due(row, now):
            # The expiry must commit, so it is returned, not raised (raising rolls back).
            self._expire_in(conn, row, now)
            return _Outcome(self._reload(conn, request_id), terminal=True, expired=True)
        insert_decision(conn, request_id, reviewer, decision, comment, now, seal=self._seal)
        about = _about(row)
        self._audit.record_in(
            conn, now, "approval.decision", subject=request_id, actor=reviewer, data={"decision": decision, **about}
        )
        target = resulting_status(conn, row, decision)
        values: dict[str, Any] = {}
        if target is not None:
            values = {"status": target, "decided_at": now}
            if target == "approved" and rules is not None:
                values["approved_until"] = now + rules.approval_valid_ms
        cas(conn, row, now, **values)  # bumps the version even when the request stays pending
        if target is not None:
            self._audit.record_in(conn, now, f"approval.{target}", subject=request_id, actor=reviewer, data=about)
            self._ended_in(conn, request_id, target, now)
        return _Outcome(self._reload(conn, request_id), terminal=target is not None)

    def why_ineligible(self, reviewer: str, record: ApprovalRecord) -> str | None:
        """Why ``reviewer`` may not decide ``record``, or ``None``.

        The rules stored with the request only (reviewer role, self-approval); :meth:`decide`
        applies them again, together with the request's current state, when the decision is recorded.
        """
        return _why_ineligible(reviewer, self._roles(reviewer), record.requester, record.template, record.rules)

    def _check_eligible(self, row: Row, rules: RequestRules | None, reviewer: str) -> None:
        reason = _why_ineligible(reviewer, self._roles(reviewer), row["requester"], row["template"], rules)
        if reason is not None:
            raise NotEligibleError(reason)

    def _reload(self, conn: Connection, request_id: str) -> ApprovalRecord:
        row = fetch(conn, request_id)
        assert row is not None  # it was locked in this transaction
        return self._record(row, decision_rows(conn, [request_id]))

    async def _notify(self, request_id: str) -> None:
        if self._listener is None:
            return
        try:
            await self._listener(request_id)
        except Exception:  # a wake-up failing must not undo or hide a committed decision
            _log.exception("approval status listener failed for %s…", request_id[:8])

    def _spawn_resolver(self, request_id: str) -> None:
        task = asyncio.create_task(self._resolve(request_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _resolve(self, request_id: str) -> None:
        row = await self._db.read(lambda conn: fetch(conn, request_id))
        if row is None or row["status"] != "pending" or row["template"] not in self._resolvers:
            return
        template = row["template"]
        actor = f"resolver:{template}"
        decisions = await self._db.read(lambda conn: decision_rows(conn, [request_id]))
        failure = self._integrity_failure(row, decisions)
        if failure is not None:  # an edited row is never decided on what it now says
            data = {"why": failure, **_about(row)}
            await self._audit.record("approval.unverified", subject=request_id, actor=actor, data=data)
            return
        submission = ApprovalSubmission.from_json(json.loads(row["body_json"]))
        try:
            verdict = await self._resolvers[template].decide(submission)
        except Exception as exc:  # a broken resolver leaves the request to human reviewers
            _log.exception("resolver for template %r failed", template)
            data = {"error": f"{type(exc).__name__}: {exc}"[:500], **_about(row)}
            await self._audit.record("approval.resolver_failed", subject=request_id, actor=actor, data=data)
            return
        if verdict is None:
            await self._audit.record("approval.resolver_deferred", subject=request_id, actor=actor, data=_about(row))
            return
        # A reviewer, the deadline or a cancellation may have got there first.
        with contextlib.suppress(ReviewError, UnknownRequestError):
            await self._decide(request_id, actor, verdict, "decided automatically", automatic=True)


def _about(row: Row) -> dict[str, str]:
    """What every audit event about a request carries: the digest of its call (never an argument value).

    Read from the stored body; a body edited since it was submitted yields another digest, which
    then disagrees with the request's ``approval.submitted`` event.
    """
    try:
        body = json.loads(row["body_json"])
        return {"call_digest": ApprovalSubmission.from_json(body).call_digest()}
    except (ValueError, KeyError, TypeError):
        return {"call_digest": "unreadable"}


def _why_ineligible(
    reviewer: str, roles: frozenset[str], requester: str, template: str | None, rules: RequestRules | None
) -> str | None:
    """Why a reviewer holding ``roles`` may not decide a request of ``requester`` decided by ``rules``."""
    name = template or "(default)"
    if rules is None:
        # Stored before rules were, and its template has left the configuration: nobody may decide it.
        return f"template {name!r} is not configured, so nobody may decide this request"
    if reviewer == requester and not rules.allow_self_approval:
        return f"{reviewer} made this request and template {name!r} forbids self-approval"
    if rules.reviewer_role not in roles:
        return f"{reviewer} lacks the role {rules.reviewer_role!r} template {name!r} requires"
    return None


#: The columns :func:`_state_of`, :func:`due` and :meth:`LocalApprovalBackend._with_note` read.
_STATE_COLUMNS = (
    _R.c.request_id,
    _R.c.status,
    _R.c.template,
    _R.c.expires_at,
    _R.c.approved_until,
    _R.c.decided_at,
)


def _state_of(row: Row) -> ApprovalState:
    """The contract's view of an ``approval_requests`` row."""
    status = ApprovalStatus(row["status"])
    if status is ApprovalStatus.APPROVED:
        approval = {
            "id": row["request_id"],
            "approved_at": iso8601(row["decided_at"]),
            "approved_until": iso8601(row["approved_until"]),
        }
        return ApprovalState(status, approval=approval, approved_until_ms=row["approved_until"])
    if status is ApprovalStatus.PENDING:
        return ApprovalState(status, deadline_ms=row["expires_at"])
    return ApprovalState(status)
