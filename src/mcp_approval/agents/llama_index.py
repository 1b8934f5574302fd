"""LlamaIndex: MCP servers' tools in an agent workflow; a pending approval waits for a ``HumanResponseEvent``.

::

    async with mcp_client(url, tasks=True, auth=token, call_journal="calls.sqlite3") as client:
        gate = ApprovalTools(client)
        agent = ApprovalFunctionAgent(name="treasurer", llm=llm, tools=await approval_tools(gate))
        memory = Memory.from_defaults(session_id="run-1", async_database_uri="sqlite+aiosqlite:///memory.db")
        handler = agent.run(user_msg=prompt, memory=memory)
        if await run_to_pause(handler):                       # paused: keep the context, stop the run
            save(handler.ctx.to_dict(serializer=JsonSerializer()))
            await handler.cancel_run()
        ...
        # later, in any process:
        ctx = Context.from_dict(agent, saved, serializer=JsonSerializer())
        events = await resume_events(gate, ctx)               # waits; None: nothing is pending
        handler = agent.run(ctx=ctx)
        await handler.ctx.store.set("memory", memory)         # the workflow does not serialize memory
        for event in events:
            handler.ctx.send_event(event)
        result = await handler

Several servers: pass an :class:`~mcp_approval.agents.ApprovalServers` wherever one ``gate`` goes;
the agent gets every server's tools under their prefixed names, and :func:`resume_events` sends
each wait to the server the call was made on.

A call that finishes at once answers a ``ToolOutput`` with the tool's text and ``is_error`` for
an error result (``llama-index-tools-mcp`` hands the model the ``repr`` of the whole result,
``is_error=False``). A call waiting for a decision makes its step wait
(``ctx.wait_for_event``) for an :class:`ApprovalDecided` naming its call key, having written an
:class:`ApprovalRequired` (an ``InputRequiredEvent``, carrying the :class:`PendingCall`) to the
event stream; once every running step waits, the workflow is idle and :func:`run_to_pause`
returns the pending calls. The pending calls and the run id are kept in the context's store
(``mcp_approval``), so they are serialized with the context. :func:`resume_events` waits for the
decisions and builds the :class:`ApprovalDecided` events that wake the steps; a step waking
replays, and the call answers its journaled result (the real one, or the server's answer that it
did not run).

The tool needs the tool call's id for its call key (``llama-index/<run id>/<tool_id>``), which
LlamaIndex gives only to the agent's ``call_tool`` step: build the agent from
:class:`ApprovalFunctionAgent`, or put :class:`ApprovalCalls` before another agent class
(``class Agent(ApprovalCalls, ReActAgent)``). LlamaIndex is imported when this module is.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

try:
    from llama_index.core.agent.workflow import FunctionAgent, ToolCall, ToolCallResult
    from llama_index.core.tools.types import AsyncBaseTool, ToolMetadata, ToolOutput
    from workflows import Context
    from workflows.context.serializers import JsonSerializer
    from workflows.decorators import step
    from workflows.events import HumanResponseEvent, InputRequiredEvent, WorkflowIdleEvent
except ModuleNotFoundError as exc:  # an optional extra: say which one
    raise ModuleNotFoundError(
        f"mcp_approval.agents.llama_index needs llama-index-core ({exc}): pip install 'mcp-approval[agents]'",
        name=exc.name,
    ) from exc

from mcp_approval.agents.core import PendingCall, ServerTool, call_key_for, result_text
from mcp_approval.agents.servers import ApprovalServers, SavedCall, Servers
from mcp_approval.client.connect import ClientUsageError

__all__ = [
    "FRAMEWORK",
    "STORE_KEY",
    "ApprovalCalls",
    "ApprovalDecided",
    "ApprovalFunctionAgent",
    "ApprovalRequired",
    "ApprovalTool",
    "approval_tools",
    "pending_calls",
    "resume_events",
    "run_to_pause",
    "tool_output",
]

#: The framework part of the call keys this adapter makes.
FRAMEWORK = "llama-index"
#: The context store key of the run id and the pending calls (call key → :meth:`PendingCall.as_dict`).
STORE_KEY = "mcp_approval"

# The tool call the agent's call_tool step is running in this asyncio task (see ApprovalCalls).
_TOOL_CALL: ContextVar[str | None] = ContextVar("mcp_approval_llama_index_tool_call", default=None)


class ApprovalRequired(InputRequiredEvent):  # type: ignore[misc]  # LlamaIndex is untyped here
    """Written to the event stream when a call waits for approval: ``call`` is its :meth:`PendingCall.as_dict`."""

    call: dict[str, Any]

    @property
    def pending(self) -> PendingCall:
        """The call waiting for approval."""
        return PendingCall.from_dict(self.call)


class ApprovalDecided(HumanResponseEvent):  # type: ignore[misc]
    """Wakes the step waiting for the call ``call_key``: ``result`` is the decided call's ``CallToolResult`` as JSON."""

    call_key: str
    result: dict[str, Any]


