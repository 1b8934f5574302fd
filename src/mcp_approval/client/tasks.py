"""The client side of ``io.modelcontextprotocol/tasks``: tool calls that resolve tasks transparently.

::

    tasks = TasksClient(task_wait_s=30, input_handler=ask_user, journal=TaskJournal("tasks.db"))
    async with Client(url, extensions=[tasks]) as client:
        try:
            result = await client.call_tool("wire_transfer", {"to": "acme", "amount": 50_000})
        except TaskPendingError as pending:
            ...  # later, perhaps in a new process: await tasks.resume(client.session, pending.task_id)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, NotificationBinding, ResultClaim
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import Field, TypeAdapter, ValidationError

from mcp_approval.client.calls import note_task_created
from mcp_approval.client.inputs import answer_through_callbacks
from mcp_approval.client.journal import TaskJournal
from mcp_approval.client.task_push import TaskPush
from mcp_approval.errors import MCPApprovalError
from mcp_approval.protocol import METHOD_TASKS_CANCEL, METHOD_TASKS_GET, METHOD_TASKS_UPDATE, TASKS_EXTENSION
from mcp_approval.tasks.models import TaskIdParams, UpdateTaskParams  # the params the server validates
from mcp_approval.tasks.states import TaskStatus

__all__ = [
    "MIN_POLL_INTERVAL_S",
    "CancelTaskRequest",
    "CreateTaskResult",
    "DetailedTask",
    "GetTaskRequest",
    "InputHandler",
    "TaskCancelledError",
    "TaskError",
    "TaskExpiredError",
    "TaskFailedError",
    "TaskInputRequiredError",
    "TaskPendingError",
    "TasksClient",
    "UpdateTaskRequest",
    "task_wait",
]

InputHandler = Callable[[Mapping[str, Any]], Awaitable[Mapping[str, Any]]]
"""Answers one input request ``{"method": ..., "params": ...}`` with the client's result."""

#: The shortest wait between two ``tasks/get`` of one task, whatever ``pollIntervalMs`` a server asks
#: for: a server answering ``0`` (or a few milliseconds) must not turn the wait into a tight loop.
MIN_POLL_INTERVAL_S = 0.1

_INPUT_REQUEST: TypeAdapter[types.InputRequest] = TypeAdapter(types.InputRequest)

# How long the calls of this asyncio task wait for their task, instead of ``task_wait_s`` (see task_wait).
_TASK_WAIT: ContextVar[tuple[float | None] | None] = ContextVar("mcp_approval_task_wait", default=None)


@contextmanager
def task_wait(seconds: float | None) -> Iterator[None]:
    """Calls made inside ``with task_wait(s):`` wait ``s`` seconds for their task (``None``: as long as it lives).

    Overrides :attr:`TasksClient.task_wait_s` for this asyncio task only, so concurrent calls on one
    client can wait differently (a first call briefly, a resume until the decision).
    """
    token = _TASK_WAIT.set((seconds,))
    try:
        yield
    finally:
        _TASK_WAIT.reset(token)


class CreateTaskResult(types.Result):
    """The flat ``CreateTaskResult`` a server answers to ``tools/call``."""

    result_type: Literal["task"] = "task"
    task_id: str = Field(min_length=1, max_length=512)
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class DetailedTask(types.Result):
    """What ``tasks/get`` returns: the task with its status-specific fields."""

    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: types.ErrorData | None = None
    input_requests: dict[str, dict[str, Any]] | None = None


class GetTaskRequest(types.Request[TaskIdParams, Literal["tasks/get"]]):
    """``tasks/get``; the SDK sends ``Mcp-Name: <taskId>`` for it."""

    method: Literal["tasks/get"] = METHOD_TASKS_GET
    params: TaskIdParams
    name_param = "taskId"


class UpdateTaskRequest(types.Request[UpdateTaskParams, Literal["tasks/update"]]):
    """``tasks/update``."""

    method: Literal["tasks/update"] = METHOD_TASKS_UPDATE
    params: UpdateTaskParams
    name_param = "taskId"


