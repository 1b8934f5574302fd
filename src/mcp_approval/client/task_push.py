"""``notifications/tasks`` for a waiting client: listen on the tasks it waits for, wake on a change.

A notification wakes the waiting call, which then reads the task with ``tasks/get``; a terminal
notification is used as it is (it is the ``tasks/get`` body, and terminal states never change).
The listen request runs in the background for as long as the call waits; whatever becomes of it
(refused, dropped, never acknowledged), the call keeps polling at ``pollIntervalMs``, so a lost
stream never stalls a call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

import mcp_types as types
from mcp.client.extension import NotificationBinding
from mcp.client.session import ClientSession
from pydantic import ConfigDict, Field

from mcp_approval.protocol import METHOD_SUBSCRIPTIONS_LISTEN

__all__ = ["TaskNotification", "TaskPush"]

logger = logging.getLogger("mcp_approval.client")

_METHOD: Literal["notifications/tasks"] = "notifications/tasks"
_TERMINAL = frozenset({"completed", "failed", "cancelled"})


class TaskNotification(types.NotificationParams):
    """The params of ``notifications/tasks``: the ``DetailedTask`` (only the id is read here)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    task_id: str = Field(alias="taskId")
    status: str


class _ListenParams(types.RequestParams):
    notifications: dict[str, Any]


class _ListenTasksRequest(types.Request[_ListenParams, Literal["subscriptions/listen"]]):
    method: Literal["subscriptions/listen"] = METHOD_SUBSCRIPTIONS_LISTEN
    params: _ListenParams


class TaskPush:
    """Per-task wake-ups from ``notifications/tasks`` frames."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}
        self._terminal: dict[str, dict[str, Any]] = {}
        #: How many notifications arrived (for diagnostics and tests).
        self.received = 0

    def bindings(self) -> Sequence[NotificationBinding[Any]]:
        """The notification binding the client extension declares."""
        return (NotificationBinding(method=_METHOD, params_type=TaskNotification, handler=self._on_notification),)

    async def _on_notification(self, params: TaskNotification) -> None:
        self.received += 1
        event = self._events.get(params.task_id)
        if event is None:
            return
        if params.status in _TERMINAL:  # the tasks/get body itself: no read needed
            self._terminal[params.task_id] = params.model_dump(by_alias=True, mode="json", exclude={"meta"})
        event.set()

    @contextlib.asynccontextmanager
    async def watching(self, session: ClientSession, task_id: str) -> AsyncIterator[None]:
        """Listen for ``task_id`` while the body runs (the stream is best effort)."""
        self._events.setdefault(task_id, asyncio.Event())
        listener = asyncio.create_task(self._listen(session, task_id), name=f"listen {task_id[:8]}")
        try:
            yield
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
            self._events.pop(task_id, None)
            self._terminal.pop(task_id, None)

    async def _listen(self, session: ClientSession, task_id: str) -> None:
        request = _ListenTasksRequest(params=_ListenParams(notifications={"taskIds": [task_id]}))
        try:
            await session.send_request(request, types.EmptyResult, request_read_timeout_seconds=None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # refused or dropped: polling carries on
            logger.debug("listen for task %s ended: %s", task_id[:8], exc)

    async def changed(self, task_id: str, timeout_s: float) -> dict[str, Any] | None:
        """Wait up to ``timeout_s`` for a notification about ``task_id``.

        Returns the task as notified when it is terminal (what ``tasks/get`` would return; terminal
        states never change), else ``None``: the caller then reads the task.
        """
        event = self._events.get(task_id)
        if event is None:
            await asyncio.sleep(timeout_s)
            return None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout_s)
        event.clear()
        return self._terminal.pop(task_id, None)
