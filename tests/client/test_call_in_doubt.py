"""``CallInDoubtError`` says what is known of a keyed call with nothing on record: never a crash that did not happen."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from mcp_approval.client import CallInDoubtError, CallTarget, SQLiteCallJournal, mcp_client

pytestmark = pytest.mark.anyio


class Gate:
    """A tool that waits until released, so a test knows when a call is in flight."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.release = anyio.Event()


def held_server(gate: Gate, ran: Counter[str]) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("held", log_level="WARNING")

    @server.tool()
    async def transfer(to: str) -> str:
        ran["transfer"] += 1
        gate.started.set()
        await gate.release.wait()
        return f"sent to {to}"

    return server


async def test_a_call_still_in_flight_in_this_client_is_said_to_be_in_flight(tmp_path: Path) -> None:
    gate, ran = Gate(), Counter[str]()
    journal = SQLiteCallJournal(tmp_path / "calls.sqlite3")
    async with mcp_client(held_server(gate, ran), call_journal=journal) as client, anyio.create_task_group() as group:
        group.start_soon(lambda: client.call_tool("transfer", {"to": "acme"}, call_key="k"))
        await gate.started.wait()  # the keyed call is now running on the server
        with pytest.raises(CallInDoubtError) as doubt:
            await client.call_tool("transfer", {"to": "acme"}, call_key="k")
        gate.release.set()
    assert "still in flight in this client" in str(doubt.value)
    assert "crash" not in str(doubt.value)
    assert ran == Counter({"transfer": 1})  # never the repeat


async def test_a_call_that_timed_out_here_is_kept_in_doubt_and_says_so(tmp_path: Path) -> None:
    gate, ran = Gate(), Counter[str]()
    journal = SQLiteCallJournal(tmp_path / "calls.sqlite3")
    async with mcp_client(held_server(gate, ran), call_journal=journal) as client:
        with pytest.raises(MCPError):
            await client.call_tool("transfer", {"to": "acme"}, read_timeout_seconds=0.2, call_key="k")
        gate.release.set()  # the server ran it after all: a repeat must not send it again
        with pytest.raises(CallInDoubtError) as doubt:
            await client.call_tool("transfer", {"to": "acme"}, call_key="k")
    assert "failed in this client before its answer came back" in doubt.value.reason
    assert "timed out" in doubt.value.reason.lower()
    assert "crash" not in str(doubt.value)
    assert ran == Counter({"transfer": 1})


async def test_a_call_another_client_left_without_an_answer_names_when_it_was_sent(tmp_path: Path) -> None:
    journal = SQLiteCallJournal(tmp_path / "calls.sqlite3")
    gate, ran = Gate(), Counter[str]()
    await journal.begin("k", CallTarget.of("in-process:held", "transfer", {"to": "acme"}))
    async with mcp_client(held_server(gate, ran), call_journal=journal) as client:
        with pytest.raises(CallInDoubtError) as doubt:
            await client.call_tool("transfer", {"to": "acme"}, call_key="k")
    assert "was sent at 20" in doubt.value.reason
    assert "by another or an earlier client, which recorded nothing after" in doubt.value.reason
    assert "crash" not in str(doubt.value)
    assert ran == Counter()