class CancelTaskRequest(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    """``tasks/cancel``."""

    method: Literal["tasks/cancel"] = METHOD_TASKS_CANCEL
    params: TaskIdParams
    name_param = "taskId"


class TaskError(MCPApprovalError):
    """Base of the errors a task-resolving call raises; ``task_id`` names the task.

    ``remote_kind`` says how the remote task stands (``task_pending``, ``task_failed``,
    ``task_cancelled``, ``task_expired``, ``input_required``); ``details`` carries it with the task id.
    """

    remote_kind = "task_error"

    def __init__(self, task_id: str, message: str) -> None:
        super().__init__(message)
        self.task_id = task_id

    @property
    def details(self) -> dict[str, str]:
        """``{"remote_kind": ..., "task_id": ...}``, for logs and for the agent's own error reports."""
        return {"remote_kind": self.remote_kind, "task_id": self.task_id}


class TaskPendingError(TaskError):
    """The task was still open after ``task_wait_s``; resume it later with its ``task_id``."""

    remote_kind = "task_pending"


class TaskFailedError(TaskError):
    """The task ended ``failed``; ``error`` is its JSON-RPC error."""

    def __init__(self, task_id: str, error: types.ErrorData | None) -> None:
        super().__init__(task_id, f"task failed: {error.message if error else 'no error given'}")
        self.error = error

    remote_kind = "task_failed"


class TaskCancelledError(TaskError):
    """The task ended ``cancelled``."""

    remote_kind = "task_cancelled"


class TaskExpiredError(TaskError):
    """The server no longer knows the task (expired, purged, or never ours)."""

    remote_kind = "task_expired"


class TaskInputRequiredError(TaskError):
    """The task needs input and this client has no input handler; ``task_id`` names the task."""

    remote_kind = "input_required"


class TasksClient(ClientExtension):
    """Declares the tasks extension and resolves ``CreateTaskResult`` into the tool's result.

    Args:
        task_wait_s: how long a call waits for its task before raising
            :class:`TaskPendingError`; ``None`` waits for as long as the task lives.
        input_handler: answers ``input_required`` requests. By default they go through the
            ``Client``'s own elicitation, sampling and roots callbacks (the same ones that
            declare those capabilities); a request the client cannot answer raises
            :class:`TaskInputRequiredError`.
        journal: a durable record of open task ids, so a restarted agent can resume them.
        default_poll_interval_s: the polling interval when the server suggests none.
        min_poll_interval_s: the shortest sleep between polls, whatever the server suggests
            (default :data:`MIN_POLL_INTERVAL_S`, 0.1 s); it must be positive.
        max_poll_interval_s: the longest sleep between polls, whatever the server suggests.
        notifications: open ``subscriptions/listen`` for each waited task and wake on its
            ``notifications/tasks`` instead of sleeping out the poll interval. Polling continues
            at ``pollIntervalMs`` whatever happens to the stream, so a lost stream never stalls.
    """

    identifier = TASKS_EXTENSION

    def __init__(
        self,
        *,
        task_wait_s: float | None = 30.0,
        input_handler: InputHandler | None = None,
        journal: TaskJournal | None = None,
        default_poll_interval_s: float = 1.0,
        min_poll_interval_s: float = MIN_POLL_INTERVAL_S,
        max_poll_interval_s: float = 30.0,
        notifications: bool = True,
    ) -> None:
        if not 0 < min_poll_interval_s <= max_poll_interval_s:
            raise ValueError(
                f"min_poll_interval_s must be positive and at most max_poll_interval_s ({max_poll_interval_s}); "
                f"got {min_poll_interval_s}"
            )
        self.task_wait_s = task_wait_s
        self.input_handler = input_handler
        self.journal = journal
        self.default_poll_interval_s = default_poll_interval_s
        self.min_poll_interval_s = min_poll_interval_s
        self.max_poll_interval_s = max_poll_interval_s
        self.push = TaskPush() if notifications else None

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        """Observe ``notifications/tasks`` (they wake a waiting call early)."""
        return self.push.bindings() if self.push is not None else ()

    def claims(self) -> Sequence[ResultClaim[Any]]:
        """Claim ``resultType: "task"`` on ``tools/call``."""
        return (ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._resolve),)

    async def _resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
        if self.journal is not None:
            self.journal.add(created.task_id, ctx.tool_name)
        await note_task_created(created.task_id)
        return await self.wait(ctx.session, created.task_id, poll_interval_ms=created.poll_interval_ms)

    async def get(self, session: ClientSession, task_id: str) -> DetailedTask:
        """``tasks/get``; raises :class:`TaskExpiredError` when the server answers ``-32602``."""
        try:
            return await session.send_request(GetTaskRequest(params=TaskIdParams(task_id=task_id)), DetailedTask)
        except MCPError as exc:
            if exc.code == types.INVALID_PARAMS:
                self._forget(task_id)
                raise TaskExpiredError(task_id, f"the server no longer knows task {task_id[:8]}…") from exc
            raise

    async def update(self, session: ClientSession, task_id: str, responses: Mapping[str, Any]) -> None:
        """``tasks/update`` with answers keyed by input request key."""
        params = UpdateTaskParams(task_id=task_id, input_responses=dict(responses))
        await session.send_request(UpdateTaskRequest(params=params), types.EmptyResult)

    async def cancel(self, session: ClientSession, task_id: str) -> None:
        """``tasks/cancel``; the task may still end ``completed`` or ``failed``."""
        await session.send_request(CancelTaskRequest(params=TaskIdParams(task_id=task_id)), types.EmptyResult)
        self._forget(task_id)

    async def resume(self, session: ClientSession, task_id: str) -> types.CallToolResult:
        """Continue waiting for a task known only by its id (after a restart, say)."""
        return await self.wait(session, task_id)

    async def wait(
        self, session: ClientSession, task_id: str, *, poll_interval_ms: int | None = None
    ) -> types.CallToolResult:
        """Poll until the task ends or ``task_wait_s`` passes, answering input requests on the way."""
        if self.push is None:
            return await self._wait(session, task_id, poll_interval_ms)
        async with self.push.watching(session, task_id):
            return await self._wait(session, task_id, poll_interval_ms)

    async def _wait(self, session: ClientSession, task_id: str, poll_interval_ms: int | None) -> types.CallToolResult:
        override = _TASK_WAIT.get()
        wait_s = self.task_wait_s if override is None else override[0]
        deadline = None if wait_s is None else time.monotonic() + wait_s
        answered: set[str] = set()
        interval_ms = poll_interval_ms
        notified: dict[str, Any] | None = None
        while True:
            task = await self.get(session, task_id) if notified is None else DetailedTask.model_validate(notified)
            if task.status is TaskStatus.COMPLETED:
                self._forget(task_id)
                return types.CallToolResult.model_validate(task.result or {"content": []})
            if task.status is TaskStatus.FAILED:
                self._forget(task_id)
                raise TaskFailedError(task_id, task.error)
            if task.status is TaskStatus.CANCELLED:
                self._forget(task_id)
                raise TaskCancelledError(task_id, "task cancelled")
            if task.status is TaskStatus.INPUT_REQUIRED:
                await self._answer(session, task, answered)
            interval_ms = task.poll_interval_ms if task.poll_interval_ms is not None else interval_ms
            delay = self._delay(interval_ms, deadline)
            if delay is None:
                raise TaskPendingError(task_id, f"task {task_id[:8]}… still {task.status} after {wait_s}s")
            if self.push is None:
                await asyncio.sleep(delay)
            else:  # a notification ends the wait early; a terminal one is the task itself
                notified = await self.push.changed(task_id, delay)

    async def _answer(self, session: ClientSession, task: DetailedTask, answered: set[str]) -> None:
        pending = {key: request for key, request in (task.input_requests or {}).items() if key not in answered}
        if not pending:
            return
        responses = {
            key: await self._answer_one(session, task.task_id, key, request) for key, request in pending.items()
        }
        await self.update(session, task.task_id, responses)
        answered.update(responses)

    async def _answer_one(
        self, session: ClientSession, task_id: str, key: str, request: Mapping[str, Any]
    ) -> dict[str, Any]:
        if self.input_handler is not None:
            return dict(await self.input_handler(request))
        try:
            parsed = _INPUT_REQUEST.validate_python(dict(request))
        except ValidationError as exc:
            raise TaskInputRequiredError(task_id, f"task asks for input this client cannot parse ({key})") from exc
        answer = await answer_through_callbacks(session, key, parsed)
        if isinstance(answer, types.ErrorData):
            raise TaskInputRequiredError(task_id, f"task needs input the client declined ({key}: {answer.message})")
        return answer.model_dump(by_alias=True, mode="json", exclude_none=True)

    def _delay(self, interval_ms: int | None, deadline: float | None) -> float | None:
        if interval_ms is None:
            delay = self.default_poll_interval_s  # the client's own choice stands as given
        else:  # what a server asks for is held to the floor, so 0 is no tight loop
            delay = max(interval_ms / 1000, self.min_poll_interval_s)
        delay = min(max(delay, 0.0), self.max_poll_interval_s)
        if deadline is None:
            return delay
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        return min(delay, remaining)

    def _forget(self, task_id: str) -> None:
        if self.journal is not None:
            self.journal.remove(task_id)
