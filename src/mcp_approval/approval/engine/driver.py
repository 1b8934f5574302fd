"""The workflow driver: follows pending approvals to their end (SEP-2848 §Lifecycle, §Completion).

Each worker runs one. It leases due workflows from the store, fetches the backend's
authoritative status (callbacks only wake it up), and then:

=======================  ====================================================================
backend state            what happens
=======================  ====================================================================
pending                  look again later; a moved deadline extends the task's retention
approved                 re-evaluate with the approval as input, against the call binding and
                         current state: allow → claim → run once → ``approved-executed``;
                         retry → backoff (never past the approval's expiry); request → a new
                         generation (bounded); deny → ``denied-not-executed``
denied / expired         ``completed`` + ``isError`` + ``denied-not-executed``
cancelled                ``cancelled``
failed / unknown handle  ``failed`` (before any claim, so retryable)
=======================  ====================================================================

A claimed execution whose worker stops renewing its lease ends ``outcome-unknown``; it is
never invoked again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from mcp_approval._background import finish_or_cancel, pause_unless_stopping
from mcp_approval.approval import inputs as submission_inputs
from mcp_approval.approval.binding import BindingIntegrityError, CallBinding
from mcp_approval.approval.engine.changes import ChangeFollower
from mcp_approval.approval.engine.dependencies import ApprovalDependencies
from mcp_approval.approval.engine.execution import Executor
from mcp_approval.approval.engine.integrity import link_failure
from mcp_approval.approval.engine.requests import new_intent, submission_for
from mcp_approval.approval.engine.resubmission import Resubmission, withdraw
from mcp_approval.approval.messages import (
    APPROVAL_EXPIRED,
    ARGUMENTS_REFUSED,
    BACKEND_FAILED,
    BINDING_BROKEN,
    EXPIRED,
    INPUTS_NOT_GIVEN,
    INTEGRITY_FAILED,
    POLICY_DENIED,
    PRINCIPAL_INVALID,
    TOO_MANY_ROUNDS,
    TOOL_CHANGED,
    denied_because,
)
from mcp_approval.approval.persistence.states import IN_FLIGHT_INTENTS, Disposition, IntentState, Phase
from mcp_approval.approval.persistence.store import DueCheck, Intent, Reschedule, TaskOutcome, Workflow
from mcp_approval.approval.results import denied_result
from mcp_approval.backends import (
    ApprovalBackendError,
    ApprovalState,
    ApprovalStatus,
    ApprovalSubmission,
    SupportsStatusMany,
    UnknownRequestError,
)
from mcp_approval.clock import parse_iso8601
from mcp_approval.json_body import off_loop
from mcp_approval.policy import Decision, NextAction
from mcp_approval.policy.mapping import ToolMappingError
from mcp_approval.policy.models import REASON_PDP_ERROR, REASON_PDP_INVALID_RESPONSE, REASON_PDP_UNAVAILABLE
from mcp_approval.protocol import INTERNAL_ERROR
from mcp_approval.storage import StoreUnavailableError
from mcp_approval.tasks.models import error_document
from mcp_approval.tasks.states import TaskStatus
from mcp_approval.tracing import span

__all__ = ["CheckPass", "WorkflowDriver"]

#: A sealed binding longer than this is opened, checked and mapped on a worker thread.
_LARGE_SEALED_CHARS = 16 * 1024
logger = logging.getLogger("mcp_approval.approval")

# Due workflows read and checked together: a batch costs one commit (two when some must be
# leased), so a pass over a large pending set after a restart is bound by how many batches it takes.
_BATCH = 1000
_EARLY_WAKES = 4096
_CONCURRENCY = 32
# Denials a PEP-side PDP client makes up when the PDP cannot be asked: transient, never a verdict.
_PDP_FAILURES = frozenset({REASON_PDP_UNAVAILABLE, REASON_PDP_ERROR, REASON_PDP_INVALID_RESPONSE})


@dataclass(frozen=True)
class CheckPass:
    """What the checks of one driver pass share.

    A pass over a leased batch (:meth:`batch`) reads the backend states of the whole batch at
    once (when the backend offers :class:`SupportsStatusMany`) and writes its "look again later"
    decisions together at its end; ``CheckPass()``, for a single check (a wake-up), asks the
    backend and writes each decision at once.
    """

    states: Mapping[str, ApprovalState] = field(default_factory=dict)
    """Backend states read for the whole pass, by handle; a handle not here is asked on its own."""
    deferred: list[Reschedule] | None = None
    """The pass's reschedules, written together at its end; ``None``: each is written as decided."""

    @classmethod
    def batch(cls, states: Mapping[str, ApprovalState]) -> CheckPass:
        """A pass over a batch: ``states`` read up front, reschedules collected for one write."""
        return cls(states, [])


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
        batch = CheckPass.batch(states)
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
            await self._guarded(workflow, CheckPass())

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

    async def _guarded(self, workflow: Workflow, batch: CheckPass) -> None:
        task_id = workflow.task_id
        if task_id in self._checking:
            return
        self._checking.add(task_id)
        try:
            async with self._limit:
                await self.check(workflow, batch)
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

    # -- one check ---------------------------------------------------------------------------

    async def check(self, workflow: Workflow, batch: CheckPass) -> None:
        """Fetch the backend's status for a leased workflow and act on it, as part of ``batch``.

        ``CheckPass()`` checks it on its own: the backend is asked, and the next check written at once.
        """
        now = self.deps.clock.now_ms()
        if workflow.handle is None:
            await self._unsubmitted(workflow, now, batch)
            return
        try:
            state = batch.states.get(workflow.handle) or await self._status(workflow.task_id, workflow.handle)
        except UnknownRequestError:
            await self._fail(workflow)
            return
        except ApprovalBackendError as exc:
            logger.warning("task %s: backend status unavailable (%s)", workflow.task_id[:8], exc)
            if workflow.request_deadline is not None and now >= workflow.request_deadline:
                await self._deny(workflow, EXPIRED)
            else:
                await self._later(
                    workflow, batch, now + self._backoff_ms(workflow.attempts), attempts=workflow.attempts + 1
                )
            return
        await self._act(workflow, state, now, batch)

    async def _status(self, task_id: str, handle: str) -> ApprovalState:
        """One request's state at the backend."""
        backend = self.deps.backend
        with span("backend.status", root=True, backend=backend.name, task_id=task_id, requests=1) as traced:
            state = await backend.status(handle)
            traced.set("status", state.status.value)
            return state

    async def _unsubmitted(self, workflow: Workflow, now: int, batch: CheckPass) -> None:
        """A workflow with nothing at the backend yet: waiting for its inputs, or mid-chain."""
        if workflow.request_deadline is not None and now >= workflow.request_deadline:
            await self._deny(workflow, EXPIRED)
        elif workflow.generation == 0:
            await self._submit_with_inputs(workflow, now, batch)
        else:  # a chained request still being submitted: reconciliation resubmits it
            await self._later(workflow, batch, now + self.lease_ms)

    async def _submit_with_inputs(self, workflow: Workflow, now: int, batch: CheckPass) -> None:
        """Submit a task that waited for its inputs, once ``tasks/update`` supplied them."""
        deps = self.deps
        record = await deps.task_store.get(workflow.task_id)
        binding = self._binding(workflow)
        fields = deps.options.submission_inputs.get(workflow.template or "", ())
        answers = list(record.input_responses.values()) if record is not None else []
        if binding is None or not answers:
            await self._later(workflow, batch, now + round(deps.options.poll_interval_s * 1000))
            return
        supplied = submission_inputs.supplied(answers[-1], fields)
        if not isinstance(supplied, dict):
            await self._deny(workflow, INPUTS_NOT_GIVEN)
            return
        draft = await deps.store.intent(workflow.task_id, 0)
        if draft is None:
            await self._deny(workflow, BINDING_BROKEN)
            return
        body = deps.cipher.open(draft.body_sealed, record=draft.key)
        submission = replace(ApprovalSubmission.from_json(body), inputs=supplied)
        intent = self._new_intent(workflow, 1, binding, submission)
        if await deps.store.chain(workflow.task_id, 0, intent):
            await self._resubmission.submit_chained(intent, submission.deadline_ms)

    async def _act(self, workflow: Workflow, state: ApprovalState, now: int, batch: CheckPass) -> None:
        status = state.status
        if status is ApprovalStatus.PENDING:
            await self._still_pending(workflow, state, now, batch)
        elif status is ApprovalStatus.APPROVED:
            await self._approved(workflow, state, now, batch)
        elif status in (ApprovalStatus.DENIED, ApprovalStatus.EXPIRED):
            await self._deny(workflow, denied_because(state.note) if status is ApprovalStatus.DENIED else EXPIRED)
        elif state.integrity_failure is not None:
            await self._integrity_failure(workflow, state.integrity_failure)
        elif status is ApprovalStatus.CANCELLED:
            await self.deps.store.fence(
                workflow.task_id, TaskOutcome(TaskStatus.CANCELLED, "The approval request was withdrawn")
            )
        else:
            await self._fail(workflow)

    async def _still_pending(self, workflow: Workflow, state: ApprovalState, now: int, batch: CheckPass) -> None:
        deadline = workflow.request_deadline
        if state.deadline_ms is not None:
            longest = workflow.created_at + round(self.deps.options.max_pending_s * 1000)
            deadline = min(state.deadline_ms, longest)
        if deadline is not None and now >= deadline:
            await self._deny(workflow, EXPIRED)
            return
        wait = round(state.retry_after_s * 1000) if state.retry_after_s else self._pending_poll_ms
        moved = deadline is not None and deadline != workflow.request_deadline
        next_check = now + max(wait, 1)
        await self._later(
            workflow,
            batch,
            next_check if deadline is None else min(next_check, deadline),
            # Retention already covers the deadline the task was created with; only a moved one extends it.
            request_deadline=deadline if moved else None,
            min_ttl_end=deadline + self.deps.store.result_retention_ms if moved and deadline else None,
        )

    async def _approved(self, workflow: Workflow, state: ApprovalState, now: int, batch: CheckPass) -> None:
        until = state.approved_until_ms
        if until is not None and now >= until:
            await self._deny(workflow, APPROVAL_EXPIRED)
            return
        sealed_size = len(workflow.binding_sealed or "")
        binding = await off_loop(sealed_size > _LARGE_SEALED_CHARS, self._binding, workflow)
        if binding is None:
            await self._deny(workflow, BINDING_BROKEN)
            return
        intent = await self.deps.store.intent(workflow.task_id, workflow.generation)
        assert workflow.handle is not None  # only a submitted workflow has a backend state
        broken = await link_failure(self.deps.backend, workflow.handle, binding, intent.key if intent else None)
        if broken is not None:
            await self._integrity_failure(workflow, broken)
            return
        refusal = await self._current_state_refusal(binding)
        if refusal is not None:
            await self._deny(workflow, refusal)
            return
        deps = self.deps
        try:
            request = await off_loop(
                sealed_size > _LARGE_SEALED_CHARS,
                deps.mapper.map_call,
                principal=binding.principal,
                tool=binding.tool,
                arguments=binding.arguments,
                client=binding.client,
            )
        except ToolMappingError:
            await self._deny(workflow, POLICY_DENIED)
            return
        context = {**(request.context or {}), "approval": dict(state.approval or {})}
        try:
            decision = await deps.pdp.evaluate(request.with_context(context))
        except Exception:
            logger.exception("task %s: re-evaluation failed; tried again later", workflow.task_id[:8])
            await self._retry(workflow, batch, until, None, now)
            return
        if decision.decision:
            until = _earliest(until, _permit_expiry_ms(decision))
            if not await self.executor.run(workflow, binding, until):
                await self._deny(workflow, APPROVAL_EXPIRED)
            return
        if until is not None and deps.clock.now_ms() >= until:
            # The approval ran out while the PDP was deciding: whatever that deny asks for (a new
            # request, say), this approval ended by expiry, as it would had the check started later.
            await self._deny(workflow, APPROVAL_EXPIRED)
            return
        action = NextAction.RETRY if decision.reason in _PDP_FAILURES else decision.next_action()
        if action is NextAction.RETRY:
            await self._retry(workflow, batch, until, decision.retry_after, now)
        elif action is NextAction.REQUEST:
            await self._chain(workflow, binding, decision)
        else:
            await self._deny(workflow, POLICY_DENIED)

    async def _current_state_refusal(self, binding: CallBinding) -> str | None:
        """Why the binding may not run now (principal gone, tool changed, arguments refused), or ``None``."""
        if not await self.deps.principal_valid(binding.principal):
            return PRINCIPAL_INVALID
        if await self.deps.tools.fingerprint(binding.tool) != binding.tool_fingerprint:
            return TOOL_CHANGED
        # Refused here, the call ends "not executed"; left to the run, it would read as a possible side effect.
        if await self.deps.tools.refuses_arguments(binding.tool, dict(binding.arguments)):
            return ARGUMENTS_REFUSED
        return None

    async def _retry(
        self, workflow: Workflow, batch: CheckPass, until: int | None, retry_after: int | None, now: int
    ) -> None:
        """``retry``: wait, then re-evaluate; never past the approval's expiry (it then ends as expired)."""
        wait = retry_after * 1000 if retry_after is not None else self._backoff_ms(workflow.attempts)
        next_check = now + wait if until is None else min(now + wait, until)
        await self._later(
            workflow,
            batch,
            next_check,
            attempts=workflow.attempts + 1,
            approval_expires_at=until,
            min_ttl_end=None if until is None else until + self.deps.store.result_retention_ms,
        )

    async def _chain(self, workflow: Workflow, binding: CallBinding, decision: Decision) -> None:
        """``request``: consume this generation, then submit a fresh request (bounded)."""
        deps = self.deps
        if workflow.generation >= deps.options.max_generations:
            await self._deny(workflow, TOO_MANY_ROUNDS)
            return
        submission = submission_for(
            binding, decision, mapper=deps.mapper, options=deps.options, now=deps.clock.now_ms()
        )
        # The next round's reviewers are told of an identical call that already ended, as the first round's were.
        earlier = await deps.store.earlier_call(
            workflow.principal_digest, workflow.tool_name, workflow.arguments_digest
        )
        submission = replace(submission, duplicate_of=earlier)
        intent = self._new_intent(workflow, workflow.generation + 1, binding, submission)
        if not await deps.store.chain(workflow.task_id, workflow.generation, intent):
            return
        await self._resubmission.submit_chained(intent, submission.deadline_ms)

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

    # -- endings -----------------------------------------------------------------------------

    async def _deny(self, workflow: Workflow, why: str) -> None:
        outcome = TaskOutcome(
            TaskStatus.COMPLETED,
            result=denied_result(workflow.tool_name, why),
            disposition=Disposition.DENIED_NOT_EXECUTED.value,
            reason=why,
        )
        if await self.deps.store.fence(workflow.task_id, outcome, generation=workflow.generation):
            logger.info("task %s: denied-not-executed (%s)", workflow.task_id[:8], why)

    async def _integrity_failure(self, workflow: Workflow, why: str) -> None:
        """Not executed, and said: the task ends ``denied-not-executed``; its audit event names why."""
        outcome = TaskOutcome(
            TaskStatus.COMPLETED,
            result=denied_result(workflow.tool_name, INTEGRITY_FAILED),
            disposition=Disposition.DENIED_NOT_EXECUTED.value,
            reason=INTEGRITY_FAILED,
        )
        if await self.deps.store.fence(
            workflow.task_id, outcome, generation=workflow.generation, integrity_failure=why
        ):
            logger.error("task %s: integrity failure, not executed: %s", workflow.task_id[:8], why)

    async def _fail(self, workflow: Workflow) -> None:
        outcome = TaskOutcome(TaskStatus.FAILED, BACKEND_FAILED, error=error_document(INTERNAL_ERROR, BACKEND_FAILED))
        await self.deps.store.fence(workflow.task_id, outcome, generation=workflow.generation)

    async def _later(self, workflow: Workflow, batch: CheckPass, next_check_at: int, **changes: int | None) -> None:
        item = Reschedule(workflow.task_id, workflow.generation, next_check_at, **changes)
        if batch.deferred is not None:
            batch.deferred.append(item)  # written with the rest of the pass
        else:
            await self.deps.store.reschedule(item)

    def _new_intent(
        self, workflow: Workflow, generation: int, binding: CallBinding, submission: ApprovalSubmission
    ) -> Intent:
        return new_intent(
            workflow.task_id,
            generation,
            binding,
            submission,
            owner=workflow.principal_digest,
            cipher=self.deps.cipher,
            now=self.deps.clock.now_ms(),
        )

    def _binding(self, workflow: Workflow) -> CallBinding | None:
        if workflow.binding_sealed is None:
            return None
        try:
            binding = CallBinding.from_json(self.deps.cipher.open(workflow.binding_sealed, record=workflow.task_id))
        except (BindingIntegrityError, KeyError, TypeError, ValueError):
            logger.error("task %s: call binding does not open or parse; failing closed", workflow.task_id[:8])
            return None
        if binding.digest != workflow.arguments_digest or binding.tool != workflow.tool_name:
            logger.error("task %s: call binding does not match its digest; failing closed", workflow.task_id[:8])
            return None
        return binding

    def _backoff_ms(self, attempts: int) -> int:
        """Exponential backoff with jitter, capped."""
        options = self.deps.options
        base = options.poll_interval_s * float(2 ** min(attempts, 16))
        capped = min(base, options.max_retry_backoff_s)
        return max(1, round(capped * random.uniform(0.8, 1.2) * 1000))  # noqa: S311 (jitter, not security)


def _permit_expiry_ms(decision: Decision) -> int | None:
    """``context.approval.approved_until`` of a permit (ARAP §2.6: never enforce past it)."""
    approval = (decision.context or {}).get("approval")
    until = approval.get("approved_until") if isinstance(approval, dict) else None
    return parse_iso8601(until)


def _earliest(first: int | None, second: int | None) -> int | None:
    values = [value for value in (first, second) if value is not None]
    return min(values) if values else None
