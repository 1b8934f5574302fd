"""The framework-neutral core (``ApprovalTools``) against a served treasury example, without a framework."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import mcp_types as types
import pytest

from mcp_approval.agents import (
    ApprovalServers,
    ApprovalTools,
    PendingCall,
    ServerNotGivenError,
    call_key_for,
    result_text,
)
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


async def test_a_pending_call_resumes_only_on_the_server_it_was_made_on(
    treasury: TreasuryServer, strict_treasury: TreasuryServer, tmp_path: Path
) -> None:
    # b gates a transfer of 5,000 that a allows at once; each client has a journal of its own.
    account = new_account("core-route")
    url_a, url_b = f"{treasury.base_url}/mcp", f"{strict_treasury.base_url}/mcp"
    async with mcp_client(url_b, tasks=True, auth="alice-token", call_journal=tmp_path / "b.sqlite3") as client:
        pending = await ApprovalTools(client, name="b", pending_wait_s=0.2).call(
            "wire_transfer", transfer(account, 5_000), call_key="test/run-6/c1"
        )
    assert isinstance(pending, PendingCall)
    assert pending.server == "b"
    async with mcp_client(url_a, tasks=True, auth="alice-token", call_journal=tmp_path / "a.sqlite3") as client:
        gate_a = ApprovalTools(client, name="a")
        with pytest.raises(ServerNotGivenError, match=f"server 'b': {pending.reference}.*nothing was sent"):
            await ApprovalServers(gate_a).decisions([pending], timeout_s=5)
        with pytest.raises(ClientUsageError, match="made on server 'b', not on 'a'; nothing was sent"):
            await gate_a.wait_for_decision(pending, timeout_s=5)
        misnamed = ApprovalTools(client, name="b")  # server a's client under b's name: its journal says no
        with pytest.raises(ClientUsageError, match="not in the call journal"):
            await misnamed.wait_for_decision(pending, timeout_s=5)
    # The same journal for both: it knows the call was made on b's URL.
    shared = tmp_path / "b.sqlite3"
    async with mcp_client(url_a, tasks=True, auth="alice-token", call_journal=shared) as client:
        with pytest.raises(ClientUsageError, match=f"was made on {url_b}, not on {url_a}"):
            await ApprovalTools(client, name="b").wait_for_decision(pending, timeout_s=5)
    assert transfers_to(treasury, account) == 0  # nothing reached a
    assert transfers_to(strict_treasury, account) == 0
    decide(strict_treasury, account, "approve")
    async with mcp_client(url_b, tasks=True, auth="alice-token", call_journal=tmp_path / "b.sqlite3") as client:
        result = await ApprovalServers.of({"b": ApprovalTools(client, name="b")}).wait_for_decision(pending)
    assert f"to {account} completed" in result_text(result)
    assert (transfers_to(treasury, account), transfers_to(strict_treasury, account)) == (0, 1)


async def test_several_servers_need_distinct_tool_names_and_share_one_status_tool(
    treasury: TreasuryServer, strict_treasury: TreasuryServer, tmp_path: Path
) -> None:
    account, journal = new_account("core-status"), tmp_path / "calls.sqlite3"
    async with (
        mcp_client(f"{treasury.base_url}/mcp", tasks=True, auth="alice-token", call_journal=journal) as a,
        mcp_client(f"{strict_treasury.base_url}/mcp", tasks=True, auth="alice-token", call_journal=journal) as b,
    ):
        with pytest.raises(ClientUsageError, match="both give the model a tool named 'wire_transfer'"):
            await ApprovalServers(ApprovalTools(a, name="a"), ApprovalTools(b, name="b")).tools()
        servers = ApprovalServers(ApprovalTools(a, name="a", prefix="a_"), ApprovalTools(b, name="b", prefix="b_"))
        names = [tool.name for tool in await servers.tools()]
        assert {"a_wire_transfer", "b_wire_transfer", "approval_status"} <= set(names)
        assert names.count("approval_status") == 1
        assert not any(name.endswith("_approval_status") for name in names)
        transfer_b, status = await servers.tool("b_wire_transfer"), await servers.tool("approval_status")
        assert transfer_b is not None
        assert status is not None
        pending = await transfer_b.call(transfer(account, 5_000), call_key="test/run-7/c1")
        assert isinstance(pending, PendingCall)
        assert pending.tool == "wire_transfer"  # the server's own name for it
        answer = await status.call({"reference": pending.reference}, call_key="test/run-7/c2")
        assert isinstance(answer, types.CallToolResult)
        assert answer.is_error is not True
        assert answer.structured_content is not None
        assert answer.structured_content["state"] == "pending"
        unknown = await status.call({"reference": "no-such-reference"}, call_key="test/run-7/c3")
        assert isinstance(unknown, types.CallToolResult)
        assert unknown.is_error is True
        assert "No call this agent made on its servers (a, b)" in result_text(unknown)
        decide(strict_treasury, account, "deny")


async def test_a_pending_wait_leaves_the_client_block_as_itself(treasury: TreasuryServer, tmp_path: Path) -> None:
    account, journal = new_account("core-group"), tmp_path / "calls.sqlite3"
    url = f"{treasury.base_url}/mcp"
    async with mcp_client(url, tasks=True, auth="alice-token", call_journal=journal) as client:
        pending = await ApprovalTools(client, pending_wait_s=0.2).call(
            "wire_transfer", transfer(account), call_key="test/run-8/c1"
        )
    assert isinstance(pending, PendingCall)
    with pytest.raises(TaskPendingError) as still:  # the error itself, not an ExceptionGroup around it
        async with mcp_client(url, tasks=True, auth="alice-token", call_journal=journal) as client:
            await ApprovalTools(client).wait_for_decision(pending, timeout_s=0.3)
    assert still.value.task_id == pending.reference
    decide(treasury, account, "deny")


def test_servers_are_named_once_and_a_resume_names_every_server_it_lacks() -> None:
    def gate(name: str | None, url: str = "http://127.0.0.1:9/mcp") -> ApprovalTools:
        return ApprovalTools(mcp_client(url, tasks=True), name=name)  # not connected: nothing is sent

    assert gate(None).name == "http://127.0.0.1:9/mcp"  # by default, the server's URL
    with pytest.raises(ClientUsageError, match="two servers are named 'a'"):
        ApprovalServers(gate("a"), gate("a", "http://127.0.0.1:10/mcp"))
    with pytest.raises(ClientUsageError, match=r"servers\['b'\] is the server named 'a'"):
        ApprovalServers.of({"b": gate("a")})
    servers = ApprovalServers.of([gate("a")])

    def waiting(server: str, reference: str) -> PendingCall:
        return PendingCall(f"test/run/{reference}", "wire_transfer", {}, reference, server=server)

    with pytest.raises(ServerNotGivenError) as refused:
        servers.check([waiting("a", "r1"), waiting("b", "r2"), waiting("c", "r3"), waiting("b", "r4")])
    assert refused.value.missing == {"b": ["r2", "r4"], "c": ["r3"]}
    assert "given: 'a'" in str(refused.value)
    servers.check([waiting("a", "r1"), waiting("", "r5")])  # unnamed (paused before names): the one server
    with pytest.raises(ServerNotGivenError, match=r"server '\(unnamed\)': r5"):
        ApprovalServers(gate("a"), gate("b", "http://127.0.0.1:10/mcp")).check([waiting("", "r5")])
