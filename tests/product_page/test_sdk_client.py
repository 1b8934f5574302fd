"""A real ``mcp`` SDK client against a deployment with ``approval_url``.

With an elicitation callback the client declares URL elicitation, so the approval task asks it
to show the reviewers' page; ``TasksClient`` answers through the callback and keeps polling. A
client without one declares no elicitation and sees the plain task it always saw.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_approval.client import TaskPendingError, TasksClient
from tests.product_page.conftest import approval_link
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer
from tests.treasury.helpers import DISPOSITION, approval_for

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def alice_client(server: TreasuryServer, tasks: TasksClient, **client_options: Any) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(
        base_url=server.base_url, headers={"Authorization": "Bearer alice-token"}, timeout=scaled(20)
    ) as http:
        transport = streamable_http_client(f"{server.base_url}/mcp", http_client=http)
        async with Client(transport, extensions=[tasks], **client_options) as client:
            yield client


async def pending_transfer(client: Client, tasks: TasksClient, account: str) -> str:
    tasks.task_wait_s = 0.5
    with pytest.raises(TaskPendingError) as pending:
        await client.call_tool("wire_transfer", {"to": account, "amount": 30_000})
    return pending.value.task_id


async def reviewer_approves(server: TreasuryServer, account: str) -> str:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
        carol = Reviewer(http, "carol-token")
        approval = await approval_for(carol, "wire_transfer", to=account)
        assert (await carol.decide(approval["id"], "approve")).status_code == 200
        return str(approval["id"])


def transfers_to(server: TreasuryServer, account: str) -> int:
    return len([entry for entry in server.ledger() if entry.get("to") == account])


async def test_the_elicitation_callback_is_shown_the_page_and_the_call_completes(linked: TreasuryServer) -> None:
    shown: list[types.ElicitRequestFormParams | types.ElicitRequestURLParams] = []

    async def show(_context: Any, params: types.ElicitRequestFormParams | types.ElicitRequestURLParams) -> Any:
        shown.append(params)
        return types.ElicitResult(action="accept")

    tasks = TasksClient(default_poll_interval_s=0.05)
    async with alice_client(linked, tasks, elicitation_callback=show) as client:
        task_id = await pending_transfer(client, tasks, "acct-sdk-link")
        status = (await tasks.get(client.session, task_id)).status
        approval_id = await reviewer_approves(linked, "acct-sdk-link")
        tasks.task_wait_s = 20
        result = await tasks.resume(client.session, task_id)
    (params,) = shown  # asked once; the answered key is never asked again
    assert isinstance(params, types.ElicitRequestURLParams)
    assert params.url == approval_link(approval_id)
    assert status == "working"  # the answer moved it back; it waited for the reviewer
    assert result.is_error is False
    assert result.meta is not None
    assert result.meta[DISPOSITION] == "approved-executed"
    assert transfers_to(linked, "acct-sdk-link") == 1


async def test_a_client_without_elicitation_sees_the_plain_task(linked: TreasuryServer) -> None:
    tasks = TasksClient(default_poll_interval_s=0.05)
    async with alice_client(linked, tasks) as client:
        task_id = await pending_transfer(client, tasks, "acct-sdk-plain")
        task = await tasks.get(client.session, task_id)
        await reviewer_approves(linked, "acct-sdk-plain")
        tasks.task_wait_s = 20
        result = await tasks.resume(client.session, task_id)
    assert task.status == "working"
    assert not task.input_requests
    assert result.meta is not None
    assert result.meta[DISPOSITION] == "approved-executed"
