"""Diagnostic fixtures of the 2026-07-28 transport scenarios.

``server-stateless`` (SEP-2575) probes capability gating, log gating, response-stream contents and
``subscriptions/listen`` delivery through dedicated hook tools; ``json-schema-2020-12`` and
``http-custom-header-server-validation`` (SEP-2243) inspect tool registrations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from pydantic import Field

from mcp_approval.protocol import MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_approval.testing.conformance._common import (
    AnyContext,
    declares,
    elicit_request,
    response_for,
    sampling_request,
)

__all__ = ["DIAGNOSTIC_TOOLS", "json_schema_2020_12_tool", "register", "schema_tool"]

JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


async def test_missing_capability(ctx: AnyContext) -> str | types.InputRequiredResult:
    """Needs the client's ``sampling`` capability; answers ``-32021`` when it is not declared."""
    if not declares(ctx, "sampling"):
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="This tool needs the sampling client capability",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    if response_for(ctx, "sample") is None:
        return types.InputRequiredResult(input_requests={"sample": sampling_request("Say hi", 10)})
    return "Sampling answered."


async def test_streaming_elicitation(ctx: AnyContext) -> str | types.InputRequiredResult:
    """Asks for input through an ``InputRequiredResult``, never a standalone request on the stream."""
    if response_for(ctx, "answer") is None:
        return types.InputRequiredResult(input_requests={"answer": elicit_request("Anything?", {"answer": "string"})})
    return "Elicitation answered."


async def test_logging_tool(ctx: AnyContext) -> str:
    """Logs three messages; they reach the client only if it opted in with ``_meta`` logLevel."""
    for message in ("first log", "second log", "third log"):
        await ctx.info(message)
    return "Logging tool finished"


async def test_trigger_tool_change(ctx: AnyContext) -> str:
    """Publishes a tools list-changed event to ``subscriptions/listen`` streams."""
    await ctx.notify_tools_changed()
    return "Tool list change published"


async def test_trigger_prompt_change(ctx: AnyContext) -> str:
    """Publishes a prompts list-changed event to ``subscriptions/listen`` streams."""
    await ctx.notify_prompts_changed()
    return "Prompt list change published"


def test_header_echo(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    """Echoes ``region``, which is mirrored into the ``Mcp-Param-Region`` HTTP header (SEP-2243)."""
    return f"Region: {region}"


def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, Any] | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Tool with JSON Schema 2020-12 features"""
    return f"Received contact for {name or 'unknown'}"


DIAGNOSTIC_TOOLS: tuple[Callable[..., Any], ...] = (
    test_missing_capability,
    test_streaming_elicitation,
    test_logging_tool,
    test_trigger_tool_change,
    test_trigger_prompt_change,
    test_header_echo,
)


def schema_tool() -> Tool:
    """``json_schema_2020_12_tool``, advertised with the suite's verbatim 2020-12 input schema."""
    tool = Tool.from_function(json_schema_2020_12_tool, structured_output=False)
    return tool.model_copy(update={"parameters": JSON_SCHEMA_2020_12})


def register(server: MCPServer[Any]) -> list[str]:
    """Register the diagnostic hook tools; return their names."""
    for fn in DIAGNOSTIC_TOOLS:
        server.add_tool(fn, structured_output=False)
    return [fn.__name__ for fn in DIAGNOSTIC_TOOLS]
