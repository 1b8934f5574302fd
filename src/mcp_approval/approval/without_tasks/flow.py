"""How :class:`~mcp_approval.approval.ToolApproval` answers a client without tasks (``without_tasks = "request"``).

=====================================  ====================================================
the call                               answer
=====================================  ====================================================
an ended request's outcome is owed     that outcome, once (the compare-and-set on
                                       ``owed_to_retry``); the approval is then spent
nothing owed                           open (or join) a request, then the pending answer:
                                       ``undisclosed`` text, or with ``requester_url`` and a
                                       declared ``elicitation.url`` the revision's URL
                                       mechanism (:mod:`.links`)
the request it joins is decided        read-your-decision: the driver acts on it at once,
                                       and the call waits briefly for the outcome it is owed
its template needs submission inputs   an MRTR form round first (2026-07-28), unless an
                                       outcome is owed or a request is already open
2026-07-28 retry with a URL round's    its state checked (``-32602`` unless minted for this
``requestState``                       call and caller); the outcome once, the pending
                                       answer while still open (the page was given: never
                                       the same elicitation again), else a new request
=====================================  ====================================================

Requests are drafted and opened by :class:`~mcp_approval.approval.creation.steps.TaskCreation`,
which returns what admission said; the answer is chosen here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from mcp.server.context import HandlerResult, ServerRequestContext

from mcp_approval.approval.binding import CallBinding
from mcp_approval.approval.call import inputs as submission_inputs
from mcp_approval.approval.creation.answers import CreationAnswers
from mcp_approval.approval.creation.requestable import RequestableCall
from mcp_approval.approval.creation.steps import TaskCreation
from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.approval.persistence.records import Admission
from mcp_approval.approval.persistence.retries import RetryStore
from mcp_approval.approval.persistence.states import Phase
from mcp_approval.approval.without_tasks import answers as without_tasks
from mcp_approval.approval.without_tasks.links import RequesterLinks, UrlRevision, url_revision
from mcp_approval.backends import ApprovalBackend, ApprovalBackendError
from mcp_approval.backends.contract import EarlierCall
from mcp_approval.safe_text import storable
from mcp_approval.tasks.store import TaskStore

__all__ = ["PendingAnswer", "WithoutTasksFlow"]

# How long a retry waits for the outcome of a request whose decision is already stored (the
# driver is nudged at once; an approved call may still be running).
_DECISION_WAIT_S = (0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0)


class PendingAnswer(Protocol):
    """The answer to a call without tasks whose request ``task_id`` is open (``opened``: by this call).

    ``earlier``: the identical call whose request already ended, which this one may duplicate.
    """

    async def __call__(
        self, task_id: str, tool: str, *, opened: bool, earlier: EarlierCall | None = None
    ) -> HandlerResult:
        """The result (or raised error) the caller receives."""
        ...


OutputSchemaLookup = Callable[[str], Awaitable["dict[str, Any] | None"]]
"""The ``outputSchema`` a tool declares (``None``: none)."""


class WithoutTasksFlow:
    """The answers of the table above.

    Args:
        store: the approval store's part for requests made without tasks (their outcomes, once).
        tasks: the task store holding the requests' results.
        links: seals the requester page's tokens and the URL rounds' state.
        options: the URL mechanism a call opens, the poll interval ``approval_status`` suggests.
        creation: drafts and opens the requests.
        answers: the refusal naming the limit admission hit.
        backend: whether an open request was decided before its workflow knows (read-your-decision).
        nudge: the workflow driver's "check this task now".
        output_schema: the ``outputSchema`` a tool declares.
    """

    def __init__(
        self,
        *,
        store: RetryStore,
        tasks: TaskStore,
        links: RequesterLinks,
        options: ApprovalOptions,
        creation: TaskCreation,
        answers: CreationAnswers,
        backend: ApprovalBackend,
        nudge: Callable[[str], None],
        output_schema: OutputSchemaLookup,
    ) -> None:
        self.store = store
        self.tasks = tasks
        self.links = links
        self.options = options
        self.creation = creation
        self.answers = answers
        self.backend = backend
        self.nudge = nudge
        self._output_schema = output_schema

    async def answer_call(self, call: RequestableCall, ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        """The answer to ``call`` by a client without tasks (``ctx``: the interactions it declared)."""
        revision = url_revision(ctx, self.options)
        state = call.gated.request_state
        answering_form = submission_inputs.INPUT_KEY in (call.gated.input_responses or {})
        if call.fields and (state is None or answering_form):
            return await self._inputs_first(call, revision, ctx)
        if revision == "2026-07-28" and state is not None:
            return await self._url_retry(call, state)
        return await self._ask(call, revision)

    async def pending(
        self, task_id: str, tool: str, *, opened: bool, earlier: EarlierCall | None = None
    ) -> HandlerResult:
        """A request made without tasks is open: say so, with its reference and deadline (and the
        identical ``earlier`` call it may duplicate)."""
        workflow = await self.store.get(task_id)
        deadline = workflow.request_deadline if workflow is not None else None
        answer = without_tasks.pending_answer(tool, task_id, deadline, opened=opened, earlier=earlier)
        if await self._output_schema(tool) is not None:
            # Clients check structuredContent against the tool's outputSchema, error results
            # included (the Inspector refuses the answer otherwise): the facts stay in the text.
            return answer.model_copy(update={"structured_content": None})
        return answer

    async def status(self, reference: str, owner: str | None) -> Any:
        """Where ``owner``'s request ``reference`` stands; another principal's reads like an unknown one."""
        # A reference no store can hold (a NUL) names nothing, on every store alike.
        known = isinstance(owner, str) and reference and storable(reference)
        workflow = await self.store.get(reference) if known else None
        if workflow is None or workflow.principal_digest != owner:
            return without_tasks.unknown_reference(reference)
        poll_ms = round(self.options.task_poll_interval_s * 1000)
        return without_tasks.status_answer(workflow, poll_interval_ms=poll_ms)

    async def owed_outcome(self, binding: CallBinding, owner: str) -> dict[str, Any] | None:
        """Take the ended request's outcome owed to this call, if any (exactly one retry gets it)."""
        taken = await self.store.take_retry_outcome(owner, binding.tool, binding.digest)
        record = await self.tasks.get(taken) if taken is not None else None
        return without_tasks.outcome_answer(record) if record is not None and record.terminal else None

    # -- the answers -----------------------------------------------------------------------------

    async def _inputs_first(
        self, call: RequestableCall, revision: UrlRevision | None, ctx: ServerRequestContext[Any, Any]
    ) -> HandlerResult:
        """Inputs first (an MRTR form round), unless an outcome is owed or a request is already open."""
        outcome = await self.owed_outcome(call.binding, call.owner)
        if outcome is not None:
            return outcome
        if await self.store.find_live(call.owner, call.tool, call.binding.digest) is not None:
            return await self._ask(call, revision)  # joins it
        gated = call.gated
        capabilities = ctx.session.client_capabilities
        supplied = submission_inputs.collect(
            call.binding, call.owner, call.fields, gated.input_responses, gated.request_state, capabilities
        )
        if not isinstance(supplied, dict):
            return supplied
        return await self._ask(call, revision, inputs=supplied)

    async def _ask(
        self, call: RequestableCall, revision: UrlRevision | None, *, inputs: Mapping[str, str] | None = None
    ) -> HandlerResult:
        """The outcome owed to this call, else its request (``revision``: the URL mechanism it opens, if any).

        ``inputs``: the submission inputs the requester supplied (in an MRTR form round), if any.
        """
        outcome = await self.owed_outcome(call.binding, call.owner)
        if outcome is not None:
            return outcome
        # Nothing owed (or its task outlived its retention): this call asks for approval.
        pending = self.pending if revision is None else self._url_answer(call, revision)
        return await self._open(call, pending, inputs=inputs)

    async def _url_retry(self, call: RequestableCall, state: str) -> HandlerResult:
        """The retry of a URL round: the outcome once ended, the pending answer while still open.

        Whether the page was accepted or declined, the round ended: while the request is open the
        retry is answered like any other call without tasks (read-your-decision, else the pending
        answer), never with the same elicitation again, so a client's round loop ends. A state for
        a request whose outcome was already taken (the approval is spent) asks anew.
        """
        reference = self.links.open_state(state, call.binding, call.owner)  # -32602 unless minted for this call
        outcome = await self.owed_outcome(call.binding, call.owner)
        if outcome is not None:
            return outcome
        workflow = await self.store.get(reference)
        still_open = workflow is not None and workflow.phase in (Phase.PENDING, Phase.CLAIMED)
        pending = self.pending if still_open else self._url_answer(call, "2026-07-28")
        return await self._open(call, pending)

    async def _open(
        self, call: RequestableCall, pending: PendingAnswer, *, inputs: Mapping[str, str] | None = None
    ) -> HandlerResult:
        """Open (or join) the request of ``call``; the ``pending`` answer while it is open.

        Admission first looks for a request of the same call that ended since this caller looked:
        it owes this call its outcome, once, instead of a new request.
        """
        draft = await self.creation.draft(call, inputs=inputs, for_retry=True)
        created = await self.creation.open_draft(draft, owed_first=True)
        if created.admission is Admission.OUTCOME_OWED:
            outcome = await self.owed_outcome(call.binding, call.owner)
            if outcome is not None:
                return outcome
            created = await self.creation.open_draft(draft)  # a concurrent retry took it
        task_id = created.task_id
        if created.admission is Admission.RECORDED and task_id is not None:
            return await pending(task_id, call.tool, opened=True, earlier=draft.earlier)
        if created.admission is Admission.DUPLICATE and task_id is not None:
            decided = await self._decided_outcome(task_id, call)
            if decided is not None:
                return decided
            return await pending(task_id, call.tool, opened=False, earlier=draft.earlier)
        return self.answers.refusal(created.admission, call.tool, call.owner)

    def _url_answer(self, call: RequestableCall, revision: UrlRevision) -> PendingAnswer:
        """The pending answer that sends this caller to its request's page."""
        binding, owner = call.binding, call.owner

        async def answer(task_id: str, tool: str, *, opened: bool, earlier: EarlierCall | None = None) -> HandlerResult:
            workflow = await self.store.get(task_id)
            deadline = workflow.request_deadline if workflow is not None else None
            if revision == "2025-11-25":
                raise self.links.elicitation_required(task_id, tool, owner, deadline, earlier=earlier)
            return self.links.input_required(task_id, binding, owner, deadline, earlier=earlier)

        return answer

    # -- read-your-decision ----------------------------------------------------------------------

    async def _decided_outcome(self, task_id: str, call: RequestableCall) -> dict[str, Any] | None:
        """Read-your-decision for a retry: the outcome of its open request once decided.

        A decision stored at the backend (by any worker's reviewer) or an approved call already
        running is not "still open": the driver is nudged to act on it now, and the retry waits
        briefly for the outcome it then owes. ``None`` while nothing is decided (or it takes longer).
        """
        if not await self._decision_stored(task_id):
            return None
        self.nudge(task_id)
        for delay in _DECISION_WAIT_S:
            await asyncio.sleep(delay)
            outcome = await self.owed_outcome(call.binding, call.owner)
            if outcome is not None:
                return outcome
            workflow = await self.store.get(task_id)
            if workflow is None or workflow.phase in (Phase.FINISHED, Phase.FENCED):
                # Ended: since the look above (its outcome is ours), or an identical retry took it first.
                return await self.owed_outcome(call.binding, call.owner)
        return None

    async def _decision_stored(self, task_id: str) -> bool:
        """Whether the request of ``task_id`` was decided, though its workflow may not know it yet.

        A workflow past ``pending`` was decided: running, or already ended (between the retry's
        admission, which found it live, and this look) with the outcome the retry then takes.
        """
        workflow = await self.store.get(task_id)
        if workflow is None or workflow.phase is not Phase.PENDING or workflow.handle is None:
            return workflow is not None and workflow.phase is not Phase.PENDING
        try:
            state = await self.backend.status(workflow.handle)
        except ApprovalBackendError:
            return False  # the backend's answer decides; without one the request reads as open
        return state.status.terminal
