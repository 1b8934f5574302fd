"""strands: MCP servers' tools as agent tools whose pending approvals are the agent's own interrupts.

::

    async with mcp_client(url, tasks=True, auth=token, call_journal="calls.sqlite3") as client:
        gate = ApprovalTools(client)
        agent = Agent(model=model, tools=await approval_tools(gate),
                      session_manager=FileSessionManager(session_id=..., storage_dir=...))
        result = await agent.invoke_async(prompt)
        if result.stop_reason == "interrupt":                # paused: the session holds it
            ...
        # later, in any process, with an agent on the same session:
        responses = await resume_responses(gate, agent)     # waits; None: nothing is pending
        result = await agent.invoke_async(responses)

Several servers: pass an :class:`~mcp_approval.agents.ApprovalServers` wherever one ``gate`` goes;
the agent gets every server's tools under their prefixed names, and :func:`resume_responses` sends
each wait to the server the call was made on.

A call that finishes at once answers its ``ToolResult`` (the text blocks, ``status="error"`` for
an error result), as strands' ``MCPClient`` does. A call waiting for a decision raises a tool
interrupt (``ToolContext.interrupt``) whose reason is the :class:`PendingCall`; the agent stops with
``stop_reason == "interrupt"`` and ``result.interrupts``, and its session manager persists the
interrupt with the conversation. The pending calls are also kept in the agent's state
(``agent.state["mcp_approval"]``, persisted with it), so :func:`pending_calls` reads them back
after a restart. :func:`resume_responses` waits for the decisions and builds the
``interruptResponse`` s that resume the agent: the tool then answers the decided call's journaled
result (the real one, or the server's answer that it did not run). Unlike strands' own tasks
support, waiting never cancels the request: a pause has no timeout. The call key is
``strands/<run id>/<toolUseId>``, the run id kept in the agent's state. strands is imported when
this module is.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator
from typing import Any

import mcp_types as types

try:
    from strands.interrupt import InterruptException
    from strands.types.events import ToolResultEvent
    from strands.types.tools import AgentTool, ToolContext, ToolResult, ToolSpec, ToolUse
except ModuleNotFoundError as exc:  # an optional extra: say which one
    raise ModuleNotFoundError(
        f"mcp_approval.agents.strands needs strands-agents ({exc}): pip install 'mcp-approval[agents]'", name=exc.name
    ) from exc

from mcp_approval.agents.core import PendingCall, ServerTool, call_key_for
from mcp_approval.agents.servers import ApprovalServers, SavedCall, Servers
from mcp_approval.client.connect import ClientUsageError

__all__ = [
    "FRAMEWORK",
    "INTERRUPT_NAME",
    "STATE_KEY",
    "ApprovalTool",
    "approval_tools",
    "pending_calls",
    "resume_responses",
    "tool_result",
]

#: The framework part of the call keys this adapter makes.
FRAMEWORK = "strands"
#: The agent state key of the run id and the pending calls (toolUseId → interrupt id and :meth:`PendingCall.as_dict`).
STATE_KEY = "mcp_approval"
#: The name of the interrupt a pending call raises.
INTERRUPT_NAME = "mcp-approval"


def tool_result(tool_use_id: str, result: types.CallToolResult) -> ToolResult:
    """The ``ToolResult`` of ``result``, as strands' ``MCPClient`` makes it (``error`` for an error result)."""
    content: list[Any] = [
        {"text": block.text} if isinstance(block, types.TextContent) else {"json": block.model_dump(mode="json")}
        for block in result.content
    ]
    return {"toolUseId": tool_use_id, "status": "error" if result.is_error else "success", "content": content}


def _slot(agent: Any) -> dict[str, Any]:
    slot = agent.state.get(STATE_KEY)
    if not isinstance(slot, dict):
        slot = {"run_id": uuid.uuid4().hex, "pending": {}}
        agent.state.set(STATE_KEY, slot)
    return slot