class ApprovalCalls:
    """Put before an agent class: its ``call_tool`` step tells the approval tools which tool call they run."""

    @step  # type: ignore[untyped-decorator]  # LlamaIndex is untyped here (an optional dependency)
    async def call_tool(self, ctx: Context, ev: ToolCall) -> ToolCallResult:
        """The agent's own ``call_tool``, with the tool call's id known to the tool."""
        token = _TOOL_CALL.set(ev.tool_id)
        try:
            return await super().call_tool(ctx, ev)  # type: ignore[misc]
        finally:
            _TOOL_CALL.reset(token)


class ApprovalFunctionAgent(ApprovalCalls, FunctionAgent):  # type: ignore[misc]
    """LlamaIndex's ``FunctionAgent``, able to run :class:`ApprovalTool` s."""


def tool_output(name: str, arguments: Mapping[str, Any], result: types.CallToolResult) -> ToolOutput:
    """What the model is given for ``result``: its text, ``is_error`` for an error result (raw output: all of it)."""
    raw = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    text, error = result_text(result), bool(result.is_error)
    return ToolOutput(tool_name=name, content=text, raw_input=dict(arguments), raw_output=raw, is_error=error)


@dataclass
class _Metadata(ToolMetadata):  # type: ignore[misc]
    """The tool's metadata with the input schema as the server lists it (not a pydantic model)."""

    parameters: dict[str, Any] = field(default_factory=dict)

    def get_parameters_dict(self) -> dict[str, Any]:
        return self.parameters


class ApprovalTool(AsyncBaseTool):  # type: ignore[misc]
    """One MCP tool as a LlamaIndex tool (see the module docstring); its name is the model's (prefixed) name."""

    def __init__(self, tool: ServerTool) -> None:
        self._tool = tool
        self._metadata = _Metadata(
            name=tool.name, description=tool.description or tool.name, fn_schema=None, parameters=tool.input_schema
        )

    @property
    def metadata(self) -> ToolMetadata:
        """Name, description and input schema, as the server lists them (the name with its prefix)."""
        return self._metadata

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Not offered: the call may wait for approval, which only the async agent workflow can do."""
        raise ClientUsageError("an approval tool runs in an agent workflow (acall), not synchronously")

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Call the tool on its server with ``kwargs``; while it waits for approval, the step waits for the decision.

        The agent passes the model's arguments by name (a tool argument may be called ``input``).
        """
        if args:
            raise ClientUsageError("an approval tool takes its arguments by name")
        tool_id = _TOOL_CALL.get()
        if tool_id is None:
            raise ClientUsageError(
                "an approval tool needs the agent's tool call id: build the agent from ApprovalFunctionAgent, "
                "or put ApprovalCalls before its class"
            )
        ctx = Context.get_step_context()
        key = call_key_for(FRAMEWORK, await _run_id(ctx), tool_id)
        outcome = await self._tool.call(kwargs, call_key=key)
        if isinstance(outcome, PendingCall):
            await _remember(ctx, outcome)
            # Waiting replays this step when the event comes; the keyed call above is safe to repeat.
            decided = await ctx.wait_for_event(
                ApprovalDecided,
                waiter_event=ApprovalRequired(call=outcome.as_dict()),
                waiter_id=key,
                requirements={"call_key": key},
                timeout=None,
            )
            outcome = types.CallToolResult.model_validate(decided.result)
        await _forget(ctx, key)
        return tool_output(self._tool.name, kwargs, outcome)


async def _run_id(ctx: Context) -> str:
    async with ctx.store.edit_state() as state:
        slot = state.get(STORE_KEY)
        if not isinstance(slot, dict):
            slot = {"run_id": uuid.uuid4().hex, "pending": {}}
            state[STORE_KEY] = slot
        return str(slot["run_id"])


