"""OpenAI Agents SDK: MCP servers' tools as function tools whose pending approvals are run interruptions.

::

    async with mcp_client(url, tasks=True, auth=token, call_journal="calls.sqlite3") as client:
        gate = ApprovalTools(client)
        agent = Agent(name="treasurer", tools=await approval_tools(gate), ...)
        result = await Runner.run(agent, prompt, context=run_context())
        if result.interruptions:                             # paused: persist the RunState, exit
            save(result.to_state().to_string())
        ...
        # later, in any process:
        state = await RunState.from_string(agent, saved)
        await resume_state(gate, state)                      # waits for the decisions
        result = await Runner.run(agent, state)

Several servers: ``approval_tools(servers)`` with an :class:`~mcp_approval.agents.ApprovalServers`
gives every server's tools under their prefixed names (so the SDK never routes one name to the
wrong server), and :func:`resume_state` sends each wait to the server the call was made on.

Each tool's ``needs_approval`` makes the MCP call: a call that finishes at once needs no approval
and the tool answers its result, as ``MCPServerStreamableHttp`` would; a call waiting for a
decision interrupts the run with the SDK's own ``ToolApprovalItem``. The :class:`PendingCall`
(reference, deadline) is kept in the run's context (a dict made by :func:`run_context`), so it is
serialized with the ``RunState``. :func:`resume_state` waits for each decision, then approves the
item (the tool answers its real result) or rejects it with the server's text (denied, expired),
which the model reads. The call key is ``openai-agents/<run id>/<call_id>``, the run id being
the one :func:`run_context` made. The SDK is imported when this module is.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import MutableMapping
from typing import Any

import mcp_types as types

try:
    from agents import FunctionTool, RunContextWrapper, RunState
    from agents.tool_context import ToolContext
except ModuleNotFoundError as exc:  # an optional extra: say which one
    raise ModuleNotFoundError(
        f"mcp_approval.agents.openai_agents needs openai-agents ({exc}): pip install 'mcp-approval[agents]'",
        name=exc.name,
    ) from exc

from mcp_approval.agents.core import PendingCall, ServerTool, call_key_for
from mcp_approval.agents.servers import ApprovalServers, Servers
from mcp_approval.client.connect import ClientUsageError

__all__ = [
    "CONTEXT_KEY",
    "FRAMEWORK",
    "approval_tools",
    "pending_calls",
    "resume_state",
    "run_context",
    "tool_output",
]

#: The framework part of the call keys this adapter makes.
FRAMEWORK = "openai-agents"
#: Where the run's context keeps its run id and pending calls.
CONTEXT_KEY = "mcp_approval"


def run_context(context: MutableMapping[str, Any] | None = None) -> MutableMapping[str, Any]:
    """A run context (a dict, so ``RunState`` serializes it) with a new run id; ``context`` is kept."""
    made: MutableMapping[str, Any] = context if context is not None else {}
    made[CONTEXT_KEY] = {"run_id": uuid.uuid4().hex, "pending": {}}
    return made


def _slot(wrapper: RunContextWrapper[Any]) -> dict[str, Any]:
    context = wrapper.context
    slot = context.get(CONTEXT_KEY) if isinstance(context, MutableMapping) else None
    if not isinstance(slot, dict):
        raise ClientUsageError("run the agent with context=run_context(): the call keys need its run id")
    return slot


def _state_slot(state: RunState[Any, Any]) -> dict[str, Any]:
    # RunState keeps the restored run context in _context; it has no public accessor (0.24).
    wrapper = state._context
    return _slot(wrapper) if wrapper is not None else {"run_id": "", "pending": {}}


def tool_output(result: types.CallToolResult) -> Any:
    """What the model is given for ``result``, as the SDK's MCP servers give it (text blocks)."""
    blocks: list[dict[str, str]] = [
        {"type": "text", "text": block.text if isinstance(block, types.TextContent) else block.model_dump_json()}
        for block in result.content
    ]
    return blocks[0] if len(blocks) == 1 else blocks


