"""The metrics themselves (read from the store) and the guarded route that serves them."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from mcp_approval.approval.persistence.outcomes import WorkflowOutcomes
from mcp_approval.metrics.options import MetricsOptions
from mcp_approval.notify.outbox import CONSUMER_PREFIX
from mcp_approval.storage import AuditEvent, AuditLog, Database, all_cursors
from mcp_approval.web.throttle import FailedLoginThrottle, TooManyFailuresError, bearer_caller

__all__ = ["ApprovalMetrics", "metrics_paths", "metrics_route"]

#: The local backend's events that end a request, and the outcome each counts as.
_ENDINGS = {
    "approval.approved": "approved",
    "approval.denied": "denied",
    "approval.expired": "expired",
    "approval.cancelled": "cancelled",
}
_EXECUTION_ENDINGS = frozenset({"approval.execution_finished", "approval.fenced"})
#: Seconds: from a minute to a week, the range human reviewers decide in.
_DECISION_BUCKETS = (1, 10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400)


class ApprovalMetrics:
    """The metrics of one store, brought up to date by :meth:`refresh` before each scrape.

    Args:
        database: the store of approval workflows and the audit log.
        audit: the audit log whose events feed the counters.
        anchor_alerts: the alerts this process's audit anchors raised, by problem (a live view,
            :attr:`~mcp_approval.notify.anchors.AuditAnchors.alerts`); ``None`` without anchors.
    """

    def __init__(self, database: Database, audit: AuditLog, anchor_alerts: Mapping[str, int] | None = None) -> None:
        self._database = database
        self._audit = audit
        self._workflows = WorkflowOutcomes(database, audit)
        self._anchor_alerts = anchor_alerts
        self.registry = CollectorRegistry(auto_describe=True)
        self._pending = Gauge(
            "mcp_approval_pending_approvals",
            "Calls waiting for approval or for their approved execution.",
            ["template"],
            registry=self.registry,
        )
        self._decisions = Counter(
            "mcp_approval_decisions", "Approval requests that ended, by outcome.", ["outcome"], registry=self.registry
        )
        self._time_to_decision = Histogram(
            "mcp_approval_time_to_decision_seconds",
            "Time from submission to approval or denial.",
            buckets=_DECISION_BUCKETS,
            registry=self.registry,
        )
        self._executions = Counter(
            "mcp_approval_executions",
            "Approval tasks that ended, by disposition.",
            ["disposition"],
            registry=self.registry,
        )
        self._store_errors = Counter(
            "mcp_approval_store_errors", "Store operations that failed in this process.", registry=self.registry
        )
        self._deliveries = Counter(
            "mcp_approval_notification_deliveries",
            "Notifications a channel accepted.",
            ["channel"],
            registry=self.registry,
        )
        self._integrity_failures = Counter(
            "mcp_approval_integrity_failures",
            "Stored approvals that did not match their seals, so nothing ran on them (see the audit log).",
            registry=self.registry,
        )
        self._failures = Counter(
            "mcp_approval_notification_failures",
            "Notification attempts a channel did not accept (each is retried).",
            ["channel"],
            registry=self.registry,
        )
        self._anchor_alerts_counter = Counter(
            "mcp_approval_audit_anchor_alerts",
            "Audit anchor alerts in this process: the chain no longer holds the last anchor (problem=chain, "
            "no anchor written) or the anchor file lost anchors (problem=history).",
            ["problem"],
            registry=self.registry,
        )
        self._by_reviewer = Counter(
            "mcp_approval_reviewer_decisions",
            "Decisions people recorded, by reviewer and verdict (approvals of several-approver requests count each).",
            ["reviewer", "decision"],
            registry=self.registry,
        )
        self._by_rule = Counter(
            "mcp_approval_similar_rule_decisions",
            "Requests a similar-call rule approved, by rule and the reviewer who wrote it.",
            ["rule", "author"],
            registry=self.registry,
        )
        self._anchor_alerts_seen: dict[str, int] = {}
        for problem in anchor_alerts or {}:
            self._anchor_alerts_counter.labels(problem=problem)
        self._delivery_counts: dict[str, tuple[int, int]] = {}
        self._lock = asyncio.Lock()
        self._seq = 0
        self._submitted: dict[str, int] = {}
        self._errors_seen = 0

    async def refresh(self) -> None:
        """Count the events appended since the last refresh and recount the pending approvals."""
        async with self._lock:
            async for event in self._audit.export(after_seq=self._seq):
                self._count(event)
                self._seq = event.seq or self._seq
            pending = await self._workflows.pending_by_template()
            self._pending.clear()
            for template, count in pending.items():
                self._pending.labels(template=template).set(count)
            await self._count_deliveries()
            errors = self._database.unavailable_errors
            self._store_errors.inc(errors - self._errors_seen)
            self._errors_seen = errors
            self._count_anchor_alerts()

    def _count_anchor_alerts(self) -> None:
        for problem, count in (self._anchor_alerts or {}).items():
            self._anchor_alerts_counter.labels(problem=problem).inc(count - self._anchor_alerts_seen.get(problem, 0))
            self._anchor_alerts_seen[problem] = count

    async def _count_deliveries(self) -> None:
        for cursor in await all_cursors(self._database):
            channel = cursor.consumer.removeprefix(CONSUMER_PREFIX)
            delivered, failures = self._delivery_counts.get(channel, (0, 0))
            self._deliveries.labels(channel=channel).inc(max(0, cursor.delivered - delivered))
            self._failures.labels(channel=channel).inc(max(0, cursor.failures - failures))
            self._delivery_counts[channel] = (cursor.delivered, cursor.failures)

    def _count(self, event: AuditEvent) -> None:
        if event.kind == "approval.submitted" and event.subject is not None:
            self._submitted[event.subject] = event.at
        elif event.kind in _ENDINGS:
            self._decisions.labels(outcome=_ENDINGS[event.kind]).inc()
            submitted = self._submitted.pop(event.subject or "", None)
            if submitted is not None and event.kind in ("approval.approved", "approval.denied"):
                self._time_to_decision.observe(max(0, event.at - submitted) / 1000)
        elif event.kind == "approval.decision" and event.actor is not None:
            self._count_decision(event.actor, event.data)
        elif event.kind in _EXECUTION_ENDINGS and event.data.get("disposition"):
            self._executions.labels(disposition=str(event.data["disposition"])).inc()
        if event.kind in ("approval.unverified", "approval.similar_rule_unverified") or (
            event.kind == "approval.fenced" and "integrity_failure" in event.data
        ):
            self._integrity_failures.inc()

    def _count_decision(self, actor: str, data: Mapping[str, Any]) -> None:
        rule = data.get("similar_rule")
        if isinstance(rule, str):
            self._by_rule.labels(rule=rule, author=str(data.get("rule_author", ""))).inc()
        elif not actor.startswith("resolver:"):  # a resolver is neither a person nor a rule
            self._by_reviewer.labels(reviewer=actor, decision=str(data.get("decision", ""))).inc()

    def exposition(self) -> bytes:
        """The metrics in the Prometheus text format."""
        return generate_latest(self.registry)


def metrics_paths(options: MetricsOptions) -> dict[str, Any]:
    """The OpenAPI path item of :func:`metrics_route` (see :mod:`mcp_approval.openapi`)."""
    answers = {
        "200": {
            "description": "Prometheus text exposition",
            "content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
        },
        "401": {"description": "no valid token", "content": {"text/plain": {"schema": {"type": "string"}}}},
        "429": {
            "description": "too many failed authentications from this address (see Retry-After)",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
    }
    return {options.path: {"get": {"summary": "Approval metrics", "security": [{"bearer": []}], "responses": answers}}}


def metrics_route(
    options: MetricsOptions, metrics: ApprovalMetrics, *, throttle: FailedLoginThrottle | None = None
) -> BaseRoute:
    """``GET options.path``: the metrics, to a request bearing ``options.bearer_token``.

    ``throttle`` counts missing and wrong tokens per client address (by default a new one in this
    process's memory); a client over its limit is answered ``429`` with ``Retry-After``.
    """
    token = options.bearer_token.get_secret_value().encode() if options.bearer_token is not None else b""
    limit = throttle or FailedLoginThrottle()

    async def scraper(presented: str) -> str | None:
        return "scraper" if token and hmac.compare_digest(presented.encode(), token) else None

    async def serve(request: Request) -> Response:
        try:
            caller = await bearer_caller(request, limit, scraper)
        except TooManyFailuresError as exc:
            message = "too many failed authentications from this address\n"
            return PlainTextResponse(message, 429, {"Retry-After": str(exc.retry_after_s)})
        if caller is None:
            return PlainTextResponse("a valid bearer token is required\n", 401, {"WWW-Authenticate": "Bearer"})
        await metrics.refresh()
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    return Route(options.path, serve, methods=["GET"])
