"""LangGraph: MCP servers' tools in one tool node that pauses the graph with ``interrupt()`` on a pending approval.

::

    async with mcp_client(url, tasks=True, auth=token, call_journal="calls.sqlite3") as client:
        gate = ApprovalTools(client)
        model = chat_model.bind_tools(tool_schemas(await gate.tools()))   # names, descriptions, input schemas
        builder.add_node("tools", approval_tool_node(gate))            # instead of ToolNode
        graph = builder.compile(checkpointer=AsyncSqliteSaver(...))
        await graph.ainvoke({"messages": [...]}, config)               # paused: the state has __interrupt__
        ...
        # later, in any process, with the same checkpointer and thread:
        await graph.ainvoke(await resume_command(gate, graph, config), config)

Several servers: one node for all of them, ``approval_tool_node(servers)`` with an
:class:`~mcp_approval.agents.ApprovalServers`; each tool call goes to the server whose (prefixed)
tool it names, and :func:`resume_command` sends each wait to the server the call was made on.

The node answers each tool call of the last ``AIMessage`` with a ``ToolMessage`` (the tool's text,
``status="error"`` for an error result), as ``langchain-mcp-adapters`` with a ``ToolNode`` does.
Calls still waiting for approval make one ``interrupt()`` whose value lists their
:class:`PendingCall` s; :func:`resume_command` waits for the decisions and resumes with the results,
keyed by call key. The call key is ``langgraph/<thread_id>/<tool_call_id>``. LangGraph and
langchain-core are imported when this module is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import mcp_types as types

try:
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.types import Command, interrupt
except ModuleNotFoundError as exc:  # an optional extra: say which one
    raise ModuleNotFoundError(
        f"mcp_approval.agents.langgraph needs LangGraph ({exc}): pip install 'mcp-approval[agents]'", name=exc.name
    ) from exc

from mcp_approval.agents.core import PendingCall, ServerTool, call_key_for, result_text
from mcp_approval.agents.servers import ApprovalServers, SavedCall, Servers

__all__ = [
    "FRAMEWORK",
    "approval_tool_node",
    "pending_calls",
    "resume_command",
    "tool_message",
    "tool_schemas",
]

#: The framework part of the call keys this adapter makes.
FRAMEWORK = "langgraph"

ToolNodeFunction = Callable[[Mapping[str, Any], RunnableConfig], Awaitable[dict[str, list[ToolMessage]]]]


def tool_schemas(tools: Sequence[ServerTool | types.Tool]) -> list[dict[str, Any]]:
    """The tools in the OpenAI function format ``bind_tools`` takes (names, descriptions, input schemas)."""
    return [{"type": "function", "function": _function(tool)} for tool in tools]


def _function(tool: ServerTool | types.Tool) -> dict[str, Any]:
    if isinstance(tool, ServerTool):
        return {"name": tool.name, "description": tool.description, "parameters": tool.input_schema}
    return {"name": tool.name, "description": tool.description or "", "parameters": tool.input_schema}


def tool_message(result: types.CallToolResult, tool_call: Mapping[str, Any]) -> ToolMessage:
    """The ``ToolMessage`` for one call's result: its text, ``status="error"`` for an error result."""
    return ToolMessage(
        content=result_text(result),
        tool_call_id=tool_call["id"],
        name=tool_call["name"],
        status="error" if result.is_error else "success",
        artifact={"structured_content": result.structured_content} if result.structured_content else None,
    )


def approval_tool_node(servers: Servers) -> ToolNodeFunction:
    """A graph node running the last ``AIMessage``'s tool calls, each on its server; pending approvals interrupt.

    The graph needs a checkpointer, and the run a ``thread_id`` (the call keys are made of it). A
    tool call naming no tool of ``servers`` is answered an error ``ToolMessage``, as ``ToolNode`` does.
    """
    every = ApprovalServers.of(servers)

    async def tools(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, list[ToolMessage]]:
        message = state["messages"][-1]
        if not isinstance(message, AIMessage):
            return {"messages": []}
        thread = str((config.get("configurable") or {}).get("thread_id") or "")
        calls = list(message.tool_calls)
        keys = [call_key_for(FRAMEWORK, thread, call["id"] or "") for call in calls]
        # Each call again after a resume: a decided one answers its recorded result at once.
        outcomes = await asyncio.gather(*(_call(every, call, key) for call, key in zip(calls, keys, strict=True)))
        waiting = [outcome for outcome in outcomes if isinstance(outcome, PendingCall)]
        decided: Mapping[str, Any] = {}
        if waiting:  # one interrupt per node run, so resuming never depends on which calls were decided first
            decided = interrupt([pending.as_dict() for pending in waiting])
        messages = []
        for call, outcome in zip(calls, outcomes, strict=True):
            if isinstance(outcome, PendingCall):
                outcome = await _decided(every, outcome, decided)
            messages.append(tool_message(outcome, call))
        return {"messages": messages}

    return tools


