"""Task creation: a requestable denial's call becomes a durable approval task (SEP-2848).

Creation is crash-consistent (§Crash-consistent creation): dedup first; then a durable intent
with a fresh idempotency key and the exact (sealed) body; then the backend submission under that
key; then the handle; then the task, in that order, each durable before the next step. A backend
kept in the server's own database (the local backend) joins one transaction with the intent and
the task instead: creation commits whole or not at all, and leaves nothing in flight to reconcile.
The :class:`~mcp_approval.approval.engine.driver.WorkflowDriver` takes it from there.

A request is first drafted (:meth:`TaskCreation.draft`: its submission, intent and rows, built
from what the gate learned, on a worker thread when the arguments are large), then opened
(:meth:`TaskCreation.open_draft`), which returns what admission said. A client that declared tasks is
answered here (:meth:`TaskCreation.approval_task`); one without tasks by the caller that opened its
request (:mod:`~mcp_approval.approval.without_tasks`).

A template with submission inputs asks for them first: in an MRTR form round before the
submission, or (``ApprovalOptions.inputs_in_task``) from a task that is submitted once they arrive.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from mcp_approval.approval import url_approval
from mcp_approval.approval.call import inputs as submission_inputs
from mcp_approval.approval.creation.answers import CreationAnswers, task_limits
from mcp_approval.approval.creation.requestable import RequestableCall
from mcp_approval.approval.engine.driver import WorkflowDriver
from mcp_approval.approval.engine.requests import new_intent, new_workflow, submission_for
from mcp_approval.approval.engine.resubmission import withdraw
from mcp_approval.approval.messages import BACKEND_DOWN_MESSAGE, INPUTS_IN_TASK
from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.approval.persistence.admission import AdmissionStore
from mcp_approval.approval.persistence.records import Admission, Creation, Intent, NewWorkflow
from mcp_approval.approval.persistence.states import IntentState
from mcp_approval.approval.results import sanitize_model_text
from mcp_approval.backends import (
    ApprovalBackend,
    ApprovalBackendError,
    ApprovalSubmission,
    EarlierCall,
    SubmissionRejectedError,
    SupportsSubmitInTransaction,
)
from mcp_approval.clock import Clock
from mcp_approval.crashpoints import crash_point
from mcp_approval.keyring import BindingCipher
from mcp_approval.protocol import INTERNAL_ERROR
from mcp_approval.tasks.models import new_task_id
from mcp_approval.tasks.server import TasksExtension
from mcp_approval.tracing import span
from mcp_approval.worker_thread import off_loop

__all__ = ["Draft", "TaskCreation"]

# The approval layer's logger, shared with the service: one name for operators to filter on.
logger = logging.getLogger("mcp_approval.approval")


@dataclass(frozen=True)
class Draft:
    """A new approval request for one call, built before anything of it is stored.

    Attributes:
        call: the call it asks approval for.
        submission: the exact backend request (with the supplied submission inputs, and the
            identical earlier call it may repeat).
        intent: its submission intent: a fresh idempotency key and the sealed body.
        earlier: the identical call whose request already ended, which reviewers and the
            caller are told this one may repeat.
        linked: the task starts with the approval page's link (the call declared URL elicitation).
        for_retry: made for a client without tasks: the identical retry collects the outcome, once.
    """

    call: RequestableCall
    submission: ApprovalSubmission
    intent: Intent
    earlier: EarlierCall | None
    linked: bool = False
    for_retry: bool = False


class TaskCreation:
    """Creates approval tasks: dedup, admission, intent, submission, handle, task (see the module docstring).

    Args:
        store: the approval store's part for creation (admission, intents, the new task).
        backend: where the requests go.
        cipher: seals the call binding and the request body.
        options: limits, deadlines and intervals.
        clock: the source of time.
        driver: told of this worker's creations in flight (its reconciler leaves them) and of new tasks.
        tasks: the tasks extension; its options' limits count approval tasks (read at each
            creation: a deployment may replace the options while serving).
        answers: what a client that declared tasks is answered.
    """

    def __init__(
        self,
        *,
        store: AdmissionStore,
        backend: ApprovalBackend,
        cipher: BindingCipher,
        options: ApprovalOptions,
        clock: Clock,
        driver: WorkflowDriver,
        tasks: TasksExtension,
        answers: CreationAnswers,
    ) -> None:
        self.store = store
        self.backend = backend
        self.cipher = cipher
        self.options = options
        self.clock = clock
        self.driver = driver
        self.tasks = tasks
        self.answers = answers
        # A backend writing to the approval store's own database creates in one transaction.
        self._joins_transaction: SupportsSubmitInTransaction | None = None
        if isinstance(backend, SupportsSubmitInTransaction) and backend.shares_database(store.database):
            self._joins_transaction = backend

    # -- a client that declared tasks --------------------------------------------------------

    async def approval_task(self, call: RequestableCall, ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        """The approval task of ``call`` (``CreateTaskResult``), or what admission answered instead.

        A template with submission inputs asks for them first; ``ctx`` says which interactions
        the request declared (a form round, a link to the approval page).
        """
        if call.fields:
            return await self._create_with_inputs(call, ctx)
        return await self._create(call, linked=url_approval.declares_url_elicitation(ctx))

    async def _create(
        self, call: RequestableCall, *, inputs: Mapping[str, str] | None = None, linked: bool
    ) -> HandlerResult:
        draft = await self.draft(call, inputs=inputs, linked=linked)
        return await self.answers.admitted(await self.open_draft(draft), call.tool, call.owner, earlier=draft.earlier)

    async def _create_with_inputs(self, call: RequestableCall, ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        """Ask for the template's submission inputs before submitting (an MRTR round), then create."""
        existing = await self.store.find_live(call.owner, call.tool, call.binding.digest)
        if existing is not None:  # a retry of a call already waiting: its task, no second form
            return await self.answers.existing_task(existing, call.tool)
        if call.template in self.options.inputs_in_task:
            return await self._create_waiting(call)
        gated = call.gated
        capabilities = ctx.session.client_capabilities
        supplied = submission_inputs.collect(
            call.binding, call.owner, call.fields, gated.input_responses, gated.request_state, capabilities
        )
        if not isinstance(supplied, dict):
            return supplied  # the form round, or the answer that nothing was submitted
        return await self._create(call, inputs=supplied, linked=url_approval.declares_url_elicitation(ctx))

    async def _create_waiting(self, call: RequestableCall) -> HandlerResult:
        """A task that asks for the submission inputs itself; it is submitted once they arrive."""
        options = self.options
        earlier = await self.store.earlier_call(call.owner, call.tool, call.binding.digest)
        # Generation 0 keeps the body and is never sent: a chain from it submits once the inputs arrived.
        submission, unsent = self._request_of(call, None, earlier, generation=0)
        draft = Draft(call, submission, replace(unsent, state=IntentState.BOUND), earlier)
        fields = ", ".join(call.fields)
        new = replace(
            self._rows_of(draft, None),
            status_message=sanitize_model_text(INPUTS_IN_TASK.format(tool=call.tool, fields=fields)),
            input_requests=submission_inputs.in_task_requests(call.tool, call.fields),
            next_check_at=self.clock.now_ms() + round(options.poll_interval_s * 1000),
        )
        admission, existing = await self.store.create_waiting_task(
            new,
            draft.intent,
            submissions_per_minute=options.submissions_per_minute,
            max_pending=options.max_pending_per_principal,
            task_limits=task_limits(self.tasks.options),
        )
        return await self.answers.admitted(Creation(admission, existing), call.tool, call.owner, earlier=earlier)

    # -- drafting and opening a request --------------------------------------------------------

    async def draft(
        self,
        call: RequestableCall,
        *,
        inputs: Mapping[str, str] | None = None,
        linked: bool = False,
        for_retry: bool = False,
    ) -> Draft:
        """The request ``call`` would open (``inputs``: the submission inputs its requester supplied).

        The identical call whose request already ended is read first: the body names it.
        """
        earlier = await self.store.earlier_call(call.owner, call.tool, call.binding.digest)
        # Building, canonicalizing and sealing large arguments runs on a worker thread.
        submission, intent = await off_loop(call.gated.large, self._request_of, call, inputs, earlier)
        return Draft(call, submission, intent, earlier, linked=linked, for_retry=for_retry)

    async def open_draft(self, draft: Draft, *, owed_first: bool = False) -> Creation:
        """Admit ``draft``'s call and create its task; returns what admission said and what was made.

        :attr:`~Admission.RECORDED` with the new task; :attr:`~Admission.DUPLICATE` naming the live
        task of an identical call; a limit it hit; :attr:`~Admission.REFUSED` when the backend
        refused the request for good. ``owed_first`` (a client without tasks): an ended request of
        the same call that owes this caller its outcome comes first (:attr:`~Admission.OUTCOME_OWED`,
        naming it); nothing is stored then, and ``draft`` may be opened again.

        Raises:
            MCPError: ``-32603`` when the backend could not be reached, or another worker's
                reconciliation took the intent while this one stalled.
        """
        # A creation of this worker that failed (the store went away under it, say) is settled first,
        # so that this call, if it is that one's retry, finds no request of it still in flight.
        await self.driver.settle_failed_creations()
        if self._joins_transaction is not None:
            return await self._open_at_once(self._joins_transaction, draft, owed_first=owed_first)
        return await self._open_in_steps(draft, owed_first=owed_first)

    async def _open_in_steps(self, draft: Draft, *, owed_first: bool) -> Creation:
        """Intent → submit → handle → task, each durable before the next."""
        intent, options = draft.intent, self.options
        # Until the task exists, the intent is this worker's creation in flight: its reconciler never
        # takes it for a crash leftover, however long a loaded host stalls the steps below.
        with self.driver.creating(intent):
            admission, task_id = await self.store.record_intent(
                intent,
                submissions_per_minute=options.submissions_per_minute,
                max_pending=options.max_pending_per_principal,
                task_limits=task_limits(self.tasks.options),
                owed_first=owed_first,
            )
            if admission is not Admission.RECORDED:
                return Creation(admission, task_id)
            crash_point("after_intent")
            handle = await self._submit(intent, draft.submission)
            if handle is None:
                return Creation(Admission.REFUSED, None)
            crash_point("after_submit")
            if not await self.store.mark_submitted(intent.key, handle):
                # Another worker's reconciliation claimed the intent (this one stalled past the grace
                # without renewing it) while the backend was being asked; it may have looked for this
                # request before it existed, so withdraw it here too.
                await withdraw(self.backend, handle, task_id=intent.task_id)
                raise MCPError(code=INTERNAL_ERROR, message=BACKEND_DOWN_MESSAGE)
            crash_point("after_handle")
            new = await self._workflow_of(draft, handle=handle)
            if not await self.store.create_task(self._as_created(new, draft, handle)):
                raise MCPError(code=INTERNAL_ERROR, message=BACKEND_DOWN_MESSAGE)
            crash_point("after_task")
            self.driver.task_created(intent.task_id, handle)
            return Creation(Admission.RECORDED, intent.task_id, handle)

    async def _open_at_once(self, backend: SupportsSubmitInTransaction, draft: Draft, *, owed_first: bool) -> Creation:
        """Creation in one transaction, for a backend in this database (see ``SupportsSubmitInTransaction``)."""
        intent, submission, options = draft.intent, draft.submission, self.options
        # Large arguments are canonicalized on a worker thread now, not inside the transaction on the loop.
        prebuilt = await off_loop(draft.call.gated.large, self._prepared_rows, draft)

        def workflow_for(handle: str) -> NewWorkflow:
            return self._as_created(replace(prebuilt, handle=handle), draft, handle)

        with span("backend.submit", backend=self.backend.name, task_id=intent.task_id):
            created = await self.store.create_at_once(
                intent,
                lambda conn: backend.submit_in(conn, intent.key, submission),
                workflow_for,
                submissions_per_minute=options.submissions_per_minute,
                max_pending=options.max_pending_per_principal,
                task_limits=task_limits(self.tasks.options),
                owed_first=owed_first,
            )
        if created.admission is not Admission.RECORDED or created.handle is None:
            return created
        crash_point("after_task")
        backend.submitted(created.handle, submission)
        self.driver.task_created(intent.task_id, created.handle)
        return created

    def _as_created(self, new: NewWorkflow, draft: Draft, handle: str) -> NewWorkflow:
        """``new`` as created for its caller: with the approval page's link, kept for a retry without tasks."""
        if draft.linked:
            new = url_approval.with_approval_link(new, options=self.options, backend=self.backend, handle=handle)
        return replace(new, owed_to_retry=True) if draft.for_retry else new

    async def _workflow_of(self, draft: Draft, *, handle: str | None) -> NewWorkflow:
        """The new task's rows for ``draft`` (built on a worker thread when the arguments are large)."""
        return await off_loop(draft.call.gated.large, self._rows_of, draft, handle)

    async def _submit(self, intent: Intent, submission: ApprovalSubmission) -> str | None:
        """The backend's handle; ``None`` when it refused the request for good (nothing to retry)."""
        try:
            with span("backend.submit", backend=self.backend.name, task_id=intent.task_id):
                return await self.backend.submit(intent.key, submission)
        except SubmissionRejectedError as exc:
            logger.warning("approval backend refused the submission for good: %s", exc)
            await self.store.abandon_intent(intent)
            return None
        except ApprovalBackendError as exc:
            # The intent stays open: the reconciler finds out whether the backend got it.
            logger.warning("approval backend refused or failed the submission: %s", exc)
            raise MCPError(code=INTERNAL_ERROR, message=BACKEND_DOWN_MESSAGE) from exc

    # -- the values a request is made of ------------------------------------------------------

    def _request_of(
        self,
        call: RequestableCall,
        inputs: Mapping[str, str] | None,
        earlier: EarlierCall | None,
        *,
        generation: int = 1,
    ) -> tuple[ApprovalSubmission, Intent]:
        """The submission of ``call`` (with ``inputs``, naming ``earlier``) and its intent of ``generation``."""
        now = self.clock.now_ms()
        submission = submission_for(call.binding, call.decision, call.gated.request, options=self.options, now=now)
        submission = replace(submission, inputs=inputs or None, duplicate_of=earlier)
        intent = new_intent(
            new_task_id(), generation, call.binding, submission, owner=call.owner, cipher=self.cipher, now=now
        )
        return submission, intent

    def _rows_of(self, draft: Draft, handle: str | None) -> NewWorkflow:
        """The task and workflow rows of ``draft`` (``handle``: ``None`` until it is submitted)."""
        intent = draft.intent
        return new_workflow(
            intent.task_id,
            draft.call.binding,
            draft.submission,
            intent_key=intent.key,
            owner=draft.call.owner,
            handle=handle,
            backend=self.backend.name,
            cipher=self.cipher,
            options=self.options,
            now=self.clock.now_ms(),
        )

    def _prepared_rows(self, draft: Draft) -> NewWorkflow:
        """:meth:`_rows_of` before the submission, with the body canonicalized for the transaction."""
        draft.submission.prepare()
        return self._rows_of(draft, None)
