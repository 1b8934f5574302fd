"""A server asking for ``pollIntervalMs: 0`` does not make the tasks client poll in a tight loop."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_approval.client import TasksClient
from mcp_approval.client.tasks import MIN_POLL_INTERVAL_S
from mcp_approval.tasks import TaskOptions, store_from_url
from mcp_approval.testing.tasks_demo import build_tasks_demo_server
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

BASE_URL = "http://127.0.0.1:8000"
POLL_INTERVAL = re.compile(rb'"pollIntervalMs":\s*\d+')
JOB_S = 0.6


@dataclass
class ZeroPollInterval:
    """ASGI middleware answering every ``pollIntervalMs`` as ``0`` and counting ``tasks/get`` requests."""

    app: ASGIApp
    gets: int = 0
    rewritten: int = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if headers.get(b"mcp-method") == b"tasks/get":
            self.gets += 1
        start: Message | None = None
        body = b""

        async def rewrite(message: Message) -> None:
            nonlocal start, body
            if message["type"] == "http.response.start":
                start = message
                return
            body += message.get("body", b"")
            if message.get("more_body", False):
                return
            changed, count = POLL_INTERVAL.subn(b'"pollIntervalMs":0', body)
            self.rewritten += count
            assert start is not None
            kept = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            await send({**start, "headers": [*kept, (b"content-length", str(len(changed)).encode())]})
            await send({"type": "http.response.body", "body": changed, "more_body": False})

        await self.app(scope, receive, rewrite)


async def test_a_zero_poll_interval_is_held_to_the_floor() -> None:
    options = TaskOptions(
        modes={"slow_job": "required"}, threshold_s=0.0, poll_interval_s=1.0, allow_anonymous_tasks=True
    )
    server, _ = build_tasks_demo_server(options, store=store_from_url("sqlite://"))
    zeroing = ZeroPollInterval(server.streamable_http_app(json_response=True))
    tasks = TasksClient(task_wait_s=scaled(30), notifications=False)
    async with (
        server.session_manager.run(),
        httpx2.AsyncClient(transport=httpx2.ASGITransport(app=zeroing), base_url=BASE_URL) as http,
        Client(streamable_http_client(f"{BASE_URL}/mcp", http_client=http), extensions=[tasks]) as client,
    ):
        result: Any = await client.call_tool("slow_job", {"seconds": JOB_S, "label": "report"})
    assert isinstance(result, types.CallToolResult)
    assert result.content[0] == types.TextContent(type="text", text=f"report finished after {JOB_S}s")
    assert zeroing.rewritten >= 2  # the task and each tasks/get answered pollIntervalMs 0
    # At most one tasks/get per floor interval while the job runs (plus the last one and some slack).
    assert 2 <= zeroing.gets <= JOB_S / MIN_POLL_INTERVAL_S + 3


@pytest.mark.parametrize("floor", [0.0, -1.0, 31.0])
def test_the_floor_must_be_positive_and_below_the_ceiling(floor: float) -> None:
    with pytest.raises(ValueError, match="min_poll_interval_s must be positive and at most max_poll_interval_s"):
        TasksClient(min_poll_interval_s=floor)
