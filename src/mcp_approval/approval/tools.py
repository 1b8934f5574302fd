"""Running a tool from its stored call binding, outside the request that asked for it."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import mcp_types as types
import rfc8785
from mcp.server.mcpserver import MCPServer
from pydantic import ValidationError

from mcp_approval._sdk import registered_tool

__all__ = ["ServerTools", "ToolInvoker"]

logger = logging.getLogger("mcp_approval.approval")


class ToolInvoker(Protocol):
    """Runs tools and describes their current definitions."""

    async def fingerprint(self, tool: str) -> str | None:
        """A hash of the tool's current definition (``None`` if there is no such tool)."""
        ...

    async def refuses_arguments(self, tool: str, arguments: dict[str, Any]) -> bool:
        """Whether the tool would refuse ``arguments`` before it starts (its argument validation fails)."""
        ...

    async def output_schema(self, tool: str) -> dict[str, Any] | None:
        """The ``outputSchema`` the tool declares (``None``: none, or no such tool)."""
        ...

    async def invoke(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Run the tool once; a tool failure is an ``isError`` result, not an exception."""
        ...


@dataclass(frozen=True)
class _Described:
    """What the server lists for one tool, and the fingerprint of it."""

    signature: str  # the registered definition it was listed from, compared on every use
    fingerprint: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None


class ServerTools:
    """The tools of an SDK :class:`~mcp.server.mcpserver.MCPServer`, called without interceptors.

    Approved calls run here, bypassing the policy gate: the gate's decision for them was made by
    the re-evaluation that preceded the execution claim.

    A tool's listing and fingerprint are computed when its definition changes, not per call: the
    SDK keeps registered tools in a plain table that ``add_tool``/``remove_tool`` (or assignment
    to a tool's fields) change at any time, without notice, so every use compares a cheap
    signature of the registered definition (its name, description and schemas as JSON) with the
    one the cached listing was made from. A server class that overrides ``list_tools`` is listed
    on every use, since what it lists need not follow the registered tools.
    """

    def __init__(self, server: MCPServer[Any] | None = None) -> None:
        self._server = server
        self._described: dict[str, _Described] = {}

    @property
    def server(self) -> MCPServer[Any]:
        """The server whose tools these are.

        Raises:
            RuntimeError: built without one, and not :meth:`serving` one now.
        """
        if self._server is None:
            raise RuntimeError("the server is not running: approved calls run only inside its lifespan")
        return self._server

    @contextmanager
    def serving(self, server: MCPServer[Any]) -> Iterator[None]:
        """The tools of ``server`` while the block runs (its lifespan), for a composition built before it.

        Raises:
            RuntimeError: these tools serve another server.
        """
        if self._server is not None and self._server is not server:
            raise RuntimeError("one Approvals serves one MCPServer; build another for another server")
        self._server, self._described = server, {}
        try:
            yield
        finally:
            self._server, self._described = None, {}

    def exists(self, tool: str) -> bool:
        """Whether the server has ``tool`` (middleware that hides tools from ``tools/list`` aside).

        Outside :meth:`serving` nothing is called, so this leaves the answer to the gate's policy.
        """
        if self._server is None:
            return True
        return registered_tool(self._server, tool) is not None

    async def fingerprint(self, tool: str) -> str | None:
        """SHA-256 over the canonical JSON of the tool's name, description and schemas."""
        described = await self._describe(tool)
        return described.fingerprint if described is not None else None

    async def input_schema(self, tool: str) -> dict[str, Any] | None:
        """The ``inputSchema`` the server lists for ``tool`` (``None`` when it has no such tool)."""
        described = await self._describe(tool)
        return described.input_schema if described is not None else None

    async def output_schema(self, tool: str) -> dict[str, Any] | None:
        """The ``outputSchema`` the server lists for ``tool`` (``None``: none, or no such tool)."""
        described = await self._describe(tool)
        return described.output_schema if described is not None else None

    async def _describe(self, tool: str) -> _Described | None:
        """The listing of ``tool`` (``None``: no such tool), from the cache while its definition holds."""
        cacheable = type(self.server).list_tools is MCPServer.list_tools
        signature = self._signature(tool) if cacheable else None
        if signature is None:
            self._described.pop(tool, None)
            return await self._listed(tool, "")
        cached = self._described.get(tool)
        if cached is not None and cached.signature == signature:
            return cached
        described = await self._listed(tool, signature)
        if described is not None:
            self._described[tool] = described
        return described

    def _signature(self, tool: str) -> str | None:
        """The registered definition of ``tool`` as JSON (``None``: no such tool, or not JSON)."""
        registered = registered_tool(self.server, tool)
        if registered is None:
            return None
        definition = [registered.name, registered.description, registered.parameters, registered.output_schema]
        try:
            return json.dumps(definition, default=repr)  # C speed: far cheaper than listing and hashing
        except ValueError:  # a circular schema: listed every time, as the hash would fail anyway
            return None

    async def _listed(self, tool: str, signature: str) -> _Described | None:
        for definition in await self.server.list_tools():
            if definition.name == tool:
                described = {
                    "name": definition.name,
                    "description": definition.description,
                    "inputSchema": definition.input_schema,
                    "outputSchema": definition.output_schema,
                }
                fingerprint = hashlib.sha256(rfc8785.dumps(described)).hexdigest()
                return _Described(signature, fingerprint, definition.input_schema, definition.output_schema)
        return None

    async def refuses_arguments(self, tool: str, arguments: dict[str, Any]) -> bool:
        """Whether the SDK's validation of ``arguments`` (the tool's own, stricter than its listed
        schema, e.g. custom validators) fails, so calling it would not start the tool."""
        registered = registered_tool(self.server, tool)
        if registered is None:
            return False
        try:
            registered.fn_metadata.validate_arguments(arguments)
        except ValidationError:
            return True
        except Exception:  # a validator that crashes is the tool's failure, reported when it runs
            return False
        return False

    async def invoke(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Run ``tool``; errors become ``isError`` results (the tool may have had an effect)."""
        try:
            result = await self.server.call_tool(tool, arguments)
        except Exception as exc:  # the tool ran (or tried to): report it, never raise past the claim
            logger.warning("approved tool %r failed: %r", tool, str(exc))
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(exc))], is_error=True)
        if isinstance(result, types.InputRequiredResult):
            text = "The tool asked for input, which an approved execution cannot provide."
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
        return result
