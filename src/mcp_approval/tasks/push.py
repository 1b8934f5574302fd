"""``notifications/tasks`` over ``subscriptions/listen`` (SEP-2663, optional push).

A listen request that declares the extension and names ``notifications.taskIds`` gets, on its
stream, one ``notifications/tasks`` per change of each accepted task: the ``DetailedTask`` that
``tasks/get`` would return at that moment (no ``resultType``), stamped with the listen request's
id under ``_meta["io.modelcontextprotocol/subscriptionId"]``.

The SDK's own listen handler keeps serving the core filters; :class:`TaskNotifier` is a server
middleware around it. It adds the accepted ids to the acknowledgement (the stream's first frame)
and, once that is sent, forwards task changes on the same stream. Ids the caller does not own are
treated exactly like unknown ids: left out of the acknowledgement, nothing more.

Changes arrive as :class:`~mcp_approval.tasks.signals.TaskChange` signals from whichever worker
made them; the stream then reads the task from the store. After the acknowledgement each accepted
task's current state is sent once, so a change between the client's last ``tasks/get`` and the
listen is never missed. Consecutive identical documents are sent once. When the signal of a
change to ``working`` is read only after the task moved on (its answer completed it at once, and
the signal took a pub/sub round trip), that ``working`` is still sent before the later state, so
the client sees every status change; it carries the task's fields without an outcome. A dropped
stream loses nothing: the client re-listens or polls ``tasks/get``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, Final, cast

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import require_client_extension
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from mcp_approval.protocol import (
    INVALID_PARAMS,
    METHOD_NOTIFICATIONS_TASKS,
    METHOD_SUBSCRIPTIONS_LISTEN,
    TASKS_EXTENSION,
)
from mcp_approval.safe_text import storable
from mcp_approval.storage import StoreUnavailableError, jsonrpc_error
from mcp_approval.tasks.models import TaskRecord, detailed_task, task_fields
from mcp_approval.tasks.signals import SignalKind, TaskChange, TaskSignals
from mcp_approval.tasks.states import TaskStatus

__all__ = ["MAX_TASK_IDS_PER_LISTEN", "METHOD_NOTIFICATIONS_TASKS", "TaskNotifier"]

#: How many task ids one listen request may name (more is ``-32602``).
MAX_TASK_IDS_PER_LISTEN: Final = 256
_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"

#: Reads a task the calling request may see: ``None`` for unknown, expired or another's task.
OwnedTask = Callable[[ServerRequestContext[Any, Any], str], Awaitable[TaskRecord | None]]
#: Reads a task by id for delivery (``None`` once it is gone).
ReadTask = Callable[[str], Awaitable[TaskRecord | None]]


class _Notification(BaseModel):
    """A server notification outside the SDK's typed union (the session only serializes it)."""

    method: str
    params: dict[str, Any]


