"""The OpenAPI documents the HTTP servers publish at ``/openapi.json``.

Each layer describes its own routes as data (``reviewer_paths`` and ``console_paths`` in
:mod:`mcp_approval.reviewers.openapi_paths`, ``pdp_paths`` and ``ars_paths`` in
:mod:`mcp_approval.reference.openapi_paths`, ``callback_paths`` in
:mod:`mcp_approval.backends.callbacks`); a server joins the pieces of the routes it mounts with
:func:`openapi_document` and serves the result with :func:`openapi_route`. The MCP endpoint and
its protected resource metadata are not part of them: they are described by the MCP specification.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = ["OPENAPI_PATH", "PROBLEM", "openapi_document", "openapi_route", "problem_response"]

#: Where every server publishes its document.
OPENAPI_PATH: Final = "/openapi.json"

#: An RFC 9457 problem details object.
PROBLEM: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
    },
}


def problem_response(description: str) -> dict[str, Any]:
    """An OpenAPI response object answering ``application/problem+json``."""
    return {"description": description, "content": {"application/problem+json": {"schema": PROBLEM}}}


def openapi_document(title: str, version: str, *paths: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAPI 3.1 document of ``paths`` (path → path item), with the bearer security scheme.

    Raises:
        ValueError: two pieces describe the same path.
    """
    joined: dict[str, Any] = {}
    for piece in paths:
        for path, item in piece.items():
            if path in joined:
                raise ValueError(f"OpenAPI path {path!r} is described twice")
            joined[path] = item
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "paths": joined,
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


def openapi_route(document: Mapping[str, Any]) -> Route:
    """``GET /openapi.json``: ``document``, as it was built (no request changes it)."""
    body = dict(document)

    async def serve(request: Request) -> Response:
        return JSONResponse(body)

    return Route(OPENAPI_PATH, serve, methods=["GET"])
