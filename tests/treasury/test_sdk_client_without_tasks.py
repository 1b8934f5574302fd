"""The Python SDK's own ``Client`` (no ``TasksClient``) against ``serve`` with ``without_tasks = "request"``.

A client no one here wrote, over real streamable HTTP: its approval-gated call opens a request;
calling again before a decision changes nothing; once approved the identical call answers the
result of the one execution; once denied, ``denied-not-executed``. The ledger (the tool's durable
side effect) is counted at every step.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_approval.client import read_disposition
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir
from tests.treasury.helpers import approval_for

pytestmark = pytest.mark.anyio

AUTHORIZATION = "io.modelcontextprotocol/authorization"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    """The treasury example as shipped (its default is ``without_tasks = "request"``)."""
    started = TreasuryServer(deployment_dir(tmp_path_factory.mktemp("sdk-no-tasks"))).start()
    try:
        yield started
    finally:
        started.kill()


@asynccontextmanager
async def sdk_client(server: TreasuryServer) -> AsyncIterator[Client]:
    """The SDK ``Client`` as alice, declaring no extension."""
    headers = {"authorization": "Bearer alice-token"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=scaled(30)) as http,
        Client(streamable_http_client(f"{server.base_url}/mcp", http_client=http)) as client,
    ):
        yield client


def text(result: Any) -> str:
    return " ".join(getattr(item, "text", "") for item in result.content)


def reference(result: Any) -> str:
    found = re.search(r"reference (\S+)\)", text(result))
    assert found is not None, text(result)
    return found.group(1)


def assert_pending(result: Any) -> None:
    assert result.is_error is True
    assert (result.meta or {})[AUTHORIZATION]["remediation"] == "undisclosed"
    assert read_disposition(result) is None
    assert "did not run" in text(result)
    assert text(result).startswith("Stop and tell the user:")  # what a model reads first
    # wire_transfer declares an outputSchema: no structuredContent that would fail a client's check of it.
    assert result.structured_content is None
    assert f"approval_status with reference {reference(result)}" in text(result)


def entries(server: TreasuryServer, account: str) -> int:
    return sum(1 for entry in server.ledger() if entry.get("to") == account)


async def outcome(client: Client, arguments: dict[str, Any]) -> Any:
    """Call again until the answer carries a disposition (each earlier answer is the pending one)."""
    return await eventually(
        lambda: client.call_tool("wire_transfer", arguments), lambda result: read_disposition(result) is not None
    )


@pytest.mark.parametrize("decision", ["approve", "deny"])
@pytest.mark.sep_check("sep-2848-client-maturity-ordinary-tools", "sep-2643-undisclosed-remedy-in-content")
async def test_the_sdk_client_without_tasks_is_approved_or_denied_exactly_once(
    server: TreasuryServer, decision: str
) -> None:
    account = f"acct-sdk-{decision}"
    arguments = {"to": account, "amount": 30_000}
    async with sdk_client(server) as client, httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
        first = await client.call_tool("wire_transfer", arguments)
        assert_pending(first)
        again = await client.call_tool("wire_transfer", arguments)
        assert_pending(again)
        assert reference(again) == reference(first)  # no second request
        assert entries(server, account) == 0  # none while pending
        carol = Reviewer(http, "carol-token")
        approval = await approval_for(carol, "wire_transfer", to=account)
        assert (await carol.decide(approval["id"], decision)).status_code == 200
        result = await outcome(client, arguments)
        if decision == "approve":
            assert read_disposition(result).value == "approved-executed"  # type: ignore[union-attr]
            assert result.is_error is False
            statement = text(result).split("completed. ")[-1]
            assert statement == result.structured_content["toolApproval"]["text"]  # passed the SDK's schema check
            assert entries(server, account) == 1  # one after approval
        else:
            assert read_disposition(result).value == "denied-not-executed"  # type: ignore[union-attr]
            assert "did not run" in text(result)
            assert entries(server, account) == 0  # zero after denial
        spent = await client.call_tool("wire_transfer", arguments)  # a second retry: a new request
        assert_pending(spent)
        assert reference(spent) != reference(first)
        assert entries(server, account) == (1 if decision == "approve" else 0)


async def test_an_unknown_tool_gets_the_plain_sdk_answer_not_a_denial(server: TreasuryServer) -> None:
    async with sdk_client(server) as client:
        result = await client.call_tool("nope", {"to": "acct-x", "amount": 30_000})
    assert result.is_error is True
    assert text(result) == "Unknown tool: nope"  # what an MCPServer without the gate answers
    assert AUTHORIZATION not in (result.meta or {})