async def _call(servers: ApprovalServers, call: Mapping[str, Any], key: str) -> types.CallToolResult | PendingCall:
    tool = await servers.tool(call["name"])
    if tool is None:
        names = ", ".join(tool.name for tool in await servers.tools())
        text = f"Error: {call['name']} is not a valid tool, try one of [{names}]."
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
    return await tool.call(call["args"], call_key=key)


async def _decided(servers: ApprovalServers, pending: PendingCall, decided: Mapping[str, Any]) -> types.CallToolResult:
    """The resume value's result for ``pending``; one it lacks is waited for (the journal may have it already)."""
    if pending.call_key in decided:
        return types.CallToolResult.model_validate(decided[pending.call_key])
    return await servers.wait_for_decision(pending)


def pending_calls(snapshot: Any) -> list[PendingCall]:
    """The calls a paused graph waits for, from ``graph.get_state(config)`` (or its ``interrupts``)."""
    interrupts = getattr(snapshot, "interrupts", snapshot)
    found: list[PendingCall] = []
    for paused in interrupts:
        values = paused.value if isinstance(paused.value, list) else [paused.value]
        found.extend(PendingCall.from_dict(value) for value in values if PendingCall.is_pending(value))
    return found


def _saved_calls(snapshot: Any, config: RunnableConfig) -> list[SavedCall]:
    """The tool calls the node will run again on resume: the checkpoint's last message's, with their keys."""
    messages = (getattr(snapshot, "values", None) or {}).get("messages") or []
    if not messages or not isinstance(messages[-1], AIMessage):
        return []
    thread = str((config.get("configurable") or {}).get("thread_id") or "")
    return [
        (call["name"], call["args"], call_key_for(FRAMEWORK, thread, call["id"] or ""))
        for call in messages[-1].tool_calls
    ]


async def resume_command(
    servers: Servers, graph: Any, config: RunnableConfig, *, timeout_s: float | None = None
) -> Command[Any]:
    """Wait for every pending approval of the paused thread, each on its own server; the ``Command`` that resumes it.

    ``servers``: every server the graph's tool node uses. Each call is checked first: its server
    is given and its key is in that server's call journal; otherwise nothing is sent. The node runs
    the checkpoint's tool calls (its state's last ``AIMessage``) again on resume, so each of them
    must be a pending call as the interrupt saved it, or a call the journal already holds: a
    checkpoint edited after the pause (another tool, other arguments, another tool-call id) is
    refused, and nothing is sent.

    Raises:
        ServerNotGivenError: a call was made on a server not given (nothing is sent).
        ClientUsageError: a call is not in its server's call journal, or the checkpoint's tool calls
            differ from the pending calls and the journal (nothing is sent).
        TaskPendingError: a decision is still outstanding after ``timeout_s``.
    """
    every = ApprovalServers.of(servers)
    snapshot = await graph.aget_state(config)
    paused = [(interrupt.id, pending_calls([interrupt])) for interrupt in snapshot.interrupts]
    pendings = [pending for _, waiting in paused for pending in waiting]
    if pendings:  # the node runs the checkpoint's tool calls again: each must be the call it made before
        await every.check_rerun(pendings, _saved_calls(snapshot, config))
    await every.verify(pendings)
    resume: dict[str, dict[str, Any]] = {}
    for interrupt_id, waiting in paused:
        if not waiting:
            continue  # another interrupt of the graph: the application answers it
        results = await every.decisions(waiting, timeout_s=timeout_s)
        resume[interrupt_id] = {
            pending.call_key: result.model_dump(mode="json", by_alias=True, exclude_none=True)
            for pending, result in zip(waiting, results, strict=True)
        }
    return Command(resume=resume)
