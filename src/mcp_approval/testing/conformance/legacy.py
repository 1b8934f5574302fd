"""Fixtures of the 2025-11-25-only scenarios: mid-call logging, sampling, elicitation, SSE polling.

These tools send standalone server-to-client requests and notifications, which exist only on a
handshake (2025-era) connection; on the 2026-07-28 wire the same needs go through MRTR.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server.mcpserver import MCPServer

from mcp_approval.testing.conformance._common import AnyContext, form_schema, text

__all__ = ["LEGACY_TOOLS", "register"]

_SEP1034_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
}


def _titled(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"const": value, "title": title} for value, title in pairs]


_SEP1330_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["active", "inactive", "pending"]},
        "titledSingle": {
            "type": "string",
            "oneOf": _titled(("low", "Low Priority"), ("medium", "Medium Priority"), ("high", "High Priority")),
        },
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["read", "write", "execute"]}},
        "titledMulti": {
            "type": "array",
            "items": {"anyOf": _titled(("feature", "New Feature"), ("bug", "Bug Fix"), ("docs", "Documentation"))},
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["small", "medium", "large"],
            "enumNames": ["Small Size", "Medium Size", "Large Size"],
        },
    },
    "required": ["untitledSingle", "titledSingle", "untitledMulti", "titledMulti", "legacyEnum"],
}


async def _elicit(ctx: AnyContext, message: str, schema: dict[str, Any]) -> str:
    result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_context.request_id)
    content = json.dumps(result.content or {}) if result.action == "accept" else "{}"
    return f"action={result.action}, content={content}"


async def test_tool_with_logging(ctx: AnyContext) -> str:
    """Sends three info log notifications about 50 ms apart."""
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(message)
        if message != "Tool execution completed":
            await anyio.sleep(0.05)
    return "Tool with logging executed successfully"


async def test_sampling(prompt: str, ctx: AnyContext) -> str:
    """Asks the client's model to answer ``prompt`` (``sampling/createMessage``)."""
    message = types.SamplingMessage(role="user", content=text(prompt))
    result = await ctx.session.create_message(
        [message], max_tokens=100, related_request_id=ctx.request_context.request_id
    )
    content = result.content
    answer = content.text if isinstance(content, types.TextContent) else "No response"
    return f"LLM response: {answer}"


async def test_elicitation(message: str, ctx: AnyContext) -> str:
    """Asks the user for a free-text ``response`` (``elicitation/create``)."""
    outcome = await _elicit(ctx, message, form_schema({"response": "string"}))
    return f"User response: {outcome}"


async def test_elicitation_sep1034_defaults(ctx: AnyContext) -> str:
    """Elicits a form whose every primitive field carries a default (SEP-1034)."""
    outcome = await _elicit(ctx, "Please provide user information", _SEP1034_SCHEMA)
    return f"Elicitation completed: {outcome}"


async def test_elicitation_sep1330_enums(ctx: AnyContext) -> str:
    """Elicits a form with every enum schema variant (SEP-1330)."""
    outcome = await _elicit(ctx, "Please select values using different enum schema types", _SEP1330_SCHEMA)
    return f"Elicitation completed: {outcome}"


async def test_reconnection(ctx: AnyContext) -> str:
    """Closes its SSE stream mid-call so the client must resume it (SEP-1699)."""
    await ctx.info("Before disconnect")
    await ctx.close_sse_stream()
    await anyio.sleep(0.2)
    await ctx.info("After reconnect")
    return "Reconnection test completed"


LEGACY_TOOLS: tuple[Callable[..., Any], ...] = (
    test_tool_with_logging,
    test_sampling,
    test_elicitation,
    test_elicitation_sep1034_defaults,
    test_elicitation_sep1330_enums,
    test_reconnection,
)


def register(server: MCPServer[Any]) -> list[str]:
    """Register the 2025-era interactive fixtures; return their names."""
    for fn in LEGACY_TOOLS:
        server.add_tool(fn, structured_output=False)
    return [fn.__name__ for fn in LEGACY_TOOLS]