def _tool(tool: ServerTool) -> FunctionTool:
    async def needs_approval(wrapper: RunContextWrapper[Any], arguments: dict[str, Any], call_id: str) -> bool:
        slot = _slot(wrapper)
        key = call_key_for(FRAMEWORK, slot["run_id"], call_id)
        outcome = await tool.call(arguments, call_key=key)
        if isinstance(outcome, PendingCall):
            slot["pending"][call_id] = outcome.as_dict()
            return True
        return False  # finished (its result is journaled): the tool answers it at once

    async def invoke(context: ToolContext[Any], arguments_json: str) -> Any:
        # needs_approval made the call; here it is only collected, so a saved run whose run id, call
        # id or arguments were edited between the pause and the resume is refused, not sent anew.
        slot = _slot(context)
        key = call_key_for(FRAMEWORK, slot["run_id"], context.tool_call_id)
        outcome = await tool.collect(json.loads(arguments_json or "{}"), call_key=key)
        if isinstance(outcome, PendingCall):  # approved in the SDK before the server decided
            return {"type": "text", "text": outcome.text()}
        slot["pending"].pop(context.tool_call_id, None)
        return tool_output(outcome)

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=tool.input_schema,
        on_invoke_tool=invoke,
        strict_json_schema=False,
        needs_approval=needs_approval,
    )


async def approval_tools(servers: Servers) -> list[FunctionTool]:
    """The servers' tools (descriptions and input schemas as listed, names with each server's prefix) as function tools.

    Raises:
        ClientUsageError: two servers give the model one tool name (set a prefix on one).
    """
    return [_tool(tool) for tool in await ApprovalServers.of(servers).tools()]


def _arguments(item: Any) -> Any:
    """The arguments of an interrupted function call, as the resumed run will call the tool with them."""
    text = getattr(item, "arguments", None)
    try:
        return json.loads(text) if isinstance(text, str) and text else {}
    except json.JSONDecodeError:
        return text


def pending_calls(state: RunState[Any, Any]) -> list[PendingCall]:
    """The calls a paused run waits for (tool, arguments, reference, deadline, server), from its state."""
    slot = _state_slot(state)
    waiting = {item.call_id for item in state.get_interruptions()}
    return [PendingCall.from_dict(data) for call_id, data in slot["pending"].items() if call_id in waiting]


async def resume_state(servers: Servers, state: RunState[Any, Any], *, timeout_s: float | None = None) -> None:
    """Wait for the decision on each interruption of ``state``, each on its own server; approve or reject it.

    Approved: the item is approved, and the resumed run's tool answers the tool's real result.
    Denied or expired: the item is rejected with the server's text (the tool did not run).
    ``servers``: every server the run used; each call is checked first (its server is given, its
    key is in that server's call journal), otherwise nothing is sent.

    Raises:
        ServerNotGivenError: a call was made on a server not given (nothing is sent).
        ClientUsageError: a call is not in its server's call journal (nothing is sent).
        TaskPendingError: a decision is still outstanding after ``timeout_s``.
    """
    slot = _state_slot(state)
    items = [item for item in state.get_interruptions() if item.call_id in slot["pending"]]
    # Other interruptions (another tool's own needs_approval) are the application's to decide.
    waiting = [PendingCall.from_dict(slot["pending"][item.call_id]) for item in items]
    every = ApprovalServers.of(servers)
    for item, pending in zip(items, waiting, strict=True):  # the run will answer item: it must be the pending call
        key = call_key_for(FRAMEWORK, slot["run_id"], item.call_id or "")
        await every.check_saved(pending, tool=item.tool_name or "", arguments=_arguments(item), call_key=key)
    results = await every.decisions(waiting, timeout_s=timeout_s)
    for item, result in zip(items, results, strict=True):
        if result.is_error:
            slot["pending"].pop(item.call_id, None)
            text = tool_output(result)
            message = text["text"] if isinstance(text, dict) else json.dumps(text)
            state.reject(item, rejection_message=message)
        else:
            state.approve(item)
