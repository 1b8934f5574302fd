"""Task creation: a requestable denial's call becomes a durable approval task (SEP-2848).

Creation is crash-consistent (§Crash-consistent creation): dedup first; then a durable intent
with a fresh idempotency key and the exact (sealed) body; then the backend submission under that
key; then the handle; then the task, in that order, each durable before the next step. A backend
kept in the server's own database (the local backend) joins one transaction with the intent and
the task instead: creation commits whole or not at all, and leaves nothing in flight to reconcile.
The :class:`~mcp_approval.approval.engine.driver.WorkflowDriver` takes it from there.

A template with submission inputs asks for them first: in an MRTR form round before the
submission, or (``ApprovalOptions.inputs_in_task``) from a task that is submitted once they arrive.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from mcp_approval.approval import url_approval
from mcp_approval.approval.binding import CallBinding
from mcp_approval.approval.call import inputs as submission_inputs
from mcp_approval.approval.creation_answers import CreationAnswers, task_limits
from mcp_approval.approval.engine.dependencies import ApprovalDependencies
from mcp_approval.approval.engine.driver import WorkflowDriver
from mcp_approval.approval.engine.requests import new_intent, new_workflow, submission_for
from mcp_approval.approval.engine.resubmission import withdraw
from mcp_approval.approval.gate import GatedCall
from mcp_approval.approval.messages import (
    BACKEND_DOWN_MESSAGE,
    INPUTS_DECLINED,
    INPUTS_IN_TASK,
    INPUTS_UNSUPPORTED,
    REFUSED_MESSAGE,
)
from mcp_approval.approval.persistence.records import Creation
from mcp_approval.approval.persistence.states import IntentState
from mcp_approval.approval.persistence.store import Admission, Intent, NewWorkflow
from mcp_approval.approval.results import sanitize_model_text
from mcp_approval.approval.without_tasks.flow import PendingAnswer, WithoutTasksFlow
from mcp_approval.backends import (
    ApprovalBackendError,
    ApprovalSubmission,
    EarlierCall,
    SubmissionRejectedError,
    SupportsSubmitInTransaction,
)
from mcp_approval.crashpoints import crash_point
from mcp_approval.denials import Remediation, final_denial
from mcp_approval.json_body import large_json, off_loop
from mcp_approval.policy import Decision
from mcp_approval.protocol import INTERNAL_ERROR
from mcp_approval.tasks.execution import check_declared
from mcp_approval.tasks.models import TaskRecord, new_task_id
from mcp_approval.tasks.server import TasksExtension
from mcp_approval.tracing import span

__all__ = ["TaskCreation", "template_of"]

# The approval layer's logger, shared with the service: one name for operators to filter on.
logger = logging.getLogger("mcp_approval.approval")


class TaskCreation:
    """Creates approval tasks: dedup, admission, intent, submission, handle, task, and the answer.

    Built once by the approval service, which hands it every new approval request.

    Args:
        deps: what the workflow runs with (store, backend, mapper, cipher, options, clock).
        driver: told of this worker's creations in flight (its reconciler leaves them) and of new tasks.
        tasks: the tasks extension; its store holds the approval tasks and its options' limits
            count them (read at each creation: a deployment may replace the options while serving).
        without_tasks: the answers to clients without tasks (an owed outcome, a pending request).
    """

    def __init__(
        self,
        deps: ApprovalDependencies,
        *,
        driver: WorkflowDriver,
        tasks: TasksExtension,
        without_tasks: WithoutTasksFlow,
    ) -> None:
        self.deps = deps
        self.driver = driver
        self.tasks = tasks
        self.without_tasks = without_tasks
        # The collaborators the steps read most, by name (``deps`` is frozen).
        self.store = deps.store
        self.backend = deps.backend
        self.options = deps.options
        self.answers = CreationAnswers(
            store=deps.store,
            backend=deps.backend,
            tasks=tasks,
            options=deps.options,
            nudge=driver.nudge,
            without_tasks=without_tasks,
        )
        # A backend writing to the approval store's own database creates in one transaction.
        self._joins_transaction: SupportsSubmitInTransaction | None = None
        if isinstance(deps.backend, SupportsSubmitInTransaction) and deps.backend.shares_database(deps.store.database):
            self._joins_transaction = deps.backend

    async def create(
        self,
        binding: CallBinding,
        decision: Decision,
        *,
        owner: str,
        inputs: Mapping[str, str] | None = None,
        linked: bool = False,
        without_task: bool = False,
        pending: PendingAnswer | None = None,
    ) -> HandlerResult:
        """Dedup, then intent → submit → handle → task; returns the ``CreateTaskResult``.

        With a backend in the approval store's own database, the four are one transaction
        (:meth:`~mcp_approval.approval.persistence.store.ApprovalStore.create_at_once`).

        ``owner`` is the task owner's digest, as the tasks extension computes it for the caller;
        ``inputs`` are the submission inputs the requester supplied; ``linked``: the request
        declared URL elicitation, so with ``ApprovalOptions.approval_url`` the task links the approval page;
        ``without_task``: the client declared no tasks, so the task row is kept for the identical
        retry (``owed_to_retry``) and the answer is ``pending`` (by default
        :func:`~mcp_approval.approval.without_tasks.answers.pending_answer`).
        """
        answer_pending = pending or self.without_tasks.pending
        deps = self.deps
        large = large_json(binding.arguments)  # mapping, canonicalizing and sealing them run on a worker thread
        # The identical call whose request already ended: reviewers and the caller are told this one may repeat it.
        earlier = await deps.store.earlier_call(owner, binding.tool, binding.digest)
        submission = replace(
            await off_loop(large, self._submission, binding, decision), inputs=inputs or None, duplicate_of=earlier
        )
        intent = await off_loop(large, self._new_intent, new_task_id(), 1, binding, submission, owner=owner)
        # A creation of this worker that failed (the store went away under it, say) is settled first,
        # so that this call, if it is that one's retry, finds no request of it still in flight.
        await self.driver.settle_failed_creations()
        if self._joins_transaction is not None:
            return await self._create_at_once(
                self._joins_transaction,
                intent,
                submission,
                binding,
                owner=owner,
                linked=linked,
                without_task=without_task,
                earlier=earlier,
                pending=answer_pending,
                large=large,
            )
        # Until the task exists, the intent is this worker's creation in flight: its reconciler never
        # takes it for a crash leftover, however long a loaded host stalls the steps below.
        with self.driver.creating(intent):
            admitted = await self._admit(
                lambda owed_first: self._record(intent, owed_first=owed_first), binding, owner, without_task
            )
            if not isinstance(admitted, Creation):
                return admitted
            admission, task_id = admitted.admission, admitted.task_id
            if admission is not Admission.RECORDED:
                return await self.answers.admitted(
                    admission,
                    task_id,
                    binding,
                    owner,
                    pending=answer_pending if without_task else None,
                    earlier=earlier,
                )
            crash_point("after_intent")
            handle = await self._submit(intent, submission)
            if handle is None:
                return final_denial(REFUSED_MESSAGE.format(tool=binding.tool), remediation=Remediation.UNAVAILABLE)
            crash_point("after_submit")
            if not await deps.store.mark_submitted(intent.key, handle):
                # Another worker's reconciliation claimed the intent (this one stalled past the grace
                # without renewing it) while the backend was being asked; it may have looked for this
                # request before it existed, so withdraw it here too.
                await withdraw(deps.backend, handle, task_id=intent.task_id)
                raise MCPError(code=INTERNAL_ERROR, message=BACKEND_DOWN_MESSAGE)
            crash_point("after_handle")
            new = await self._workflow_of(intent, binding, submission, owner=owner, handle=handle, large=large)
            new = self._as_created(new, handle, linked=linked, without_task=without_task)
            created = await deps.store.create_task(new)
            if not created:
                raise MCPError(code=INTERNAL_ERROR, message=BACKEND_DOWN_MESSAGE)
            crash_point("after_task")
            self.driver.task_created(intent.task_id, handle)
            return await self._answer_created(intent.task_id, binding.tool, without_task, answer_pending, earlier)

    async def _create_at_once(
        self,
        backend: SupportsSubmitInTransaction,
        intent: Intent,
        submission: ApprovalSubmission,
        binding: CallBinding,
        *,
        owner: str,
        linked: bool,
        without_task: bool,
        earlier: EarlierCall | None,
        pending: PendingAnswer,
        large: bool,
    ) -> HandlerResult:
        """Creation in one transaction, for a backend in this database (see ``SupportsSubmitInTransaction``)."""
        prebuilt = await self._workflow_of(intent, binding, submission, owner=owner, handle=None, large=large)
        # Large arguments are canonicalized on a worker thread now, not inside the transaction on the loop.
        await off_loop(large, submission.prepare)

        def workflow_for(handle: str) -> NewWorkflow:
            return self._as_created(replace(prebuilt, handle=handle), handle, linked=linked, without_task=without_task)

        async def record(owed_first: bool) -> Creation:
            options = self.options
            with span("backend.submit", backend=self.backend.name, task_id=intent.task_id):
                return await self.store.create_at_once(
                    intent,
                    lambda conn: backend.submit_in(conn, intent.key, submission),
                    workflow_for,
                    submissions_per_minute=options.submissions_per_minute,
                    max_pending=options.max_pending_per_principal,
                    task_limits=task_limits(self.tasks.options),
                    owed_first=owed_first,
                )

        admitted = await self._admit(record, binding, owner, without_task)
        if not isinstance(admitted, Creation):
            return admitted
        if admitted.admission is not Admission.RECORDED or admitted.handle is None:
            return await self.answers.admitted(
                admitted.admission,
                admitted.task_id,
                binding,
                owner,
                pending=pending if without_task else None,
                earlier=earlier,
            )
        crash_point("after_task")
        backend.submitted(admitted.handle, submission)
        self.driver.task_created(intent.task_id, admitted.handle)
        return await self._answer_created(
            intent.task_id, binding.tool, without_task, pending, earlier, record=admitted.task
        )

    async def _admit(
        self,
        record: Callable[[bool], Awaitable[Creation]],
        binding: CallBinding,
        owner: str,
        without_task: bool,
    ) -> Creation | HandlerResult:
        """``record`` the intent; an outcome an ended identical request owes this call comes first.

        ``record(owed_first)``: without tasks, a request of the same call that ended since this
        caller looked owes it its outcome, once, instead of a new request.
        """
        creation = await record(without_task)
        if creation.admission is not Admission.OUTCOME_OWED:
            return creation
        outcome = await self.without_tasks.owed_outcome(binding, owner)
        if outcome is not None:
            return outcome
        return await record(False)  # a concurrent retry took it

    def _as_created(self, new: NewWorkflow, handle: str, *, linked: bool, without_task: bool) -> NewWorkflow:
        """``new`` as created for its caller: with the approval page's link, kept for a retry without tasks."""
        if linked:
            new = url_approval.with_approval_link(new, options=self.options, backend=self.backend, handle=handle)
        return replace(new, owed_to_retry=True) if without_task else new

    async def _workflow_of(
        self,
        intent: Intent,
        binding: CallBinding,
        submission: ApprovalSubmission,
        *,
        owner: str,
        handle: str | None,
        large: bool,
    ) -> NewWorkflow:
        """The new task's rows for ``intent`` (built on a worker thread when the arguments are large)."""
        return await off_loop(
            large,
            self._new_workflow,
            intent.task_id,
            binding,
            submission,
            intent_key=intent.key,
            owner=owner,
            handle=handle,
        )

    async def _answer_created(
        self,
        task_id: str,
        tool: str,
        without_task: bool,
        pending: PendingAnswer,
        earlier: EarlierCall | None,
        *,
        record: TaskRecord | None = None,
    ) -> HandlerResult:
        """The answer to the call that created ``task_id`` (``record``: the task as created, if at hand)."""
        if without_task:
            return await pending(task_id, tool, opened=True, earlier=earlier)
        return await self.answers.task_answer(task_id, tool, immediate=True, earlier=earlier, record=record)

    async def create_with_inputs(
        self,
        call: GatedCall,
        binding: CallBinding,
        decision: Decision,
        ctx: ServerRequestContext[Any, Any],
        *,
        owner: str,
        fields: tuple[str, ...],
    ) -> HandlerResult:
        """Ask for the template's submission inputs before submitting (an MRTR round), then create."""
        existing = await self.store.find_live(owner, binding.tool, binding.digest)
        if existing is not None:  # a retry of a call already waiting: its task, no second form
            return await self.answers.existing_task(existing, binding)
        if template_of(decision) in self.options.inputs_in_task:
            return await self._create_waiting(binding, decision, owner=owner, fields=fields)
        supplied = self.supplied_inputs(call, binding, ctx, owner=owner, fields=fields)
        if not isinstance(supplied, dict):
            return supplied  # the form round, or the answer that nothing was submitted
        linked = url_approval.declares_url_elicitation(ctx)
        return await self.create(binding, decision, owner=owner, inputs=supplied, linked=linked)

    def supplied_inputs(
        self,
        call: GatedCall,
        binding: CallBinding,
        ctx: ServerRequestContext[Any, Any],
        *,
        owner: str,
        fields: tuple[str, ...],
    ) -> dict[str, str] | HandlerResult:
        """The inputs this call's MRTR retry supplies, else the form round (or why none can be asked).

        Raises:
            MCPError: ``-32602`` when the retry's ``requestState`` was minted for another call.
        """
        supplied = submission_inputs.answered(binding, owner, fields, call.input_responses, call.request_state)
        if isinstance(supplied, submission_inputs.Declined):
            message = INPUTS_DECLINED.format(tool=binding.tool, fields=", ".join(fields))
            return final_denial(message, remediation=Remediation.UNDISCLOSED)
        if supplied is not None:
            return dict(supplied)
        form = submission_inputs.input_request(binding.tool, fields)
        try:
            check_declared({"method": form.method, "params": form.params.model_dump(by_alias=True)}, _capabilities(ctx))
        except MCPError:
            message = INPUTS_UNSUPPORTED.format(tool=binding.tool, fields=", ".join(fields))
            return final_denial(message, remediation=Remediation.UNDISCLOSED)
        return submission_inputs.ask(binding, owner, fields)

    async def _create_waiting(
        self, binding: CallBinding, decision: Decision, *, owner: str, fields: tuple[str, ...]
    ) -> HandlerResult:
        """A task that asks for the submission inputs itself; it is submitted once they arrive."""
        deps = self.deps
        earlier = await deps.store.earlier_call(owner, binding.tool, binding.digest)
        submission = replace(self._submission(binding, decision), duplicate_of=earlier)
        task_id = new_task_id()
        draft = replace(self._new_intent(task_id, 0, binding, submission, owner=owner), state=IntentState.BOUND)
        new = replace(
            self._new_workflow(task_id, binding, submission, intent_key="", owner=owner, handle=None),
            status_message=sanitize_model_text(INPUTS_IN_TASK.format(tool=binding.tool, fields=", ".join(fields))),
            input_requests=submission_inputs.in_task_requests(binding.tool, fields),
            next_check_at=deps.clock.now_ms() + round(deps.options.poll_interval_s * 1000),
        )
        admission, existing = await deps.store.create_waiting_task(
            new,
            draft,
            submissions_per_minute=deps.options.submissions_per_minute,
            max_pending=deps.options.max_pending_per_principal,
            task_limits=task_limits(self.tasks.options),
        )
        return await self.answers.admitted(admission, existing, binding, owner, earlier=earlier)

    async def _record(self, intent: Intent, *, owed_first: bool) -> Creation:
        options = self.options
        admission, task_id = await self.store.record_intent(
            intent,
            submissions_per_minute=options.submissions_per_minute,
            max_pending=options.max_pending_per_principal,
            task_limits=task_limits(self.tasks.options),
            owed_first=owed_first,
        )
        return Creation(admission, task_id)

    def _submission(self, binding: CallBinding, decision: Decision) -> ApprovalSubmission:
        deps = self.deps
        return submission_for(binding, decision, mapper=deps.mapper, options=deps.options, now=deps.clock.now_ms())

    def _new_intent(
        self, task_id: str, generation: int, binding: CallBinding, submission: ApprovalSubmission, *, owner: str
    ) -> Intent:
        deps = self.deps
        return new_intent(
            task_id, generation, binding, submission, owner=owner, cipher=deps.cipher, now=deps.clock.now_ms()
        )

    def _new_workflow(
        self,
        task_id: str,
        binding: CallBinding,
        submission: ApprovalSubmission,
        *,
        intent_key: str,
        owner: str,
        handle: str | None,
    ) -> NewWorkflow:
        deps = self.deps
        return new_workflow(
            task_id,
            binding,
            submission,
            intent_key=intent_key,
            owner=owner,
            handle=handle,
            backend=deps.backend.name,
            cipher=deps.cipher,
            options=deps.options,
            now=deps.clock.now_ms(),
        )

    async def _submit(self, intent: Intent, submission: ApprovalSubmission) -> str | None:
        """The backend's handle; ``None`` when it refused the request for good (nothing to retry)."""
        deps = self.deps
        try:
            with span("backend.submit", backend=deps.backend.name, task_id=intent.task_id):
                return await deps.backend.submit(intent.key, submission)
        except SubmissionRejectedError as exc:
            logger.warning("approval backend refused the submission for good: %s", exc)
            await deps.store.abandon_intent(intent)
            return None
        except ApprovalBackendError as exc:
            # The intent stays open: the reconciler finds out whether the backend got it.
            logger.warning("approval backend refused or failed the submission: %s", exc)
            raise MCPError(code=INTERNAL_ERROR, message=BACKEND_DOWN_MESSAGE) from exc


def template_of(decision: Decision) -> str | None:
    """The access request template a requestable denial names (its submission inputs are keyed by it)."""
    denial = decision.requestable_denial
    return denial.access_request.template if denial is not None else None


def _capabilities(ctx: ServerRequestContext[Any, Any]) -> Any:
    return ctx.session.client_capabilities
