"""strands: a pending approval interrupts the agent; ``resume`` answers the interrupt once it is decided.

    python examples/agents/strands.py --url http://127.0.0.1:8000/mcp --token alice-token \\
        --state /tmp/run-1 --scripted start "Send 30000 to acme"
    python examples/agents/strands.py --url ... --token alice-token --state /tmp/run-1 --scripted resume

The agent keeps its conversation, state and interrupts in ``DIR/sessions`` (strands'
``FileSessionManager``, session ``run``). ``start`` runs the agent; a call waiting for approval
interrupts it (``stop_reason == "interrupt"``), and the pending reference is printed. ``resume``
waits for the decision and resumes the agent with the interrupt's response, printing the tool's
result text. Several servers: ``--url a=URL --url b=URL`` (the tools are ``a_wire_transfer``, ...).
``--scripted`` plays the model with a scripted strands ``Model``; without it the agent uses
strands' default model (Amazon Bedrock, with the usual AWS credentials).
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterable
from pathlib import Path
from typing import Any

# This file is named like the framework: its folder joins the path only after the framework is imported.
HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [entry for entry in sys.path if str(Path(entry or ".").resolve()) != HERE]

from strands import Agent  # noqa: E402
from strands.models import Model  # noqa: E402
from strands.session.file_session_manager import FileSessionManager  # noqa: E402

from mcp_approval.agents.strands import approval_tools, pending_calls, resume_responses  # noqa: E402

sys.path.append(HERE)
from scripted import connect, finished_before, options, record_finished, refused, report, scripted_calls  # noqa: E402

SESSION = "run"


def tool_results(messages: list[Any]) -> list[str]:
    """The texts of the results of the model's latest tool calls."""
    asked = [i for i, m in enumerate(messages) if any("toolUse" in block for block in m["content"])]
    if not asked:
        return []
    results = [
        block["toolResult"] for m in messages[asked[-1] + 1 :] for block in m["content"] if "toolResult" in block
    ]
    return ["\n".join(part["text"] for part in result["content"] if "text" in part) for result in results]


class ScriptedModel(Model):  # type: ignore[misc]
    """Calls the tools the user's prompt asks for; after their results, reports what they returned."""

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}

    def update_config(self, **model_config: Any) -> None:
        self.config.update(model_config)

    def get_config(self) -> Any:
        return self.config

    def structured_output(self, output_model: Any, prompt: Any, system_prompt: str | None = None, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model gives no structured output")

    async def stream(
        self, messages: list[Any], tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterable[Any]:
        for event in self._answer(messages):
            yield event

    def _answer(self, messages: list[Any]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = [{"messageStart": {"role": "assistant"}}]
        if any("toolResult" in block for block in messages[-1]["content"]):
            events += [
                {"contentBlockDelta": {"delta": {"text": report(tool_results(messages))}}},
                {"contentBlockStop": {}},
            ]
            return [*events, {"messageStop": {"stopReason": "end_turn"}}]
        prompt = next(
            block["text"] for m in messages if m["role"] == "user" for block in m["content"] if "text" in block
        )
        for tool, arguments in scripted_calls(prompt):
            start = {"toolUse": {"name": tool, "toolUseId": f"call_{uuid.uuid4().hex}"}}
            events += [
                {"contentBlockStart": {"start": start}},
                {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(arguments)}}}},
                {"contentBlockStop": {}},
            ]
        return [*events, {"messageStop": {"stopReason": "tool_use"}}]


async def main() -> int:
    opts = options("strands agent whose MCP approvals interrupt it")
    if finished_before(opts, opts.state / "sessions"):  # its recorded result was printed; nothing is called
        return 0
    async with connect(opts) as servers:
        agent = Agent(
            model=ScriptedModel() if opts.scripted else None,
            tools=await approval_tools(servers),
            session_manager=FileSessionManager(session_id=SESSION, storage_dir=str(opts.state / "sessions")),
            callback_handler=None,
        )
        if opts.command == "start":
            result = await agent.invoke_async(opts.prompt)
        else:
            for pending in pending_calls(agent):
                print(f"waiting {pending.reference}", flush=True)
            responses = await resume_responses(servers, agent)  # waits for the decisions, each on its server
            if responses is None:
                print("nothing is pending for this agent: nothing to resume")
                return 0
            result = await agent.invoke_async(responses)
    if result.stop_reason == "interrupt":
        for pending in pending_calls(agent):
            print(f"pending {pending.reference}")
            print(pending.text())
        return 0
    text = "\n".join(tool_results(agent.messages)) or str(result)
    record_finished(opts.state, text, agent.messages)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(refused(main)()))
