"""The framework-neutral core (``ApprovalTools``) against a served treasury example, without a framework."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import mcp_types as types
import pytest

from mcp_approval.agents import ApprovalTools, PendingCall, call_key_for, result_text
from mcp_approval.client import ClientUsageError, TaskPendingError, mcp_client
from tests.agents.contract import decide, new_account, transfers_to
from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer, deployment_dir

pytestmark = pytest.mark.anyio


def transfer(account: str, amount: int = 30_000) -> dict[str, object]:
    return {"to": account, "amount": amount}


async def test_a_gated_call_is_pending_then_resolves_once_in_a_new_client(
    treasury: TreasuryServer, tmp_path: Path
) -> None:
    account, journal = new_account("core"), tmp_path / "calls.sqlite3"
    key = call_key_for("test", "run-1", "call-1")
    async with mcp_client(f"{treasury.base_url}/mcp", tasks=True, auth="alice-token", call_journal=journal) as client:
        gate = ApprovalTools(client, pending_wait_s=0.2)
        assert "wire_transfer" in {tool.name for tool in await gate.tools()}
        pending = await gate.call("wire_transfer", transfer(account), call_key=key)
        assert isinstance(pending, PendingCall)
        with pytest.raises(TaskPendingError):
            await gate.wait_for_decision(pending, timeout_s=0.2)
    assert pending.call_key == key
    assert pending.deadline is not None
    assert pending.reference in pending.text()
    assert PendingCall.from_dict(pending.as_dict()) == pending
    assert transfers_to(treasury, account) == 0
    decide(treasury, account, "approve")
    async with mcp_client(f"{treasury.base_url}/mcp", tasks=True, auth="alice-token", call_journal=journal) as client:
        gate = ApprovalTools(client)
        result = await gate.wait_for_decision(PendingCall.from_dict(pending.as_dict()), timeout_s=scaled(30))
        again = await gate.wait_for_decision(pending, timeout_s=scaled(30))  # the recorded outcome: nothing is called
    assert result.is_error is not True
    assert f"to {account} completed" in result_text(result)
    assert again == result
    assert transfers_to(treasury, account) == 1


async def test_a_first_call_stays_brief_while_another_waits_for_its_decision_on_the_same_client(
    treasury: TreasuryServer, tmp_path: Path
) -> None:
    first, second = new_account("core-wait"), new_account("core-brief")
    async with mcp_client(
        f"{treasury.base_url}/mcp", tasks=True, auth="alice-token", call_journal=tmp_path / "calls.sqlite3"
    ) as client:
        gate = ApprovalTools(client, pending_wait_s=0.2)
        waiting = await gate.call("wire_transfer", transfer(first), call_key="test/run-4/c1")
        assert isinstance(waiting, PendingCall)
        # The brief call starts first, the long wait right after it, before the brief one reaches its task.
        started = time.monotonic()
        briefly = asyncio.create_task(gate.call("wire_transfer", transfer(second), call_key="test/run-4/c2"))
        decision = asyncio.create_task(gate.wait_for_decision(waiting, timeout_s=scaled(60)))
        brief = await briefly
        took = time.monotonic() - started
        assert isinstance(brief, PendingCall)
        assert not decision.done()
        decide(treasury, first, "approve")
        result = await decision
    assert took < 30, f"the brief call waited {took:.1f} s, as long as the other call's wait"
    assert f"to {first} completed" in result_text(result)
    assert transfers_to(treasury, second) == 0


async def test_a_denied_call_answers_that_it_did_not_run(treasury: TreasuryServer, tmp_path: Path) -> None:
    account = new_account("core-deny")
    key = call_key_for("test", "run-2", "call-1")
    async with mcp_client(
        f"{treasury.base_url}/mcp", tasks=True, auth="alice-token", call_journal=tmp_path / "calls.sqlite3"
    ) as client:
        gate = ApprovalTools(client, pending_wait_s=0.2)
        pending = await gate.call("wire_transfer", transfer(account), call_key=key)
        assert isinstance(pending, PendingCall)
        decide(treasury, account, "deny")
        result = await gate.wait_for_decision(pending, timeout_s=scaled(30))
    assert result.is_error is True
    assert "did not run" in result_text(result)
    assert transfers_to(treasury, account) == 0


async def test_an_expired_request_answers_that_it_did_not_run(tmp_path: Path) -> None:
    # Requests expire two seconds (scaled: a busy machine must see it pending first) after they open;
    # no one decides this one.
    server = TreasuryServer(deployment_dir(tmp_path, {"approval": {"max_pending_s": scaled(2.0)}})).start()
    try:
        account = new_account("core-expire")
        async with mcp_client(
            f"{server.base_url}/mcp", tasks=True, auth="alice-token", call_journal=tmp_path / "calls.sqlite3"
        ) as client:
            gate = ApprovalTools(client, pending_wait_s=0.2)
            pending = await gate.call("wire_transfer", transfer(account), call_key="test/run-5/c1")
            assert isinstance(pending, PendingCall)
            assert pending.deadline is not None
            result = await gate.wait_for_decision(pending, timeout_s=scaled(60))
        assert result.is_error is True
        assert "expired" in result_text(result)
        assert "did not run" in result_text(result)
        assert transfers_to(server, account) == 0
    finally:
        server.kill()


async def test_a_call_that_needs_no_approval_answers_its_result(treasury: TreasuryServer, tmp_path: Path) -> None:
    account = new_account("core-small")
    async with mcp_client(
        f"{treasury.base_url}/mcp", tasks=True, auth="alice-token", call_journal=tmp_path / "calls.sqlite3"
    ) as client:
        outcome = await ApprovalTools(client).call("wire_transfer", transfer(account, 100), call_key="test/run-3/c1")
    assert isinstance(outcome, types.CallToolResult)
    assert f"to {account} completed" in result_text(outcome)
    assert transfers_to(treasury, account) == 1


async def test_the_key_needs_both_ids_and_the_client_tasks(treasury: TreasuryServer) -> None:
    with pytest.raises(ClientUsageError, match="run id and tool-call id"):
        call_key_for("test", "", "call-1")
    async with mcp_client(f"{treasury.base_url}/mcp", auth="alice-token") as client:
        with pytest.raises(ClientUsageError, match="tasks=True"):
            ApprovalTools(client)
