"""LangGraph: a pending approval interrupts the graph; ``resume`` answers it with ``Command(resume=...)``.

    python examples/agents/langgraph.py --url http://127.0.0.1:8000/mcp --token alice-token \\
        --state /tmp/run-1 --scripted start "Send 30000 to acme"
    python examples/agents/langgraph.py --url ... --token alice-token --state /tmp/run-1 --scripted resume

The graph is a model node and :func:`~mcp_approval.agents.langgraph.approval_tool_node`, checkpointed
in ``DIR/checkpoints.sqlite3`` (``langgraph-checkpoint-sqlite``) under the thread id kept in
``DIR/thread``. ``start`` runs it until it ends or is interrupted (and prints the pending
reference); ``resume`` waits for the decision and resumes the thread, printing the tool's result
text. Several servers: ``--url a=URL --url b=URL`` (one tool node for all, the tools
``a_wire_transfer``, ...). ``--scripted`` plays the model with langchain-core's
``GenericFakeChatModel``, each answer scripted from the conversation; without it the model is
``init_chat_model($LANGCHAIN_MODEL)`` (default ``openai:gpt-4o``; needs the ``langchain`` package
and the provider's key).
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path
from typing import Any

# This file is named like the framework: its folder joins the path only after the framework is imported.
HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [entry for entry in sys.path if str(Path(entry or ".").resolve()) != HERE]

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage, messages_to_dict  # noqa: E402
from langchain_core.runnables import RunnableConfig  # noqa: E402
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402

from mcp_approval.agents.langgraph import approval_tool_node, pending_calls, resume_command, tool_schemas  # noqa: E402

sys.path.append(HERE)
from scripted import Options, connect, finished_before, options, record_finished, refused, report, scripted_calls  # noqa: E402


def scripted_answer(messages: list[BaseMessage]) -> AIMessage:
    """Call the tools the user's message asks for; after their results, report what they returned."""
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(content=report([str(m.content) for m in tool_results(messages)]))
    prompt = next(str(m.content) for m in reversed(messages) if isinstance(m, HumanMessage))
    calls = [{"name": tool, "args": args, "id": f"call_{uuid.uuid4().hex}"} for tool, args in scripted_calls(prompt)]
    return AIMessage(content="", tool_calls=calls)


def model_node(opts: Options, schemas: list[dict[str, Any]]) -> Any:
    """The graph's model step: the scripted fake chat model, or a real one bound to the server's tools."""
    if opts.scripted:

        async def scripted(state: MessagesState) -> dict[str, list[BaseMessage]]:
            fake = GenericFakeChatModel(messages=iter([scripted_answer(state["messages"])]))
            return {"messages": [await fake.ainvoke(state["messages"])]}

        return scripted
    from langchain.chat_models import init_chat_model

    chat = init_chat_model(os.environ.get("LANGCHAIN_MODEL", "openai:gpt-4o")).bind_tools(schemas)

    async def real(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [await chat.ainvoke(state["messages"])]}

    return real


def route(state: MessagesState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def tool_results(messages: list[BaseMessage]) -> list[ToolMessage]:
    """The results of the model's latest tool calls."""
    asked = [i for i, m in enumerate(messages) if isinstance(m, AIMessage) and m.tool_calls]
    return [m for m in messages[asked[-1] + 1 :] if isinstance(m, ToolMessage)] if asked else []


async def main() -> int:
    opts = options("LangGraph agent whose MCP approvals interrupt the graph")
    thread_file = opts.state / "thread"
    if finished_before(opts, thread_file):  # its recorded result was printed; nothing is called
        return 0
    if opts.command == "start":
        thread_file.write_text(uuid.uuid4().hex)
    config: RunnableConfig = {"configurable": {"thread_id": thread_file.read_text()}}
    async with (
        connect(opts) as servers,
        AsyncSqliteSaver.from_conn_string(str(opts.state / "checkpoints.sqlite3")) as checkpointer,
    ):
        builder = StateGraph(MessagesState)
        builder.add_node("agent", model_node(opts, tool_schemas(await servers.tools())))
        builder.add_node("tools", approval_tool_node(servers))  # one node for every server
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", route, ["tools", END])
        builder.add_edge("tools", "agent")
        graph = builder.compile(checkpointer=checkpointer)
        if opts.command == "start":
            await graph.ainvoke({"messages": [HumanMessage(opts.prompt)]}, config)
        else:
            for pending in pending_calls(await graph.aget_state(config)):
                print(f"waiting {pending.reference}", flush=True)
            await graph.ainvoke(await resume_command(servers, graph, config), config)  # waits, each on its server
        snapshot = await graph.aget_state(config)
    waiting = pending_calls(snapshot)
    if waiting:
        for pending in waiting:
            print(f"pending {pending.reference}")
            print(pending.text())
        return 0
    messages = snapshot.values["messages"]
    text = "\n".join(str(m.content) for m in tool_results(messages)) or str(messages[-1].content)
    record_finished(opts.state, text, messages_to_dict(messages))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(refused(main)()))
