"""Running the local backend's automatic deciders: each request of a template with a resolver
(:mod:`~mcp_approval.backends.local.resolvers`) is put to it once it is committed, in a task of
its own, and again after a restart for every request still pending; a request without a resolver,
or whose resolver defers, is then put to the similar-call rules
(:mod:`~mcp_approval.backends.local.similar_store`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping

from sqlalchemy import Connection, or_, select

from mcp_approval.backends.contract import ApprovalSubmission, UnknownRequestError
from mcp_approval.backends.local.decisions import Decisions
from mcp_approval.backends.local.errors import ReviewError
from mcp_approval.backends.local.resolvers import AutoResolver
from mcp_approval.backends.local.rows import Row, decision_rows, event_data, fetch
from mcp_approval.backends.local.schema import approval_requests_table
from mcp_approval.backends.local.sealing import RequestSealing
from mcp_approval.backends.local.similar_store import SimilarCallRules
from mcp_approval.storage.audit import AuditLog
from mcp_approval.storage.database import Database

__all__ = ["AutomaticResolution"]

_R = approval_requests_table
_log = logging.getLogger(__name__)


class AutomaticResolution:
    """Puts requests to their template's resolver and records its verdict as a decision.

    A resolver that fails, or defers (answers ``None``), leaves the request to human reviewers;
    so does a request whose rows fail their seals (an edited row is never decided on what it now
    says). Each case is an audit event.

    Args:
        database: the database the requests are kept in.
        audit: where audit events go.
        resolvers: the resolver of each template that has one.
        sealing: checks a request's rows before it is put to a resolver.
        decisions: records the verdict.
        similar: the similar-call rules, asked when a request has no resolver or its resolver defers.
    """

    def __init__(
        self,
        database: Database,
        audit: AuditLog,
        resolvers: Mapping[str, AutoResolver],
        sealing: RequestSealing,
        decisions: Decisions,
        similar: SimilarCallRules | None = None,
    ) -> None:
        self._db = database
        self._audit = audit
        self._resolvers = resolvers
        self._sealing = sealing
        self._decisions = decisions
        self._similar = similar
        self._tasks: set[asyncio.Task[None]] = set()

    def decides(self, template: str | None) -> bool:
        """Whether requests of ``template`` have a resolver, or may be decided by similar-call rules."""
        return template in self._resolvers or (self._similar is not None and self._similar.applies(template))

    def decides_in(self, conn: Connection, submission: ApprovalSubmission) -> bool:
        """:meth:`decides`, for a request being opened in ``conn``: its template has a resolver, or a
        live similar-call rule of its tool exists."""
        if submission.template in self._resolvers:
            return True
        return self._similar is not None and self._similar.may_decide_in(conn, submission)

    async def resume(self) -> None:
        """Put every pending request of a template with a resolver to it, and to the similar-call
        rules (work a previous process left)."""
        # Only requests a resolver or a live rule could decide: a backlog without them costs one read.
        tools = sorted(await self._similar.live_tools()) if self._similar is not None else []
        if not self._resolvers and not tools:
            return
        query = select(_R.c.request_id, _R.c.template).where(
            _R.c.status == "pending",
            or_(_R.c.template.in_(sorted(self._resolvers)), _R.c.tool_name.in_(tools)),
        )
        rows = await self._db.read(lambda conn: list(conn.execute(query).all()))
        for row in rows:
            if self.decides(row.template):
                self.spawn(row.request_id, row.template)

    def spawn(self, request_id: str, template: str | None) -> None:
        """Put the committed request ``request_id`` of ``template`` to its resolver, in a task of its own."""
        task = asyncio.create_task(self._resolve(request_id, template))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        """Cancel the work in progress (:meth:`resume` takes it up again)."""
        tasks, self._tasks = list(self._tasks), set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _resolve(self, request_id: str, template: str | None) -> None:
        if template in self._resolvers:
            row = await self._db.read(lambda conn: fetch(conn, request_id))
            if row is None or row["status"] != "pending" or not await self._by_resolver(request_id, row):
                return
        # The rules read the request themselves (and find it pending, or leave it).
        if self._similar is not None:
            try:
                await self._similar.decide(request_id)
            except Exception:  # a failure here leaves the request to human reviewers, as a resolver's does
                _log.exception("similar-call rules failed on request %s…", request_id[:8])

    async def _by_resolver(self, request_id: str, row: Row) -> bool:
        """Put the request to its template's resolver; whether it deferred (the rules may then decide)."""
        template = row["template"]
        actor = f"resolver:{template}"
        decisions = await self._db.read(lambda conn: decision_rows(conn, [request_id]))
        failure = self._sealing.failure(row, decisions)
        if failure is not None:  # an edited row is never decided on what it now says
            data = {"why": failure, **event_data(row)}
            await self._audit.record("approval.unverified", subject=request_id, actor=actor, data=data)
            return False
        submission = ApprovalSubmission.from_json(json.loads(row["body_json"]))
        try:
            verdict = await self._resolvers[template].decide(submission)
        except Exception as exc:  # a broken resolver leaves the request to human reviewers
            _log.exception("resolver for template %r failed", template)
            data = {"error": f"{type(exc).__name__}: {exc}"[:500], **event_data(row)}
            await self._audit.record("approval.resolver_failed", subject=request_id, actor=actor, data=data)
            return False
        if verdict is None:
            await self._audit.record(
                "approval.resolver_deferred", subject=request_id, actor=actor, data=event_data(row)
            )
            return True
        # A reviewer, the deadline or a cancellation may have got there first.
        with contextlib.suppress(ReviewError, UnknownRequestError):
            await self._decisions.decide(request_id, actor, verdict, "decided automatically", automatic=True)
        return False
