"""google-adk: an ``LlmAgent`` with ``McpToolset`` run by ``InMemoryRunner`` on a scripted model.

Every call is a real agent run: the scripted model (a ``BaseLlm`` that asks for one function call,
then ends) is answered by ADK with the tool's ``function_response``, which is what a model receives;
the leg records it as JSON.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.adk.tools.mcp_tool import McpToolset
from google.adk.tools.mcp_tool.mcp_session_manager import StreamableHTTPConnectionParams
from google.genai import types
from harness import REQUESTER_TOKEN, Leg, approval_flow


class ScriptedModel(BaseLlm):
    """Asks for ``call`` once, then records the function response it is handed and ends the turn."""

    call: tuple[str, dict[str, Any]] = ("", {})
    seen: list[str] = []

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        responses = [
            part.function_response.response
            for content in llm_request.contents[-1:]
            for part in content.parts or []
            if part.function_response is not None
        ]
        if not responses:
            name, arguments = self.call
            part = types.Part(function_call=types.FunctionCall(name=name, args=arguments))
        else:
            self.seen.append(json.dumps(responses[-1]))
            part = types.Part(text="done")
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


async def main() -> int:
    leg = Leg("google-adk")
    logging.getLogger("google_adk").setLevel(logging.ERROR)  # a warning per model turn without token counts
    params = StreamableHTTPConnectionParams(url=leg.mcp_url, headers={"Authorization": f"Bearer {REQUESTER_TOKEN}"})
    toolset = McpToolset(connection_params=params)
    model = ScriptedModel(model="scripted")
    runner = InMemoryRunner(agent=LlmAgent(name="treasurer", model=model, tools=[toolset]), app_name="interop")
    sessions = itertools.count(1)

    async def call(name: str, arguments: dict[str, Any]) -> str:
        model.call, model.seen = (name, arguments), []
        session = await runner.session_service.create_session(
            app_name="interop", user_id="alice", session_id=f"s{next(sessions)}"
        )
        message = types.Content(role="user", parts=[types.Part(text=f"Call {name}.")])
        async for _ in runner.run_async(user_id="alice", session_id=session.id, new_message=message):
            pass
        return model.seen[-1]

    try:
        await approval_flow(leg, call)
    finally:
        await toolset.close()
    return leg.finish()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
