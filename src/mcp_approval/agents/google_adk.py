"""Google ADK: MCP servers' tools as long-running tools; a pending approval pauses the invocation.

::

    async with mcp_client(url, tasks=True, auth=token, call_journal="calls.sqlite3") as client:
        gate = ApprovalTools(client)
        agent = LlmAgent(name="treasurer", model=model, tools=await approval_tools(gate))
        app = App(name="treasury", root_agent=agent, resumability_config=ResumabilityConfig(is_resumable=True))
        runner = Runner(app=app, session_service=SqliteSessionService("sessions.db"))
        async for event in runner.run_async(user_id=..., session_id=..., new_message=prompt):
            ...                                      # paused: the session holds the pending call
        ...
        # later, in any process, with the same session service:
        session = await runner.session_service.get_session(app_name=..., user_id=..., session_id=...)
        resume = await resume_message(gate, session)  # waits for the decisions; None: nothing is pending
        if resume is not None:
            async for event in runner.run_async(user_id=..., session_id=..., invocation_id=resume.invocation_id,
                                                new_message=resume.message, state_delta=resume.state_delta):
                ...

Several servers: ``approval_tools(servers)`` with an :class:`~mcp_approval.agents.ApprovalServers`
gives every server's tools under their prefixed names (each tool calls its server with the
server's own name for it), and :func:`resume_message` sends each wait to the server the call was
made on.

Each tool is long-running (``is_long_running``): a call that finishes at once answers the whole
``CallToolResult`` as its function response, as ADK's ``McpToolset`` does; a call waiting for a
decision answers nothing, so ADK marks it in ``long_running_tool_ids`` and a resumable app pauses
the invocation. The :class:`PendingCall` is kept in the session state (``mcp_approval:pending``,
by function call id), persisted by the session service. :func:`resume_message` waits for the
decisions and builds the ``FunctionResponse`` message (the tool's real result, or the server's
answer that it did not run) that resumes the invocation by its id. The call key is
``google-adk/<invocation_id>/<function_call_id>``. ADK is imported when this module is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp_types as types

try:
    from google.adk.tools import BaseTool
    from google.adk.tools.tool_context import ToolContext
    from google.genai import types as genai
except ModuleNotFoundError as exc:  # an optional extra: say which one
    raise ModuleNotFoundError(
        f"mcp_approval.agents.google_adk needs Google ADK ({exc}): pip install 'mcp-approval[agents]'", name=exc.name
    ) from exc

from mcp_approval.agents.core import PendingCall, ServerTool, call_key_for
from mcp_approval.agents.servers import ApprovalServers, SavedCall, Servers

__all__ = [
    "FRAMEWORK",
    "STATE_KEY",
    "ApprovalTool",
    "Resume",
    "approval_tools",
    "function_response",
    "pending_calls",
    "resume_message",
]

#: The framework part of the call keys this adapter makes.
FRAMEWORK = "google-adk"
#: The session state key of the pending calls (function call id → its invocation, the tool's name as the model
#: called it and :meth:`PendingCall.as_dict`).
STATE_KEY = "mcp_approval:pending"


def function_response(result: types.CallToolResult) -> dict[str, Any]:
    """What the model is given for ``result``: the whole ``CallToolResult``, as ADK's ``McpToolset`` gives it."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