class ApprovalTool(AgentTool):  # type: ignore[misc]  # strands is untyped here (an optional dependency)
    """One MCP tool as a strands agent tool (see the module docstring); ``tool_name`` is the model's (prefixed) name."""

    def __init__(self, tool: ServerTool) -> None:
        super().__init__()
        self._tool = tool

    @property
    def tool_name(self) -> str:
        """The name the model calls the tool by."""
        return self._tool.name

    @property
    def tool_spec(self) -> ToolSpec:
        """Name, description and input schema, as the server lists them (the name with its prefix)."""
        return {
            "name": self._tool.name,
            "description": self._tool.description,
            "inputSchema": {"json": self._tool.input_schema},
        }

    @property
    def tool_type(self) -> str:
        """What kind of tool this is."""
        return "mcp-approval"

    async def stream(
        self, tool_use: ToolUse, invocation_state: dict[str, Any], **kwargs: Any
    ) -> AsyncGenerator[Any, None]:
        """Make the call on the tool's server; interrupt the agent while it waits for approval."""
        context: ToolContext[Any] | None = kwargs.get("_tool_context")
        if context is None:
            raise ClientUsageError("an approval tool runs inside a strands Agent (it needs the tool context)")
        agent, use_id = context.agent, tool_use["toolUseId"]
        slot = _slot(agent)
        outcome = await self._tool.call(tool_use["input"], call_key=call_key_for(FRAMEWORK, slot["run_id"], use_id))
        if isinstance(outcome, PendingCall):
            try:
                context.interrupt(INTERRUPT_NAME, reason=outcome.as_dict())
            except InterruptException as paused:
                slot["pending"][use_id] = {"interrupt_id": paused.interrupt.id, "call": outcome.as_dict()}
                agent.state.set(STATE_KEY, slot)
                raise
            # Answered before the server decided (an application's own response): wait for the decision.
            outcome = await self._tool.via.call(self._tool.listed.name, tool_use["input"], call_key=outcome.call_key)
            if isinstance(outcome, PendingCall):
                outcome = types.CallToolResult(
                    content=[types.TextContent(type="text", text=outcome.text())], is_error=True
                )
        if slot["pending"].pop(use_id, None) is not None:
            agent.state.set(STATE_KEY, slot)
        yield ToolResultEvent(tool_result(use_id, outcome))


async def approval_tools(servers: Servers) -> list[ApprovalTool]:
    """The servers' tools (descriptions and input schemas as listed, names with each server's prefix) as agent tools.

    Raises:
        ClientUsageError: two servers give the model one tool name (set a prefix on one).
    """
    return [ApprovalTool(tool) for tool in await ApprovalServers.of(servers).tools()]


def pending_calls(agent: Any) -> list[PendingCall]:
    """The calls a paused agent waits for (tool, arguments, reference, deadline, server), from its state."""
    slot = agent.state.get(STATE_KEY) or {}
    return [PendingCall.from_dict(entry["call"]) for entry in (slot.get("pending") or {}).values()]


def _saved_calls(agent: Any, run_id: str) -> list[SavedCall]:
    """The tool uses the agent runs again when it resumes: its interrupted message's, less those it has results for."""
    # strands replays the assistant message it kept with the interrupt (not the conversation's copy).
    kept = getattr(getattr(agent, "_interrupt_state", None), "pending_tool_execution", None)
    message = kept.assistant_message if kept is not None else (agent.messages[-1] if agent.messages else {})
    done = {result["toolUseId"] for result in (kept.completed_tool_results if kept is not None else [])}
    uses = [block["toolUse"] for block in message.get("content") or [] if "toolUse" in block]
    return [
        (use["name"], use.get("input"), call_key_for(FRAMEWORK, run_id, use["toolUseId"]))
        for use in uses
        if use["toolUseId"] not in done
    ]


async def resume_responses(
    servers: Servers, agent: Any, *, timeout_s: float | None = None
) -> list[dict[str, Any]] | None:
    """Wait for every pending approval of ``agent``, each on its own server; the ``interruptResponse`` s to resume it.

    ``None`` when nothing is pending (the agent never paused here, or was resumed already).
    ``servers``: every server the agent used; each call is checked first (its server is given,
    its key is in that server's call journal), otherwise nothing is sent. The agent runs its
    interrupted message's tool uses again on resume, so each must be a pending call as the agent's
    state saved it (tool, input, ``toolUseId`` and run id): a session edited after the pause is
    refused, and nothing is sent.

    Raises:
        ServerNotGivenError: a call was made on a server not given (nothing is sent).
        ClientUsageError: a call is not in its server's call journal, or the tool uses the agent
            will run differ from the pending calls and the journal (nothing is sent).
        TaskPendingError: a decision is still outstanding after ``timeout_s``.
    """
    slot = agent.state.get(STATE_KEY) or {}
    pending: dict[str, Any] = slot.get("pending") or {}
    if not pending:
        return None
    calls = [PendingCall.from_dict(entry["call"]) for entry in pending.values()]
    every = ApprovalServers.of(servers)
    await every.check_rerun(calls, _saved_calls(agent, str(slot.get("run_id") or "")))
    results = await every.decisions(calls, timeout_s=timeout_s)
    return [
        {
            "interruptResponse": {
                "interruptId": entry["interrupt_id"],
                "response": result.model_dump(mode="json", by_alias=True, exclude_none=True),
            }
        }
        for entry, result in zip(pending.values(), results, strict=True)
    ]
