"""langchain-mcp-adapters with LangGraph: ``MultiServerMCPClient`` tools run by a LangGraph ``ToolNode``
(a one-node ``StateGraph``).

Each call is an ``AIMessage`` tool call handed to ``ToolNode``, as a LangGraph agent's tool step runs
it; the ``ToolMessage`` it returns is what the model receives next.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from harness import REQUESTER_TOKEN, Leg, approval_flow
from langchain_core.messages import AIMessage, ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode


def message_text(message: ToolMessage) -> str:
    """A ``ToolMessage``'s content as the model reads it (text blocks joined; other blocks as JSON)."""
    if isinstance(message.content, str):
        return message.content
    parts = [
        block.get("text", "") if isinstance(block, dict) and block.get("type") == "text" else json.dumps(block)
        for block in message.content
    ]
    return "\n".join(str(part) for part in parts)


async def main() -> int:
    leg = Leg("langchain-mcp-adapters")
    connection = {
        "url": leg.mcp_url,
        "transport": "streamable_http",
        "headers": {"Authorization": f"Bearer {REQUESTER_TOKEN}"},
    }
    client = MultiServerMCPClient({"treasury": connection})  # type: ignore[dict-item]
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode(await client.get_tools()))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    graph = builder.compile()
    ids = itertools.count(1)

    async def call(name: str, arguments: dict[str, Any]) -> str:
        request = AIMessage(content="", tool_calls=[{"name": name, "args": arguments, "id": f"call-{next(ids)}"}])
        output = await graph.ainvoke({"messages": [request]})
        message = output["messages"][-1]
        assert isinstance(message, ToolMessage)
        return f"[status={message.status}] {message_text(message)}"

    await approval_flow(leg, call)
    return leg.finish()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
