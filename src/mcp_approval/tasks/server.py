"""The ``io.modelcontextprotocol/tasks`` server extension on ``mcp`` 2.3's extension seams."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import Extension, MethodBinding, authenticated_principal, require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_approval.clock import Clock
from mcp_approval.protocol import (
    INVALID_PARAMS,
    METHOD_TASKS_CANCEL,
    METHOD_TASKS_GET,
    METHOD_TASKS_UPDATE,
    TASKS_EXTENSION,
    UNKNOWN_TASK_MESSAGE,
)
from mcp_approval.safe_text import storable
from mcp_approval.storage import StoreUnavailableError, jsonrpc_error
from mcp_approval.tasks.execution import AnsweredRound
from mcp_approval.tasks.models import (
    TaskIdParams,
    TaskRecord,
    UpdateTaskParams,
    create_task_result,
    detailed_task,
    principal_digest,
)
from mcp_approval.tasks.options import PrincipalLookup, TaskMode, TaskOptions
from mcp_approval.tasks.push import TaskNotifier
from mcp_approval.tasks.runtime import TaskRuntime
from mcp_approval.tasks.signals import SignalKind, TaskSignals
from mcp_approval.tasks.sql_store import SqlTaskStore
from mcp_approval.tasks.states import TaskStatus
from mcp_approval.tasks.store import TaskStore

__all__ = [
    "ANONYMOUS",
    "LOCAL_PRINCIPAL",
    "Caller",
    "TaskHandler",
    "TasksExtension",
    "declares_tasks",
    "default_principal",
]

logger = logging.getLogger("mcp_approval.tasks")

_MODERN = frozenset(MODERN_PROTOCOL_VERSIONS)
# A server sees the same few principals over and over: hash each once, not on every request.
_digest_of = functools.lru_cache(maxsize=4096)(principal_digest)
#: The principal of in-process and stdio callers: the transport itself is the one client.
LOCAL_PRINCIPAL = "local"


class _Anonymous:
    """Marker for an unauthenticated HTTP caller."""


ANONYMOUS = _Anonymous()
Caller = str | None | _Anonymous
"""A principal digest, ``None`` for an anonymous task owner, or :data:`ANONYMOUS` (no task)."""


class TaskHandler(Protocol):
    """A component that drives tasks no in-process execution runs (e.g. approval-gated calls).

    Such tasks carry the handler's name in :attr:`TaskRecord.handler`; ``tasks/cancel`` on one
    is handed to the handler, which owns the fence between cancellation and its own work.
    """

    async def cancel_task(self, record: TaskRecord) -> None:
        """Cancel ``record`` if it can still be cancelled; a no-op otherwise."""
        ...

    async def input_received(self, record: TaskRecord) -> None:
        """``tasks/update`` recorded answers for ``record`` (a wake-up; the answers are in the store)."""
        ...


def default_principal(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The SDK's authenticated principal; in-process and stdio callers are one local caller."""
    principal = authenticated_principal(ctx)
    if principal is not None:
        return principal
    return LOCAL_PRINCIPAL if ctx.request is None else None


def declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether *this* request is on the 2026-07-28 wire and declares the tasks extension."""
    if ctx.protocol_version not in _MODERN:
        return False
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities else None
    return bool(extensions) and TASKS_EXTENSION in extensions  # type: ignore[operator]


class TasksExtension(Extension):
    """Durable SEP-2663 tasks for ``tools/call``.

    Add it to a server and let the server's lifespan run it::

        tasks = TasksExtension(TaskOptions(threshold_s=1.0), store=SqlTaskStore("sqlite:///tasks.db"))
        server = MCPServer("demo", extensions=[tasks], lifespan=tasks.lifespan)

    On a 2026-07-28 request that declares the extension, a tool call becomes a task when its
    mode says so (see :class:`TaskMode`); every other request is answered as if the extension
    were absent. ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` are served from the
    store, so any worker sharing it can answer them.

    Args:
        options: thresholds, lifetimes, limits and per-tool modes.
        store: the durable task store (:class:`~mcp_approval.tasks.sql_store.SqlTaskStore`,
            :class:`~mcp_approval.tasks.redis_store.RedisTaskStore`; :func:`store_from_url` picks one
            for a URL); by default a private temporary SQLite database (one process).
        principal_lookup: maps a request to the caller's identity; by default the SDK's
            authenticated principal, with in-process and stdio callers treated as one local caller.
        clock: the source of time.
        signals: change signals between workers; by default the store's own channel (PostgreSQL
            ``LISTEN``/``NOTIFY``, Redis pub/sub, in-process for SQLite).

    ``notifications/tasks`` are served by :attr:`listen_middleware`, which the server's middleware
    list must include (after :func:`~mcp_approval.tasks.middleware.task_routing_middleware`).
    """

    identifier = TASKS_EXTENSION

    def __init__(
        self,
        options: TaskOptions | None = None,
        *,
        store: TaskStore | None = None,
        principal_lookup: PrincipalLookup | None = None,
        clock: Clock | None = None,
        signals: TaskSignals | None = None,
    ) -> None:
        self.options = options or TaskOptions()
        self.runtime = TaskRuntime(
            store or SqlTaskStore("sqlite://", clock=clock), self.options, clock=clock, signals=signals
        )
        self._principal_of = principal_lookup or default_principal
        self._handlers: dict[str, TaskHandler] = {}
        self.notifier = TaskNotifier(self._visible, self._live, lambda: self.runtime.signals)

    @property
    def listen_middleware(self) -> ServerMiddleware[Any]:
        """Server middleware serving ``notifications/tasks`` on ``subscriptions/listen`` streams."""
        return self.notifier.middleware

    def register_handler(self, name: str, handler: TaskHandler) -> None:
        """Hand ``tasks/cancel`` on tasks whose :attr:`TaskRecord.handler` is ``name`` to ``handler``.

        Registering the same name again replaces the handler (so registering twice is harmless).
        """
        self._handlers[name] = handler

    @property
    def store(self) -> TaskStore:
        """The task store this extension reads and writes."""
        return self.runtime.store

    @asynccontextmanager
    async def lifespan(self, _server: object = None) -> AsyncIterator[dict[str, Any]]:
        """Run the tasks runtime for as long as the server runs; pass as ``MCPServer(lifespan=...)``."""
        await self.runtime.start()
        try:
            yield {}
        finally:
            await self.runtime.stop()

    def methods(self) -> Sequence[MethodBinding]:
        """``tasks/get``, ``tasks/update`` and ``tasks/cancel``, on the 2026-07-28 wire only."""
        return [
            MethodBinding(METHOD_TASKS_GET, TaskIdParams, self._get, protocol_versions=_MODERN),
            MethodBinding(METHOD_TASKS_UPDATE, UpdateTaskParams, self._update, protocol_versions=_MODERN),
            MethodBinding(METHOD_TASKS_CANCEL, TaskIdParams, self._cancel, protocol_versions=_MODERN),
        ]

    # -- tools/call -------------------------------------------------------------------------

    async def intercept_tool_call(
        self, params: types.CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Answer inline, or run the call as a task, as the tool's mode and the request allow."""
        mode = self.options.mode_of(params.name)
        if not declares_tasks(ctx):
            if mode is TaskMode.REQUIRED and ctx.protocol_version in _MODERN:
                require_client_extension(ctx, TASKS_EXTENSION)
            return await call_next(ctx)
        if mode is TaskMode.FORBIDDEN or (mode is TaskMode.OPTIONAL and self.options.threshold_s is None):
            return await call_next(ctx)
        caller = self.caller(ctx)
        if isinstance(caller, _Anonymous):
            return await call_next(ctx)

        async def run_call(answered: AnsweredRound | None) -> HandlerResult:
            if answered is not None:
                # The SDK binds these params into the handler chain, so the next run reads its
                # answers from them: the MRTR retry a client would send, made in the server.
                params.input_responses = answered.input_responses()
                params.request_state = answered.request_state
            return await call_next(ctx)

        execution = self.runtime.begin(
            tool_name=params.name,
            principal_digest=caller,
            call=run_call,
            capabilities=ctx.session.client_capabilities,
        )
        # At a zero threshold the call is a task before it runs at all, so it is not started
        # eagerly: a first step that finishes at once would otherwise be answered inline.
        execution.start(eager=bool(self.options.threshold_s))
        outcome = await execution.wait(self.options.threshold_s or 0.0)
        if outcome is not None and (mode is TaskMode.OPTIONAL or outcome.asks_for_input):
            return outcome.unwrap()  # finished in time, or an input round that precedes any task
        try:
            record = await execution.promote()
        except StoreUnavailableError:
            logger.warning("task store unavailable: %r answered without a task", params.name)
            record = None
        if record is not None:
            return create_task_result(record)
        outcome = await execution.wait(None)
        assert outcome is not None  # waiting without a timeout always yields the outcome
        return outcome.unwrap()

    def caller(self, ctx: ServerRequestContext[Any, Any]) -> Caller:
        """The stored owner for a task created by this request, or :data:`ANONYMOUS`."""
        principal = self._principal_of(ctx)
        if principal is not None:
            return _digest_of(principal)
        return None if self.options.allow_anonymous_tasks else ANONYMOUS

    # -- tasks/* ---------------------------------------------------------------------------

    async def _load(self, ctx: ServerRequestContext[Any, Any], task_id: str, *, remembered: bool = False) -> TaskRecord:
        """The task as this request may see it (``-32602`` for unknown, expired or another's).

        While the store is unreachable the answer is ``-32603``, except that with ``remembered``
        the worker holding the task answers from its own view of it (:meth:`TaskRuntime.remembered`);
        the same ownership and expiry checks apply to that view.
        """
        require_client_extension(ctx, TASKS_EXTENSION)
        caller = self.caller(ctx)
        if not storable(task_id):  # no store holds such an id (PostgreSQL cannot compare it): unknown
            raise MCPError(code=INVALID_PARAMS, message=UNKNOWN_TASK_MESSAGE)
        try:
            record = await self.store.get(task_id)
        except StoreUnavailableError as exc:
            record = self.runtime.remembered(task_id) if remembered else None
            if record is None:
                raise MCPError(**jsonrpc_error(exc, "Task store")) from exc
        if record is None or record.expired(self.runtime.clock.now_ms()):
            raise MCPError(code=INVALID_PARAMS, message=UNKNOWN_TASK_MESSAGE)
        if record.principal_digest is not None and record.principal_digest != caller:
            raise MCPError(code=INVALID_PARAMS, message=UNKNOWN_TASK_MESSAGE)
        return record

    async def _visible(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> TaskRecord | None:
        """The task if this request may see it; ``None`` for unknown, expired or another's."""
        record = await self._live(task_id)
        if record is None or (record.principal_digest is not None and record.principal_digest != self.caller(ctx)):
            return None
        return record

    async def _live(self, task_id: str) -> TaskRecord | None:
        if not storable(task_id):
            return None
        record = await self.store.get(task_id)
        return None if record is None or record.expired(self.runtime.clock.now_ms()) else record

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        # Only reads fall back to the worker's memory; every change still needs the store.
        return detailed_task(await self._load(ctx, params.task_id, remembered=True))

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams) -> dict[str, Any]:
        size = len(json.dumps(params.input_responses, separators=(",", ":")))
        if size > self.options.max_input_response_bytes:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"inputResponses is {size} bytes; the limit is {self.options.max_input_response_bytes}",
            )
        record = await self._load(ctx, params.task_id)
        if record.terminal or not params.input_responses:
            return {}
        try:
            accepted = await self.store.submit_input_responses(record.task_id, params.input_responses)
            handler = self._handlers.get(record.handler) if record.handler is not None else None
            if accepted and handler is not None:
                await handler.input_received(record)
            elif accepted and self.runtime.local(record.task_id) is not None:
                await self.runtime.deliver_input(record.task_id)
            elif accepted:
                await self.runtime.publish(record.task_id, SignalKind.INPUT)  # its worker acts at once
            if accepted:
                # Every outstanding request answered: the store moved the task back to working.
                resumed = record.status is TaskStatus.INPUT_REQUIRED and set(accepted) >= set(record.input_requests)
                await self.runtime.task_changed(record.task_id, TaskStatus.WORKING if resumed else None)
        except StoreUnavailableError as exc:
            raise MCPError(**jsonrpc_error(exc, "Task store")) from exc
        return {}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        record = await self._load(ctx, params.task_id)
        if record.terminal:
            return {}
        try:
            await self._cancel_active(record)
        except StoreUnavailableError as exc:
            raise MCPError(**jsonrpc_error(exc, "Task store")) from exc
        return {}

    async def _cancel_active(self, record: TaskRecord) -> None:
        if record.handler is not None:
            handler = self._handlers.get(record.handler)
            if handler is not None:
                await handler.cancel_task(record)
            else:  # this worker lacks the handler: leave the request where one that has it will see it
                await self.store.request_cancel(record.task_id)
            return
        execution = self.runtime.local(record.task_id)
        if execution is not None:
            # Runs here: stop it. Once the tool has returned this is a no-op, and the outcome
            # being recorded stands.
            execution.cancel()
            return
        flagged = await self.store.request_cancel(record.task_id)
        if flagged is None or flagged.terminal:
            return
        if flagged.owner is None:
            # Nothing runs it: cancelling is only a status change.
            if await self.store.transition(record.task_id, TaskStatus.CANCELLED, status_message="Cancelled"):
                await self.runtime.task_changed(record.task_id, TaskStatus.CANCELLED)
            return
        # Its worker acts on the signal at once (or, if the signal is lost, at its next heartbeat).
        await self.runtime.publish(record.task_id, SignalKind.CANCEL)
