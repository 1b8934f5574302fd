"""The reviewer HTTP API of the local approval backend.

``GET /approvals?status=pending|decided&offset=0&limit=200`` (a page with ``total`` and
``next_offset``), ``GET /approvals/{id}`` and ``POST /approvals/{id}/decide`` with
``{"decision": "approve"|"deny", "comment": "..."}``; ``{id}`` may also be the reference the
requester was given (the task's id, :mod:`mcp_approval.reviewers.lookup`). An approval may add
``"similar": {...}``, a similar-call rule deciding later calls like it
(:class:`~mcp_approval.backends.SimilarRuleSpec`). ``POST /approvals/decide`` with
``{"ids": [...], "decision": ..., "comment": ...}`` decides several, each on its own, and answers
which succeeded and why any did not. ``GET /similar-rules``, ``GET /similar-rules/{id}`` and
``POST /similar-rules/{id}/revoke`` list and revoke rules; ``POST /delegations``,
``GET /delegations`` and ``POST /delegations/{id}/revoke`` write, list and revoke delegations
(:mod:`mcp_approval.reviewers.delegation_api`). Reviewers authenticate with a bearer
token; each reads only what :meth:`~mcp_approval.backends.LocalApprovalBackend.get_request` shows
it (a request it may not see is a 404; deciding one is refused, 403). Errors are RFC 9457
``application/problem+json``.
A client whose missing or wrong tokens pass the :class:`~mcp_approval.web.throttle.FailedLoginThrottle`
limit is answered 429 with ``Retry-After`` until the limit lets it try again. While the store
cannot be reached every request is answered 503 with ``Retry-After``: nothing was read or
decided, and the same request may be sent again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from mcp_approval.backends import (
    NotEligibleError,
    ReviewError,
    SimilarRuleError,
    SimilarRuleSpec,
    SupportsReview,
    SupportsSimilarRules,
)
from mcp_approval.backends.contract import UnknownRequestError
from mcp_approval.backends.outcomes import OutcomeReader
from mcp_approval.reviewers.batch import decide_each
from mcp_approval.reviewers.delegation_api import DelegationEndpoints
from mcp_approval.reviewers.limits import (
    MAX_BATCH_SIZE,
    MAX_COMMENT_CHARS,
    MAX_DECISION_BYTES,
    MAX_PAGE_SIZE,
    STORE_RETRY_AFTER_S,
)
from mcp_approval.reviewers.lookup import find_request
from mcp_approval.safe_text import storable
from mcp_approval.web.problems import Endpoint, answering_problems, json_object_body, problem
from mcp_approval.web.problems import Problem as _Problem
from mcp_approval.web.throttle import FailedLoginThrottle, TooManyFailuresError, bearer_caller

__all__ = [
    "MAX_BATCH_SIZE",
    "MAX_COMMENT_CHARS",
    "MAX_DECISION_BYTES",
    "MAX_PAGE_SIZE",
    "STORE_RETRY_AFTER_S",
    "Authenticator",
    "problem",
    "reviewer_routes",
]

Authenticator = Callable[[str], Awaitable[str | None]]


def reviewer_routes(
    backend: SupportsReview,
    authenticate: Authenticator,
    *,
    throttle: FailedLoginThrottle | None = None,
    outcomes: OutcomeReader | None = None,
) -> list[BaseRoute]:
    """The reviewer API's routes; ``authenticate`` maps a bearer token to a reviewer (or ``None``).

    ``throttle`` counts missing and wrong tokens per client (by default a new one on the system
    clock); pass the console's so that failures on either count against both. With ``outcomes``,
    ``GET /approvals/{id}`` adds ``outcome``: what happened to the call (``null`` if unknown).
    """
    throttle = throttle or FailedLoginThrottle()

    async def reviewer_of(request: Request) -> str:
        try:
            reviewer = await bearer_caller(request, throttle, authenticate)
        except TooManyFailuresError as exc:
            detail = "too many failed authentications from this address"
            raise _Problem(429, detail, {"Retry-After": str(exc.retry_after_s)}) from None
        if reviewer is None:
            raise _Problem(401, "a valid bearer token is required", {"WWW-Authenticate": "Bearer"})
        return reviewer

    async def list_approvals(request: Request) -> Response:
        reviewer = await reviewer_of(request)
        status = request.query_params.get("status", "pending")
        if status not in ("pending", "decided"):
            raise _Problem(400, "query parameter 'status' must be 'pending' or 'decided'")
        offset = _count_param(request, "offset", 0, None)
        limit = _count_param(request, "limit", 1, MAX_PAGE_SIZE)
        wanted: Literal["pending", "decided"] = "pending" if status == "pending" else "decided"
        page = await backend.page_requests(wanted, viewer=reviewer, offset=offset, limit=limit)
        return JSONResponse(page.to_json())

    async def get_approval(request: Request) -> Response:
        reviewer = await reviewer_of(request)
        record = await find_request(backend, _request_id(request), reviewer, outcomes)
        if record is None:
            raise _Problem(404, "no such approval request")
        body = record.to_json()
        if outcomes is not None:
            outcome = await outcomes.outcome(record.id)
            body["outcome"] = outcome.to_json() if outcome is not None else None
        return JSONResponse(body)

    async def decide(request: Request) -> Response:
        reviewer = await reviewer_of(request)
        request_id = await _by_reference(_request_id(request), reviewer)
        decision, comment, body = await _decision_body(request)
        try:
            if "similar" in body:
                rules = _similar_rules(backend)
                if decision != "approve":
                    raise _Problem(400, "field 'similar' goes with an approval only")
                spec = SimilarRuleSpec.from_json(body["similar"])
                record, rule = await rules.approve_similar(request_id, reviewer, spec, comment)
                return JSONResponse({**record.to_json(), "similar_rule": rule.to_json()})
            record = await backend.decide(request_id, reviewer, decision, comment)
        except UnknownRequestError:
            raise _Problem(404, "no such approval request") from None
        except NotEligibleError as exc:
            raise _Problem(403, str(exc)) from None
        except SimilarRuleError as exc:  # a rule that does not fit its request or its template
            raise _Problem(400, str(exc)) from None
        except ReviewError as exc:  # already decided, or the request kept changing under the decision
            raise _Problem(409, str(exc)) from None
        return JSONResponse(record.to_json())

    async def _by_reference(wanted: str, reviewer: str) -> str:
        """The request id ``wanted`` stands for: itself, or the request its requester's reference names
        (one ``reviewer`` may see; an id that names no request is left for ``decide`` to refuse)."""
        if outcomes is None or await backend.get_request(wanted, viewer=reviewer) is not None:
            return wanted
        record = await find_request(backend, wanted, reviewer, outcomes)
        return wanted if record is None else record.id

    async def decide_many(request: Request) -> Response:
        reviewer = await reviewer_of(request)
        decision, comment, body = await _decision_body(request)
        ids = body.get("ids")
        if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_BATCH_SIZE or not all(isinstance(i, str) for i in ids):
            raise _Problem(400, f"field 'ids' must be a list of 1 to {MAX_BATCH_SIZE} request ids")
        if "similar" in body:
            raise _Problem(400, "field 'similar' goes with one request's approval, not a batch")
        results = await decide_each(backend, ids, reviewer, decision, comment)
        return JSONResponse({"decided": sum(1 for r in results if r.ok), "results": [r.to_json() for r in results]})

    async def list_rules(request: Request) -> Response:
        reviewer = await reviewer_of(request)
        active_only = request.query_params.get("state") == "active"
        rules = await _similar_rules(backend).similar_rules(viewer=reviewer, active_only=active_only)
        return JSONResponse({"rules": [rule.to_json() for rule in rules]})

    async def get_rule(request: Request) -> Response:
        reviewer = await reviewer_of(request)
        rule = await _similar_rules(backend).similar_rule(request.path_params["rule_id"], viewer=reviewer)
        if rule is None:
            raise _Problem(404, "no such similar-call rule")
        return JSONResponse(rule.to_json())

    async def revoke_rule(request: Request) -> Response:
        reviewer = await reviewer_of(request)
        try:
            rule = await _similar_rules(backend).revoke_similar_rule(request.path_params["rule_id"], reviewer)
        except NotEligibleError as exc:
            raise _Problem(403, str(exc)) from None
        except SimilarRuleError as exc:
            status = 404 if str(exc).startswith("no similar-call rule") else 409
            raise _Problem(status, str(exc)) from None
        return JSONResponse(rule.to_json())

    delegations = DelegationEndpoints(backend, reviewer_of)
    return [
        Route("/approvals", _problems(list_approvals), methods=["GET"]),
        Route("/approvals/decide", _problems(decide_many), methods=["POST"]),
        Route("/approvals/{request_id}", _problems(get_approval), methods=["GET"]),
        Route("/approvals/{request_id}/decide", _problems(decide), methods=["POST"]),
        Route("/similar-rules", _problems(list_rules), methods=["GET"]),
        Route("/similar-rules/{rule_id}", _problems(get_rule), methods=["GET"]),
        Route("/similar-rules/{rule_id}/revoke", _problems(revoke_rule), methods=["POST"]),
        Route("/delegations", _problems(delegations.listed), methods=["GET"]),
        Route("/delegations", _problems(delegations.create), methods=["POST"]),
        Route("/delegations/{delegation_id}/revoke", _problems(delegations.revoke), methods=["POST"]),
    ]


def _similar_rules(backend: SupportsReview) -> SupportsSimilarRules:
    if not isinstance(backend, SupportsSimilarRules):
        raise _Problem(400, "this approval backend keeps no similar-call rules")
    return backend


def _problems(endpoint: Endpoint) -> Endpoint:
    """``endpoint`` answering its refusals as problem details (see :func:`answering_problems`)."""
    return answering_problems(endpoint, store_retry_after_s=STORE_RETRY_AFTER_S)


def _request_id(request: Request) -> str:
    """The path's request id; one no store can hold (a NUL, a lone surrogate) names no request."""
    request_id: str = request.path_params["request_id"]
    if not storable(request_id):
        raise _Problem(404, "no such approval request")
    return request_id