class TaskNotifier:
    """Serves the ``taskIds`` part of ``subscriptions/listen``; pass :meth:`middleware` to the server.

    Args:
        owned: the task as the calling request may see it (ownership and expiry applied).
        read: the task by id, for each change.
        signals: where task changes arrive from (every worker's).
    """

    def __init__(self, owned: OwnedTask, read: ReadTask, signals: Callable[[], TaskSignals]) -> None:
        self._owned = owned
        self._read = read
        self._signals = signals

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Add task notifications to a listen request that asks for them; pass anything else on."""
        requested = _requested_task_ids(ctx) if ctx.method == METHOD_SUBSCRIPTIONS_LISTEN else None
        if requested is None:
            return await call_next(ctx)
        require_client_extension(ctx, TASKS_EXTENSION)
        if ctx.request_id is None:
            return await call_next(ctx)
        accepted = await self._accept(ctx, requested)
        stream = _TaskStream(ctx, accepted, self._read)
        unsubscribe = self._signals().subscribe(stream.on_change)
        result: HandlerResult = None
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(stream.forward)
                try:
                    result = await call_next(replace(ctx, session=cast(Any, _AckingSession(ctx.session, stream))))
                finally:
                    group.cancel_scope.cancel()
        finally:
            unsubscribe()
        return result

    async def _accept(self, ctx: ServerRequestContext[Any, Any], requested: list[str]) -> list[str]:
        accepted: list[str] = []
        try:
            for task_id in dict.fromkeys(requested):
                record = await self._owned(ctx, task_id)
                if record is not None:
                    accepted.append(task_id)
        except StoreUnavailableError as exc:
            raise MCPError(**jsonrpc_error(exc, "Task store")) from exc
        return accepted


def _requested_task_ids(ctx: ServerRequestContext[Any, Any]) -> list[str] | None:
    """The ``notifications.taskIds`` of a listen request, ``None`` if absent; ``-32602`` if malformed."""
    params = ctx.params if isinstance(ctx.params, Mapping) else {}
    notifications = params.get("notifications")
    if not isinstance(notifications, Mapping) or "taskIds" not in notifications:
        return None
    task_ids = notifications["taskIds"]
    if not isinstance(task_ids, list) or not all(isinstance(task_id, str) for task_id in task_ids):
        raise MCPError(code=INVALID_PARAMS, message="notifications.taskIds must be an array of task id strings")
    if not all(storable(task_id) for task_id in task_ids):
        raise MCPError(code=INVALID_PARAMS, message="notifications.taskIds names an id no task has (a NUL character)")
    if len(task_ids) > MAX_TASK_IDS_PER_LISTEN:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"notifications.taskIds names {len(task_ids)} tasks; the limit is {MAX_TASK_IDS_PER_LISTEN}",
        )
    return cast(list[str], task_ids)


class _TaskStream:
    """The task half of one listen stream: accepted ids, pending changes, the last document sent."""

    def __init__(self, ctx: ServerRequestContext[Any, Any], accepted: list[str], read: ReadTask) -> None:
        self.session = ctx.session
        self.request_id = ctx.request_id
        self.accepted = accepted
        self._watching = set(accepted)
        self._read = read
        self._pending: asyncio.Queue[tuple[str, TaskStatus | None]] = asyncio.Queue()
        self._acknowledged = asyncio.Event()
        self._last: dict[str, dict[str, Any]] = {}
        for task_id in accepted:  # the current state goes out right after the acknowledgement
            self._pending.put_nowait((task_id, None))

    def on_change(self, change: TaskChange) -> None:
        """A signal listener: queue a status change of a watched task."""
        if change.kind is SignalKind.STATUS and change.task_id in self._watching:
            self._pending.put_nowait((change.task_id, change.status))

    def acknowledgement(self, params: dict[str, Any]) -> dict[str, Any]:
        """The SDK's acknowledgement params with the accepted task ids added."""
        notifications = dict(params.get("notifications") or {})
        notifications["taskIds"] = list(self.accepted)
        return {**params, "notifications": notifications}

    def acknowledged(self) -> None:
        """The acknowledgement is on the stream: task frames may follow."""
        self._acknowledged.set()

    async def forward(self) -> None:
        """Send each queued change, in order, once the acknowledgement went out."""
        await self._acknowledged.wait()
        while self._watching:
            task_id, status = await self._pending.get()
            if task_id not in self._watching:
                continue
            try:
                record = await self._read(task_id)
            except StoreUnavailableError:
                continue  # the client's tasks/get is the fallback; the next change is sent
            if record is None:
                self._watching.discard(task_id)  # purged: nothing more will change
                continue
            if status is TaskStatus.WORKING and record.status is not TaskStatus.WORKING:
                await self._send_passed_working(record)
            await self._send(record)

    async def _send_passed_working(self, record: TaskRecord) -> None:
        """The ``working`` the task passed through before ``record`` (unless it was the last one sent)."""
        last = self._last.get(record.task_id)
        if last is not None and last.get("status") != TaskStatus.WORKING.value:
            body = task_fields(record)
            body["status"] = TaskStatus.WORKING.value
            body.pop("statusMessage", None)  # the message belongs to the later state
            await self._send_body(record.task_id, body, terminal=False)

    async def _send(self, record: TaskRecord) -> None:
        await self._send_body(record.task_id, detailed_task(record), terminal=record.terminal)

    async def _send_body(self, task_id: str, body: dict[str, Any], *, terminal: bool) -> None:
        if self._last.get(task_id) == body:
            return
        self._last[task_id] = body
        if terminal:
            self._watching.discard(task_id)  # terminal states are absorbing
        meta = {**body.get("_meta", {}), _SUBSCRIPTION_ID: self.request_id}
        notification = _Notification(method=METHOD_NOTIFICATIONS_TASKS, params={**body, "_meta": meta})
        await self.session.send_notification(cast(Any, notification), related_request_id=self.request_id)


class _AckingSession:
    """The listen request's session, adding accepted task ids to the SDK's acknowledgement."""

    def __init__(self, session: Any, stream: _TaskStream) -> None:
        self._session = session
        self._stream = stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    async def send_notification(
        self, notification: types.ServerNotification, related_request_id: types.RequestId | None = None
    ) -> None:
        """Send ``notification``; the acknowledgement gains ``taskIds`` and releases the task frames."""
        if notification.method != _ACKNOWLEDGED:
            await self._session.send_notification(notification, related_request_id=related_request_id)
            return
        params = notification.model_dump(by_alias=True, mode="json", exclude_none=True).get("params", {})
        acknowledgement = _Notification(method=_ACKNOWLEDGED, params=self._stream.acknowledgement(params))
        await self._session.send_notification(cast(Any, acknowledgement), related_request_id=related_request_id)
        self._stream.acknowledged()
