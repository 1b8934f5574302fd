"""Input limits of the MCP endpoint: what one caller may make the server parse, decide and seal.

A ``tools/call`` costs time in proportion to its arguments: the policy request maps them, the
PDP reads them, the call binding canonicalizes (RFC 8785) and seals them. Two limits keep that
bounded, both from :class:`~mcp_approval.approval.options.ApprovalOptions`:

- :class:`McpBodyLimit`, ASGI middleware on ``POST /mcp``: a body over ``max_request_bytes`` is
  answered HTTP 413 ``application/problem+json`` as soon as it is announced or streams past the
  limit, before it is parsed.
- :func:`argument_limit_problem`, checked first by the policy gate: arguments with more
  members, deeper nesting or more bytes than allowed are ``-32602`` naming the limit.

Arguments still large within those limits (:func:`~mcp_approval.json_shape.large_json`) are
mapped, decided and sealed on a worker thread (:func:`~mcp_approval.worker_thread.off_loop`), so
other callers keep being answered.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.json_shape import json_shape

__all__ = ["McpBodyLimit", "argument_limit_problem"]


def argument_limit_problem(arguments: Mapping[str, Any], options: ApprovalOptions) -> str | None:
    """Why ``arguments`` are refused (naming the ``[approval]`` option), or ``None`` when within limits.

    Costs at most ``max_argument_members`` steps, plus one serialization once the shape is fine.
    """
    shape = json_shape(dict(arguments), max_members=options.max_argument_members, max_depth=options.max_argument_depth)
    if shape.depth > options.max_argument_depth:
        return f"the arguments nest deeper than approval.max_argument_depth ({options.max_argument_depth} levels)"
    if shape.members > options.max_argument_members:
        return f"the arguments have more than approval.max_argument_members ({options.max_argument_members}) members"
    try:
        size = len(json.dumps(dict(arguments), ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace"))
    except ValueError:  # a circular value cannot come off the wire; refuse rather than crash
        return "the arguments are not JSON"
    if size > options.max_argument_bytes:
        return f"the arguments exceed approval.max_argument_bytes ({options.max_argument_bytes} bytes)"
    return None


class McpBodyLimit:
    """ASGI middleware: ``POST`` bodies at ``path`` longer than ``max_bytes`` are answered HTTP 413.

    The body is read (at most ``max_bytes``) before the app sees it and then replayed to it, so
    the app never starts on a body it would have to abandon.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int, path: str = "/mcp") -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the body of a ``POST`` to the path, then pass the request on."""
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path", "").rstrip("/") != self.path:
            await self.app(scope, receive, send)
            return
        announced = dict(scope.get("headers") or ()).get(b"content-length", b"")
        if announced.isdigit() and int(announced) > self.max_bytes:
            await self._refuse(send)
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body.extend(message.get("body", b""))
            more = bool(message.get("more_body", False))
            if len(body) > self.max_bytes:
                await self._refuse(send)
                return
        await self.app(scope, _replay(bytes(body), receive), send)

    async def _refuse(self, send: Send) -> None:
        detail = f"the request body exceeds approval.max_request_bytes ({self.max_bytes} bytes)"
        payload = json.dumps(
            {"type": "about:blank", "title": "Content Too Large", "status": 413, "detail": detail}
        ).encode()
        headers = [(b"content-type", b"application/problem+json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then whatever the connection sends (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
