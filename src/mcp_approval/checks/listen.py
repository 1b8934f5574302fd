"""A ``subscriptions/listen`` stream (SEP-2663 notifications), its frames collected as they arrive.

The stream is bounded like every other answer: at most :data:`MAX_FRAMES` frames and
:data:`~mcp_approval.checks.bounded.MAX_ANSWER_BYTES` bytes are kept, and it is read only for as
long as the scenario holds it open.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from mcp_approval.checks.bounded import MAX_ANSWER_BYTES
from mcp_approval.checks.judge import member
from mcp_approval.checks.wire import Reply, Wire, envelope, request_headers
from mcp_approval.protocol import METHOD_NOTIFICATIONS_TASKS, METHOD_SUBSCRIPTIONS_LISTEN

__all__ = ["ACKNOWLEDGED", "LISTEN_ID", "MAX_FRAMES", "Listening", "listening"]

#: The id of the kit's listen request: every frame must carry it as its subscription id.
LISTEN_ID = "kit-listen"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
MAX_FRAMES = 1000


class Listening:
    """The frames of one listen stream; ``refused`` holds a JSON-RPC error or HTTP answer instead."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self.refused: str | None = None
        self.refusal: dict[str, Any] | None = None
        self.changed = asyncio.Event()
        self.received_bytes = 0

    def acknowledged_ids(self) -> list[str] | None:
        """The task ids the acknowledgement says the server will notify (``None``: no acknowledgement)."""
        for frame in self.frames:
            if frame.get("method") == ACKNOWLEDGED:
                params = member(frame, "params")
                agreed = member(params, "notifications")
                ids = agreed.get("taskIds")
                return [str(item) for item in ids] if isinstance(ids, list) else []
        return None

    def task_notifications(self, task_id: str) -> list[dict[str, Any]]:
        """The ``notifications/tasks`` params received for ``task_id``, in order."""
        return [
            frame["params"]
            for frame in self.frames
            if frame.get("method") == METHOD_NOTIFICATIONS_TASKS
            and isinstance(frame.get("params"), dict)
            and frame["params"].get("taskId") == task_id
        ]

    async def wait_for(self, task_id: str, status: str, timeout_s: float) -> dict[str, Any] | None:
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

    def add(self, frame: Any) -> None:
        """Keep one frame (a JSON object), up to :data:`MAX_FRAMES`."""
        if isinstance(frame, dict) and len(self.frames) < MAX_FRAMES:
            self.frames.append(frame)
            self.changed.set()


@contextlib.asynccontextmanager
async def listening(
    wire: Wire, task_ids: list[str], timeout_s: float, *, tasks: bool = True
) -> AsyncIterator[Listening]:
    """Open a listen stream for ``task_ids`` as ``wire``'s principal; yields once its first frame came
    (or it was refused, or ``timeout_s`` passed)."""
    body = {
        "jsonrpc": "2.0",
        "id": LISTEN_ID,
        "method": METHOD_SUBSCRIPTIONS_LISTEN,
        "params": {"notifications": {"taskIds": task_ids}, "_meta": envelope(tasks=tasks, elicitation="form")},
    }
    stream = Listening()
    headers = request_headers(METHOD_SUBSCRIPTIONS_LISTEN, wire.token)
    async with wire.http.stream("POST", wire.url, content=json.dumps(body), headers=headers) as response:
        collector = asyncio.create_task(_collect(response, stream))
        try:
            await _first_frame(stream, collector, timeout_s)
            if not str(response.headers.get("content-type", "")).startswith("text/event-stream"):
                await asyncio.wait([collector], timeout=timeout_s)
                _refusal(stream, response.status_code)
            elif stream.frames and isinstance(stream.frames[0].get("error"), dict):
                stream.refusal = stream.frames[0]["error"]
                stream.refused = json.dumps(stream.refusal)[:300]
            yield stream
        finally:
            collector.cancel()
            await asyncio.gather(collector, return_exceptions=True)
            if wire.transcript is not None:  # the frames, for the scans over the run
                for frame in stream.frames:
                    wire.transcript.add(METHOD_SUBSCRIPTIONS_LISTEN, Reply(200, frame, json.dumps(frame)))


def _refusal(stream: Listening, status: int) -> None:
    """A JSON answer instead of a stream: the listen request was refused (or answered oddly)."""
    message = stream.frames[0] if stream.frames else {}
    error = message.get("error")
    stream.refusal = error if isinstance(error, dict) else None
    stream.refused = f"HTTP {status}: {json.dumps(message)[:300]}"


async def _first_frame(stream: Listening, collector: asyncio.Task[None], timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not stream.frames and not collector.done() and loop.time() < deadline:
        stream.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stream.changed.wait(), min(0.5, max(0.01, deadline - loop.time())))


async def _collect(response: Any, stream: Listening) -> None:
    """Split the body into events (or read it as one JSON answer) within the byte cap."""
    buffer = b""
    async for chunk in response.aiter_bytes():
        stream.received_bytes += len(chunk)
        if stream.received_bytes > MAX_ANSWER_BYTES:
            return
        buffer += chunk
        *events, buffer = buffer.replace(b"\r\n", b"\n").split(b"\n\n")
        for event in events:
            data = b"\n".join(line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:"))
            with contextlib.suppress(ValueError, RecursionError):
                stream.add(json.loads(data))
    if buffer.strip() and not stream.frames:  # a plain JSON answer (an error), not a stream
        with contextlib.suppress(ValueError, RecursionError):
            stream.add(json.loads(buffer))
