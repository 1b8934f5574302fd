"""Several MCP servers in one agent: tool names that cannot collide, and each pending call resumed where it was made.

::

    async with (
        mcp_client(payments_url, tasks=True, auth=token, call_journal=journal) as payments,
        mcp_client(treasury_url, tasks=True, auth=token, call_journal=journal) as treasury,
    ):
        servers = ApprovalServers(
            ApprovalTools(payments, name="payments", prefix="payments_"),
            ApprovalTools(treasury, name="treasury", prefix="treasury_"),
        )
        tools = await servers.tools()      # payments_refund, treasury_wire_transfer, ..., one approval_status

Each adapter takes an :class:`ApprovalServers` wherever it takes one server's :class:`ApprovalTools`.
A :class:`~mcp_approval.agents.PendingCall` carries the name of the server it was made on; the
adapters' resume helpers route it there, check it against that client's call journal, and refuse
the whole resume, before anything is sent, when a call's server was not given
(:class:`ServerNotGivenError`).

Two servers listing the same tool name need a prefix on (at least) one of them; listing them
together is refused otherwise. ``approval_status``, which every approval server in ``request``
mode lists, is the exception: when several servers list it the model sees one client-side
``approval_status``, which finds the server that made the request by its reference (in the call
journals) and asks that server.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import mcp_types as types

from mcp_approval.agents.core import ApprovalTools, PendingCall, ServerTool
from mcp_approval.client.connect import ClientUsageError

__all__ = ["STATUS_TOOL", "ApprovalServers", "SavedCall", "ServerNotGivenError", "Servers"]

#: The tool an approval server in ``request`` mode lists to say where a request stands (its name on the wire).
STATUS_TOOL = "approval_status"

_STATUS_DESCRIPTION = (
    "Where your approval request stands: pass the reference a call needing approval gave you (any of "
    "this agent's servers; the server that made it answers). Read-only; it never approves or runs anything."
)
_STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reference": {"type": "string", "description": "the approval request's reference"}},
    "required": ["reference"],
}


class ServerNotGivenError(ClientUsageError):
    """A resume was not given the server (by name) that some of its pending calls were made on; nothing was sent.

    ``missing`` maps each such server's name to the references of its pending calls.
    """

    def __init__(self, missing: Mapping[str, Sequence[str]], given: Sequence[str]) -> None:
        calls = "; ".join(f"server {name!r}: {', '.join(refs)}" for name, refs in missing.items())
        names = ", ".join(repr(name) for name in given) or "none"
        super().__init__(
            f"pending calls were made on servers this resume was not given ({calls}; given: {names}), "
            "so nothing was sent. Resume with every server the paused run used, under the names it used"
        )
        self.missing = {name: list(refs) for name, refs in missing.items()}


class ApprovalServers:
    """The servers of one agent, each an :class:`ApprovalTools` with a name of its own (and a prefix if needed).

    Args:
        servers: the servers; their names (:attr:`ApprovalTools.name`) must differ.
        status_tool: the name of the one client-side status tool the model sees when several
            servers list ``approval_status``.
    """

    def __init__(self, *servers: ApprovalTools, status_tool: str = STATUS_TOOL) -> None:
        if not servers:
            raise ClientUsageError("ApprovalServers needs at least one server")
        by_name: dict[str, ApprovalTools] = {}
        for server in servers:
            if server.name in by_name:
                raise ClientUsageError(f"two servers are named {server.name!r}: give each its own name=")
            by_name[server.name] = server
        self._servers = by_name
        self.status_tool = status_tool
        self._listing: dict[str, ServerTool] | None = None

    @classmethod
    def of(cls, servers: Servers) -> ApprovalServers:
        """``servers`` as :class:`ApprovalServers`: as it is, one server's tools, some, or a mapping by name.

        Raises:
            ClientUsageError: a mapping key differs from its server's name.
        """
        if isinstance(servers, ApprovalServers):
            return servers
        if isinstance(servers, ApprovalTools):
            return cls(servers)
        if isinstance(servers, Mapping):
            for key, server in servers.items():
                if key != server.name:
                    raise ClientUsageError(f"servers[{key!r}] is the server named {server.name!r}: use one name")
            return cls(*servers.values())
        return cls(*servers)

    @property
    def names(self) -> list[str]:
        """The servers' names, in the order given."""
        return list(self._servers)

    def __getitem__(self, name: str) -> ApprovalTools:
        """The server named ``name``."""
        return self._servers[name]

    async def tools(self) -> list[ServerTool]:
        """Every server's tools as the model sees them, in the order given (listed once, then kept).

        Raises:
            ClientUsageError: two servers give the model one tool name (set a ``prefix`` on one).
        """
        if self._listing is None:
            self._listing = await self._list()
        return list(self._listing.values())

    async def tool(self, name: str) -> ServerTool | None:
        """The tool the model knows as ``name``, or ``None``."""
        if self._listing is None:
            await self.tools()
        assert self._listing is not None
        return self._listing.get(name)

    async def _list(self) -> dict[str, ServerTool]:
        listings = {name: await server.tools() for name, server in self._servers.items()}
        with_status = [name for name, tools in listings.items() if any(t.listed.name == STATUS_TOOL for t in tools)]
        routed = len(with_status) > 1
        found: dict[str, ServerTool] = {}
        for tools in listings.values():
            for tool in tools:
                if routed and tool.listed.name == STATUS_TOOL:
                    continue  # one client-side status tool stands for all of them (below)
                _add(found, tool)
        if routed:
            listed = types.Tool(name=STATUS_TOOL, description=_STATUS_DESCRIPTION, input_schema=_STATUS_SCHEMA)
            _add(found, ServerTool(self.status_tool, listed, _StatusRouter(self, with_status)))
        return found

    def route(self, pending: PendingCall) -> ApprovalTools:
        """The server ``pending`` was made on.

        Raises:
            ServerNotGivenError: no server of that name is here.
        """
        self.check([pending])
        return self._server_of(pending)

    def check(self, pendings: Iterable[PendingCall]) -> None:
        """Check that every call of ``pendings`` has its server here (nothing is sent).

        Raises:
            ServerNotGivenError: naming every server missing, with the references of its calls.
        """
        missing: dict[str, list[str]] = {}
        for pending in pendings:
            if not pending.server and len(self._servers) == 1:
                continue  # paused before servers were named: the one server given, checked by its journal
            if pending.server not in self._servers:
                missing.setdefault(pending.server or "(unnamed)", []).append(pending.reference)
        if missing:
            raise ServerNotGivenError(missing, self.names)

    async def verify(self, pendings: Sequence[PendingCall]) -> None:
        """Check, sending nothing, that each call has its server here and is in that server's journal.

        Raises:
            ServerNotGivenError: a call's server is not here.
            ClientUsageError: a call is not in its server's journal (:meth:`ApprovalTools.verify`).
        """
        self.check(pendings)
        for pending in pendings:
            await self._server_of(pending).verify(pending)

    async def check_saved(self, pending: PendingCall, *, tool: str, arguments: Any, call_key: str) -> None:
        """Check, sending nothing, that a framework's saved tool call is the call ``pending`` stands for.

        ``tool`` (the model's name for it), ``arguments`` and ``call_key`` are what the framework's
        saved run will answer or run on resume; ``pending`` is the saved pending call, which
        :meth:`verify` checks against the call journal. A saved run edited between the pause and
        the resume (another tool, other arguments, another run or call id) is refused.

        Raises:
            ServerNotGivenError: the call's server is not here (nothing is sent).
            ClientUsageError: naming what differs (nothing is sent).
        """
        self.check([pending])
        listed = await self.tool(tool)
        differs: list[str] = []
        if listed is None or listed.listed.name != pending.tool or (pending.server and listed.server != pending.server):
            differs.append(f"tool {tool!r}, not {pending.tool!r} on {pending.server or 'its server'!r}")
        if arguments != pending.arguments:
            differs.append("other arguments than the pending call's")
        if call_key != pending.call_key:
            differs.append(f"call key {call_key!r}, not {pending.call_key!r}")
        if differs:
            raise ClientUsageError(
                f"the saved run's call waiting on reference {pending.reference} names {'; '.join(differs)}: the "
                "saved state was edited after the pause, so nothing was sent"
            )

    async def check_rerun(self, pendings: Sequence[PendingCall], calls: Sequence[SavedCall]) -> None:
        """Check, sending nothing, that a resumed run makes again only the calls it made before the pause.

        For a framework that runs its saved tool calls again on resume (a LangGraph tool node, for
        one): ``calls`` are those the saved run will make, as ``(tool, arguments, call_key)``
        (``tool`` the model's name for it). Each of ``pendings`` must be one of them
        (:meth:`check_saved`), and every other call must already be in its server's journal for
        that key, tool and arguments, so that running it again only replays its outcome. A call to
        a tool no server lists, or the routed ``approval_status`` with a reference no journal
        holds, sends nothing and is let through.

        Raises:
            ServerNotGivenError: a pending call's server is not here (nothing is sent).
            ClientUsageError: naming the call that would be new or differs (nothing is sent).
        """
        self.check(pendings)
        by_key = {call_key: (tool, arguments) for tool, arguments, call_key in calls}
        for pending in pendings:
            if pending.call_key not in by_key:
                raise ClientUsageError(
                    f"the saved run has no tool call with the call key {pending.call_key!r} waiting on reference "
                    f"{pending.reference}: the saved state was edited after the pause, so nothing was sent"
                )
            tool, arguments = by_key[pending.call_key]
            await self.check_saved(pending, tool=tool, arguments=arguments, call_key=pending.call_key)
        waiting = {pending.call_key for pending in pendings}
        for tool, arguments, call_key in calls:
            if call_key not in waiting:
                await self._check_journaled(tool, arguments, call_key)

    async def _check_journaled(self, name: str, arguments: Any, call_key: str) -> None:
        tool = await self.tool(name)
        if tool is None:
            return  # answered as an unknown tool: nothing is sent
        via = tool.via if isinstance(tool.via, ApprovalTools) else await self._status_server(arguments)
        if via is None:
            return  # the routed approval_status answers "no call has that reference": nothing is sent
        listed_name = tool.listed.name
        try:
            await via.client.check_resumable(listed_name, arguments, call_key=call_key)
        except ClientUsageError as error:
            raise ClientUsageError(
                f"the saved state was edited after the pause: resuming it would send its tool call {call_key!r} "
                f"({name}) anew. {error}"
            ) from error

    async def _status_server(self, arguments: Any) -> ApprovalTools | None:
        """The server the routed ``approval_status`` asks for ``arguments`` (its journal has the reference)."""
        reference = arguments.get("reference") if isinstance(arguments, Mapping) else None
        if not isinstance(reference, str) or not reference:
            return None
        for server in self._servers.values():
            if await server.client.journaled_task(reference) is not None:
                return server
        return None

    async def wait_for_decision(self, pending: PendingCall, *, timeout_s: float | None = None) -> types.CallToolResult:
        """:meth:`ApprovalTools.wait_for_decision` on the server ``pending`` was made on."""
        return await self.route(pending).wait_for_decision(pending, timeout_s=timeout_s)

    async def decisions(
        self, pendings: Sequence[PendingCall], *, timeout_s: float | None = None
    ) -> list[types.CallToolResult]:
        """Every call's result, in order, once each is decided; all are verified before anything waits.

        Raises:
            ServerNotGivenError, ClientUsageError: as :meth:`verify` (nothing is sent).
            TaskPendingError: a decision is still outstanding after ``timeout_s``.
        """
        await self.verify(pendings)
        return [await self.wait_for_decision(pending, timeout_s=timeout_s) for pending in pendings]

    def _server_of(self, pending: PendingCall) -> ApprovalTools:
        if not pending.server:
            return next(iter(self._servers.values()))
        return self._servers[pending.server]


