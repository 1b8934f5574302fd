"""One ``tools/call`` that may become a task, and the API a tool uses while it runs as one."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

import mcp_types as types
from mcp.server.context import HandlerResult
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter, ValidationError

from mcp_approval.clock import Clock
from mcp_approval.protocol import INTERNAL_ERROR, INVALID_PARAMS, METHOD_ELICITATION_CREATE
from mcp_approval.storage import StoreUnavailableError
from mcp_approval.tasks._eager_start import start_eagerly
from mcp_approval.tasks.capabilities import check_declared
from mcp_approval.tasks.models import TaskRecord, error_document, new_task_id, result_document
from mcp_approval.tasks.options import TaskOptions
from mcp_approval.tasks.states import TaskStatus
from mcp_approval.tasks.store import NewTask, TaskLimitReachedError, TaskStore

logger = logging.getLogger("mcp_approval.tasks")

_CURRENT: contextvars.ContextVar[Execution] = contextvars.ContextVar("mcp_approval_task")
_INPUT_RESPONSES: TypeAdapter[types.InputResponses] = TypeAdapter(types.InputResponses)


def current_task() -> Execution:
    """The task-capable call the running tool belongs to.

    Raises:
        RuntimeError: when the tool is not running under the tasks extension.
    """
    try:
        return _CURRENT.get()
    except LookupError:
        raise RuntimeError("current_task() called outside a call handled by the tasks extension") from None


@dataclass(frozen=True)
class AnsweredRound:
    """The client's answers to an input round a task asked, for the call's next run.

    ``responses`` maps the tool's own request keys to the answers; ``request_state`` is the
    state the tool returned with the round (kept in the server, never sent to the client).
    """

    responses: dict[str, Any]
    request_state: str | None

    def input_responses(self) -> types.InputResponses:
        """The answers as the SDK's typed ``InputResponses``, as a client's retry would carry them.

        Raises:
            MCPError: ``-32602`` naming the keys whose answers are not valid results.
        """
        try:
            return _INPUT_RESPONSES.validate_python(self.responses)
        except ValidationError as exc:
            keys = sorted({str(error["loc"][0]) for error in exc.errors() if error["loc"]})
            raise MCPError(code=INVALID_PARAMS, message=f"Invalid inputResponses for {', '.join(keys)}") from None


@dataclass(frozen=True)
class Outcome:
    """How a call ended: a result, a JSON-RPC error, or cancellation."""

    kind: Literal["result", "error", "cancelled"]
    result: HandlerResult = None
    error: MCPError | None = None

    @property
    def asks_for_input(self) -> bool:
        """Whether the call answered with an MRTR input round (``InputRequiredResult``)."""
        return isinstance(self.result, types.InputRequiredResult)

    def unwrap(self) -> HandlerResult:
        """The result for an ordinary (non-task) answer; re-raises a JSON-RPC error."""
        if self.error is not None:
            raise self.error
        if self.kind == "cancelled":
            raise MCPError(code=INTERNAL_ERROR, message="The call was cancelled by server shutdown")
        return self.result


class ExecutionHost(Protocol):
    """What an :class:`Execution` needs from the worker running it (the tasks runtime)."""

    @property
    def options(self) -> TaskOptions:
        """The tasks options (TTL, poll interval, lease, limits)."""
        ...

    @property
    def worker_id(self) -> str:
        """This worker's id, the owner of the tasks it promotes."""
        ...

    @property
    def store(self) -> TaskStore:
        """Where task rows live."""
        ...

    @property
    def clock(self) -> Clock:
        """The source of time (stamps the worker's own view of its tasks)."""
        ...

    def adopt(self, execution: Execution) -> None:
        """Track a promoted execution so signals and shutdown reach it."""
        ...

    def release(self, task_id: str) -> None:
        """Forget a finished execution."""
        ...

    async def persist_terminal(
        self,
        task_id: str,
        status: TaskStatus,
        status_message: str | None,
        result: dict[str, Any] | None,
        error: dict[str, Any] | None,
    ) -> None:
        """Write a task's final status, retrying while the store is unreachable."""
        ...

    async def deliver_input(self, task_id: str) -> None:
        """Move answers recorded in the store to the local execution waiting for them."""
        ...

    async def task_changed(self, task_id: str, status: TaskStatus | None = None) -> None:
        """Signal every worker that the task's status changed (for ``notifications/tasks``)."""
        ...


