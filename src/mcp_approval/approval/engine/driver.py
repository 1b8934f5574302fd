"""The workflow driver: follows pending approvals to their end (SEP-2848 §Lifecycle, §Completion).

Each worker runs one. It decides when a workflow is looked at: pass after pass, it reads the due
workflows in batches (their backend states in one call where the backend offers it), writes a
later look for a request still pending as the workflow knows it, and leases the rest for a full
look (:class:`~mcp_approval.approval.engine.progress.WorkflowProgress`, whose table says what each
backend state leads to). A backend's wake-up checks its workflow at once. Now and then it
reconciles what a crash left in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping

from mcp_approval._background import finish_or_cancel, pause_unless_stopping
from mcp_approval.approval.engine.changes import ChangeFollower
from mcp_approval.approval.engine.dependencies import ApprovalDependencies
from mcp_approval.approval.engine.progress import DriverPass, WorkflowProgress
from mcp_approval.approval.engine.resubmission import Resubmission, withdraw
from mcp_approval.approval.engine.run_once import Executor
from mcp_approval.approval.persistence.states import IN_FLIGHT_INTENTS, IntentState, Phase
from mcp_approval.approval.persistence.store import DueCheck, Intent, Reschedule, TaskOutcome, Workflow
from mcp_approval.backends import ApprovalBackendError, ApprovalState, ApprovalStatus, SupportsStatusMany
from mcp_approval.storage import StoreUnavailableError
from mcp_approval.tasks.states import TaskStatus
from mcp_approval.tracing import span

__all__ = ["WorkflowDriver"]

logger = logging.getLogger("mcp_approval.approval")

# Due workflows read and checked together: a batch costs one commit (two when some must be
# leased), so a pass over a large pending set after a restart is bound by how many batches it takes.
_BATCH = 1000
_EARLY_WAKES = 4096
_CONCURRENCY = 32


class WorkflowDriver:
    """Drives one worker's share of pending approvals (see the module docstring).

    Args:
        deps: the store, backend, policy and the rest it works with.
        worker_id: this worker, the holder of the leases and claims it takes.
    """

    def __init__(self, deps: ApprovalDependencies, *, worker_id: str) -> None:
        self.deps = deps
        self.worker_id = worker_id
        options = deps.options
        self.lease_ms = round(options.lease_s * 1000)
        self.executor = Executor(
            deps.store,
            deps.tools,
            deps.clock,
            worker_id=worker_id,
            lease_ms=self.lease_ms,
            execution_deadline_ms=round(options.execution_deadline_s * 1000),
            cipher=deps.cipher,
        )
        self.tick_s = max(0.02, min(1.0, options.poll_interval_s / 2))
        self._loop: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._inflight: set[asyncio.Task[None]] = set()
        self._limit = asyncio.Semaphore(_CONCURRENCY)
        self._resubmission = Resubmission(
            deps.store,
            deps.backend,
            deps.cipher,
            deps.clock,
            intent_grace_ms=round(options.intent_grace_s * 1000),
        )
        self._last_reconcile = 0
        # This worker vouches for its creations in flight a few times per grace (see Resubmission).
        self._renewal_ms = round(options.intent_grace_s * 1000 / 3)
        self._last_renewal = 0
        # Workflows this worker is checking, and those woken meanwhile (checked once more after).
        self._checking: set[str] = set()
        self._woken: set[str] = set()
        # Handles woken before their task existed (an automatic resolver can decide that fast).
        self._early: dict[str, None] = {}
        # Wake-ups the store could not serve (handles), and checks it interrupted or that found the
        # workflow still held by this worker (task ids): each pass tries them again until a check
        # went through, so no decision waits for the slow poll.
        self._missed_wakes: set[str] = set()
        self._missed_checks: set[str] = set()
        self._doubts: asyncio.Task[None] | None = None
        fallback_s = max(options.poll_interval_s, options.fallback_poll_interval_s)
        self.changes = ChangeFollower(
            deps.backend,
            deps.clock,
            self.wake,
            first_look_back_ms=round(fallback_s * 1000),
            enabled=options.follow_changes,
        )
        # A still-pending request is polled this often (rarely, when the backend's feed reports changes).
        self._pending_poll_ms = round((fallback_s if self.changes.active else options.poll_interval_s) * 1000)
        self._progress = WorkflowProgress(
            deps,
            executor=self.executor,
            resubmission=self._resubmission,
            pending_poll_ms=self._pending_poll_ms,
            lease_ms=self.lease_ms,
        )

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Resolve in the background: reconcile what a crash may have left, then pass after pass.

        Nothing here waits for the store, so a server starts serving at once however many
        approvals are pending; the first pass works through them in leased batches.
        """
        self._stopping.clear()
        self._loop = asyncio.create_task(self._run(), name="mcp-approval workflow driver")

    async def stop(self) -> None:
        """Stop the loop and the checks in flight: each finishes what it is doing first.

        The pass and the checks get a grace to end (see :mod:`mcp_approval._background`); only
        what still runs then is cancelled (its leases lapse for another worker). No new check
        starts meanwhile.
        """
        self._stopping.set()
        await finish_or_cancel([self._loop, *self._inflight])
        self._loop = None

    async def _run(self) -> None:
        started, first = time.perf_counter(), True
        while not self._stopping.is_set():
            try:
                if first:
                    await self.reconcile()
                checked = await self.tick()
                if first:
                    first = False
                    took = time.perf_counter() - started
                    logger.info(
                        "workflow driver: first pass after start checked %d due approvals in %.2f s", checked, took
                    )
            except StoreUnavailableError:
                logger.warning("approval store unavailable; the workflow driver retries")
            except Exception:
                logger.exception("approval workflow driver tick failed")
            await pause_unless_stopping(self._stopping, self.tick_s)

    async def tick(self) -> int:
        """One pass: lost executions, due checks (batch after batch), and now and then reconciliation.

        Returns how many due workflows the pass checked.
        """
        store = self.deps.store
        await self.settle_failed_creations()
        await self._retry_missed()
        self._resolve_doubtful_claims()
        for workflow in await store.lapsed_claims():
            if workflow.task_id not in self.executor.held:  # this worker's own are alive: it renews them
                await self.executor.finish_unknown(workflow)
        await self.changes.follow()
        checked = 0
        while not self._stopping.is_set():
            due = await self._pass_batch()
            checked += due
            if due < _BATCH:
                break
        now = self.deps.clock.now_ms()
        if now - self._last_renewal >= self._renewal_ms:
            self._last_renewal = now
            await self._resubmission.renew_creating()
        if now - self._last_reconcile >= max(1000, round(self.deps.options.intent_grace_s * 500)):
            await self.reconcile()
        return checked

    async def _pass_batch(self) -> int:
        """Check one batch of due workflows; returns how many were due.

        The batch is read without a lease and its backend states in one call. A request still
        pending with the deadline the workflow already has needs nothing but a later look: that
        is written as a compare-and-set on the workflow still being due and free (one write, no
        lease, no per-workflow task). Every other workflow is leased and checked in full.
        """
        store = self.deps.store
        due = await store.due_checks(_BATCH)
        states = await self._statuses([item.handle for item in due if item.handle is not None])
        now = self.deps.clock.now_ms()
        quiet: list[Reschedule] = []
        rest: list[str] = []
        for item in due:
            next_check = self._quiet_next_check(item, states, now)
            if next_check is None:
                rest.append(item.task_id)
            else:
                quiet.append(Reschedule(item.task_id, item.generation, next_check))
        await store.look_again_unleased(quiet)
        if rest:
            leased = await store.lease_due(self.worker_id, self.lease_ms, len(rest), among=rest)
            await self._check_batch(leased, states)
        return len(due)

    def _quiet_next_check(self, item: DueCheck, states: Mapping[str, ApprovalState], now: int) -> int | None:
        """The next look at a request still pending as the workflow knows it, else ``None`` (a full check)."""
        state = states.get(item.handle) if item.handle is not None else None
        if state is None or state.status is not ApprovalStatus.PENDING:
            return None
        deadline = item.request_deadline
        if state.deadline_ms is not None:
            deadline = min(state.deadline_ms, item.created_at + round(self.deps.options.max_pending_s * 1000))
        if deadline != item.request_deadline or (deadline is not None and now >= deadline):
            return None  # a moved deadline (retention follows it) or an expiry: see _still_pending
        wait = round(state.retry_after_s * 1000) if state.retry_after_s else self._pending_poll_ms
        next_check = now + max(wait, 1)
        return next_check if deadline is None else min(next_check, deadline)

    async def _check_batch(self, due: list[Workflow], states: Mapping[str, ApprovalState]) -> None:
        """Check leased workflows together, with the batch's states read up front; one reschedule write."""
        batch = DriverPass.batch(states)
        await asyncio.gather(*(self._guarded(workflow, batch) for workflow in due))
        await self.deps.store.reschedule_many(batch.deferred or [])

    async def _statuses(self, handles: list[str]) -> dict[str, ApprovalState]:
        """The batch's backend states in one call, when the backend offers it (else each is asked)."""
        backend = self.deps.backend
        if len(handles) < 2 or not isinstance(backend, SupportsStatusMany):
            return {}
        try:
            with span("backend.status", root=True, backend=backend.name, requests=len(handles)):
                return await backend.status_many(handles)
        except ApprovalBackendError as exc:
            logger.warning("batched backend status failed; asking one by one (%s)", exc)
            return {}

    # -- wake-ups ----------------------------------------------------------------------------

    async def wake(self, handle: str) -> None:
        """A backend says ``handle`` may have changed: check it now (its status decides, not this).

        A wake-up the store cannot serve now is not lost: the next passes try it again.
        """
        try:
            intent = await self.deps.store.by_handle(handle)
        except StoreUnavailableError:
            self._missed_wakes.add(handle)
            logger.warning("approval store unavailable; a wake-up is tried again on the next pass")
            return
        if intent is None or intent.state in IN_FLIGHT_INTENTS:
            self._remember_early(handle)  # the task is still being created: see task_created
            return
        if intent.state is IntentState.BOUND:
            self.nudge(intent.task_id)
        # a consumed or abandoned generation is never acted on

    def task_created(self, task_id: str, handle: str) -> None:
        """A task was bound to ``handle``; check it now if the backend already woke us about it."""
        if handle in self._early:
            del self._early[handle]
            self.nudge(task_id)

    def _remember_early(self, handle: str) -> None:
        self._early[handle] = None
        while len(self._early) > _EARLY_WAKES:
            del self._early[next(iter(self._early))]

    def nudge(self, task_id: str) -> None:
        """Check ``task_id`` as soon as possible, in the background (not once stopping: the next start checks it)."""
        if self._stopping.is_set():
            return
        if task_id in self._checking:
            self._woken.add(task_id)  # the check in progress may have read the old status
            return
        task = asyncio.create_task(self._check_now(task_id), name=f"mcp-approval check {task_id[:8]}")
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _check_now(self, task_id: str) -> None:
        store = self.deps.store
        try:
            leased = await store.lease_due(self.worker_id, self.lease_ms, 1, task_id=task_id)
            if not leased:
                # Held by this worker: a pass that checked it has yet to write its next look (it may
                # have read the status before this wake-up), or a check the store interrupted. Again
                # on the next passes, until the lease is let go; another worker's lease is its own.
                # Let go since the lease was tried (no owner now) counts as held: the pass that let
                # it go read the status before this wake-up, and its next look may be far away.
                workflow = await store.get(task_id)
                mine = workflow is not None and workflow.lease_owner in (None, self.worker_id)
                if workflow is not None and workflow.phase is Phase.PENDING and mine:
                    self._missed_checks.add(task_id)
                else:
                    self._missed_checks.discard(task_id)
        except StoreUnavailableError:
            self._missed_checks.add(task_id)
            return
        for workflow in leased:
            await self._guarded(workflow, DriverPass())

    def _resolve_doubtful_claims(self) -> None:
        """In the background, read back the claims whose answer the store lost (see :class:`Executor`)."""
        if not self.executor.claims_in_doubt or self._doubts in self._inflight or self._stopping.is_set():
            return
        self._doubts = asyncio.create_task(self._resolve_doubts(), name="mcp-approval claims in doubt")
        self._inflight.add(self._doubts)
        self._doubts.add_done_callback(self._inflight.discard)

    async def _resolve_doubts(self) -> None:
        try:
            await self.executor.resolve_doubts()
        except StoreUnavailableError:
            logger.warning("approval store unavailable; claims in doubt are read again on the next pass")
        except Exception:
            logger.exception("claims in doubt could not be resolved")

    async def _retry_missed(self) -> None:
        """Try again the wake-ups and checks the store could not serve (see ``_missed_wakes``)."""
        handles, self._missed_wakes = self._missed_wakes, set()
        for handle in handles:
            await self.wake(handle)
        for task_id in self._missed_checks - self._checking:
            self.nudge(task_id)

    async def _guarded(self, workflow: Workflow, batch: DriverPass) -> None:
        task_id = workflow.task_id
        if task_id in self._checking:
            return
        self._checking.add(task_id)
        try:
            async with self._limit:
                await self._progress.advance(workflow, batch)
            self._missed_checks.discard(task_id)
        except StoreUnavailableError:
            self._missed_checks.add(task_id)  # a decision may be waiting: again on the next pass
            logger.warning("task %s: store unavailable; checked again later", task_id[:8])
        except Exception:
            logger.exception("task %s: approval check failed; checked again later", task_id[:8])
        finally:
            self._checking.discard(task_id)
        if task_id in self._woken:
            self._woken.discard(task_id)
            self.nudge(task_id)

    # -- cancellation ----------------------------------------------------------------------

    async def cancel(self, task_id: str) -> bool:
        """Fence a pending task as ``cancelled`` and withdraw its request; a no-op once claimed."""
        store = self.deps.store
        won = await store.fence(task_id, TaskOutcome(TaskStatus.CANCELLED, "Cancelled"))
        if not won:
            return False
        workflow = await store.get(task_id)
        if workflow is not None and workflow.handle is not None:
            await withdraw(self.deps.backend, workflow.handle, task_id=task_id)
        return True

    # -- reconciliation --------------------------------------------------------------------

    def creating(self, intent: Intent) -> contextlib.AbstractContextManager[None]:
        """Mark ``intent`` as this worker's creation in flight: never its orphan, and settled at once
        if the creation fails (see :class:`Resubmission`)."""
        return self._resubmission.creating(intent)

    async def settle_failed_creations(self) -> None:
        """Settle this worker's failed creations now (see :meth:`Resubmission.settle_failed`)."""
        if self._resubmission.failed_creations:
            await self._resubmission.settle_failed()

    async def reconcile(self) -> None:
        """Settle what a crash left in flight (see :meth:`Resubmission.reconcile`)."""
        self._last_reconcile = self.deps.clock.now_ms()
        await self._resubmission.reconcile()
