"""LangGraph: an MCP server's tools in a tool node that pauses the graph with ``interrupt()`` on a pending approval.

::

    async with mcp_client(url, tasks=True, auth=token, call_journal="calls.sqlite3") as client:
        gate = ApprovalTools(client)
        listed = await gate.tools()
        model = chat_model.bind_tools(tool_schemas(listed))        # names, descriptions, input schemas
        builder.add_node("tools", approval_tool_node(gate))        # instead of ToolNode
        graph = builder.compile(checkpointer=AsyncSqliteSaver(...))
        await graph.ainvoke({"messages": [...]}, config)           # paused: the state has __interrupt__
        ...
        # later, in any process, with the same checkpointer and thread:
        await graph.ainvoke(await resume_command(gate, graph, config), config)

The node answers each tool call of the last ``AIMessage`` with a ``ToolMessage`` (the tool's text,
``status="error"`` for an error result), as ``langchain-mcp-adapters`` with a ``ToolNode`` does.
Calls still waiting for approval make one ``interrupt()`` whose value lists their
:class:`PendingCall` s; :func:`resume_command` waits for the decisions and resumes with the results,
keyed by call key. The call key is ``langgraph/<thread_id>/<tool_call_id>``. LangGraph and
langchain-core are imported when this module is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
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

from mcp_approval.agents.core import ApprovalTools, PendingCall, call_key_for, result_text

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


def tool_schemas(listed: list[types.Tool]) -> list[dict[str, Any]]:
    """The tools in the OpenAI function format ``bind_tools`` takes (names, descriptions, input schemas)."""
    return [
        {
            "type": "function",
            "function": {"name": tool.name, "description": tool.description or "", "parameters": tool.input_schema},
        }
        for tool in listed
    ]


def tool_message(result: types.CallToolResult, tool_call: Mapping[str, Any]) -> ToolMessage:
    """The ``ToolMessage`` for one call's result: its text, ``status="error"`` for an error result."""
    return ToolMessage(
        content=result_text(result),
        tool_call_id=tool_call["id"],
        name=tool_call["name"],
        status="error" if result.is_error else "success",
        artifact={"structured_content": result.structured_content} if result.structured_content else None,
    )


def approval_tool_node(gate: ApprovalTools) -> ToolNodeFunction:
    """A graph node running the last ``AIMessage``'s tool calls; pending approvals interrupt the graph.

    The graph needs a checkpointer, and the run a ``thread_id`` (the call keys are made of it).
    """

    async def tools(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, list[ToolMessage]]:
        message = state["messages"][-1]
        if not isinstance(message, AIMessage):
            return {"messages": []}
        thread = str((config.get("configurable") or {}).get("thread_id") or "")
        calls = list(message.tool_calls)
        keys = [call_key_for(FRAMEWORK, thread, call["id"] or "") for call in calls]
        # Each call again after a resume: a decided one answers its recorded result at once.
        outcomes = await asyncio.gather(
            *(gate.call(call["name"], call["args"], call_key=key) for call, key in zip(calls, keys, strict=True))
        )
        waiting = [outcome for outcome in outcomes if isinstance(outcome, PendingCall)]
        decided: Mapping[str, Any] = {}
        if waiting:  # one interrupt per node run, so resuming never depends on which calls were decided first
            decided = interrupt([pending.as_dict() for pending in waiting])
        messages = []
        for call, outcome in zip(calls, outcomes, strict=True):
            if isinstance(outcome, PendingCall):
                outcome = types.CallToolResult.model_validate(decided[outcome.call_key])
            messages.append(tool_message(outcome, call))
        return {"messages": messages}

    return tools


def pending_calls(snapshot: Any) -> list[PendingCall]:
    """The calls a paused graph waits for, from ``graph.get_state(config)`` (or its ``interrupts``)."""
    interrupts = getattr(snapshot, "interrupts", snapshot)
    found: list[PendingCall] = []
    for paused in interrupts:
        values = paused.value if isinstance(paused.value, list) else [paused.value]
        found.extend(PendingCall.from_dict(value) for value in values if PendingCall.is_pending(value))
    return found


async def resume_command(
    gate: ApprovalTools, graph: Any, config: RunnableConfig, *, timeout_s: float | None = None
) -> Command[Any]:
    """Wait for every pending approval of the paused thread; the ``Command`` that resumes it.

    Raises:
        TaskPendingError: a decision is still outstanding after ``timeout_s``.
    """
    snapshot = await graph.aget_state(config)
    resume: dict[str, dict[str, Any]] = {}
    for paused in snapshot.interrupts:
        values = paused.value if isinstance(paused.value, list) else [paused.value]
        waiting = [PendingCall.from_dict(value) for value in values if PendingCall.is_pending(value)]
        if waiting:
            results = {}
            for pending in waiting:
                result = await gate.wait_for_decision(pending, timeout_s=timeout_s)
                results[pending.call_key] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
            resume[paused.id] = results
    return Command(resume=resume)