class Execution:
    """A running call: answered inline if it finishes in time, otherwise promoted to a task.

    The coroutine starts at once. :meth:`promote` commits a task row and from then on the
    outcome is written to the store instead of being returned. Status changes after promotion
    go through the store's compare-and-set, so a terminal status written by one path is never
    overwritten by another (cancellation racing completion, shutdown, lease expiry).
    """

    def __init__(
        self,
        runtime: ExecutionHost,
        *,
        tool_name: str,
        principal_digest: str | None,
        call: Callable[[AnsweredRound | None], Awaitable[HandlerResult]],
        capabilities: types.ClientCapabilities | None = None,
    ) -> None:
        self._runtime = runtime
        self._capabilities = capabilities
        self.tool_name = tool_name
        self.principal_digest = principal_digest
        self._call = call
        self.task_id: str | None = None
        self.record: TaskRecord | None = None
        #: This worker's own view of the task (status, input asked, the outcome once known), kept
        #: in memory so ``tasks/get`` can be answered from it while the store is unreachable.
        self.view: TaskRecord | None = None
        self._created: asyncio.Event | None = None  # made by the first promote()
        self._outcome: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        # Futures of callers of wait(), resolved by _run the moment the outcome is set.
        self._wakers: list[asyncio.Future[None]] = []
        self._finishing = False
        self._waiters: dict[str, asyncio.Future[Any]] = {}
        self._runner: asyncio.Task[None] | None = None
        self._promotion: asyncio.Future[TaskRecord | None] | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, *, eager: bool = False) -> None:
        """Start running the call in a task of its own.

        ``eager``: run its first step at once, inside this call (up to its first suspension),
        so a call that finishes without suspending is over when this returns. Otherwise the
        first step waits for the next event-loop iteration, after whatever the caller does next
        (a :meth:`promote` made right after starts before the call's first step ends).
        """
        name = f"mcp-approval call {self.tool_name}"
        if eager:
            self._runner = start_eagerly(self._run(), name=name)
        else:
            self._runner = asyncio.get_running_loop().create_task(self._run(), name=name)

    async def wait(self, timeout_s: float | None) -> Outcome | None:
        """Wait up to ``timeout_s`` for the outcome; ``None`` if the call is still running.

        Cancelling the waiter never cancels the call.
        """
        if not self._outcome.done() and timeout_s != 0:
            # A private future that _run resolves directly and a timer, rather than
            # asyncio.wait: no callbacks to add and remove, and the waiter wakes in the
            # loop iteration after the outcome instead of two iterations later.
            loop = asyncio.get_running_loop()
            waker: asyncio.Future[None] = loop.create_future()
            self._wakers.append(waker)
            timer = None if timeout_s is None else loop.call_later(timeout_s, _wake, waker)
            try:
                await waker
            finally:
                if timer is not None:
                    timer.cancel()
                self._wakers.remove(waker)
        return self._outcome.result() if self._outcome.done() else None

    @property
    def promoted(self) -> bool:
        """Whether the call has become a task."""
        return self.task_id is not None

    @property
    def running(self) -> bool:
        """Whether the tool is still running (a cancel can still reach it)."""
        return self._runner is not None and not self._runner.done() and not self._finishing

    async def promote(self) -> TaskRecord | None:
        """Turn the call into a committed task and return its row.

        Every caller shares one promotion (the interceptor and the tool asking for input may
        race to it). A call that has already finished becomes a task born terminal with its
        outcome. Returns ``None`` when a task limit refuses the task (answer inline instead).
        Raises :class:`StoreUnavailableError` if the row cannot be written.
        """
        if self._promotion is None:
            self._created = asyncio.Event()
            self._promotion = asyncio.ensure_future(self._promote_once())
        return await asyncio.shield(self._promotion)

    async def _promote_once(self) -> TaskRecord | None:
        self.task_id = new_task_id()  # claimed before the first await: _run sees it from now on
        options = self._runtime.options
        task = NewTask(
            task_id=self.task_id,
            principal_digest=self.principal_digest,
            tool_name=self.tool_name,
            ttl_ms=options.ttl_ms,
            poll_interval_ms=options.poll_interval_ms,
            owner=self._runtime.worker_id,
            lease_ms=options.lease_ms,
        )
        if self._outcome.done() and self._outcome.result().asks_for_input:
            # The call answered with its input round before the task existed: the round is
            # answered in the request (no task is created), exactly as if it had come in time.
            self._abandon_promotion()
            return None
        if self._outcome.done():  # already over: the task is born terminal
            status, message, result, error = _terminal_write(self._outcome.result())
            task = replace(task, status=status, status_message=message, result=result, error=error)
        try:
            self.record = await self._runtime.store.create(
                task, max_active=options.max_tasks, max_active_per_principal=options.max_per_principal
            )
        except TaskLimitReachedError as limit:
            self._abandon_promotion()
            logger.warning("task limit %s: %r answered without a task", limit, self.tool_name)
            return None
        except BaseException:
            self._abandon_promotion()
            raise
        if not self.record.terminal:
            self.view = self.record
            self._runtime.adopt(self)
        self._promoted()
        return self.record

    def _abandon_promotion(self) -> None:
        # No row exists: the outcome goes back to the inline answer, and _record_outcome
        # (which may already be waiting for the row) stands down.
        self.task_id = None
        self._promoted()

    def _promoted(self) -> None:
        """The promotion has ended (a row was written, or none will be)."""
        assert self._created is not None  # made by promote() before _promote_once runs
        self._created.set()

    def cancel(self) -> bool:
        """Cancel the running tool; returns whether a cancellation was delivered."""
        if not self.running or self._runner is None:
            return False
        return self._runner.cancel()

    async def join(self) -> None:
        """Wait until the background run (including its final store write) is over."""
        if self._runner is not None:
            await asyncio.gather(self._runner, return_exceptions=True)

    async def _run(self) -> None:
        _CURRENT.set(self)
        try:
            result = await self._call(None)
            while self.task_id is not None and isinstance(result, types.InputRequiredResult):
                result = await self._call(await self._ask_through_task(result))
        except asyncio.CancelledError:
            outcome = Outcome("cancelled")
        except MCPError as exc:
            outcome = Outcome("error", error=exc)
        except Exception:
            logger.exception("tool %r raised outside the SDK's error handling", self.tool_name)
            outcome = Outcome("error", error=MCPError(code=INTERNAL_ERROR, message="Internal error"))
        else:
            outcome = Outcome("result", result=result)
        self._finishing = True
        self._outcome.set_result(outcome)
        for waker in self._wakers:
            _wake(waker)
        # A task promoted before this point records the outcome; one promoted later is born
        # terminal with it (see promote).
        if self.task_id is not None:
            await asyncio.shield(self._record_outcome(outcome))

    async def _record_outcome(self, outcome: Outcome) -> None:
        assert self._created is not None  # task_id is only set once promote() has begun
        await self._created.wait()
        if self.task_id is None:  # promotion failed: the outcome is answered inline
            return
        status, message, result, error = _terminal_write(outcome)
        self._remember(status=status, status_message=message, result=result, error=error, input_requests={})
        try:
            await self._runtime.persist_terminal(self.task_id, status, message, result, error)
        finally:
            self._runtime.release(self.task_id)
            for waiter in self._waiters.values():
                waiter.cancel()

    # -- input during execution ------------------------------------------------------------

    async def _ask_through_task(self, round_: types.InputRequiredResult) -> AnsweredRound:
        """An MRTR round the call answered with after it became a task, asked through the task.

        The task moves to ``input_required`` with the round's requests; once ``tasks/update``
        has answered them all, the call runs again with the answers under the tool's own keys
        and its ``requestState``, which never leaves the server.
        """
        asked = round_.input_requests or {}
        if not asked:  # a round of state alone: nothing to ask, the call runs again at once
            return AnsweredRound(responses={}, request_state=round_.request_state)
        keys = list(asked)
        requests = [asked[key].model_dump(by_alias=True, exclude_none=True, mode="json") for key in keys]
        answers = await self.request_input(requests)
        return AnsweredRound(responses=dict(zip(keys, answers, strict=True)), request_state=round_.request_state)

    async def request_input(self, requests: Sequence[Mapping[str, Any]]) -> list[Any]:
        """Ask the client for input and wait for every answer.

        Each request is ``{"method": ..., "params": ...}`` (``elicitation/create``,
        ``sampling/createMessage`` or ``roots/list``). The task moves to ``input_required``
        until all are answered through ``tasks/update``. Returns the answers in order.

        Raises:
            MCPError: ``-32021`` if the creating request did not declare the capability a request
                needs (its task then ends ``failed`` unless the tool handles it), or
                ``-32603`` if the call cannot become a task (a task limit was reached).
        """
        for request in requests:
            check_declared(request, self._capabilities)
        if await self.promote() is None:
            raise MCPError(code=INTERNAL_ERROR, message="This call cannot ask for input: no task could be created")
        assert self.task_id is not None
        keys = await self._runtime.store.add_input_requests(self.task_id, requests)
        if keys is None:  # the task has already ended (expired, or failed by a lost lease): stop
            raise asyncio.CancelledError
        asked = {key: dict(request) for key, request in zip(keys, requests, strict=True)}
        self._remember(status=TaskStatus.INPUT_REQUIRED, input_requests=asked)
        await self._runtime.task_changed(self.task_id, TaskStatus.INPUT_REQUIRED)
        loop = asyncio.get_running_loop()
        futures = [self._waiters.setdefault(key, loop.create_future()) for key in keys]
        await self._runtime.deliver_input(self.task_id)  # answers may already be waiting
        answers = list(await asyncio.gather(*futures))
        self._remember(status=TaskStatus.WORKING, input_requests={})
        return answers

    def _remember(self, **changes: Any) -> None:
        """Record a change of the task in this worker's view of it (see :attr:`view`)."""
        if self.view is not None:
            self.view = replace(self.view, updated_at=self._runtime.clock.now_ms(), **changes)

    async def elicit(self, message: str, requested_schema: Mapping[str, Any]) -> dict[str, Any]:
        """Ask the user a form-mode question; returns the ``ElicitResult`` as a dict."""
        params = types.ElicitRequestFormParams(message=message, requested_schema=dict(requested_schema))
        request = {"method": METHOD_ELICITATION_CREATE, "params": params.model_dump(by_alias=True, exclude_none=True)}
        (answer,) = await self.request_input([request])
        return dict(answer) if isinstance(answer, Mapping) else {"action": "cancel"}

    def accept_responses(self, responses: Mapping[str, Any]) -> None:
        """Hand answers taken from the store to the waiting tool."""
        for key, value in responses.items():
            waiter = self._waiters.pop(key, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(value)


def _wake(waker: asyncio.Future[None]) -> None:
    if not waker.done():  # a waiter cancelled meanwhile has a cancelled waker
        waker.set_result(None)


def _terminal_write(outcome: Outcome) -> tuple[TaskStatus, str | None, dict[str, Any] | None, dict[str, Any] | None]:
    """(status, statusMessage, result, error) for an outcome, per SEP-2663's status rules."""
    if outcome.kind == "cancelled":
        return TaskStatus.CANCELLED, "Cancelled", None, None
    if outcome.error is not None:
        error = outcome.error.error
        return TaskStatus.FAILED, error.message, None, error_document(error.code, error.message, error.data)
    # Never an input round: a promoted call asks it through its task (_run), and a round that
    # finished before the promotion committed is answered inline (_promote_once).
    return TaskStatus.COMPLETED, None, result_document(outcome.result), None


__all__ = ["AnsweredRound", "Execution", "Outcome", "StoreUnavailableError", "check_declared", "current_task"]
