"""strands-agents without tasks: ``MCPClient`` tools as ``MCPAgentTool`` objects.

Each call goes through ``MCPAgentTool.stream`` with a tool use, as a strands agent's event loop runs
the tool the model asked for; the ``ToolResult`` it yields (status and content blocks) is what the
model receives.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from harness import REQUESTER_TOKEN, Leg, approval_flow
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from strands.tools.mcp import MCPClient
from strands.types.tools import ToolResult


def transport(url: str) -> Any:
    """The streamable HTTP transport as alice (a fresh HTTP client per connection)."""
    return streamable_http_client(
        url, http_client=create_mcp_http_client(headers={"Authorization": f"Bearer {REQUESTER_TOKEN}"})
    )


def result_text(result: ToolResult) -> str:
    """A strands ``ToolResult`` as the model reads it: its status, then its content blocks."""
    blocks = [str(block.get("text", block.get("json", ""))) for block in result["content"]]
    return f"[status={result['status']}] " + "\n".join(blocks)


async def run_tool(tool: Any, arguments: dict[str, Any], tool_use_id: str) -> ToolResult:
    """Run an ``MCPAgentTool`` as the event loop does; its final ``ToolResult``."""
    final: Any = None
    async for event in tool.stream({"toolUseId": tool_use_id, "name": tool.tool_name, "input": arguments}, {}):
        final = event
    result = getattr(final, "tool_result", final)
    if not (isinstance(result, dict) and "status" in result):
        raise TypeError(f"unexpected tool event {final!r}")
    return result  # type: ignore[return-value]


async def main() -> int:
    leg = Leg("strands")
    ids = itertools.count(1)
    with MCPClient(lambda: transport(leg.mcp_url)) as client:
        tools = {tool.tool_name: tool for tool in client.list_tools_sync()}

        async def call(name: str, arguments: dict[str, Any]) -> str:
            return result_text(await run_tool(tools[name], arguments, f"use-{next(ids)}"))

        await approval_flow(leg, call)
    return leg.finish()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
