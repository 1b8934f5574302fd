"""LlamaIndex: a pending approval makes the agent workflow wait; ``resume`` wakes it once it is decided.

    python examples/agents/llama_index.py --url http://127.0.0.1:8000/mcp --token alice-token \\
        --state /tmp/run-1 --scripted start "Send 30000 to acme"
    python examples/agents/llama_index.py --url ... --token alice-token --state /tmp/run-1 --scripted resume

``start`` runs an :class:`~mcp_approval.agents.llama_index.ApprovalFunctionAgent`; when a call
waits for approval the workflow goes idle, its context is kept in ``DIR/context.json`` (the
chat memory lives in ``DIR/memory.db``) and the pending reference is printed. ``resume`` restores
the context, waits for the decision and sends the event that wakes the waiting step, printing the
tool's result text. Several servers: ``--url a=URL --url b=URL`` (the tools are
``a_wire_transfer``, ...). ``--scripted`` plays the model with LlamaIndex's
``MockFunctionCallingLLM`` and a scripted answer; without it the model is OpenAI's
(``llama-index-llms-openai``, ``OPENAI_API_KEY``; ``$LLAMA_INDEX_MODEL``, default ``gpt-4o``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
import warnings
from pathlib import Path
from typing import Any

# This file is named like the framework: its folder joins the path only after the framework is imported.
HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [entry for entry in sys.path if str(Path(entry or ".").resolve()) != HERE]

from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock  # noqa: E402
from llama_index.core.llms import MockFunctionCallingLLM  # noqa: E402
from llama_index.core.memory import Memory  # noqa: E402
from workflows import Context  # noqa: E402
from workflows.context.serializers import JsonSerializer  # noqa: E402

from mcp_approval.agents.llama_index import (  # noqa: E402
    ApprovalFunctionAgent,
    approval_tools,
    pending_calls,
    resume_events,
    run_to_pause,
)

sys.path.append(HERE)
from scripted import Options, connect, finished_before, options, record_finished, refused, report, scripted_calls  # noqa: E402

# The chat memory is kept in DIR/memory.db, not in the context: the workflow says so on every save.
warnings.filterwarnings("ignore", message="Skipping serialization of known unserializable key: memory")


def tool_results(messages: list[ChatMessage]) -> list[str]:
    """The texts of the results of the model's latest tool calls."""
    asked = [i for i, m in enumerate(messages) if any(isinstance(b, ToolCallBlock) for b in m.blocks)]
    later = messages[asked[-1] + 1 :] if asked else []
    return [str(m.content) for m in later if m.role == MessageRole.TOOL]


def scripted_llm(prompt: str) -> MockFunctionCallingLLM:
    """A model that calls the tools the prompt asks for, then reports what they returned."""

    def answer(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        if messages and messages[-1].role == MessageRole.TOOL:
            return ChatMessage(role=MessageRole.ASSISTANT, content=report(tool_results(messages)))
        calls = [
            ToolCallBlock(tool_call_id=f"call_{uuid.uuid4().hex}", tool_name=tool, tool_kwargs=arguments)
            for tool, arguments in scripted_calls(prompt)
        ]
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=calls)

    return MockFunctionCallingLLM(response_generator=answer)


def llm(opts: Options, prompt: str) -> Any:
    if opts.scripted:
        return scripted_llm(prompt)
    from llama_index.llms.openai import OpenAI

    return OpenAI(model=os.environ.get("LLAMA_INDEX_MODEL", "gpt-4o"))


async def main() -> int:
    opts = options("LlamaIndex agent workflow whose MCP approvals make it wait")
    context_file = opts.state / "context.json"
    if finished_before(opts, context_file):  # its recorded result was printed; nothing is called
        return 0
    memory = Memory.from_defaults(session_id="run", async_database_uri=f"sqlite+aiosqlite:///{opts.state}/memory.db")
    async with connect(opts) as servers:
        tools = await approval_tools(servers)
        if opts.command == "start":
            prompt = opts.prompt
            agent = ApprovalFunctionAgent(name="treasurer", llm=llm(opts, prompt), tools=tools)
            handler = agent.run(user_msg=prompt, memory=memory)
        else:
            saved = json.loads(context_file.read_text())
            prompt = saved["prompt"]
            agent = ApprovalFunctionAgent(name="treasurer", llm=llm(opts, prompt), tools=tools)
            ctx = Context.from_dict(agent, saved["context"], serializer=JsonSerializer())
            for pending in await pending_calls(ctx):
                print(f"waiting {pending.reference}", flush=True)
            events = await resume_events(servers, ctx)  # waits for the decisions, each on its server
            if events is None:
                print("nothing is pending in this run: nothing to resume")
                return 0
            handler = agent.run(ctx=ctx)
            await handler.ctx.store.set("memory", memory)  # the workflow does not serialize memory
            for event in events:
                handler.ctx.send_event(event)
        waiting = await run_to_pause(handler)
        if waiting:
            context = handler.ctx.to_dict(serializer=JsonSerializer())
            context_file.write_text(json.dumps({"prompt": prompt, "context": context}))
            await handler.cancel_run()
            for pending in waiting:
                print(f"pending {pending.reference}")
                print(pending.text())
            return 0
        await handler
    messages = await memory.aget_all()
    text = "\n".join(tool_results(messages))
    record_finished(opts.state, text, [message.model_dump(mode="json") for message in messages])
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(refused(main)()))
