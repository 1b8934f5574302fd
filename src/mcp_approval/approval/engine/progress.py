"""A leased workflow moved forward: its backend state, and what follows (SEP-2848 §Lifecycle, §Completion).

The :class:`~mcp_approval.approval.engine.driver.WorkflowDriver` decides when a workflow is
looked at; :class:`WorkflowProgress` fetches the backend's authoritative status (callbacks only wake
the driver up) and acts on it:

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

import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from mcp_approval.approval.binding import CallBinding
from mcp_approval.approval.call import inputs as submission_inputs
from mcp_approval.approval.engine.dependencies import ApprovalDependencies
from mcp_approval.approval.engine.integrity import link_failure
from mcp_approval.approval.engine.requests import new_intent, submission_for
from mcp_approval.approval.engine.resubmission import Resubmission
from mcp_approval.approval.engine.run_once import Executor
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
from mcp_approval.approval.persistence.executions import ExecutedBeforeError
from mcp_approval.approval.persistence.states import Disposition
from mcp_approval.approval.persistence.store import Intent, Reschedule, TaskOutcome, Workflow
from mcp_approval.approval.results import denied_result
from mcp_approval.backends import (
    ApprovalBackendError,
    ApprovalState,
    ApprovalStatus,
    ApprovalSubmission,
    UnknownRequestError,
)
from mcp_approval.clock import parse_iso8601
from mcp_approval.keyring import BindingIntegrityError
from mcp_approval.policy import Decision, EvaluationRequest, NextAction
from mcp_approval.policy.mapping import ToolMappingError
from mcp_approval.policy.models import REASON_PDP_ERROR, REASON_PDP_INVALID_RESPONSE, REASON_PDP_UNAVAILABLE
from mcp_approval.protocol import INTERNAL_ERROR
from mcp_approval.tasks.models import error_document
from mcp_approval.tasks.states import TaskStatus
from mcp_approval.tracing import span
from mcp_approval.worker_thread import off_loop

__all__ = ["DriverPass", "WorkflowProgress"]

logger = logging.getLogger("mcp_approval.approval")

#: A sealed binding longer than this is opened, checked and mapped on a worker thread.
_LARGE_SEALED_CHARS = 16 * 1024
# Denials a PEP-side PDP client makes up when the PDP cannot be asked: transient, never a verdict.
_PDP_FAILURES = frozenset({REASON_PDP_UNAVAILABLE, REASON_PDP_ERROR, REASON_PDP_INVALID_RESPONSE})


@dataclass(frozen=True)
class DriverPass:
    """What the workflows advanced in one driver pass share.

    A pass over a leased batch (:meth:`batch`) reads the backend states of the whole batch at
    once (when the backend offers :class:`SupportsStatusMany`) and writes its "look again later"
    decisions together at its end; ``DriverPass()``, for a single workflow (a wake-up), asks the
    backend and writes each decision at once.
    """

    states: Mapping[str, ApprovalState] = field(default_factory=dict)
    """Backend states read for the whole pass, by handle; a handle not here is asked on its own."""
    deferred: list[Reschedule] | None = None
    """The pass's reschedules, written together at its end; ``None``: each is written as decided."""

    @classmethod
    def batch(cls, states: Mapping[str, ApprovalState]) -> DriverPass:
        """A pass over a batch: ``states`` read up front, reschedules collected for one write."""
        return cls(states, [])


