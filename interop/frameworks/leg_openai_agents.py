"""openai-agents: ``MCPServerStreamableHttp``'s tools as the Agents SDK's ``FunctionTool`` objects.

Each call goes through ``FunctionTool.on_invoke_tool`` with a ``ToolContext``, as the runner invokes a
tool the model asked for (failure handling included); its output is what the model receives.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agents import Agent, RunContextWrapper
from agents.mcp import MCPServerStreamableHttp, MCPUtil
from agents.tool import FunctionTool
from agents.tool_context import ToolContext
from harness import REQUESTER_TOKEN, Leg, approval_flow


def as_model_text(output: Any) -> str:
    """A tool output as the runner puts it in the model's input (strings as they are, else JSON)."""
    if isinstance(output, str):
        return output
    if hasattr(output, "model_dump"):
        return json.dumps(output.model_dump(mode="json"))
    return json.dumps(output, default=str)


async def main() -> int:
    leg = Leg("openai-agents")
    params = {"url": leg.mcp_url, "headers": {"Authorization": f"Bearer {REQUESTER_TOKEN}"}, "timeout": 30}
    async with MCPServerStreamableHttp(params=params, name="treasury") as server:
        agent = Agent(name="treasurer", mcp_servers=[server])
        context = RunContextWrapper(context=None)
        tools = await MCPUtil.get_function_tools(server, False, context, agent)
        by_name = {tool.name: tool for tool in tools if isinstance(tool, FunctionTool)}

        async def call(name: str, arguments: dict[str, Any]) -> str:
            text = json.dumps(arguments)
            tool_context = ToolContext(context=None, tool_name=name, tool_call_id=f"call-{name}", tool_arguments=text)
            return as_model_text(await by_name[name].on_invoke_tool(tool_context, text))

        await approval_flow(leg, call)
    return leg.finish()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
