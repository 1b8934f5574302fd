"""The local backend's queue: opening requests, finding them, where they stand, and their ends
without a decision (expiry, cancellation)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.exc import IntegrityError

from mcp_approval.backends.contract import (
    ApprovalState,
    ApprovalStatus,
    ApprovalSubmission,
    SubmissionRejectedError,
    UnknownRequestError,
)
from mcp_approval.backends.local.endings import RequestEndings
from mcp_approval.backends.local.rows import STATE_COLUMNS, Row, due, existing_request, fetch, state_of
from mcp_approval.backends.local.rules import DEFAULT_TEMPLATE, ApprovalTemplate, RequestRules, decided_by
from mcp_approval.backends.local.schema import approval_decisions_table, approval_requests_table
from mcp_approval.backends.local.sealing import RequestSealing
from mcp_approval.clock import Clock
from mcp_approval.storage.audit import AuditLog
from mcp_approval.storage.database import Database

__all__ = ["RequestQueue"]

_R = approval_requests_table
_D = approval_decisions_table
#: The statuses a request can change to (all terminal): what :meth:`RequestQueue.changed_since` lists.
_CHANGED = sorted(status.value for status in ApprovalStatus if status.terminal)


class RequestQueue:
    """Opens requests and answers where they stand; a pending request past its deadline expires when read.

    Args:
        database: the database the requests are kept in.
        clock: the source of time.
        audit: where audit events go.
        templates: the configured templates (a submission naming another is refused).
        sealing: seals each request as it is stored, and checks an approved one when it is read.
        endings: expires and cancels requests.
    """

    def __init__(
        self,
        database: Database,
        clock: Clock,
        audit: AuditLog,
        templates: Mapping[str, ApprovalTemplate],
        sealing: RequestSealing,
        endings: RequestEndings,
    ) -> None:
        self._db = database
        self._clock = clock
        self._audit = audit
        self._templates = templates
        self._sealing = sealing
        self._endings = endings

    # -- opening --------------------------------------------------------------------------------

    async def submit(self, key: str, submission: ApprovalSubmission) -> tuple[str, bool]:
        """Open a request under ``key``, or find the one an equivalent earlier submission opened;
        its handle, and whether this call opened it.

        Raises:
            SubmissionRejectedError: the submission names a template that is not configured.
        """
        self._check_template(submission)
        digest = submission.digest()
        try:
            return await self._db.write(lambda conn: self._insert(conn, key, digest, submission))
        except IntegrityError:
            # A concurrent submit with the same key committed first: its row is the answer.
            existing = await self._db.read(lambda conn: existing_request(conn, key, digest))
            if existing is None:
                raise
            return existing, False

    def submit_in(self, conn: Connection, key: str, submission: ApprovalSubmission) -> str:
        """Open a request under ``key`` inside the caller's write transaction ``conn``; its handle.

        Raises:
            SubmissionRejectedError: the submission names a template that is not configured.
        """
        self._check_template(submission)
        # The key was drawn for this transaction's intent: no earlier submission can hold it (and the
        # unique index on it would refuse one), so there is nothing to look up first.
        return self._insert_new(conn, key, submission.digest(), submission, body=submission.canonical_body.decode())

    def _check_template(self, submission: ApprovalSubmission) -> None:
        if submission.template and submission.template not in self._templates:
            # Fail closed: no fallback to the default template's reviewers.
            raise SubmissionRejectedError(f"approval template {submission.template!r} is not configured")

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
        # A configured template (the submission was checked), else the default one.
        template = self._templates[submission.template] if submission.template else DEFAULT_TEMPLATE
        rules = RequestRules.of(template)
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
            "approvals_required": rules.approvals_required,
            "rules_json": rules.to_text(),
            "reviewer_role": rules.reviewer_role,
            "created_at": now,
            "expires_at": submission.deadline_ms,
            "updated_at": now,
            "version": 0,
        }
        content_seal = self._sealing.content_seal(values)
        if content_seal is not None:
            values["content_seal"] = content_seal
        conn.execute(_R.insert(), values)
        data = {
            "tool": submission.tool,
            "template": submission.template,
            "call_digest": submission.call_digest(),
            # The rules the request is decided by, so `audit verify` can check its executions.
            "approvals_required": template.approvals_required,
            "self_approval": template.allow_self_approval,
        }
        self._audit.record_in(
            conn, now, "approval.submitted", subject=request_id, actor=submission.requester, data=data
        )
        return request_id

    async def find(self, key: str) -> str | None:
        """The handle of the request submitted under ``key``, if any."""
        query = select(_R.c.request_id).where(_R.c.idempotency_key == key)
        return await self._db.read(lambda conn: conn.execute(query).scalar_one_or_none())

    # -- where requests stand -------------------------------------------------------------------

    async def status(self, handle: str) -> ApprovalState:
        """The request's state; a pending request past its deadline is expired now.

        Raises:
            UnknownRequestError: no such request.
        """
        row = await self.current(handle)
        if row is None:
            raise UnknownRequestError(f"no approval request {handle[:8]}…")
        if row["status"] == "approved":
            return await self._sealing.approved_state(row)
        return await self._with_note(row, state_of(row))

    async def status_many(self, handles: Sequence[str]) -> dict[str, ApprovalState]:
        """:meth:`status` of many requests with one read; unknown handles are left out."""
        # Only what a state is made of: a pass over many pending requests reads no bodies or seals.
        query = select(*STATE_COLUMNS).where(_R.c.request_id.in_(list(handles)))
        rows = await self._db.read(lambda conn: [dict(row) for row in conn.execute(query).mappings()])
        now = self._clock.now_ms()
        states: dict[str, ApprovalState] = {}
        for row in rows:
            handle = row["request_id"]
            # Due rows expire now; approved ones are checked against their seals (both rare in a pass).
            if due(row, now) or row["status"] == "approved":
                states[handle] = await self.status(handle)
            else:
                states[handle] = await self._with_note(row, state_of(row))
        return states

    async def _with_note(self, row: Row, state: ApprovalState) -> ApprovalState:
        """``state`` with the deny comment, when the request's template shares it with the requester."""
        if state.status is not ApprovalStatus.DENIED:
            return state
        rules = decided_by(row, self._templates)
        if rules is None or not rules.share_deny_comment:
            return state
        query = select(_D.c.comment).where(
            _D.c.request_id == row["request_id"], _D.c.decision == "deny", _D.c.comment.is_not(None)
        )
        comment = await self._db.read(lambda conn: conn.execute(query.limit(1)).scalar_one_or_none())
        return replace(state, note=comment) if comment else state

    async def changed_since(self, since_ms: int) -> list[tuple[str, int]]:
        """``(handle, changed at)`` of the requests decided, expired or withdrawn at or after ``since_ms``.

        One range read per terminal status on ``ix_approval_requests_changed``: its cost follows
        the changes in the window, not the number of pending requests.
        """
        query = select(_R.c.request_id, _R.c.updated_at).where(_R.c.status.in_(_CHANGED), _R.c.updated_at >= since_ms)
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        return [(str(row.request_id), int(row.updated_at)) for row in rows]

    async def current(self, request_id: str) -> Row | None:
        """The request's row, expiring it first if it is pending past its deadline."""
        row = await self._db.read(lambda conn: fetch(conn, request_id))
        if row is not None and due(row, self._clock.now_ms()):
            now = self._clock.now_ms()
            row = await self._db.write(lambda conn: self._expire_locked(conn, request_id, now))
        return row

    # -- ends without a decision ----------------------------------------------------------------

    def _expire_locked(self, conn: Connection, request_id: str, now: int) -> Row | None:
        row = fetch(conn, request_id, lock=True)
        if row is not None and due(row, now):
            self._endings.expire_in(conn, row, now)
            row = fetch(conn, request_id)
        return row

    async def expire_due(self) -> None:
        """Expire every pending request past its deadline now."""
        now = self._clock.now_ms()
        pending_past = select(_R).where(_R.c.status == "pending", _R.c.expires_at <= now)

        def expire(conn: Connection) -> None:
            for row in conn.execute(pending_past.with_for_update()).mappings().all():
                self._endings.expire_in(conn, dict(row), now)

        # Look first, so that listing takes no write lock when nothing is due.
        if await self._db.read(lambda conn: conn.execute(pending_past.limit(1)).first() is not None):
            await self._db.write(expire)

    async def cancel(self, handle: str) -> None:
        """Withdraw a pending request; a terminal one is left as it is.

        Raises:
            UnknownRequestError: no such request.
        """
        now = self._clock.now_ms()

        def cancel(conn: Connection) -> None:
            row = fetch(conn, handle, lock=True)
            if row is None:
                raise UnknownRequestError(f"no approval request {handle[:8]}…")
            if row["status"] == "pending":
                self._endings.cancel_in(conn, row, now)

        await self._db.write(cancel)
