"""An in-memory SSE event store, so 2025-era clients can resume a closed stream (SEP-1699)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

__all__ = ["MemoryEventStore"]


@dataclass(frozen=True)
class _Event:
    stream_id: StreamId
    number: int
    message: JSONRPCMessage | None


class MemoryEventStore(EventStore):
    """Keeps the last ``limit`` events of every stream in process memory."""

    def __init__(self, limit: int = 10_000) -> None:
        self._events: list[_Event] = []
        self._numbers = itertools.count(1)
        self._limit = limit

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        """Record ``message`` (``None`` for a priming event) and return its event id."""
        event = _Event(stream_id, next(self._numbers), message)
        self._events.append(event)
        del self._events[: max(0, len(self._events) - self._limit)]
        return str(event.number)

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        """Send every event of ``last_event_id``'s stream that came after it; return that stream."""
        last = next((event for event in self._events if str(event.number) == last_event_id), None)
        if last is None:
            return None
        for event in self._events:
            if event.stream_id == last.stream_id and event.number > last.number and event.message is not None:
                await send_callback(EventMessage(event.message, str(event.number)))
        return last.stream_id
