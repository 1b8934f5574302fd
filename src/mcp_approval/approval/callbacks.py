"""Authenticated backend callbacks (SEP-2848 §Security Implications, "Callback authenticity").

A backend that pushes status changes POSTs ``{"handle": "<durable handle>"}`` to the server
with a header ``X-Approval-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>`` over
``"<t>.<raw body>"`` under the shared secret. A valid callback is only a wake-up: the resolver
then fetches the backend's authoritative status, so a forged, replayed or stale callback can
never cause an execution. Unsigned, badly signed or stale callbacks are refused with 401.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcp_approval.clock import Clock, SystemClock

logger = logging.getLogger("mcp_approval.approval")

SIGNATURE_HEADER = "x-approval-signature"
#: How far a callback's timestamp may be from the server's clock.
TOLERANCE_S = 300
_MAX_BODY = 4096
CALLBACK_PATH = "/approvals/callback"


def sign_callback(secret: str, body: bytes, timestamp: int) -> str:
    """The ``X-Approval-Signature`` value for ``body`` sent at ``timestamp`` (unix seconds)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify_callback(secret: str, body: bytes, header: str | None, now_s: int) -> bool:
    """Whether ``header`` authenticates ``body`` under ``secret`` and is fresh."""
    if not header:
        return False
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(parts.get("t", ""))
    except ValueError:
        return False
    if abs(now_s - timestamp) > TOLERANCE_S:
        return False
    expected = sign_callback(secret, body, timestamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))


def callback_route(secret: str, wake: Callable[[str], Awaitable[None]], *, clock: Clock | None = None) -> Route:
    """``POST /approvals/callback``: verify, then wake the resolver for the named handle."""
    time_source = clock or SystemClock()

    async def receive(request: Request) -> Response:
        body = await request.body()
        if len(body) > _MAX_BODY:
            return _problem(413, "Callback too large")
        if not verify_callback(secret, body, request.headers.get(SIGNATURE_HEADER), time_source.now_ms() // 1000):
            logger.warning("refused an unauthenticated approval callback")
            return _problem(401, "Callback signature missing, invalid or stale")
        try:
            handle = json.loads(body).get("handle")
        except (ValueError, AttributeError):
            handle = None
        if not isinstance(handle, str) or not handle:
            return _problem(400, 'The callback body must be {"handle": "..."}')
        await wake(handle)
        return Response(status_code=202)

    return Route(CALLBACK_PATH, receive, methods=["POST"])


def _problem(status: int, title: str) -> JSONResponse:
    return JSONResponse(
        {"type": "about:blank", "title": title, "status": status},
        status_code=status,
        media_type="application/problem+json",
    )
