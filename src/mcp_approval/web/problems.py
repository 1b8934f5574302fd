"""Refusals of the JSON APIs reviewers call, answered as RFC 9457 problem details.

An endpoint raises :class:`Problem` for anything it refuses; :func:`answering_problems` wraps it so
that the refusal becomes its ``application/problem+json`` response, and a store that cannot be
reached becomes a ``503`` with ``Retry-After`` (nothing was read or changed, so trying again is
safe). :func:`json_object_body` reads the JSON object such an endpoint takes, bounded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mcp_approval.errors import MCPApprovalError
from mcp_approval.storage.database import StoreUnavailableError
from mcp_approval.web.bodies import BodyTooLargeError, JsonBodyError, parse_json_body, read_body

__all__ = ["Endpoint", "Problem", "answering_problems", "json_object_body", "problem"]

Endpoint = Callable[[Request], Awaitable[Response]]

_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    429: "Too Many Requests",
    503: "Service Unavailable",
}


class Problem(MCPApprovalError):
    """A refusal answered with ``status`` and ``detail`` (and ``headers``, such as ``Retry-After``)."""

    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers


def problem(status: int, detail: str, headers: dict[str, str] | None = None) -> Response:
    """An RFC 9457 problem details response."""
    body = {"type": "about:blank", "title": _TITLES.get(status, "Error"), "status": status, "detail": detail}
    return JSONResponse(body, status_code=status, headers=headers, media_type="application/problem+json")


def answering_problems(endpoint: Endpoint, *, store_retry_after_s: int) -> Endpoint:
    """``endpoint`` with :class:`Problem` answered as its response, and an unreachable store as a 503."""

    async def handle(request: Request) -> Response:
        try:
            return await endpoint(request)
        except Problem as exc:
            return problem(exc.status, exc.detail, exc.headers)
        except StoreUnavailableError:
            detail = "the approval store is unavailable; nothing was read or changed, try again"
            return problem(503, detail, {"Retry-After": str(store_retry_after_s)})

    return handle


async def json_object_body(request: Request, max_bytes: int) -> dict[str, Any]:
    """The request's body, a JSON object of at most ``max_bytes``.

    Raises:
        Problem: another media type than JSON (415), a longer body (413), or a body that is not a
            JSON object (400).
    """
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        raise Problem(415, "the request body must be application/json")
    try:
        body: Any = parse_json_body(await read_body(request, max_bytes))
    except BodyTooLargeError as exc:
        raise Problem(413, str(exc)) from None
    except JsonBodyError as exc:
        raise Problem(400, str(exc)) from None
    if not isinstance(body, dict):
        raise Problem(400, "the request body must be a JSON object")
    return body
