"""``authorizationContextId``: issuing it, and reading the copy a retry echoes.

The id is a correlation handle for audit and telemetry, never authorization material: it is
random (it encodes no operation, resource, policy or user), a retry that omits it or echoes an
unknown or malformed one is processed normally, and every retry is evaluated afresh.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Mapping
from typing import Any, Final

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from mcp_approval.protocol import META_AUTHORIZATION_CONTEXT_ID, METHOD_TOOLS_CALL

__all__ = [
    "MAX_CONTEXT_ID_LENGTH",
    "context_correlation_middleware",
    "echoed_context_id",
    "is_usable_context_id",
    "new_context_id",
    "note_retry",
]

logger = logging.getLogger("mcp_approval.denials")

#: Longest context id either side accepts; longer ones are ignored (never rejected).
MAX_CONTEXT_ID_LENGTH: Final = 256
#: Visible ASCII only, so an id can be logged and echoed without escaping.
_CONTEXT_ID: Final = re.compile(rf"[\x21-\x7e]{{1,{MAX_CONTEXT_ID_LENGTH}}}")


def new_context_id() -> str:
    """A fresh context id: 256 random bits, URL-safe, derived from nothing about the request."""
    return secrets.token_urlsafe(32)


def is_usable_context_id(value: object) -> bool:
    """Whether ``value`` is a string of 1 to :data:`MAX_CONTEXT_ID_LENGTH` visible ASCII characters."""
    return isinstance(value, str) and _CONTEXT_ID.fullmatch(value) is not None


def echoed_context_id(meta: Mapping[str, Any] | None) -> str | None:
    """The context id a request's ``_meta`` echoes, or ``None`` when it is absent or unusable.

    Never raises: a non-string, empty, oversized or non-ASCII value is logged (by type and
    length only) and treated as absent, because a retry must not be rejected for its handle.
    """
    if not isinstance(meta, Mapping) or META_AUTHORIZATION_CONTEXT_ID not in meta:
        return None
    value = meta[META_AUTHORIZATION_CONTEXT_ID]
    if is_usable_context_id(value):
        return str(value)
    size = len(value) if isinstance(value, str | list | dict) else None
    logger.info("ignored an unusable echoed authorization context id (%s, length %s)", type(value).__name__, size)
    return None


def note_retry(meta: Mapping[str, Any] | None, *, operation: str) -> str | None:
    """Log which denial a request retries, and return that context id (``None`` when it names none).

    The result is for correlation only: callers evaluate authorization afresh whatever it is.
    """
    context_id = echoed_context_id(meta)
    if context_id is not None:
        logger.info("retry of %r echoes authorization context %s", operation, context_id)
    return context_id


async def context_correlation_middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: log the context id each ``tools/call`` echoes, then handle the call as usual.

    Pass it as ``MCPServer(middleware=[context_correlation_middleware])``. It never rejects and
    changes nothing about the request.
    """
    if ctx.method == METHOD_TOOLS_CALL:
        name = ctx.params.get("name") if isinstance(ctx.params, Mapping) else None
        note_retry(ctx.meta, operation=name if isinstance(name, str) else METHOD_TOOLS_CALL)
    return await call_next(ctx)
