"""A ``call_key`` is bound to its server, tool and arguments: reused for another call, it is refused."""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_approval.client import (
    AgentClient,
    CallTarget,
    ClientUsageError,
    SQLiteCallJournal,
    default_call_journal_path,
    mcp_client,
)

pytestmark = pytest.mark.anyio


def ledger(name: str, ran: Counter[str]) -> MCPServer[Any]:
    """A server named ``name`` whose tools count each run in ``ran``."""
    server: MCPServer[Any] = MCPServer(name, log_level="WARNING")

    @server.tool()
    def transfer(to: str, amount: int) -> str:
        ran[f"{name}/transfer"] += 1
        return f"sent {amount} to {to}"

    @server.tool()
    def refund(to: str, amount: int) -> str:
        ran[f"{name}/refund"] += 1
        return f"refunded {amount} to {to}"

    return server


def text(result: types.CallToolResult) -> str:
    return " ".join(item.text for item in result.content if isinstance(item, types.TextContent))


async def test_the_journal_records_the_server_tool_and_arguments_digest_with_the_key(tmp_path: Path) -> None:
    journal = SQLiteCallJournal(tmp_path / "calls.sqlite3")
    ran: Counter[str] = Counter()
    async with mcp_client(ledger("bank-a", ran), call_journal=journal) as client:
        await client.call_tool("transfer", {"to": "acme", "amount": 5}, call_key="k")
    record = await journal.get("k")
    assert record is not None
    assert record.server == "in-process:bank-a"
    assert record.tool_name == "transfer"
    # the digest of the canonical arguments: the same in any key order
    assert record.arguments_digest == CallTarget.of("x", "transfer", {"amount": 5, "to": "acme"}).arguments_digest


@pytest.mark.parametrize(
    ("server", "tool", "arguments", "words"),
    [
        ("bank-a", "refund", {"to": "acme", "amount": 5}, "tool 'transfer', not 'refund'"),
        ("bank-a", "transfer", {"to": "acme", "amount": 6}, r"\(other arguments\)"),
        ("bank-b", "transfer", {"to": "acme", "amount": 5}, "server 'in-process:bank-a', not 'in-process:bank-b'"),
    ],
    ids=["another-tool", "other-arguments", "another-server"],
)
async def test_a_key_reused_for_another_call_is_refused_and_nothing_is_sent(
    tmp_path: Path, server: str, tool: str, arguments: dict[str, Any], words: str
) -> None:
    journal = SQLiteCallJournal(tmp_path / "calls.sqlite3")
    ran: Counter[str] = Counter()
    servers = {name: ledger(name, ran) for name in ("bank-a", "bank-b")}
    async with mcp_client(servers["bank-a"], call_journal=journal) as client:
        first = await client.call_tool("transfer", {"to": "acme", "amount": 5}, call_key="k")
    async with mcp_client(servers[server], call_journal=journal) as client:
        with pytest.raises(ClientUsageError, match=words) as refused:
            await client.call_tool(tool, arguments, call_key="k")
        runs_after_refusal = Counter(ran)
        again = await client.call_tool(tool, arguments, call_key="k2")  # a new key is a new call
    assert "nothing was sent" in str(refused.value)
    assert text(first) == "sent 5 to acme"
    assert runs_after_refusal == Counter({"bank-a/transfer": 1})  # only the first call ran
    assert not again.is_error
    record = await journal.get("k")
    assert record is not None
    assert record.outcome is not None
    assert types.CallToolResult.model_validate(record.outcome.result) == first  # the first call's record is kept


async def test_the_same_call_with_its_key_returns_the_recorded_result_without_running_again(tmp_path: Path) -> None:
    journal = SQLiteCallJournal(tmp_path / "calls.sqlite3")
    ran: Counter[str] = Counter()
    async with mcp_client(ledger("bank-a", ran), call_journal=journal) as client:
        first = await client.call_tool("transfer", {"to": "acme", "amount": 5}, call_key="k")
        again = await client.call_tool("transfer", {"amount": 5, "to": "acme"}, call_key="k")
    assert again == first
    assert ran == Counter({"bank-a/transfer": 1})


async def test_urls_bind_keys_without_their_credentials(tmp_path: Path) -> None:
    journal = SQLiteCallJournal(tmp_path / "calls.sqlite3")
    await journal.begin("k", CallTarget.of("http://127.0.0.1:1/mcp", "transfer", {}))
    other = mcp_client("http://user:secret@127.0.0.1:2/mcp", call_journal=journal)
    assert other.server_id == "http://127.0.0.1:2/mcp"
    with pytest.raises(
        ClientUsageError, match=re.escape("server 'http://127.0.0.1:1/mcp', not 'http://127.0.0.1:2/mcp'")
    ):
        await other.call_tool("transfer", {}, call_key="k")  # refused before any connection is needed
    assert other.http_client is not None
    await other.http_client.aclose()


async def test_a_keyed_call_through_a_transport_object_needs_a_server_id(tmp_path: Path) -> None:
    from mcp.client.streamable_http import streamable_http_client

    client = AgentClient(streamable_http_client("http://127.0.0.1:1/mcp"), call_journal=tmp_path / "c.sqlite3")
    with pytest.raises(ClientUsageError, match="needs server_id="):
        await client.call_tool("transfer", {}, call_key="k")


async def test_a_journal_written_before_keys_were_bound_is_upgraded_and_matched_on_the_tool(tmp_path: Path) -> None:
    path = tmp_path / "calls.sqlite3"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE calls (call_key TEXT PRIMARY KEY, tool_name TEXT NOT NULL,"
        " task_id TEXT, outcome TEXT, started_at REAL NOT NULL)"
    )
    outcome = '{"kind": "result", "task_id": null, "result": {"content": [], "isError": false}, "error": null}'
    old.execute("INSERT INTO calls VALUES ('old', 'transfer', NULL, ?, 0)", (outcome,))
    old.commit()
    old.close()
    journal = SQLiteCallJournal(path)
    ran: Counter[str] = Counter()
    async with mcp_client(ledger("bank-a", ran), call_journal=journal) as client:
        replayed = await client.call_tool("transfer", {"to": "acme", "amount": 5}, call_key="old")
        with pytest.raises(ClientUsageError, match="tool 'transfer', not 'refund'"):
            await client.call_tool("refund", {"to": "acme", "amount": 5}, call_key="old")
    assert replayed.content == []
    assert ran == Counter()


async def test_the_default_journal_is_in_the_users_data_directory_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_home, working = tmp_path / "data", tmp_path / "work"
    working.mkdir()
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))  # where platformdirs puts user data on Linux
    monkeypatch.chdir(working)
    ran: Counter[str] = Counter()
    async with mcp_client(ledger("bank-a", ran)) as client:
        await client.call_tool("transfer", {"to": "acme", "amount": 5}, call_key="k")
    expected = data_home / "mcp-approval" / "mcp-calls.sqlite3"
    assert default_call_journal_path() == expected
    assert list(working.iterdir()) == []
    record = await SQLiteCallJournal(expected).get("k")
    assert record is not None
    assert record.outcome is not None
    assert expected.parent.stat().st_mode & 0o077 == 0  # the journal's directory is the user's alone
