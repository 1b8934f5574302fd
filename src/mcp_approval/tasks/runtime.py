"""The per-process tasks runtime: running executions, leases, signals and the sweeper."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server.context import HandlerResult

from mcp_approval._background import finish_or_cancel, pause_unless_stopping
from mcp_approval.clock import Clock, SystemClock
from mcp_approval.protocol import INTERNAL_ERROR
from mcp_approval.storage import StoreUnavailableError
from mcp_approval.tasks.execution import AnsweredRound, Execution
from mcp_approval.tasks.models import TaskRecord, error_document
from mcp_approval.tasks.options import TaskOptions
from mcp_approval.tasks.signals import SignalKind, TaskChange, TaskSignals, signals_for
from mcp_approval.tasks.states import TaskStatus
from mcp_approval.tasks.store import TaskStore

__all__ = ["TaskRuntime", "new_worker_id"]

logger = logging.getLogger("mcp_approval.tasks")

_LOST_WORKER_MESSAGE = "The worker running this task stopped responding"
# How long a terminal write keeps being retried while the store is down, between attempts.
_RETRY_BACKOFF_S = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


def new_worker_id() -> str:
    """An id for this process among the workers sharing one store."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"


class TaskRuntime:
    """Runs task executions for one worker process.

    It owns the background loops of the worker: lease renewal (which also collects cancel
    and input signals that other workers recorded in the store) and the sweeper (which purges
    expired tasks and fails tasks whose worker died). Entering it more than once is allowed;
    it stops when the last user leaves.
    """

    def __init__(
        self,
        store: TaskStore,
        options: TaskOptions,
        *,
        clock: Clock | None = None,
        signals: TaskSignals | None = None,
    ) -> None:
        self.store = store
        self._given_signals = signals
        self._signals: TaskSignals | None = signals
        self._unsubscribe: Callable[[], None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self.options = options
        self.clock = clock or SystemClock()
        self.worker_id = new_worker_id()
        self._executions: dict[str, Execution] = {}
        self._loops: list[asyncio.Task[None]] = []
        self._users = 0
        self._lock = asyncio.Lock()
        self._stopping = False
        self._stop_requested = asyncio.Event()  # wakes the loops' waits when the runtime stops
        # When this worker last regained the store after failing to reach it (0: never lost it),
        # and an event set while it reaches the store (wakes terminal writes waiting to retry).
        self._reachable_since: int | None = 0
        self._reachable = asyncio.Event()
        self._reachable.set()

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the store and start the background loops (once, however often called)."""
        async with self._lock:
            if self._users == 0:
                await self.store.open()  # a failure leaves the runtime stopped, not half-started
            self._users += 1
            if self._users > 1:
                return
            self._stopping = False
            self._stop_requested.clear()
            await self._open_signals()
            self._loops = [
                asyncio.create_task(self._heartbeat_loop(), name="mcp-approval task leases"),
                asyncio.create_task(self._sweep_loop(), name="mcp-approval task sweeper"),
            ]

    async def stop(self) -> None:
        """Cancel every running task (they end ``cancelled``), stop the loops, close the store.

        A loop in the middle of a store call finishes it first (see :mod:`mcp_approval._background`).
        """
        async with self._lock:
            self._users -= 1
            if self._users > 0:
                return
            self._stopping = True
            self._stop_requested.set()
            executions = list(self._executions.values())
            for execution in executions:
                execution.cancel()
            await asyncio.gather(*(execution.join() for execution in executions), return_exceptions=True)
            await finish_or_cancel(self._loops)
            self._loops = []
            await self._close_signals()
            await self.store.close()

    # -- signals ---------------------------------------------------------------------------

    @property
    def signals(self) -> TaskSignals:
        """The change signals shared with the other workers (available once started)."""
        if self._signals is None:
            raise RuntimeError("the tasks runtime is not started")
        return self._signals

    async def _open_signals(self) -> None:
        signals = self._given_signals or signals_for(self.store)
        await signals.open()
        self._signals = signals
        self._unsubscribe = signals.subscribe(self._on_signal)

    async def _close_signals(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if self._signals is not None:
            await self._signals.close()
        self._signals = self._given_signals

    def _on_signal(self, change: TaskChange) -> None:
        """Act at once on a cancel or input signal for a task this worker runs."""
        if change.task_id not in self._executions:
            return
        if change.kind is SignalKind.CANCEL:
            self.cancel_local(change.task_id)
        elif change.kind is SignalKind.INPUT:
            task = asyncio.create_task(self._deliver_quietly(change.task_id), name="mcp-approval task input")
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _deliver_quietly(self, task_id: str) -> None:
        with contextlib.suppress(StoreUnavailableError):
            await self.deliver_input(task_id)

    async def publish(
        self, task_id: str, kind: SignalKind = SignalKind.STATUS, status: TaskStatus | None = None
    ) -> None:
        """Tell every worker that ``task_id`` changed (a wake-up; never raises)."""
        if self._signals is None:
            return
        try:
            await self._signals.publish(TaskChange(task_id, kind, status))
        except Exception:  # a signal is best effort: the heartbeat and tasks/get remain
            logger.exception("task %s: %s signal not published", task_id[:8], kind)

    async def task_changed(self, task_id: str, status: TaskStatus | None = None) -> None:
        """A task's status (to ``status``, if known) or what ``tasks/get`` shows changed: tell every worker."""
        await self.publish(task_id, SignalKind.STATUS, status)

    # -- executions ------------------------------------------------------------------------

    def begin(
        self,
        *,
        tool_name: str,
        principal_digest: str | None,
        call: Callable[[AnsweredRound | None], Awaitable[HandlerResult]],
        capabilities: types.ClientCapabilities | None = None,
    ) -> Execution:
        """Create an execution for a call; the caller starts it.

        ``call`` runs the call: first with ``None``, then, after an input round the task asked,
        with its answers. ``capabilities`` are those the creating request declared; input
        requests are held to them.
        """
        return Execution(
            self, tool_name=tool_name, principal_digest=principal_digest, call=call, capabilities=capabilities
        )

    def adopt(self, execution: Execution) -> None:
        """Track a promoted execution so signals and shutdown reach it."""
        assert execution.task_id is not None
        self._executions[execution.task_id] = execution

    def release(self, task_id: str) -> None:
        """Forget a finished execution."""
        self._executions.pop(task_id, None)

    def local(self, task_id: str) -> Execution | None:
        """The execution running ``task_id`` in this process, if any."""
        return self._executions.get(task_id)

    def remembered(self, task_id: str) -> TaskRecord | None:
        """This worker's own view of a task it holds (running, or its outcome not yet stored).

        What ``tasks/get`` answers from while the store is unreachable; ``None`` for a task
        this worker does not hold.
        """
        execution = self._executions.get(task_id)
        return None if execution is None else execution.view

    async def persist_terminal(
        self,
        task_id: str,
        status: TaskStatus,
        status_message: str | None,
        result: dict[str, Any] | None,
        error: dict[str, Any] | None,
    ) -> None:
        """Write a task's final status, retrying while the store is unreachable.

        The outcome stays in memory meanwhile (``tasks/get`` on this worker answers from it), so
        a store outage loses nothing the worker still holds; a retry starts as soon as the
        store answers again. The write is fenced on this worker's ownership: if the task ended
        meanwhile (the sweeper failed it after a lapsed lease), that outcome stands. Gives up
        only when the worker stops (the lease then lapses elsewhere).
        """
        attempt = 0
        while True:
            try:
                written = await self.store.transition(
                    task_id, status, status_message=status_message, result=result, error=error, owner=self.worker_id
                )
            except StoreUnavailableError:
                self._note_unreachable()
                if self._stopping and attempt >= len(_RETRY_BACKOFF_S):
                    logger.error("task %s: final status %s could not be stored", task_id[:8], status)
                    return
                await self._retry_pause(_RETRY_BACKOFF_S[min(attempt, len(_RETRY_BACKOFF_S) - 1)])
                attempt += 1
                continue
            self._note_reachable()
            if written or (attempt > 0 and await self._already_written(task_id, status, result, error)):
                await self.task_changed(task_id, status)
            else:
                logger.warning("task %s had already ended or changed hands; %s not recorded", task_id[:8], status)
            return

    async def _already_written(
        self, task_id: str, status: TaskStatus, result: dict[str, Any] | None, error: dict[str, Any] | None
    ) -> bool:
        """Whether an earlier attempt whose answer was lost in the outage did store this outcome."""
        with contextlib.suppress(StoreUnavailableError):
            record = await self.store.get(task_id)
            return record is not None and (record.status, record.result, record.error) == (status, result, error)
        return False

    async def _retry_pause(self, delay_s: float) -> None:
        """Wait ``delay_s`` before retrying a store write, or less if the store answers meanwhile."""
        self._reachable.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._reachable.wait(), timeout=delay_s)

    def _note_unreachable(self) -> None:
        self._reachable_since = None
        self._reachable.clear()

    def _note_reachable(self) -> None:
        if self._reachable_since is None:
            self._reachable_since = self.clock.now_ms()
            logger.info("task store reachable again")
        self._reachable.set()

    async def deliver_input(self, task_id: str) -> None:
        """Move answers recorded in the store to the local execution waiting for them."""
        execution = self._executions.get(task_id)
        if execution is None:
            return
        responses = await self.store.take_input_responses(task_id)
        if responses:
            execution.accept_responses(responses)

    def local_running(self, task_id: str) -> bool:
        """Whether this process runs ``task_id`` and its tool has not returned yet."""
        execution = self._executions.get(task_id)
        return execution is not None and execution.running

    def cancel_local(self, task_id: str) -> bool:
        """Cancel ``task_id`` if this process runs it; returns whether it did."""
        execution = self._executions.get(task_id)
        return execution is not None and execution.cancel()

    # -- background loops ------------------------------------------------------------------

    @property
    def heartbeat_interval_s(self) -> float:
        """How often leases are renewed and signals collected."""
        return max(0.02, min(self.options.poll_interval_s, self.options.lease_ms / 4000))

    async def _heartbeat_loop(self) -> None:
        # Checked as well as cancelled: a store client may turn the cancellation into a connection
        # error (suppressed below), and the loop must still end when the runtime stops.
        while not self._stopping:
            await self._pause(self.heartbeat_interval_s)
            if self._stopping:
                break
            with contextlib.suppress(StoreUnavailableError):  # noted by heartbeat_once
                await self.heartbeat_once()

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds``, or less when the runtime stops."""
        await pause_unless_stopping(self._stop_requested, seconds)

    async def heartbeat_once(self) -> None:
        """Renew this worker's lease and act on cancel and input signals from other workers.

        The one worker lease covers every task this worker holds: running, or finished with
        its outcome not yet stored (so a store outage cannot hand the task to the sweeper
        between the store's return and the delayed write). Its cost does not grow with the
        number of tasks held.
        """
        reconnect = getattr(self._signals, "reconnect_if_lost", None)
        if reconnect is not None:
            await reconnect()
        held = list(self._executions)
        try:
            signals = await self.store.heartbeat(self.worker_id, held, self.options.lease_ms)
        except StoreUnavailableError:
            self._note_unreachable()
            raise
        if held:
            self._note_reachable()
        for signal in signals:
            if not self.local_running(signal.task_id):
                continue
            if signal.cancel_requested:
                self.cancel_local(signal.task_id)
            elif signal.has_input_responses:
                await self.deliver_input(signal.task_id)

    async def _sweep_loop(self) -> None:
        while not self._stopping:  # see _heartbeat_loop
            await self._pause(self.options.sweep_interval_s)
            if self._stopping:
                break
            with contextlib.suppress(StoreUnavailableError):  # noted by sweep_once
                await self.sweep_once()

    async def sweep_once(self) -> None:
        """Purge expired tasks and fail those whose worker's lease lapsed.

        After this worker could not reach the store, lapsed leases are left alone until it has
        reached the store again for one lease period: an outage stops every worker's renewals,
        and the owners of tasks that outlived it must get the time to renew and to store their
        outcomes before their leases count as lapsed.
        """
        try:
            purged = await self.store.purge_expired()
        except StoreUnavailableError:
            self._note_unreachable()
            raise
        self._note_reachable()
        for task_id in purged:
            self.cancel_local(task_id)
        since = self._reachable_since
        if since is None or self.clock.now_ms() - since < self.options.lease_ms:
            return
        error = error_document(INTERNAL_ERROR, _LOST_WORKER_MESSAGE)
        lapsed = await self.store.fail_lapsed(error, _LOST_WORKER_MESSAGE)
        for task_id in lapsed:
            await self.task_changed(task_id)
        if lapsed:
            logger.warning("%d task(s) failed: their worker stopped renewing its lease", len(lapsed))
