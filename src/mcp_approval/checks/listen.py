"""A ``subscriptions/listen`` stream (SEP-2663 notifications), its frames collected as they arrive."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2

from mcp_approval.checks.wire import Wire, envelope_meta, request_headers
from mcp_approval.protocol import METHOD_NOTIFICATIONS_TASKS, METHOD_SUBSCRIPTIONS_LISTEN

__all__ = ["Listening", "listening"]


class Listening:
    """The frames of one listen stream; ``refused`` holds a JSON-RPC error or HTTP answer instead."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self.refused: str | None = None
        self.changed = asyncio.Event()

    def task_notifications(self, task_id: str) -> list[dict[str, Any]]:
        """The ``notifications/tasks`` params received for ``task_id``, in order."""
        return [
            frame.get("params") or {}
            for frame in self.frames
            if frame.get("method") == METHOD_NOTIFICATIONS_TASKS
            and (frame.get("params") or {}).get("taskId") == task_id
        ]

    async def wait_for_status(self, task_id: str, status: str, timeout_s: float) -> dict[str, Any] | None:
        """The first notification of ``task_id`` at ``status`` (``None`` after ``timeout_s``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            for params in self.task_notifications(task_id):
                if params.get("status") == status:
                    return params
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), remaining)


@contextlib.asynccontextmanager
async def listening(wire: Wire, task_ids: list[str], timeout_s: float) -> AsyncIterator[Listening]:
    """Open a listen stream for ``task_ids`` as ``wire``'s principal; yields once the server answered."""
    body = {
        "jsonrpc": "2.0",
        "id": "listen",
        "method": METHOD_SUBSCRIPTIONS_LISTEN,
        "params": {"notifications": {"taskIds": task_ids}, "_meta": envelope_meta(tasks=True)},
    }
    headers = request_headers(METHOD_SUBSCRIPTIONS_LISTEN, wire.token)
    stream = Listening()
    timeout = httpx2.Timeout(timeout_s, read=None)  # the stream stays open for as long as the scenario reads
    async with wire.http.stream(
        "POST", wire.url, content=json.dumps(body), headers=headers, timeout=timeout
    ) as response:
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            stream.refused = f"HTTP {response.status_code}: {(await response.aread()).decode(errors='replace')[:200]}"
            yield stream
            return
        collector = asyncio.create_task(_collect(response, stream))
        try:
            first = asyncio.get_running_loop().time() + timeout_s
            while not stream.frames and not collector.done() and asyncio.get_running_loop().time() < first:
                stream.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stream.changed.wait(), 0.5)
            if stream.frames and "error" in stream.frames[0]:
                stream.refused = json.dumps(stream.frames[0]["error"])
            yield stream
        finally:
            collector.cancel()
            await asyncio.gather(collector, return_exceptions=True)


async def _collect(response: httpx2.Response, stream: Listening) -> None:
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            with contextlib.suppress(json.JSONDecodeError):
                stream.frames.append(json.loads(line[5:]))
                stream.changed.set()
