"""A real ``mcp`` SDK client that knows only the tasks extension, against the treasury server.

The client has no approval-specific code: it declares ``io.modelcontextprotocol/tasks`` through
:class:`TasksClient`, sees an approval-gated call as an ordinary task, and reads the outcome of
the approval from the resolved ``CallToolResult`` alone (SEP-2848 on SEP-2663). Both modes
(``local``, and ``arap`` with reviewers on the arap-server) resolve to the same results.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_approval.client import TaskPendingError, TasksClient
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer
from tests.treasury.conftest import Scenario
from tests.treasury.helpers import DISPOSITION, approval_for

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def treasury(scenario: Scenario) -> TreasuryServer:
    """The scenario's ``serve`` process (local or ARAP mode)."""
    return scenario.server


@asynccontextmanager
async def tasks_only_client(treasury: TreasuryServer, tasks: TasksClient) -> AsyncIterator[Client]:
    """An SDK client over streamable HTTP as alice, with the tasks extension and nothing else."""
    async with httpx2.AsyncClient(
        base_url=treasury.base_url, headers={"Authorization": "Bearer alice-token"}, timeout=scaled(20)
    ) as http:
        transport = streamable_http_client(f"{treasury.base_url}/mcp", http_client=http)
        async with Client(transport, extensions=[tasks]) as client:
            yield client


def text_of(result: types.CallToolResult) -> str:
    return " ".join(item.text for item in result.content if isinstance(item, types.TextContent))


async def pending_transfer(client: Client, tasks: TasksClient, account: str) -> str:
    """Call ``wire_transfer`` above the threshold; the call raises once ``task_wait_s`` passes."""
    tasks.task_wait_s = 0.2
    with pytest.raises(TaskPendingError) as pending:
        await client.call_tool("wire_transfer", {"to": account, "amount": 30_000})
    return pending.value.task_id


async def decide(scenario: Scenario, account: str, decision: str) -> None:
    async with httpx.AsyncClient(base_url=scenario.reviewer_url, timeout=scaled(20)) as http:
        carol = Reviewer(http, "carol-token")
        approval = await approval_for(carol, "wire_transfer", to=account)
        decided = await carol.decide(approval["id"], decision)
        assert decided.status_code == 200, decided.text


def transfers_to(treasury: TreasuryServer, account: str) -> int:
    return len([entry for entry in treasury.ledger() if entry.get("to") == account])


@pytest.mark.sep_check("sep-2848-client-carries-task-id-only")
async def test_an_approved_call_resolves_to_the_tools_result(treasury: TreasuryServer, scenario: Scenario) -> None:
    tasks = TasksClient(default_poll_interval_s=0.05)
    async with tasks_only_client(treasury, tasks) as client:
        task_id = await pending_transfer(client, tasks, "acct-sdk-approved")
        assert transfers_to(treasury, "acct-sdk-approved") == 0
        await decide(scenario, "acct-sdk-approved", "approve")
        tasks.task_wait_s = 20
        result = await tasks.resume(client.session, task_id)
    assert result.is_error is False
    assert "ran once" in text_of(result)
    assert "acct-sdk-approved" in text_of(result)
    assert result.meta is not None
    assert result.meta[DISPOSITION] == "approved-executed"
    assert transfers_to(treasury, "acct-sdk-approved") == 1


@pytest.mark.sep_check("sep-2848-client-carries-task-id-only")
async def test_a_denied_call_resolves_to_an_error_result_saying_the_tool_did_not_run(
    treasury: TreasuryServer, scenario: Scenario
) -> None:
    tasks = TasksClient(default_poll_interval_s=0.05)
    async with tasks_only_client(treasury, tasks) as client:
        task_id = await pending_transfer(client, tasks, "acct-sdk-denied")
        await decide(scenario, "acct-sdk-denied", "deny")
        tasks.task_wait_s = 20
        result = await tasks.resume(client.session, task_id)
    assert result.is_error is True
    assert "did not run" in text_of(result)
    assert result.meta is not None
    assert result.meta[DISPOSITION] == "denied-not-executed"
    assert transfers_to(treasury, "acct-sdk-denied") == 0