def _count_param(request: Request, name: str, least: int, most: int | None) -> int:
    """A whole-number query parameter (absent: ``least`` for an offset, ``most`` for a limit)."""
    text = request.query_params.get(name)
    if text is None:
        return most if most is not None else least
    bound = f" and at most {most}" if most is not None else ""
    if not (text.isascii() and text.isdigit()) or len(text) > 9 or not least <= int(text) <= (most or int(text)):
        raise _Problem(400, f"query parameter {name!r} must be a whole number of at least {least}{bound}")
    return int(text)


async def _decision_body(request: Request) -> tuple[Literal["approve", "deny"], str | None, dict[str, Any]]:
    """The validated ``decision`` and ``comment`` of a decide request, and its whole body."""
    body = await json_object_body(request, MAX_DECISION_BYTES)
    decision = body.get("decision")
    if decision not in ("approve", "deny"):
        raise _Problem(400, "field 'decision' must be 'approve' or 'deny'")
    comment = body.get("comment")
    if comment is not None and not isinstance(comment, str):
        raise _Problem(400, "field 'comment' must be a string")
    if comment is not None and len(comment) > MAX_COMMENT_CHARS:
        raise _Problem(400, f"field 'comment' must be at most {MAX_COMMENT_CHARS} characters")
    if comment is not None and "\x00" in comment:
        raise _Problem(400, "field 'comment' must not contain NUL characters")
    return ("approve" if decision == "approve" else "deny"), comment, body
