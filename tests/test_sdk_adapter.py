"""The MCP SDK's private attributes, read in ``mcp_approval._sdk`` alone, still answer what it says.

The first test names the SDK versions the adapter was checked against and fails on any other, so an
SDK upgrade makes someone read the SDK's source again: its ``MCPServer`` may have moved the private
attributes, or gained public API that makes a function of the adapter unnecessary.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer

from mcp_approval._sdk import CHECKED_SDK_VERSIONS, add_request_handler, registered_tool

SOURCE = Path(__file__).resolve().parents[1] / "src" / "mcp_approval"
PRIVATE = ("_tool_manager", "_lowlevel_server")

pytestmark = pytest.mark.anyio


def _release(version: str) -> tuple[int, ...]:
    """``2.3.1`` -> ``(2, 3, 1)``; a pre-release counts as its release (``2.4.0rc1`` is not below 2.4)."""
    return tuple(int(number) for number in re.findall(r"\d+", version.split("+")[0])[:3])


def test_the_installed_sdk_is_one_the_adapter_was_checked_against() -> None:
    installed = importlib.metadata.version("mcp")
    lowest, below = CHECKED_SDK_VERSIONS
    checked = f">={'.'.join(map(str, lowest))},<{'.'.join(map(str, below))}"
    assert lowest <= _release(installed) < below, (
        f"mcp {installed} is installed; mcp_approval/_sdk.py was checked against mcp{checked}. Read the new "
        "SDK's MCPServer (_tool_manager, _lowlevel_server): keep or fix each function of _sdk.py, drop those "
        "the SDK now has public API for, then widen CHECKED_SDK_VERSIONS and pyproject.toml's pin"
    )


def test_registered_tool_finds_what_the_server_registered_and_nothing_else() -> None:
    server: MCPServer[Any] = MCPServer("adapter")

    @server.tool()
    def pay(to: str, amount: int) -> str:
        """Send money."""
        return f"{amount} to {to}"

    tool = registered_tool(server, "pay")
    assert tool is not None
    assert (tool.name, tool.description, sorted(tool.parameters["properties"])) == (
        "pay",
        "Send money.",
        ["amount", "to"],
    )
    assert registered_tool(server, "refund") is None
    server.remove_tool("pay")
    assert registered_tool(server, "pay") is None


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")  # a 2025-era method, as the fixtures serve it
async def test_an_added_request_handler_answers_its_method() -> None:
    server: MCPServer[Any] = MCPServer("adapter")
    subscribed: list[str] = []

    async def subscribe(ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        subscribed.append(str(params.uri))
        return types.EmptyResult()

    add_request_handler(server, "resources/subscribe", types.SubscribeRequestParams, subscribe)
    async with Client(server, mode="legacy") as client:  # resources/subscribe is a 2025-era method
        await client.subscribe_resource("test://watched")
    assert subscribed == ["test://watched"]


def test_no_other_module_reads_the_sdk_s_private_attributes() -> None:
    readers = sorted(
        f"{path.relative_to(SOURCE)}:{node.lineno} {node.attr}"
        for path in SOURCE.rglob("*.py")
        if path.name != "_sdk.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE
    )
    assert readers == []
