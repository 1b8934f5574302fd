"""pydantic-ai: MCP servers' tools as a toolset whose pending approvals are deferred tool calls.

::

    async with mcp_client(url, tasks=True, auth=token, call_journal="calls.sqlite3") as client:
        gate = ApprovalTools(client)
        agent = Agent(model, toolsets=[await approval_toolset(gate)], output_type=[str, DeferredToolRequests])
        result = await agent.run(prompt)
        if isinstance(result.output, DeferredToolRequests):   # paused: persist both, exit
            save(result.all_messages_json(), dump_requests(result.output))
        ...
        # later, in any process:
        results = await resume_results(gate, requests)       # waits for the decisions
        result = await agent.run(message_history=history, deferred_tool_results=results)

Several servers: pass an :class:`~mcp_approval.agents.ApprovalServers` (or a list of
:class:`~mcp_approval.agents.ApprovalTools`) wherever one ``gate`` goes; the toolset holds every
server's tools under their prefixed names, and :func:`resume_results` sends each call's wait to
the server it was made on.

A call that needs approval raises ``CallDeferred`` carrying the :class:`PendingCall` as its metadata,
so the run ends with ``DeferredToolRequests`` (``metadata[tool_call_id]``). :func:`resume_results`
waits for each decision and answers the call with the tool's real result (approved) or, as a
``ToolFailed``, the server's answer that it did not run (denied, expired). The call key is
``pydantic-ai/<run_id>/<tool_call_id>``. pydantic-ai is imported when this module is.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

try:
    from pydantic_ai import CallDeferred, DeferredToolRequests, DeferredToolResults, RunContext, Tool, ToolFailed
    from pydantic_ai.toolsets import FunctionToolset
except ModuleNotFoundError as exc:  # an optional extra: say which one
    raise ModuleNotFoundError(
        f"mcp_approval.agents.pydantic_ai needs pydantic-ai ({exc}): pip install 'mcp-approval[agents]'", name=exc.name
    ) from exc

from mcp_approval.agents.core import PendingCall, ServerTool, call_key_for, result_text
from mcp_approval.agents.servers import ApprovalServers, Servers

__all__ = [
    "FRAMEWORK",
    "approval_toolset",
    "dump_requests",
    "load_requests",
    "model_value",
    "pending_calls",
    "resume_results",
]

#: The framework part of the call keys this adapter makes.
FRAMEWORK = "pydantic-ai"


def model_value(result: types.CallToolResult) -> Any:
    """What the model is given for ``result``, as pydantic-ai's own ``MCPToolset`` gives it.

    ``structuredContent`` when every block is text (a lone ``result`` key unwrapped), else the text
    (one block) or the texts. An error result (a denial, an expiry) is ``ToolFailed`` with its
    text: pydantic-ai hands the model a failed tool return, without asking it to try again.
    """
    if result.is_error:
        return ToolFailed(result_text(result))
    structured = result.structured_content
    if structured is not None and all(isinstance(block, types.TextContent) for block in result.content):
        if len(structured) == 1 and "result" in structured:
            return structured["result"]
        return structured
    texts = [
        block.text if isinstance(block, types.TextContent) else block.model_dump(mode="json")
        for block in result.content
    ]
    return texts[0] if len(texts) == 1 else texts


def _tool(tool: ServerTool) -> Tool[Any]:
    async def call(ctx: RunContext[Any], **arguments: Any) -> Any:
        key = call_key_for(FRAMEWORK, ctx.run_id or "", ctx.tool_call_id or "")
        outcome = await tool.call(arguments, call_key=key)
        if isinstance(outcome, PendingCall):
            raise CallDeferred(metadata=outcome.as_dict())
        value = model_value(outcome)
        if isinstance(value, ToolFailed):
            raise value
        return value

    return Tool.from_schema(call, tool.name, tool.description, tool.input_schema, takes_ctx=True)


async def approval_toolset(servers: Servers) -> FunctionToolset[Any]:
    """The servers' tools (descriptions and input schemas as listed, names with each server's prefix) as one toolset.

    Give the agent ``output_type=[..., DeferredToolRequests]`` so a pending call ends the run.

    Raises:
        ClientUsageError: two servers give the model one tool name (set a prefix on one).
    """
    return FunctionToolset([_tool(tool) for tool in await ApprovalServers.of(servers).tools()])


def pending_calls(requests: DeferredToolRequests) -> list[PendingCall]:
    """The pending approvals among a paused run's deferred calls (tool, arguments, reference, deadline, server)."""
    return [PendingCall.from_dict(data) for data in requests.metadata.values() if PendingCall.is_pending(data)]


async def resume_results(
    servers: Servers, requests: DeferredToolRequests, *, timeout_s: float | None = None
) -> DeferredToolResults:
    """Wait for every pending approval of ``requests``, each on its own server; the results to resume the run with.

    ``servers``: every server the run used (one ``ApprovalTools``, or several). Each call is
    checked first: its server is given and its key is in that server's call journal; otherwise
    nothing is sent.

    Raises:
        ServerNotGivenError: a call was made on a server not given (nothing is sent).
        ClientUsageError: a call is not in its server's call journal (nothing is sent).
        TaskPendingError: a decision is still outstanding after ``timeout_s``.
    """
    waiting = {
        tool_call_id: PendingCall.from_dict(data)
        for tool_call_id, data in requests.metadata.items()
        if PendingCall.is_pending(data)
    }
    every = ApprovalServers.of(servers)
    parts = {part.tool_call_id: part for part in requests.calls}
    for tool_call_id, pending in waiting.items():  # the run will be answered for this part: it must be the pending call
        part = parts.get(tool_call_id)
        run, _, _ = pending.call_key.rpartition("/")
        key = f"{run}/{tool_call_id}" if run.startswith(f"{FRAMEWORK}/") else ""
        await every.check_saved(
            pending,
            tool=part.tool_name if part is not None else "",
            arguments=part.args_as_dict() if part is not None else None,
            call_key=key,
        )
    decided = await every.decisions(list(waiting.values()), timeout_s=timeout_s)
    results = DeferredToolResults()
    for tool_call_id, result in zip(waiting, decided, strict=True):
        results.calls[tool_call_id] = model_value(result)
    return results


def dump_requests(requests: DeferredToolRequests) -> str:
    """``requests`` as JSON, to persist next to the run's messages."""
    from pydantic import TypeAdapter

    return TypeAdapter(DeferredToolRequests).dump_json(requests).decode()


def load_requests(text: str) -> DeferredToolRequests:
    """The requests :func:`dump_requests` wrote."""
    from pydantic import TypeAdapter

    return TypeAdapter(DeferredToolRequests).validate_python(json.loads(text))
