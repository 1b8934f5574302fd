"""A tool's fingerprint and schemas are listed once per definition, and follow every change to it."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_approval._sdk import registered_tool
from mcp_approval.approval.tools import ServerTools

pytestmark = pytest.mark.anyio


def treasury() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("fingerprints")

    @server.tool()
    def wire_transfer(to: str, amount: float) -> str:
        """Send money."""
        return f"sent {amount} to {to}"

    @server.tool()
    def ledger() -> str:
        """Read the ledger."""
        return "[]"

    return server


class CountedListing:
    """Counts the server's ``list_tools`` calls (the listing itself is the SDK's)."""

    def __init__(self, server: MCPServer[Any]) -> None:
        self.calls = 0
        listing = server.list_tools

        async def counted() -> list[types.Tool]:
            self.calls += 1
            return await listing()

        server.list_tools = counted  # type: ignore[method-assign]


async def test_the_listing_is_made_once_per_definition() -> None:
    server = treasury()
    counted = CountedListing(server)
    tools = ServerTools(server)
    first = await tools.fingerprint("wire_transfer")
    for _ in range(5):
        assert await tools.fingerprint("wire_transfer") == first
        assert (await tools.input_schema("wire_transfer") or {})["required"] == ["to", "amount"]
        assert await tools.output_schema("wire_transfer") is not None
    assert counted.calls == 1
    assert first == await ServerTools(server).fingerprint("wire_transfer")  # what a fresh process computes


async def test_a_changed_description_changes_the_fingerprint() -> None:
    server = treasury()
    tools = ServerTools(server)
    before = await tools.fingerprint("wire_transfer")
    registered = registered_tool(server, "wire_transfer")
    assert registered is not None
    registered.description = "Send money, now with a fee."
    changed = await tools.fingerprint("wire_transfer")
    assert changed != before
    assert changed == await ServerTools(server).fingerprint("wire_transfer")


async def test_a_schema_changed_in_place_changes_the_fingerprint_and_the_schema() -> None:
    server = treasury()
    tools = ServerTools(server)
    before = await tools.fingerprint("wire_transfer")
    registered = registered_tool(server, "wire_transfer")
    assert registered is not None
    registered.parameters["properties"]["amount"]["maximum"] = 1_000_000
    assert await tools.fingerprint("wire_transfer") != before
    schema = await tools.input_schema("wire_transfer")
    assert schema is not None
    assert schema["properties"]["amount"]["maximum"] == 1_000_000


async def test_a_tool_removed_or_replaced_at_run_time_is_listed_anew() -> None:
    server = treasury()
    tools = ServerTools(server)
    original = await tools.fingerprint("wire_transfer")
    server.remove_tool("wire_transfer")
    assert await tools.fingerprint("wire_transfer") is None
    assert await tools.input_schema("wire_transfer") is None

    @server.tool(name="wire_transfer")
    def wire_transfer_v2(to: str, amount: float, memo: str = "") -> str:
        """Send money."""
        return f"sent {amount} to {to}"

    replaced = await tools.fingerprint("wire_transfer")
    assert replaced not in (None, original)
    assert "memo" in ((await tools.input_schema("wire_transfer")) or {})["properties"]
    assert await tools.fingerprint("ledger") == await ServerTools(server).fingerprint("ledger")


async def test_a_server_that_lists_its_own_way_is_listed_on_every_use() -> None:
    class Renaming(MCPServer[Any]):
        description = "Send money."

        async def list_tools(self) -> list[types.Tool]:
            listed = await super().list_tools()
            return [tool.model_copy(update={"description": self.description}) for tool in listed]

    server = Renaming("renaming")

    @server.tool()
    def wire_transfer(to: str, amount: float) -> str:
        """Registered text, which the listing replaces."""
        return f"sent {amount} to {to}"

    tools = ServerTools(server)
    before = await tools.fingerprint("wire_transfer")
    server.description = "Send money, listed differently."
    assert await tools.fingerprint("wire_transfer") != before
