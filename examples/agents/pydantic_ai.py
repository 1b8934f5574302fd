"""pydantic-ai: a pending approval ends the run with ``DeferredToolRequests``; ``resume`` finishes it.

    python examples/agents/pydantic_ai.py --url http://127.0.0.1:8000/mcp --token alice-token \\
        --state /tmp/run-1 --scripted start "Send 30000 to acme"
    python examples/agents/pydantic_ai.py --url ... --token alice-token --state /tmp/run-1 --scripted resume

``start`` runs the agent; when the call waits for approval it keeps the run's messages and the
deferred requests in ``DIR/run.json`` and prints the pending reference. ``resume`` (any process,
any time later) waits for the decision and finishes the run, printing the tool's result text.
Several servers: ``--url a=URL --url b=URL`` (one toolset, the tools ``a_wire_transfer``, ...).
``--scripted`` plays the model with pydantic-ai's ``FunctionModel``; without it the model is
``$PYDANTIC_AI_MODEL`` (default ``openai:gpt-4o``, which reads ``OPENAI_API_KEY``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

# This file is named like the framework: its folder joins the path only after the framework is imported.
HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [entry for entry in sys.path if str(Path(entry or ".").resolve()) != HERE]

from pydantic_ai import Agent, DeferredToolRequests  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from mcp_approval.agents.pydantic_ai import (  # noqa: E402
    approval_toolset,
    dump_requests,
    load_requests,
    pending_calls,
    resume_results,
)

sys.path.append(HERE)
from scripted import Options, connect, finished_before, options, record_finished, refused, report, scripted_calls  # noqa: E402


def last_tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    """The returns of the model's latest tool calls (a resumed run answers some of them in a later request)."""
    calls = [i for i, message in enumerate(messages) if isinstance(message, ModelResponse) and message.tool_calls]
    if not calls:
        return []
    later = [message for message in messages[calls[-1] + 1 :] if isinstance(message, ModelRequest)]
    return [part for message in later for part in message.parts if isinstance(part, ToolReturnPart)]


def scripted_model(prompt: str) -> FunctionModel:
    """A model that calls the tool the prompt asks for, then reports what the tool returned."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = last_tool_returns(messages)
        if not returned:
            return ModelResponse(parts=[ToolCallPart(tool, arguments) for tool, arguments in scripted_calls(prompt)])
        return ModelResponse(parts=[TextPart(report([part.model_response_str() for part in returned]))])

    return FunctionModel(respond)


def model(opts: Options, prompt: str) -> Model | str:
    """The scripted model, or the one named by ``$PYDANTIC_AI_MODEL``."""
    return scripted_model(prompt) if opts.scripted else os.environ.get("PYDANTIC_AI_MODEL", "openai:gpt-4o")


async def main() -> int:
    opts = options("pydantic-ai agent whose MCP approvals pause the run")
    run_file = opts.state / "run.json"
    prompt = opts.prompt
    if finished_before(opts, run_file):  # its recorded result was printed; nothing is called
        return 0
    async with connect(opts) as servers:
        toolset = await approval_toolset(servers)
        if opts.command == "start":
            agent = Agent(model(opts, opts.prompt), toolsets=[toolset], output_type=[str, DeferredToolRequests])
            result = await agent.run(opts.prompt)
        else:
            saved = json.loads(run_file.read_text())
            prompt = saved["prompt"]
            history = ModelMessagesTypeAdapter.validate_python(saved["messages"])
            requests = load_requests(json.dumps(saved["requests"]))
            for pending in pending_calls(requests):
                print(f"waiting {pending.reference}", flush=True)
            results = await resume_results(servers, requests)  # waits for the decisions, each on its server
            agent = Agent(model(opts, prompt), toolsets=[toolset], output_type=[str, DeferredToolRequests])
            result = await agent.run(message_history=history, deferred_tool_results=results)
    messages: Any = json.loads(result.all_messages_json())
    if isinstance(result.output, DeferredToolRequests):
        saved_run = {"prompt": prompt, "messages": messages, "requests": json.loads(dump_requests(result.output))}
        run_file.write_text(json.dumps(saved_run, indent=2))
        for pending in pending_calls(result.output):
            print(f"pending {pending.reference}")
            print(pending.text())
        return 0
    returned = last_tool_returns(result.all_messages())
    text = "\n".join(part.model_response_str() for part in returned) if returned else str(result.output)
    record_finished(opts.state, text, messages)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(refused(main)()))