class ApprovalTool(BaseTool):  # type: ignore[misc]  # ADK is untyped here (an optional dependency)
    """One MCP tool as a long-running ADK tool (see the module docstring); ``name`` is the model's (prefixed) name."""

    def __init__(self, tool: ServerTool) -> None:
        super().__init__(name=tool.name, description=tool.description, is_long_running=True)
        self._tool = tool

    def _get_declaration(self) -> genai.FunctionDeclaration:
        return genai.FunctionDeclaration(
            name=self.name, description=self.description, parameters_json_schema=self._tool.input_schema
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Make the call (on the tool's server, by the server's name for it); a pending first answer while it waits."""
        invocation = tool_context.invocation_id
        call_id = tool_context.function_call_id or ""
        outcome = await self._tool.call(args, call_key=call_key_for(FRAMEWORK, invocation, call_id))
        if isinstance(outcome, PendingCall):
            pending = dict(tool_context.state.get(STATE_KEY) or {})
            pending[call_id] = {"invocation_id": invocation, "name": self.name, "call": outcome.as_dict()}
            tool_context.state[STATE_KEY] = pending
            # The first answer of a long-running tool: ADK records it (and this state) and pauses.
            return {"status": "pending", "text": outcome.text(), **outcome.as_dict()}
        return function_response(outcome)


async def approval_tools(servers: Servers) -> list[ApprovalTool]:
    """The servers' tools (descriptions and input schemas as listed, names with each server's prefix) as ADK tools.

    Raises:
        ClientUsageError: two servers give the model one tool name (set a prefix on one).
    """
    return [ApprovalTool(tool) for tool in await ApprovalServers.of(servers).tools()]


def pending_calls(session: Any) -> list[PendingCall]:
    """The calls a paused session waits for (tool, arguments, reference, deadline, server), from its state."""
    pending = session.state.get(STATE_KEY) or {}
    return [PendingCall.from_dict(entry["call"]) for entry in pending.values()]


def _saved_calls(session: Any) -> list[SavedCall]:
    """Every function call in the session's events, with its call key (its event's invocation and its id).

    On resume ADK answers the paused ones with the responses given, and may run again one it finds
    unanswered; a call made by these tools before the pause is in the journal.
    """
    return [
        (call.name or "", call.args or {}, call_key_for(FRAMEWORK, str(event.invocation_id or ""), call.id or ""))
        for event in session.events
        for call in event.get_function_calls()
    ]


@dataclass(frozen=True)
class Resume:
    """What resumes a paused invocation: pass all three to ``runner.run_async``."""

    invocation_id: str | None
    message: genai.Content
    state_delta: dict[str, Any]


async def resume_message(servers: Servers, session: Any, *, timeout_s: float | None = None) -> Resume | None:
    """Wait for every pending approval of ``session``, each on its own server; what resumes its invocation.

    ``None`` when nothing is pending (the session never paused, or was resumed already): there is
    nothing to resume, and running the invocation anyway would call the model again on an empty turn.
    ``servers``: every server the session's agent used; each call is checked first (its server is
    given, its key is in that server's call journal), otherwise nothing is sent. ADK may run again
    a function call it finds unanswered on resume, so the session's function calls must include
    the pending calls as the session state saved them (tool, arguments, function call id and
    invocation), and every other call to these tools must be in the journal: a session edited
    after the pause is refused, and nothing is sent.

    Raises:
        ServerNotGivenError: a call was made on a server not given (nothing is sent).
        ClientUsageError: a call is not in its server's call journal, or the session's function
            calls differ from the pending calls and the journal (nothing is sent).
        TaskPendingError: a decision is still outstanding after ``timeout_s``.
    """
    pending: dict[str, Any] = dict(session.state.get(STATE_KEY) or {})
    if not pending:
        return None
    calls = [PendingCall.from_dict(entry["call"]) for entry in pending.values()]
    every = ApprovalServers.of(servers)
    await every.check_rerun(calls, _saved_calls(session))
    results = await every.decisions(calls, timeout_s=timeout_s)
    parts = []
    for (call_id, entry), result in zip(pending.items(), results, strict=True):
        name = entry.get("name") or entry["call"]["tool"]  # the function call's (prefixed) name
        response = genai.FunctionResponse(id=call_id, name=name, response=function_response(result))
        parts.append(genai.Part(function_response=response))
    invocation = next(reversed(pending.values()))["invocation_id"]
    return Resume(invocation, genai.Content(role="user", parts=parts), {STATE_KEY: {}})
