"""Server middleware for the tasks extension's wire rules the SDK does not enforce itself.

- ``Mcp-Name`` must equal ``params.taskId`` on ``tasks/*`` over HTTP (SEP-2243 applied to
  tasks); ``mcp`` 2.3 checks the header only for ``tools/call``, ``prompts/get`` and
  ``resources/read``.
- The 2025-11-25 ``params.task`` member of ``tools/call`` must be ignored whatever its value;
  ``mcp`` 2.3 rejects a non-object value before any extension sees the call.
- ``subscriptions/listen`` asking for ``taskIds`` without declaring the extension on that
  request is ``-32021``. With the declaration, the SDK's listen handler acknowledges no task ids
  (this runtime sends no ``notifications/tasks``; clients poll).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import decode_header_value

from mcp_approval.protocol import (
    HEADER_MCP_NAME,
    HEADER_MISMATCH,
    METHOD_SUBSCRIPTIONS_LISTEN,
    METHOD_TOOLS_CALL,
    TASK_METHODS,
    TASKS_EXTENSION,
)

__all__ = ["task_routing_middleware"]


async def task_routing_middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Enforce ``Mcp-Name`` on ``tasks/*`` and drop the legacy ``params.task`` of ``tools/call``."""
    method = ctx.method
    if method == METHOD_TOOLS_CALL:  # the common case first: one comparison on the hot path
        if isinstance(ctx.params, dict) and "task" in ctx.params:
            params = {key: value for key, value in ctx.params.items() if key != "task"}
            return await call_next(replace(ctx, params=params))
    elif method in TASK_METHODS:
        _check_mcp_name(ctx)
    elif method == METHOD_SUBSCRIPTIONS_LISTEN and _asks_for_task_ids(ctx):
        require_client_extension(ctx, TASKS_EXTENSION)
    return await call_next(ctx)


def _asks_for_task_ids(ctx: ServerRequestContext[Any, Any]) -> bool:
    notifications = ctx.params.get("notifications") if isinstance(ctx.params, dict) else None
    return isinstance(notifications, dict) and "taskIds" in notifications


def _check_mcp_name(ctx: ServerRequestContext[Any, Any]) -> None:
    request = ctx.request
    headers = getattr(request, "headers", None)
    if headers is None:  # stdio and in-process: no routing headers exist
        return
    task_id = ctx.params.get("taskId") if isinstance(ctx.params, dict) else None
    if not isinstance(task_id, str):
        return  # malformed params: validation answers -32602 with the details
    raw = headers.get(HEADER_MCP_NAME)
    if raw is None:
        raise MCPError(code=HEADER_MISMATCH, message="Missing Mcp-Name header for a tasks/* request")
    if decode_header_value(raw) != task_id:
        raise MCPError(code=HEADER_MISMATCH, message="Mcp-Name header does not match params.taskId")
