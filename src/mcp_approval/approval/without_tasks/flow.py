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
2026-07-28 retry with a URL round's    its state checked (``-32602`` unless minted for this
``requestState``                       call and caller); the outcome once, the pending
                                       answer while still open (the page was given: never
                                       the same elicitation again), else a new request
=====================================  ====================================================
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from mcp.server.context import HandlerResult

from mcp_approval.approval.binding import CallBinding
from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.approval.persistence.states import Phase
from mcp_approval.approval.persistence.store import ApprovalStore
from mcp_approval.approval.without_tasks import answers as without_tasks
from mcp_approval.approval.without_tasks.links import RequesterLinks, UrlRevision
from mcp_approval.backends.contract import EarlierCall
from mcp_approval.policy import Decision
from mcp_approval.tasks.store import TaskStore

__all__ = ["PendingAnswer", "RequestOpener", "WithoutTasksFlow"]


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


class RequestOpener(Protocol):
    """Opens (or joins) the approval request of a call without tasks (``ToolApproval.create``)."""

    async def __call__(
        self,
        binding: CallBinding,
        decision: Decision,
        *,
        owner: str,
        inputs: Mapping[str, str] | None,
        without_task: bool,
        pending: PendingAnswer,
    ) -> HandlerResult:
        """Dedup, then intent → submit → handle → task; the ``pending`` answer for an open request."""
        ...


class WithoutTasksFlow:
    """The answers of the table above, over the workflow and task stores.

    Args:
        store: the approval workflow store.
        tasks: the task store holding the requests' results.
        links: seals the requester page's tokens and the URL rounds' state.
        options: the poll interval ``approval_status`` suggests.
        open_request: :meth:`ToolApproval.create`.
    """

    def __init__(
        self,
        *,
        store: ApprovalStore,
        tasks: TaskStore,
        links: RequesterLinks,
        options: ApprovalOptions,
        open_request: RequestOpener,
        output_schema: OutputSchemaLookup,
    ) -> None:
        self.store = store
        self.tasks = tasks
        self.links = links
        self.options = options
        self._open = open_request
        self._output_schema = output_schema

    async def answer(
        self,
        binding: CallBinding,
        decision: Decision,
        owner: str,
        revision: UrlRevision | None,
        request_state: str | None,
        *,
        inputs: Mapping[str, str] | None = None,
    ) -> HandlerResult:
        """The answer to ``binding``'s call by ``owner`` (``revision``: the URL mechanism it opens, if any).

        ``inputs``: the submission inputs the requester supplied (in an MRTR form round), if any.
        """
        if revision == "2026-07-28" and request_state is not None:
            return await self._url_retry(binding, decision, owner, request_state)
        outcome = await self.owed_outcome(binding, owner)
        if outcome is not None:
            return outcome
        # Nothing owed (or its task outlived its retention): this call asks for approval.
        pending = self.pending if revision is None else self._url_answer(binding, owner, revision)
        return await self._open(binding, decision, owner=owner, inputs=inputs, without_task=True, pending=pending)

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
        workflow = await self.store.get(reference) if isinstance(owner, str) and reference else None
        if workflow is None or workflow.principal_digest != owner:
            return without_tasks.unknown_reference(reference)
        poll_ms = round(self.options.task_poll_interval_s * 1000)
        return without_tasks.status_answer(workflow, poll_interval_ms=poll_ms)

    async def owed_outcome(self, binding: CallBinding, owner: str) -> dict[str, Any] | None:
        """Take the ended request's outcome owed to this call, if any (exactly one retry gets it)."""
        taken = await self.store.take_retry_outcome(owner, binding.tool, binding.digest)
        record = await self.tasks.get(taken) if taken is not None else None
        return without_tasks.outcome_answer(record) if record is not None and record.terminal else None

    async def _url_retry(self, binding: CallBinding, decision: Decision, owner: str, state: str) -> HandlerResult:
        """The retry of a URL round: the outcome once ended, the pending answer while still open.

        Whether the page was accepted or declined, the round ended: while the request is open the
        retry is answered like any other call without tasks (read-your-decision, else the pending
        answer), never with the same elicitation again, so a client's round loop ends. A state for
        a request whose outcome was already taken (the approval is spent) asks anew.
        """
        reference = self.links.open_state(state, binding, owner)  # -32602 unless minted for this call and caller
        outcome = await self.owed_outcome(binding, owner)
        if outcome is not None:
            return outcome
        workflow = await self.store.get(reference)
        still_open = workflow is not None and workflow.phase in (Phase.PENDING, Phase.CLAIMED)
        pending = self.pending if still_open else self._url_answer(binding, owner, "2026-07-28")
        return await self._open(binding, decision, owner=owner, inputs=None, without_task=True, pending=pending)

    def _url_answer(self, binding: CallBinding, owner: str, revision: UrlRevision) -> PendingAnswer:
        """The pending answer that sends this caller to its request's page."""

        async def answer(task_id: str, tool: str, *, opened: bool, earlier: EarlierCall | None = None) -> HandlerResult:
            workflow = await self.store.get(task_id)
            deadline = workflow.request_deadline if workflow is not None else None
            if revision == "2025-11-25":
                raise self.links.elicitation_required(task_id, tool, owner, deadline, earlier=earlier)
            return self.links.input_required(task_id, binding, owner, deadline, earlier=earlier)

        return answer
