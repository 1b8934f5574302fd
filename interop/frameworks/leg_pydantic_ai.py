"""pydantic-ai 2.x: an ``Agent`` on ``MCPToolset`` (FastMCP client) with a scripted ``FunctionModel``.

Every call is a real agent run: the scripted model asks for the tool, pydantic-ai calls it over MCP
and hands the answer back to the model as a tool return or a retry prompt, and the model's next turn
records that text and ends the run. The first step is the model that does what the pending answer
asks first: it stops and tells the user, and the run ends normally with the reference in its output.
"""

from __future__ import annotations

import asyncio
from typing import Any

from harness import REQUESTER_TOKEN, Leg, approval_flow, check, excerpt, new_account, pending_reference, transfer
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel


def shown_to_model(message: ModelMessage) -> str:
    """The text of the tool's answer as pydantic-ai puts it in the model's next request."""
    assert isinstance(message, ModelRequest)
    texts = []
    for part in message.parts:
        if isinstance(part, ToolReturnPart):
            texts.append(part.model_response_str())
        elif isinstance(part, RetryPromptPart):
            texts.append(part.model_response())
    return "\n".join(texts)


def first_request(text: str, tool: str) -> str:
    """What the answer asks of the model first: "stop", "call again" or "nothing"."""
    asks = {"stop": text.find("Stop and tell the user"), "call again": text.find(f"call {tool} again")}
    found = sorted((at, ask) for ask, at in asks.items() if at >= 0)
    return found[0][1] if found else "nothing"


def scripted(tool: str, arguments: dict[str, Any], seen: list[str]) -> FunctionModel:
    """A model that calls ``tool``, then does what its answer asks first: stop and tell the user
    (naming the reference), or call the tool again; any other answer it reports and ends."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart(tool, arguments)])
        text = shown_to_model(messages[-1])
        seen.append(text)
        request = first_request(text, tool)
        if request == "stop":
            reference = pending_reference(text)
            return ModelResponse(parts=[TextPart(f"The transfer needs approval first (reference {reference}).")])
        if request == "call again":
            return ModelResponse(parts=[ToolCallPart(tool, arguments)])
        return ModelResponse(parts=[TextPart(f"The tool answered: {text}")])

    return FunctionModel(respond)


async def main() -> int:
    leg = Leg("pydantic-ai")
    toolset = MCPToolset(leg.mcp_url, headers={"Authorization": f"Bearer {REQUESTER_TOKEN}"})

    async def call(tool: str, arguments: dict[str, Any]) -> str:
        seen: list[str] = []
        agent = Agent(scripted(tool, arguments, seen), toolsets=[toolset])
        await agent.run(f"Call {tool}.")
        return seen[-1]

    async def agent_run() -> str:
        seen: list[str] = []
        agent = Agent(scripted("wire_transfer", transfer(new_account(leg.client, "run")), seen), toolsets=[toolset])
        result = await agent.run("Send $30,000 to the new supplier.")
        reference = pending_reference(leg.saw("agent run", seen[0]))
        check(reference in result.output, f"the run's output {result.output!r} lacks {reference}")
        return f"the run ended normally: {excerpt(result.output)}"

    async with toolset:
        await leg.step("agent run", agent_run)
        await approval_flow(leg, call)
    return leg.finish()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
