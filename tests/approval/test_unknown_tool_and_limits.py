"""What an approval-gated server answers when no policy question is asked or a limit is hit, over HTTP.

An unknown tool is answered the way the plain SDK server answers it, before policy runs; each
submission limit answers with its own text, naming that limit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from mcp_approval.checks.wire import envelope
from mcp_approval.protocol import META_AUTHORIZATION
from tests.approval.inprocess import inprocess_treasury
from tests.approval.support import http_wire
from tests.treasury.helpers import AUTHORIZATION, text_of

pytestmark = pytest.mark.anyio

WITHOUT_TASKS = envelope(tasks=False, elicitation=False)


async def plain_sdk_answer(tool: str) -> dict[str, Any]:
    """What an ``MCPServer`` with no extensions answers to ``tools/call`` of ``tool``."""
    plain: MCPServer[Any] = MCPServer("plain", log_level="WARNING")

    @plain.tool()
    def echo(text: str) -> str:
        return text

    async with http_wire(plain) as wire:
        return (await wire.call_tool(tool, {"to": "acct-x"})).result


@pytest.mark.parametrize("meta", [envelope(), WITHOUT_TASKS], ids=["tasks", "without-tasks"])
async def test_an_unknown_tool_is_answered_as_unknown_like_the_plain_sdk(tmp_path: Path, meta: dict[str, Any]) -> None:
    expected = await plain_sdk_answer("nope")
    async with inprocess_treasury(tmp_path, {"approval": {"without_tasks": "request"}}) as harness:
        answer = (await harness.alice.call_tool("nope", {"to": "acct-x"}, meta=meta)).result
        pending = await harness.reviewer("carol").pending()
    assert text_of(expected) == "Unknown tool: nope"
    assert answer["content"] == expected["content"]
    assert answer["isError"] is True
    assert "not authorized" not in text_of(answer)
    assert META_AUTHORIZATION not in answer.get("_meta", {})  # no denial envelope: policy never answered
    assert pending == []


async def test_a_known_tool_the_policy_denies_is_still_an_authorization_denial(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path) as harness:
        denied = (await harness.alice.call_tool("delete_account", {"account": "acct-x"}, meta=WITHOUT_TASKS)).result
    assert text_of(denied) == "You are not authorized to call delete_account. The call was not made."
    assert denied["_meta"][AUTHORIZATION]["remediation"] == "unavailable"


async def test_the_per_minute_limit_answer_names_the_per_minute_limit(tmp_path: Path) -> None:
    limits = {"approval": {"submissions_per_minute": 2, "max_pending_per_principal": 5}}
    async with inprocess_treasury(tmp_path, limits) as harness:
        answers = [
            (await harness.alice.call_tool("wire_transfer", {"to": f"acct-rate-{n}", "amount": 30_000})).result
            for n in range(3)
        ]
    assert [a.get("resultType") for a in answers[:2]] == ["task", "task"]
    limited = answers[2]
    assert limited["isError"] is True
    assert limited["_meta"][AUTHORIZATION]["remediation"] == "unavailable"
    assert "in the last minute (at most 2 a minute)" in text_of(limited)
    assert "Wait a minute" in text_of(limited)
    assert "pending requests" not in text_of(limited)


async def test_the_pending_limit_answer_names_the_pending_limit(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, {"approval": {"max_pending_per_principal": 1}}) as harness:
        await harness.alice.call_tool("wire_transfer", {"to": "acct-p1", "amount": 30_000})
        limited = (await harness.alice.call_tool("wire_transfer", {"to": "acct-p2", "amount": 30_000})).result
    assert limited["isError"] is True
    assert "waiting for a decision (at most 1 at a time)" in text_of(limited)
    assert "Wait for pending requests to be decided" in text_of(limited)
    assert "last minute" not in text_of(limited)


async def test_the_task_limit_answers_name_the_server_wide_or_the_callers_limit(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path / "own", {"tasks": {"max_per_principal": 1}}) as harness:
        await harness.alice.call_tool("wire_transfer", {"to": "acct-t1", "amount": 30_000})
        own = (await harness.alice.call_tool("wire_transfer", {"to": "acct-t2", "amount": 30_000})).result
    async with inprocess_treasury(tmp_path / "all", {"tasks": {"max_tasks": 1}}) as harness:
        await harness.alice.call_tool("wire_transfer", {"to": "acct-t3", "amount": 30_000})
        bob = harness.alice.as_principal("bob-token")
        server_wide = (await bob.call_tool("wire_transfer", {"to": "acct-t4", "amount": 30_000})).result
    assert own["isError"] is True
    assert "This caller has too many open tasks (at most 1)" in text_of(own)
    assert server_wide["isError"] is True
    assert "The server holds too many open tasks (at most 1)" in text_of(server_wide)
    for answer in (own, server_wide):
        assert "pending requests" not in text_of(answer)
