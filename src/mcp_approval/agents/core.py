"""What every framework adapter shares: keyed calls that pause on a pending approval, and the wait for it.

A framework adapter turns a model's tool call into :meth:`ApprovalTools.call` with a ``call_key``
made by :func:`call_key_for` from the framework's own run id and tool-call id. The call is journaled
(with its task id) in the client's durable call journal before anything waits on it, so:

- a call that needs no approval returns the tool's result, as a plain MCP call would;
- a call still waiting for a decision returns a :class:`PendingCall`, which the adapter hands to its
  framework's own pause (and which is plain JSON, so it is persisted with the framework's state);
- :meth:`ApprovalTools.wait_for_decision`, in this or another process, waits for the decision
  (woken by ``notifications/tasks`` where the server offers them, polling otherwise) and returns
  the call's :class:`~mcp_types.CallToolResult`, which the adapter hands back as the resume value.

Waiting again, or resuming twice, never runs the call twice: the same key polls the same task, and a
finished call's recorded outcome is returned without calling anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import mcp_types as types

from mcp_approval.client.connect import AgentClient, ClientUsageError
from mcp_approval.client.tasks import (
    TaskCancelledError,
    TaskExpiredError,
    TaskFailedError,
    TaskPendingError,
    task_wait,
)
from mcp_approval.protocol import META_TOOL_APPROVAL_DEADLINE

__all__ = [
    "DECIDED_BY",
    "ApprovalTools",
    "PendingCall",
    "ServerTool",
    "ToolCaller",
    "call_key_for",
    "result_text",
]

#: Who decides a pending call, in general terms: the server's approval service, not the agent.
DECIDED_BY = "a reviewer of the MCP server's approval service (not this agent)"


def call_key_for(framework: str, run_id: str, tool_call_id: str) -> str:
    """The ``call_key`` of one tool call: the framework, its run (or thread) id and its tool-call id.

    The same run and tool call always give the same key, so resuming the run polls the same task.
    """
    if not run_id or not tool_call_id:
        raise ClientUsageError(
            f"a keyed call needs the framework's run id and tool-call id (got {run_id!r}, {tool_call_id!r})"
        )
    return f"{framework}/{run_id}/{tool_call_id}"


@dataclass(frozen=True)
class PendingCall:
    """A tool call waiting for an approval decision: what the framework's pause carries.

    Everything here is plain JSON (:meth:`as_dict`, :meth:`from_dict`), so it is persisted with the
    framework's own state; it holds no credential and no backend record.
    """

    call_key: str
    """The journal key of the call (see :func:`call_key_for`)."""
    tool: str
    arguments: dict[str, Any]
    reference: str
    """The request's reference: the server's task id (``approval_status`` and reviewers know it)."""
    deadline: str | None = None
    """When the request expires if no one decides (ISO 8601, UTC), when the server says."""
    message: str = ""
    """What the server says about the request (its task's ``statusMessage``)."""
    decided_by: str = DECIDED_BY
    server: str = ""
    """The name of the server the call was made on (:attr:`ApprovalTools.name`): a resume goes on there
    and nowhere else. Empty in calls paused before servers were named."""
    kind: str = field(default="mcp-approval-pending", repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The call as JSON-ready data."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PendingCall:
        """The call from :meth:`as_dict` output (unknown fields are ignored)."""
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)

    @staticmethod
    def is_pending(data: object) -> bool:
        """Whether ``data`` is a :meth:`as_dict` of a pending call."""
        return isinstance(data, Mapping) and data.get("kind") == "mcp-approval-pending"

    def text(self) -> str:
        """One paragraph for the user (and a model) while the decision waits."""
        parts = [f"{self.tool} is waiting for approval (reference {self.reference}); {self.decided_by} decides."]
        if self.deadline:
            parts.append(f"If no one decides by {self.deadline}, it expires and the call never runs.")
        return " ".join(parts)


class ToolCaller(Protocol):
    """What calls a :class:`ServerTool`: a server's :class:`ApprovalTools`, or a router over several."""

    name: str

    async def call(
        self, tool: str, arguments: Mapping[str, Any], *, call_key: str
    ) -> types.CallToolResult | PendingCall:
        """Call ``tool`` at most once for ``call_key`` (see :meth:`ApprovalTools.call`)."""
        ...

    async def collect(
        self, tool: str, arguments: Mapping[str, Any], *, call_key: str
    ) -> types.CallToolResult | PendingCall:
        """The outcome of the journaled call ``call_key``, never a first call (see :meth:`ApprovalTools.collect`)."""
        ...


@dataclass(frozen=True)
class ServerTool:
    """One tool as the model sees it (``name``: the server's name for it, with the server's prefix) and who calls it."""

    name: str
    listed: types.Tool
    """The tool as its server lists it (the server is called with ``listed.name``)."""
    via: ToolCaller = field(repr=False)

    @property
    def server(self) -> str:
        """The name of the server the tool calls (:attr:`ApprovalTools.name`)."""
        return self.via.name

    @property
    def description(self) -> str:
        """The server's description of the tool (empty when it gives none)."""
        return self.listed.description or ""

    @property
    def input_schema(self) -> dict[str, Any]:
        """The tool's input schema as the server lists it."""
        return dict(self.listed.input_schema)

    async def call(self, arguments: Mapping[str, Any], *, call_key: str) -> types.CallToolResult | PendingCall:
        """Call the tool at most once for ``call_key``: its result, or a :class:`PendingCall`."""
        return await self.via.call(self.listed.name, arguments, call_key=call_key)

    async def collect(self, arguments: Mapping[str, Any], *, call_key: str) -> types.CallToolResult | PendingCall:
        """The outcome of the call ``call_key`` made earlier with ``arguments``; never a first call.

        What a framework runs when it resumes a paused call: the key must be in the journal for this
        server, tool and arguments (see :meth:`ApprovalTools.collect`), so a saved call whose key,
        tool or arguments were edited is refused and nothing is sent.

        Raises:
            ClientUsageError: the journal holds no such call (nothing is sent).
        """
        return await self.via.collect(self.listed.name, arguments, call_key=call_key)


def result_text(result: types.CallToolResult) -> str:
    """A result's text blocks, joined (what a model reads of it)."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def _ended_without_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


class ApprovalTools:
    """An MCP server's tools through :func:`~mcp_approval.client.mcp_client`, for a framework adapter.

    Args:
        client: a connected client made with ``tasks=True`` (an approval-gated call is a task); its
            ``call_journal`` is where calls are journaled (make it durable: a file).
        name: what the application calls this server; every :class:`PendingCall` made here carries
            it, and a resume goes on only on the server of that name. By default the server's URL
            (or command line): give a name of your own when the agent has several servers, and
            keep it the same from the pause to the resume.
        prefix: put before each tool's name as the model sees it (``"payments_"`` makes
            ``payments_refund`` of ``refund``), so tools of several servers cannot collide; the
            server is always called with its own name.
        pending_wait_s: how long a first call waits for its task before it counts as pending
            (a call that finishes in that time is answered as a plain MCP call would be).
    """

    def __init__(
        self, client: AgentClient, *, name: str | None = None, prefix: str = "", pending_wait_s: float = 1.0
    ) -> None:
        if client.tasks is None:
            raise ClientUsageError("approval-gated calls are tasks: make the client with mcp_client(..., tasks=True)")
        if name is not None and not name.strip():
            raise ClientUsageError("a server's name must not be empty")
        self.client = client
        self.name = name if name is not None else client.server_identity()
        self.prefix = prefix
        self.pending_wait_s = pending_wait_s

    async def listed(self) -> list[types.Tool]:
        """The server's tools as it lists them (every page), under the server's own names."""
        listed: list[types.Tool] = []
        cursor: str | None = None
        while True:
            page = await self.client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return listed

    async def tools(self) -> list[ServerTool]:
        """The server's tools as the model sees them: its names with :attr:`prefix`, each calling this server."""
        return [ServerTool(f"{self.prefix}{tool.name}", tool, self) for tool in await self.listed()]

    async def call(
        self, tool: str, arguments: Mapping[str, Any], *, call_key: str
    ) -> types.CallToolResult | PendingCall:
        """Call ``tool`` at most once for ``call_key``: its result, or a :class:`PendingCall`.

        A call that ended without a result (its task failed or was cancelled, or the server no
        longer knows it) answers an error result saying so, which a model can act on.
        """
        return await self._call(tool, dict(arguments), call_key, self.pending_wait_s)

    async def collect(
        self, tool: str, arguments: Mapping[str, Any], *, call_key: str
    ) -> types.CallToolResult | PendingCall:
        """As :meth:`call`, but only for a call already in the journal: its task is polled, or its outcome replayed.

        A framework's resumed run calls this instead of :meth:`call`: whatever its saved state says,
        nothing is sent unless this client's journal recorded ``call_key`` for this server, ``tool``
        and ``arguments``, and then only the journaled task is asked about.

        Raises:
            ClientUsageError: ``call_key`` is not in the journal, or is there for another server,
                tool or arguments (nothing is sent; the message says what differs).
        """
        return await self._call(tool, dict(arguments), call_key, self.pending_wait_s, resume=True)

    async def wait_for_decision(self, pending: PendingCall, *, timeout_s: float | None = None) -> types.CallToolResult:
        """Wait for the decision on ``pending`` and return the call's result (the resume value).

        Approved: the tool's real result (the tool ran once). Denied or expired: the server's error
        result, which says the tool did not run. Waking is pushed by ``notifications/tasks`` where
        the server offers them, and polled otherwise. Called again (another process, a second
        resume), it returns the recorded outcome without calling anything.

        The call must have been made here: ``pending`` names this server, and this client's
        journal holds its key for this server, tool and arguments (:meth:`verify`); anything else
        is refused before anything is sent.

        Raises:
            TaskPendingError: still undecided after ``timeout_s`` (``None``: as long as the request lives).
            ClientUsageError: the call was made on another server, or the journal's record of its key
                names another tool, other arguments or another task (nothing is sent).
        """
        await self.verify(pending)
        outcome = await self._call(pending.tool, pending.arguments, pending.call_key, timeout_s, resume=True)
        if isinstance(outcome, PendingCall):
            raise TaskPendingError(outcome.reference, f"{pending.tool} is still waiting for approval")
        return outcome

    async def verify(self, pending: PendingCall) -> None:
        """Check, sending nothing, that ``pending`` was made on this server: its name, and its key in the journal.

        Raises:
            ClientUsageError: it names another server, or this client's journal does not hold its
                key for this server, tool and arguments (see :meth:`AgentClient.check_resumable`), or
                holds it for another task than ``pending.reference``.
        """
        self._check_server(pending)
        record = await self.client.check_resumable(pending.tool, pending.arguments, call_key=pending.call_key)
        if record.task_id is not None and record.task_id != pending.reference:
            raise ClientUsageError(
                f"{pending.tool} (call {pending.call_key!r}) names reference {pending.reference}, but the call journal "
                f"recorded task {record.task_id} for that key; nothing was sent. The saved call was edited: "
                "only the journaled task is ever collected"
            )

    def _check_server(self, pending: PendingCall) -> None:
        if pending.server and pending.server != self.name:
            raise ClientUsageError(
                f"{pending.tool} (reference {pending.reference}) was made on server {pending.server!r}, not on "
                f"{self.name!r}; nothing was sent. Resume it with that server"
            )

    async def _call(
        self, tool: str, arguments: dict[str, Any], call_key: str, wait_s: float | None, *, resume: bool = False
    ) -> types.CallToolResult | PendingCall:
        try:
            with task_wait(wait_s):  # this call's own wait: others on the client may wait differently
                if resume:  # never a first call: the key must be on record for this server
                    return await self.client.resume_call(tool, arguments, call_key=call_key)
                return await self.client.call_tool(tool, arguments, call_key=call_key)
        except TaskPendingError as pending:
            return await self._pending(tool, arguments, call_key, pending.task_id)
        except TaskFailedError as failed:
            why = failed.error.message if failed.error is not None else "no reason given"
            return _ended_without_result(
                f"{tool} failed on the server ({why}); reference {failed.task_id}. It may or may not have run: "
                "do not call it again without checking."
            )
        except TaskCancelledError as cancelled:
            return _ended_without_result(
                f"The request for {tool} (reference {cancelled.task_id}) was cancelled before it finished, "
                "so the tool did not complete. Tell the user; a new call is a new request."
            )
        except TaskExpiredError as gone:
            return _ended_without_result(
                f"The server no longer knows the request for {tool} (reference {gone.task_id}); its outcome "
                "is unknown. Do not call it again without checking."
            )

    async def _pending(self, tool: str, arguments: dict[str, Any], call_key: str, task_id: str) -> PendingCall:
        tasks = self.client.tasks
        assert tasks is not None
        task = await tasks.get(self.client.session, task_id)
        meta = task.meta or {}
        deadline = meta.get(META_TOOL_APPROVAL_DEADLINE)
        return PendingCall(
            call_key=call_key,
            tool=tool,
            arguments=arguments,
            reference=task_id,
            deadline=deadline if isinstance(deadline, str) else None,
            message=task.status_message or "",
            server=self.name,
        )
