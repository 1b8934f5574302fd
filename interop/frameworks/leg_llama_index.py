"""LlamaIndex: ``McpToolSpec`` on ``BasicMCPClient``, its ``FunctionTool`` objects as an agent runs them.

Each call is ``FunctionTool.acall`` with the model's arguments, as LlamaIndex's agents run a tool; the
``ToolOutput`` content is what the model receives (``is_error`` alongside).
"""

from __future__ import annotations

import asyncio
from typing import Any

from harness import REQUESTER_TOKEN, Leg, approval_flow
from llama_index.tools.mcp import BasicMCPClient, McpToolSpec


async def main() -> int:
    leg = Leg("llama-index-tools-mcp")
    client = BasicMCPClient(leg.mcp_url, headers={"Authorization": f"Bearer {REQUESTER_TOKEN}"})
    tools = {tool.metadata.name: tool for tool in await McpToolSpec(client=client).to_tool_list_async()}

    async def call(name: str, arguments: dict[str, Any]) -> str:
        output = await tools[name].acall(**arguments)
        return f"[is_error={output.is_error}] {output.content}"

    await approval_flow(leg, call)
    return leg.finish()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
