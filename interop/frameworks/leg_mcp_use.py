"""mcp-use: ``MCPClient`` tools through its ``LangChainAdapter``, as ``MCPAgent`` gives them to its model.

Each call invokes the adapted LangChain tool with a tool call, as the agent's tool step does; the
``ToolMessage`` content is what the model receives.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from harness import REQUESTER_TOKEN, Leg, approval_flow
from langchain_core.messages import ToolMessage
from mcp_use import MCPClient
from mcp_use.agents.adapters import LangChainAdapter


async def main() -> int:
    leg = Leg("mcp-use")
    logging.getLogger("mcp_use").setLevel(logging.CRITICAL)  # it logs every error answer with a traceback
    server = {"url": leg.mcp_url, "headers": {"Authorization": f"Bearer {REQUESTER_TOKEN}"}}
    client = MCPClient.from_dict({"mcpServers": {"treasury": server}})
    tools = {tool.name: tool for tool in await LangChainAdapter().create_tools(client)}
    ids = itertools.count(1)

    async def call(name: str, arguments: dict[str, Any]) -> str:
        tool_call = {"name": name, "args": arguments, "id": f"call-{next(ids)}", "type": "tool_call"}
        message = await tools[name].ainvoke(tool_call)
        assert isinstance(message, ToolMessage), f"not a ToolMessage: {message!r}"
        return f"[status={message.status}] {message.content}"

    try:
        await approval_flow(leg, call)
    finally:
        await client.close_all_sessions()
    return leg.finish()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
