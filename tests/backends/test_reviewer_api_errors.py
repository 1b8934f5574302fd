"""The reviewer API over real HTTP answers every refusal of the backend with a problem, never a 500."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator
from typing import Literal

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette

from mcp_approval.backends import ApprovalRecord, LocalApprovalBackend, ReviewError
from mcp_approval.clock import ManualClock
from mcp_approval.reviewers.api import reviewer_routes
from mcp_approval.storage import Database
from tests.backends.conftest import TEMPLATES, roles_of, submission
from tests.support.polling import eventually
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

CHANGING = "kept changing; try again"


class ContendedBackend(LocalApprovalBackend):
    """A backend whose request changes under every decision attempt (its retries all lose)."""

    async def decide(
        self, request_id: str, reviewer: str, decision: Literal["approve", "deny"], comment: str | None = None
    ) -> ApprovalRecord:
        raise ReviewError(f"request {request_id[:8]}… {CHANGING}")


async def authenticate(token: str) -> str | None:
    return {"bob-token": "bob"}.get(token)


@pytest.fixture
async def base_url(database: Database, clock: ManualClock) -> AsyncIterator[tuple[str, LocalApprovalBackend]]:
    contended = ContendedBackend(database, templates=TEMPLATES, roles=roles_of, clock=clock)
    app = Starlette(routes=reviewer_routes(contended, authenticate))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve())
    await eventually(lambda: _started(server, serving), bool, timeout_s=scaled(10))
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", contended
    finally:
        server.should_exit = True
        await serving


async def _started(server: uvicorn.Server, serving: asyncio.Task[None]) -> bool:
    if serving.done():
        serving.result()
    return server.started


async def test_a_decision_that_keeps_losing_its_retries_is_a_409(
    base_url: tuple[str, LocalApprovalBackend], caplog: pytest.LogCaptureFixture
) -> None:
    url, backend = base_url
    handle = await backend.submit(secrets.token_urlsafe(32), submission())
    async with httpx.AsyncClient(base_url=url, timeout=scaled(20)) as http:
        response = await http.post(
            f"/approvals/{handle}/decide", json={"decision": "approve"}, headers={"authorization": "Bearer bob-token"}
        )
    assert response.status_code == 409, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert CHANGING in response.json()["detail"]
    assert [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR] == []