SavedCall = tuple[str, Any, str]
"""A tool call in a framework's saved run: the model's name for the tool, its arguments, its call key."""

Servers = ApprovalServers | ApprovalTools | Mapping[str, ApprovalTools] | Sequence[ApprovalTools]
"""What an adapter takes for the agent's servers: one server's tools, several, or an :class:`ApprovalServers`."""


def _add(found: dict[str, ServerTool], tool: ServerTool) -> None:
    other = found.get(tool.name)
    if other is not None:
        raise ClientUsageError(
            f"servers {other.server!r} and {tool.server!r} both give the model a tool named {tool.name!r}: "
            "set a prefix on one of them (ApprovalTools(..., prefix=...))"
        )
    found[tool.name] = tool


class _StatusRouter:
    """The client-side ``approval_status``: the server whose journal holds the reference answers it."""

    def __init__(self, servers: ApprovalServers, names: Sequence[str]) -> None:
        self._servers = servers
        self._names = list(names)
        self.name = "(the server that made the request)"

    async def call(
        self, tool: str, arguments: Mapping[str, Any], *, call_key: str
    ) -> types.CallToolResult | PendingCall:
        return await self._routed(arguments, call_key, collect=False)

    async def collect(
        self, tool: str, arguments: Mapping[str, Any], *, call_key: str
    ) -> types.CallToolResult | PendingCall:
        return await self._routed(arguments, call_key, collect=True)

    async def _routed(
        self, arguments: Mapping[str, Any], call_key: str, *, collect: bool
    ) -> types.CallToolResult | PendingCall:
        reference = arguments.get("reference")
        if not isinstance(reference, str) or not reference:
            return _error(f"{STATUS_TOOL} needs the reference that a call needing approval gave.")
        for name in self._names:
            server = self._servers[name]
            if await server.client.journaled_task(reference) is not None:
                if collect:
                    return await server.collect(STATUS_TOOL, {"reference": reference}, call_key=call_key)
                return await server.call(STATUS_TOOL, {"reference": reference}, call_key=call_key)
        names = ", ".join(self._names)
        return _error(f"No call this agent made on its servers ({names}) has the reference {reference[:80]}.")


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
