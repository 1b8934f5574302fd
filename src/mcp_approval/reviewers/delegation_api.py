"""The reviewer API's delegations: ``POST /delegations`` with ``{"delegate": "dave", "template":
"treasury", "duration_s": 259200}`` hands the signed-in reviewer's role for the template to the
delegate from now for that long; ``GET /delegations`` (``?state=active``) lists the ones the
reviewer made or received; ``POST /delegations/{id}/revoke`` revokes one at once (its delegator
may). :func:`~mcp_approval.reviewers.api.reviewer_routes` mounts them, answering errors as the
rest of the API does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mcp_approval.backends import DelegationError, NotEligibleError, SupportsDelegations, SupportsReview
from mcp_approval.reviewers.limits import MAX_DECISION_BYTES
from mcp_approval.safe_text import storable
from mcp_approval.web.problems import Problem, json_object_body

__all__ = ["DelegationEndpoints"]

#: The longest name a delegate may have (the column's width).
_MAX_NAME = 256


class DelegationEndpoints:
    """The delegation endpoints over ``backend``.

    Args:
        backend: the reviewer backend (one without delegations answers 400).
        reviewer_of: the authenticated reviewer of a request (raises the API's 401/429).
    """

    def __init__(self, backend: SupportsReview, reviewer_of: Callable[[Request], Awaitable[str]]) -> None:
        self._backend = backend
        self._reviewer_of = reviewer_of

    def _delegations(self) -> SupportsDelegations:
        if not isinstance(self._backend, SupportsDelegations):
            raise Problem(400, "this approval backend keeps no delegations")
        return self._backend

    async def create(self, request: Request) -> Response:
        """``POST /delegations``: 201 with the delegation."""
        reviewer = await self._reviewer_of(request)
        body = await json_object_body(request, MAX_DECISION_BYTES)
        unknown = sorted(set(body) - {"delegate", "template", "duration_s"})
        if unknown:
            raise Problem(400, f"unknown field {unknown[0]!r}")
        delegate, template, duration = body.get("delegate"), body.get("template"), body.get("duration_s")
        for name, value in (("delegate", delegate), ("template", template)):
            if not isinstance(value, str) or not value or len(value) > _MAX_NAME or not storable(value):
                raise Problem(400, f"field {name!r} must be a non-empty name of at most {_MAX_NAME} characters")
        if isinstance(duration, bool) or not isinstance(duration, int | float) or not duration > 0:
            raise Problem(400, "field 'duration_s' is required: a positive number of seconds")
        assert isinstance(delegate, str)
        assert isinstance(template, str)
        try:
            made = await self._delegations().delegate(reviewer, delegate, template, float(duration))
        except NotEligibleError as exc:
            raise Problem(403, str(exc)) from None
        except DelegationError as exc:
            raise Problem(400, str(exc)) from None
        return JSONResponse(made.to_json(), status_code=201)

    async def listed(self, request: Request) -> Response:
        """``GET /delegations``: the reviewer's, newest first."""
        reviewer = await self._reviewer_of(request)
        active_only = request.query_params.get("state") == "active"
        found = await self._delegations().delegations(viewer=reviewer, active_only=active_only)
        return JSONResponse({"delegations": [item.to_json() for item in found]})

    async def revoke(self, request: Request) -> Response:
        """``POST /delegations/{delegation_id}/revoke``: the delegation, revoked."""
        reviewer = await self._reviewer_of(request)
        delegation_id = request.path_params["delegation_id"]
        if not storable(delegation_id):
            raise Problem(404, "no such delegation")
        try:
            revoked = await self._delegations().revoke_delegation(delegation_id, reviewer)
        except NotEligibleError as exc:
            raise Problem(403, str(exc)) from None
        except DelegationError as exc:
            raise Problem(404 if str(exc).startswith("no delegation") else 409, str(exc)) from None
        return JSONResponse(revoked.to_json())
