"""OpenAI Agents SDK: a pending approval interrupts the run; ``resume`` approves or rejects it as decided.

    python examples/agents/openai_agents.py --url http://127.0.0.1:8000/mcp --token alice-token \\
        --state /tmp/run-1 --scripted start "Send 30000 to acme"
    python examples/agents/openai_agents.py --url ... --token alice-token --state /tmp/run-1 --scripted resume

``start`` runs the agent; when the call waits for approval the run's interruptions hold it, and
the ``RunState`` is kept in ``DIR/state.json`` (its context carries the pending call). ``resume``
waits for the decision, approves (or rejects, with the server's text) the interruption and runs
the state to the end, printing the tool's result text. Several servers: ``--url a=URL --url b=URL``
(the tools ``a_wire_transfer``, ...). ``--scripted`` plays the model with the
SDK's ``agents.testing.ScriptedModel``; without it the agent uses the SDK's default model (reads
``OPENAI_API_KEY``; ``OPENAI_DEFAULT_MODEL`` picks it).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")  # nothing reports home from the example

from agents import Agent, Runner, RunState
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from mcp_approval.agents.openai_agents import approval_tools, pending_calls, resume_state, run_context

sys.path.append(str(Path(__file__).resolve().parent))
from scripted import Options, connect, finished_before, options, record_finished, refused, report, scripted_calls


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _text(output: Any) -> str:
    if isinstance(output, str):
        return output
    blocks = output if isinstance(output, list) else [output]
    texts = [block.get("text") for block in blocks if isinstance(block, dict) and isinstance(block.get("text"), str)]
    return "\n".join(texts) if texts else json.dumps(output)


def last_tool_outputs(items: list[Any]) -> list[str]:
    """The outputs of the function calls since the latest message (the model's latest calls), as text."""
    messages = [i for i, item in enumerate(items) if _field(item, "role") is not None]
    later = items[messages[-1] + 1 :] if messages else items
    return [_text(_field(item, "output")) for item in later if _field(item, "type") == "function_call_output"]


def scripted_model(prompt: str) -> ScriptedModel:
    """A model that calls the tool the prompt asks for, then reports what the tool returned."""

    def respond(call: ModelCall) -> Any:
        items = call.input if isinstance(call.input, list) else []
        returned = last_tool_outputs(items)
        if not returned:
            calls = scripted_calls(prompt)
            return [function_call(tool, arguments, call_id=f"call_{uuid.uuid4().hex}") for tool, arguments in calls]
        return [assistant_message(report(returned))]

    return ScriptedModel([ModelStep.respond(respond) for _ in range(4)])


def agent_for(opts: Options, prompt: str, tools: list[Any]) -> Agent[Any]:
    if opts.scripted:
        return Agent(name="treasurer", instructions="Do what the user asks.", model=scripted_model(prompt), tools=tools)
    return Agent(name="treasurer", instructions="Do what the user asks.", tools=tools)


async def main() -> int:
    opts = options("OpenAI Agents SDK agent whose MCP approvals interrupt the run")
    state_file = opts.state / "state.json"
    if finished_before(opts, state_file):  # its recorded result was printed; nothing is called
        return 0
    async with connect(opts) as servers:
        tools = await approval_tools(servers)
        if opts.command == "start":
            prompt = opts.prompt
            agent = agent_for(opts, prompt, tools)
            result = await Runner.run(agent, prompt, context=run_context({"prompt": prompt}))
        else:
            saved = json.loads(state_file.read_text())
            prompt = saved["prompt"]
            agent = agent_for(opts, prompt, tools)
            state = await RunState.from_string(agent, saved["state"])
            for pending in pending_calls(state):
                print(f"waiting {pending.reference}", flush=True)
            await resume_state(servers, state)  # waits for the decisions, each on its server
            result = await Runner.run(agent, state)
    if result.interruptions:
        state = result.to_state()
        state_file.write_text(json.dumps({"prompt": prompt, "state": state.to_string()}))
        for pending in pending_calls(state):
            print(f"pending {pending.reference}")
            print(pending.text())
        return 0
    items = result.to_input_list()
    text = "\n".join(last_tool_outputs(items)) or str(result.final_output)
    record_finished(opts.state, text, items)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(refused(main)()))
