"""Authenticated backend callbacks (SEP-2848 §Security Implications, "Callback authenticity").

A backend that pushes status changes POSTs ``{"handle": "<durable handle>"}`` to the server
with a header ``X-Approval-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>`` over
``"<t>.<raw body>"`` under the shared secret. A valid callback is only a wake-up: the workflow driver
then fetches the backend's authoritative status, so a forged, replayed or stale callback can
never cause an execution. Unsigned, badly signed or stale callbacks are refused with 401.

With an ARAP backend, callbacks (Callback profile) arrive on the same route as ``{"state": ...,
"task": {"id", "status", "status_endpoint"}}`` under the same signature scheme, and only in that
shape: a ``{"handle": ...}`` body is refused with 400, as it would skip the checks below. Beyond
the signature, the task must be one this server submitted (its id and status endpoint rebuild a
stored handle), ``state`` must be exactly what was sent with that submission, and a signature is
accepted once (a replay within the freshness window is refused with 409). Only then is the
workflow driver woken, which GETs the status.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcp_approval.clock import Clock, SystemClock
from mcp_approval.openapi import problem_response
from mcp_approval.storage.worker_guards import MemoryOnceGuard, OnceGuard
from mcp_approval.web.bodies import BodyTooLargeError, read_body

__all__ = [
    "CALLBACK_PATH",
    "SIGNATURE_HEADER",
    "TOLERANCE_S",
    "ArapCallbackTarget",
    "callback_paths",
    "callback_route",
    "sign_callback",
    "verify_callback",
]

logger = logging.getLogger("mcp_approval.approval")

SIGNATURE_HEADER = "x-approval-signature"
#: How far a callback's timestamp may be from the server's clock.
TOLERANCE_S = 300
_MAX_BODY = 4096
CALLBACK_PATH = "/approvals/callback"
_ARAP_SHAPE = 'The callback body must be {"state": "...", "task": {"id": ..., "status_endpoint": ...}}'


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


class ArapCallbackTarget(Protocol):
    """What the route needs from an ARAP backend to check a callback."""

    def callback_handle(self, task: Mapping[str, Any]) -> str | None:
        """The handle a callback's ``task`` names, if well formed."""
        ...

    def callback_state(self, key: str) -> str | None:
        """The ``callback.state`` sent with the submission under ``key``."""
        ...


def callback_paths() -> dict[str, Any]:
    """The OpenAPI path item of :func:`callback_route` (see :mod:`mcp_approval.openapi`)."""
    answers = {
        "202": {"description": "accepted: the named request is looked at again"},
        **{
            str(status): problem_response(text)
            for status, text in (
                (400, "not a callback body"),
                (401, "signature missing, invalid or stale"),
                (404, "no such request"),
                (409, "already received"),
                (413, "body too large"),
            )
        },
    }
    return {
        CALLBACK_PATH: {
            "post": {
                "summary": "A backend says a request may have changed (a wake-up, never a verdict)",
                "parameters": [{"name": SIGNATURE_HEADER, "in": "header", "schema": {"type": "string"}}],
                "requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}},
                "responses": answers,
            }
        }
    }


def callback_route(
    secret: str,
    wake: Callable[[str], Awaitable[None]],
    *,
    clock: Clock | None = None,
    arap: ArapCallbackTarget | None = None,
    key_of: Callable[[str], Awaitable[str | None]] | None = None,
    once: OnceGuard | None = None,
) -> Route:
    """``POST /approvals/callback``: verify, then wake the workflow driver for the named handle.

    With ``arap`` (the backend) and ``key_of`` (handle → the submission key it was sent under),
    ARAP callback bodies are accepted instead (see the module docstring). ``once`` remembers
    accepted signatures: by default in this process; a :class:`~mcp_approval.storage.SqlOnceGuard`
    on the store refuses a replay to any worker on it.
    """
    time_source = clock or SystemClock()
    seen: OnceGuard = once or MemoryOnceGuard()

    async def receive(request: Request) -> Response:
        try:
            body = await read_body(request, _MAX_BODY)  # anonymous: never buffered past the limit
        except BodyTooLargeError:
            return _problem(413, "Callback too large")
        now_s = time_source.now_ms() // 1000
        if not verify_callback(secret, body, request.headers.get(SIGNATURE_HEADER), now_s):
            logger.warning("refused an unauthenticated approval callback")
            return _problem(401, "Callback signature missing, invalid or stale")
        try:
            document = json.loads(body)
        except ValueError:
            document = None
        if arap is not None and key_of is not None and isinstance(document, dict) and "task" in document:
            header = request.headers.get(SIGNATURE_HEADER) or ""
            refused, handle = await _arap_callback(document, arap, key_of)
            if refused is not None:
                return refused
            # Only an accepted callback counts as used (a refused one may be retried by its sender);
            # older signatures fail freshness anyway.
            if not await seen.first_use(header, now_s * 1000, (now_s + 2 * TOLERANCE_S) * 1000):
                logger.warning("refused a replayed ARAP callback")
                return _problem(409, "Callback already received")
            await wake(handle)
            return Response(status_code=202)
        if arap is not None:
            # Only the ARAP shape: a bare handle would skip the state and single-use checks.
            logger.warning("refused an approval callback that is not in the ARAP shape")
            return _problem(400, _ARAP_SHAPE)
        named = document.get("handle") if isinstance(document, dict) else None
        if not isinstance(named, str) or not named:
            return _problem(400, 'The callback body must be {"handle": "..."}')
        await wake(named)
        return Response(status_code=202)

    return Route(CALLBACK_PATH, receive, methods=["POST"])


async def _arap_callback(
    document: Mapping[str, Any],
    arap: ArapCallbackTarget,
    key_of: Callable[[str], Awaitable[str | None]],
) -> tuple[Response | None, str]:
    """An authenticated ARAP callback bound to a task this server submitted and its ``state``:
    ``(None, handle)``, or the refusal."""
    task, state = document.get("task"), document.get("state")
    handle = arap.callback_handle(task) if isinstance(task, Mapping) else None
    if handle is None or not isinstance(state, str):
        return _problem(400, _ARAP_SHAPE), ""
    key = await key_of(handle)
    expected = arap.callback_state(key) if key is not None else None
    if expected is None:
        logger.warning("refused an ARAP callback for a task this server did not submit")
        return _problem(404, "Unknown task"), ""
    if not hmac.compare_digest(expected.encode(), state.encode()):
        logger.warning("refused an ARAP callback whose state does not match its task")
        return _problem(401, "Callback state does not match the task"), ""
    return None, handle


def _problem(status: int, title: str) -> JSONResponse:
    return JSONResponse(
        {"type": "about:blank", "title": title, "status": status},
        status_code=status,
        media_type="application/problem+json",
    )
