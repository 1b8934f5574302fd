"""A ``subscriptions/listen`` stream over real HTTP, its frames collected as they arrive."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from mcp_approval.checks.wire import PROTOCOL, envelope
from tests.support.timing import scaled

Frame = dict[str, Any]


class ListenStream:
    """The frames of one listen stream, in arrival order."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self._arrived = asyncio.Condition()
        self.closed = False

    async def _collect(self, response: httpx.Response) -> None:
        try:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    async with self._arrived:
                        self.frames.append(json.loads(line[5:]))
                        self._arrived.notify_all()
        finally:
            async with self._arrived:
                self.closed = True
                self._arrived.notify_all()

    async def wait_for(self, predicate: Callable[[list[Frame]], bool], timeout_s: float | None = None) -> list[Frame]:
        """Wait (up to ``timeout_s``; by default ``scaled(10)``) until ``predicate(frames)`` holds; the frames."""
        async with asyncio.timeout(scaled(10) if timeout_s is None else timeout_s), self._arrived:
            await self._arrived.wait_for(lambda: predicate(self.frames) or self.closed)
        assert predicate(self.frames), f"stream ended without the expected frames: {self.frames}"
        return self.frames

    def task_frames(self, task_id: str | None = None) -> list[Frame]:
        """The ``notifications/tasks`` params received (for one task, if given)."""
        return [
            frame["params"]
            for frame in self.frames
            if frame.get("method") == "notifications/tasks"
            and (task_id is None or frame["params"]["taskId"] == task_id)
        ]

    def statuses(self, task_id: str) -> list[str]:
        """The statuses notified for ``task_id``, in order."""
        return [params["status"] for params in self.task_frames(task_id)]


@contextlib.asynccontextmanager
async def listening(
    base_url: str,
    task_ids: list[str],
    *,
    request_id: int = 77,
    token: str | None = None,
    extra_filter: dict[str, Any] | None = None,
    method: str = "subscriptions/listen",
) -> AsyncIterator[ListenStream]:
    """Open a listen stream for ``task_ids``; it is acknowledged when this yields."""
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {"notifications": {"taskIds": task_ids, **(extra_filter or {})}, "_meta": envelope()},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": PROTOCOL,
        "mcp-method": method,
    }
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    stream = ListenStream()
    async with (
        httpx.AsyncClient(base_url=base_url, timeout=httpx.Timeout(scaled(30), read=None)) as http,
        http.stream("POST", "/mcp", json=body, headers=headers) as response,
    ):
        collector = asyncio.create_task(stream._collect(response))
        try:
            await stream.wait_for(lambda frames: bool(frames))
            yield stream
        finally:
            collector.cancel()
            await asyncio.gather(collector, return_exceptions=True)