class WorkflowProgress:
    """Checks leased workflows and acts on their backend state (see the module docstring).

    Args:
        deps: the store, backend, policy and the rest it works with.
        executor: claims and runs an approved call, once.
        resubmission: submits a chained request (a new generation).
        pending_poll_ms: how long a request still pending waits for its next look, unless the
            backend says otherwise.
        lease_ms: the driver's lease; a chained request still being submitted is looked at again
            after it.
    """

    def __init__(
        self,
        deps: ApprovalDependencies,
        *,
        executor: Executor,
        resubmission: Resubmission,
        pending_poll_ms: int,
        lease_ms: int,
    ) -> None:
        self.deps = deps
        self._executor = executor
        self._resubmission = resubmission
        self._pending_poll_ms = pending_poll_ms
        self._lease_ms = lease_ms

    async def advance(self, workflow: Workflow, batch: DriverPass) -> None:
        """Fetch the backend's status for a leased workflow and act on it, as part of ``batch``.

        ``DriverPass()`` advances it on its own: the backend is asked, and the next check written at once.
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

    async def _unsubmitted(self, workflow: Workflow, now: int, batch: DriverPass) -> None:
        """A workflow with nothing at the backend yet: waiting for its inputs, or mid-chain."""
        if workflow.request_deadline is not None and now >= workflow.request_deadline:
            await self._deny(workflow, EXPIRED)
        elif workflow.generation == 0:
            await self._submit_with_inputs(workflow, now, batch)
        else:  # a chained request still being submitted: reconciliation resubmits it
            await self._later(workflow, batch, now + self._lease_ms)

    async def _submit_with_inputs(self, workflow: Workflow, now: int, batch: DriverPass) -> None:
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

    async def _act(self, workflow: Workflow, state: ApprovalState, now: int, batch: DriverPass) -> None:
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

    async def _still_pending(self, workflow: Workflow, state: ApprovalState, now: int, batch: DriverPass) -> None:
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

    async def _approved(self, workflow: Workflow, state: ApprovalState, now: int, batch: DriverPass) -> None:
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
            try:
                ran = await self._executor.run(workflow, binding, until)
            except ExecutedBeforeError as exc:
                # Its sealed record says it ran: a workflow row saying otherwise was written back.
                await self._integrity_failure(workflow, str(exc))
                return
            if not ran:
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
            await self._chain(workflow, binding, decision, request)
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
        self, workflow: Workflow, batch: DriverPass, until: int | None, retry_after: int | None, now: int
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

    async def _chain(
        self, workflow: Workflow, binding: CallBinding, decision: Decision, request: EvaluationRequest
    ) -> None:
        """Next action ``request``: consume this generation, then submit a fresh request (bounded).

        ``request`` is the re-evaluation's policy request without the approval it carried, which the
        new request's denied evaluation repeats.
        """
        deps = self.deps
        if workflow.generation >= deps.options.max_generations:
            await self._deny(workflow, TOO_MANY_ROUNDS)
            return
        submission = submission_for(binding, decision, request, options=deps.options, now=deps.clock.now_ms())
        # The next round's reviewers are told of an identical call that already ended, as the first round's were.
        earlier = await deps.store.earlier_call(
            workflow.principal_digest, workflow.tool_name, workflow.arguments_digest
        )
        submission = replace(submission, duplicate_of=earlier)
        intent = self._new_intent(workflow, workflow.generation + 1, binding, submission)
        if not await deps.store.chain(workflow.task_id, workflow.generation, intent):
            return
        await self._resubmission.submit_chained(intent, submission.deadline_ms)

    # -- endings -----------------------------------------------------------------------------

    async def _deny(self, workflow: Workflow, why: str) -> None:
        if await self.deps.store.fence(workflow.task_id, _denial(workflow, why), generation=workflow.generation):
            logger.info("task %s: denied-not-executed (%s)", workflow.task_id[:8], why)

    async def _integrity_failure(self, workflow: Workflow, why: str) -> None:
        """Not executed, and said: the task ends ``denied-not-executed``; its audit event names why."""
        outcome = _denial(workflow, INTEGRITY_FAILED)
        if await self.deps.store.fence(
            workflow.task_id, outcome, generation=workflow.generation, integrity_failure=why
        ):
            logger.error("task %s: integrity failure, not executed: %s", workflow.task_id[:8], why)

    async def _fail(self, workflow: Workflow) -> None:
        outcome = TaskOutcome(TaskStatus.FAILED, BACKEND_FAILED, error=error_document(INTERNAL_ERROR, BACKEND_FAILED))
        await self.deps.store.fence(workflow.task_id, outcome, generation=workflow.generation)

    async def _later(self, workflow: Workflow, batch: DriverPass, next_check_at: int, **changes: int | None) -> None:
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


def _denial(workflow: Workflow, why: str) -> TaskOutcome:
    """The outcome of a call that did not run: ``completed``, ``isError``, ``denied-not-executed``."""
    return TaskOutcome(
        TaskStatus.COMPLETED,
        result=denied_result(workflow.tool_name, why),
        disposition=Disposition.DENIED_NOT_EXECUTED.value,
        reason=why,
    )


def _permit_expiry_ms(decision: Decision) -> int | None:
    """``context.approval.approved_until`` of a permit (ARAP §2.6: never enforce past it)."""
    approval = (decision.context or {}).get("approval")
    until = approval.get("approved_until") if isinstance(approval, dict) else None
    return parse_iso8601(until)


def _earliest(first: int | None, second: int | None) -> int | None:
    values = [value for value in (first, second) if value is not None]
    return min(values) if values else None