async def _remember(ctx: Context, pending: PendingCall) -> None:
    async with ctx.store.edit_state() as state:
        state[STORE_KEY]["pending"][pending.call_key] = pending.as_dict()


async def _forget(ctx: Context, call_key: str) -> None:
    async with ctx.store.edit_state() as state:
        state[STORE_KEY]["pending"].pop(call_key, None)


async def approval_tools(servers: Servers) -> list[ApprovalTool]:
    """The servers' tools (descriptions and input schemas as listed, names with each server's prefix) as tools.

    Raises:
        ClientUsageError: two servers give the model one tool name (set a prefix on one).
    """
    return [ApprovalTool(tool) for tool in await ApprovalServers.of(servers).tools()]


async def run_to_pause(handler: Any) -> list[PendingCall]:
    """Stream ``handler``'s events until the run ends (``[]``) or is idle waiting for approvals (those calls).

    When calls are returned, the run is still alive and idle: keep
    ``handler.ctx.to_dict(serializer=JsonSerializer())`` and stop it (``await handler.cancel_run()``).
    """
    waiting: dict[str, PendingCall] = {}
    async for event in handler.stream_events(expose_internal=True):
        if isinstance(event, ApprovalRequired):
            waiting[event.pending.call_key] = event.pending
        elif isinstance(event, WorkflowIdleEvent) and waiting:
            return list(waiting.values())
    return []


async def pending_calls(ctx: Context) -> list[PendingCall]:
    """The calls a paused (or restored) context waits for (tool, arguments, reference, deadline, server)."""
    slot = await ctx.store.get(STORE_KEY, default=None) or {}
    return [PendingCall.from_dict(data) for data in (slot.get("pending") or {}).values()]


async def _saved_calls(ctx: Context) -> list[SavedCall]:
    """The ``ToolCall`` events the restored run will run again (queued, in progress or waiting), with their keys."""
    slot = await ctx.store.get(STORE_KEY, default=None) or {}
    run_id = str(slot.get("run_id") or "")
    # The context's own serialized form: the steps' queues and waiters, as the restored run replays them.
    workers = ctx.to_dict(serializer=JsonSerializer()).get("workers") or {}
    kind = f"{ToolCall.__module__}.{ToolCall.__qualname__}"
    found: list[SavedCall] = []
    for worker in workers.values():
        for entry in [*worker.get("queue", []), *worker.get("in_progress", []), *worker.get("collected_waiters", [])]:
            text = entry.get("event") if isinstance(entry, dict) else None
            event = json.loads(text) if isinstance(text, str) else None
            if not isinstance(event, dict) or event.get("qualified_name") != kind:
                continue
            value = event.get("value") or {}
            key = call_key_for(FRAMEWORK, run_id, str(value.get("tool_id") or ""))
            found.append((str(value.get("tool_name") or ""), value.get("tool_kwargs"), key))
    return found


async def resume_events(
    servers: Servers, ctx: Context, *, timeout_s: float | None = None
) -> list[ApprovalDecided] | None:
    """Wait for every pending approval of ``ctx``, each on its own server; the events that wake its steps.

    ``None`` when nothing is pending. ``servers``: every server the agent used; each call is
    checked first (its server is given, its key is in that server's call journal), otherwise
    nothing is sent. The restored run replays its waiting ``call_tool`` steps with their saved
    ``ToolCall`` events, so each pending call must be one of those (tool, arguments, ``tool_id``
    and run id), and any other saved call of these tools must be in the journal: a context edited
    after the pause is refused, and nothing is sent. Send the events once the restored run started
    (``handler.ctx.send_event``).

    Raises:
        ServerNotGivenError: a call was made on a server not given (nothing is sent).
        ClientUsageError: a call is not in its server's call journal, or the context's saved tool
            calls differ from the pending calls and the journal (nothing is sent).
        TaskPendingError: a decision is still outstanding after ``timeout_s``.
    """
    calls = await pending_calls(ctx)
    if not calls:
        return None
    every = ApprovalServers.of(servers)
    await every.check_rerun(calls, await _saved_calls(ctx))
    results = await every.decisions(calls, timeout_s=timeout_s)
    return [
        ApprovalDecided(call_key=call.call_key, result=result.model_dump(mode="json", by_alias=True, exclude_none=True))
        for call, result in zip(calls, results, strict=True)
    ]
