"""Tool fixtures of the content scenarios (``tools-call-*``), served on both protocol eras."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from mcp_approval.testing.conformance._common import PNG_BASE64, WAV_BASE64, AnyContext, text

__all__ = ["CONTENT_TOOLS", "register"]


def _image() -> types.ImageContent:
    return types.ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")


def _embedded(uri: str, mime_type: str, body: str) -> types.EmbeddedResource:
    contents = types.TextResourceContents(uri=uri, mime_type=mime_type, text=body)
    return types.EmbeddedResource(type="resource", resource=contents)


def test_simple_text() -> str:
    """Returns one fixed text block."""
    return "This is a simple text response for testing."


def test_image_content() -> types.CallToolResult:
    """Returns one PNG image block."""
    return types.CallToolResult(content=[_image()])


def test_audio_content() -> types.CallToolResult:
    """Returns one WAV audio block."""
    audio = types.AudioContent(type="audio", data=WAV_BASE64, mime_type="audio/wav")
    return types.CallToolResult(content=[audio])


def test_embedded_resource() -> types.CallToolResult:
    """Returns one embedded text resource."""
    block = _embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")
    return types.CallToolResult(content=[block])


def test_multiple_content_types() -> types.CallToolResult:
    """Returns a text, an image and an embedded JSON resource block."""
    resource = _embedded("test://mixed-content-resource", "application/json", '{"test": "data", "value": 123}')
    return types.CallToolResult(content=[text("Multiple content types test:"), _image(), resource])


def test_error_handling() -> str:
    """Always fails with a tool execution error (``isError: true``)."""
    raise ToolError("This tool intentionally returns an error for testing")


async def test_tool_with_progress(ctx: AnyContext) -> str:
    """Reports progress 0, 50 and 100 of 100, about 50 ms apart."""
    for step in (0, 50, 100):
        await ctx.report_progress(progress=step, total=100, message=f"Completed step {step} of 100")
        if step < 100:
            await anyio.sleep(0.05)
    meta = ctx.request_context.meta or {}
    return str(meta.get("progressToken", 0))


CONTENT_TOOLS: tuple[Callable[..., Any], ...] = (
    test_simple_text,
    test_image_content,
    test_audio_content,
    test_embedded_resource,
    test_multiple_content_types,
    test_error_handling,
    test_tool_with_progress,
)


def register(server: MCPServer[Any]) -> list[str]:
    """Register the content fixtures; return their names."""
    for fn in CONTENT_TOOLS:
        server.add_tool(fn, structured_output=False)
    return [fn.__name__ for fn in CONTENT_TOOLS]
