"""The SDK's own ``Client`` with an elicitation callback against ``serve`` with ``requester_url``.

The client declares URL elicitation (its callback) but not tasks, on 2026-07-28, over real
streamable HTTP. Its elicitation callback is shown the requester page once per call; whether it
accepts or declines, the retry the SDK sends with the round's ``requestState`` is answered with
the pending answer, never with the same elicitation again (the SDK gives up after 10 such rounds).
After a reviewer approves, calling again returns the result of the one execution.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_approval.client import read_disposition
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir
from tests.treasury.helpers import AUTHORIZATION, approval_for

pytestmark = pytest.mark.anyio

URL_MODE = {"approval": {"without_tasks": "request", "requester_url": "http://127.0.0.1:9/requests/{request_token}"}}


@asynccontextmanager
async def url_client(server: TreasuryServer, action: str, shown: list[str]) -> AsyncIterator[Client]:
    """The SDK ``Client`` as alice, whose elicitation callback answers every page with ``action``."""

    async def elicit(_context: Any, params: types.ElicitRequestFormParams | types.ElicitRequestURLParams) -> Any:
        shown.append(getattr(params, "url", ""))
        return types.ElicitResult(action=action)  # type: ignore[arg-type]

    headers = {"authorization": "Bearer alice-token"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=scaled(30)) as http,
        Client(
            streamable_http_client(f"{server.base_url}/mcp", http_client=http), elicitation_callback=elicit
        ) as client,
    ):
        yield client


def text(result: Any) -> str:
    return " ".join(getattr(item, "text", "") for item in result.content)


def reference(result: Any) -> str:
    found = re.search(r"reference (\S+)\)", text(result))
    assert found is not None, text(result)
    return found.group(1)


def entries(server: TreasuryServer, account: str) -> int:
    return sum(1 for entry in server.ledger() if entry.get("to") == account)


@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_the_sdk_client_gets_the_pending_answer_after_the_page_then_the_result(
    tmp_path: Path, action: str
) -> None:
    server = TreasuryServer(deployment_dir(tmp_path, URL_MODE)).start()
    account = f"acct-sdk-url-{action}"
    arguments = {"to": account, "amount": 30_000}
    shown: list[str] = []
    try:
        async with (
            url_client(server, action, shown) as client,
            httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http,
        ):
            first = await client.call_tool("wire_transfer", arguments)  # no InputRequiredRoundsExceededError
            assert first.is_error is True
            assert (first.meta or {})[AUTHORIZATION]["remediation"] == "undisclosed"
            assert read_disposition(first) is None
            assert "did not run" in text(first)
            assert len(shown) == 1  # the page was shown once, then the pending answer
            assert "/requests/" in shown[0]
            assert entries(server, account) == 0
            carol = Reviewer(http, "carol-token")
            approval = await approval_for(carol, "wire_transfer", to=account)
            assert len(await carol.pending()) == 1
            assert (await carol.decide(approval["id"], "approve")).status_code == 200
            result = await eventually(
                lambda: client.call_tool("wire_transfer", arguments), lambda r: read_disposition(r) is not None
            )
            assert read_disposition(result).value == "approved-executed"  # type: ignore[union-attr]
            assert result.is_error is False
            assert entries(server, account) == 1
    finally:
        server.kill()
