"""What a call asking for a new approval task is answered, once admission has spoken.

The new task (with the text the model reads at once), the live task of an identical call, a
refusal naming the limit that was hit, or, for a retry without tasks whose request is already
decided, the outcome it is owed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from mcp.server.context import HandlerResult
from mcp.shared.exceptions import MCPError

from mcp_approval.approval.binding import CallBinding
from mcp_approval.approval.messages import (
    IMMEDIATE_TEXT,
    PENDING_LIMIT_MESSAGE,
    PRINCIPAL_TASK_LIMIT_MESSAGE,
    RATE_LIMIT_MESSAGE,
    REFUSED_MESSAGE,
    TASK_LIMIT_MESSAGE,
    earlier_call_text,
)
from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.approval.persistence.states import Phase
from mcp_approval.approval.persistence.store import Admission, ApprovalStore
from mcp_approval.approval.results import sanitize_model_text
from mcp_approval.approval.without_tasks.flow import PendingAnswer, WithoutTasksFlow
from mcp_approval.backends import ApprovalBackend, ApprovalBackendError, EarlierCall
from mcp_approval.denials import Remediation, final_denial
from mcp_approval.protocol import INTERNAL_ERROR, META_MODEL_IMMEDIATE_RESPONSE
from mcp_approval.tasks.models import TaskRecord, create_task_result
from mcp_approval.tasks.options import TaskOptions
from mcp_approval.tasks.server import TasksExtension

__all__ = ["CreationAnswers", "task_limits"]

# The approval layer's logger, shared with the service: one name for operators to filter on.
logger = logging.getLogger("mcp_approval.approval")

# How long a retry waits for the task of an identical call whose submission is in flight.
_DUPLICATE_WAIT_S = (0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6)
# How long a retry without tasks waits for the outcome of a request whose decision is already
# stored (the driver is nudged at once; an approved call may still be running).
_DECISION_WAIT_S = (0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0)
# The immediate response's bound: room for the waiting text and the identical earlier call it names.
_IMMEDIATE_CHARS = 600


def task_limits(options: TaskOptions) -> tuple[int | None, int | None]:
    """The tasks extension's ``(max_tasks, max_per_principal)``: approval tasks count against them."""
    return options.max_tasks, options.max_per_principal


class CreationAnswers:
    """Answers the calls that asked for a new approval task.

    Args:
        store: the approval store (a workflow's phase, for a retry's decided outcome).
        backend: the approval backend (whether a request is decided before its workflow knows).
        tasks: the tasks extension; its store holds the approval tasks and its options' limits
            are named in refusals (read at each answer: a deployment may replace the options).
        options: the approval options (the limits a refusal names).
        nudge: the workflow driver's "check this task now".
        without_tasks: the outcomes owed to clients without tasks.
    """

    def __init__(
        self,
        *,
        store: ApprovalStore,
        backend: ApprovalBackend,
        tasks: TasksExtension,
        options: ApprovalOptions,
        nudge: Callable[[str], None],
        without_tasks: WithoutTasksFlow,
    ) -> None:
        self.store = store
        self.backend = backend
        self.tasks = tasks
        self.options = options
        self.nudge = nudge
        self.without_tasks = without_tasks

    async def admitted(
        self,
        admission: Admission,
        task_id: str | None,
        binding: CallBinding,
        owner: str,
        *,
        pending: PendingAnswer | None = None,
        earlier: EarlierCall | None = None,
    ) -> HandlerResult:
        """The answer for an admitted, duplicate or refused new approval task (``pending``: without tasks).

        ``earlier``: the identical call whose request already ended, which the answer names.
        """
        if admission is Admission.DUPLICATE:
            assert task_id is not None
            if pending is not None:
                decided = await self._decided_outcome(task_id, binding, owner)
                if decided is not None:
                    return decided
                return await pending(task_id, binding.tool, opened=False, earlier=earlier)
            return await self.existing_task(task_id, binding, earlier=earlier)
        if admission is not Admission.RECORDED:
            logger.warning("approval submission refused for %s on %r: %s", owner[:8], binding.tool, admission.value)
            return final_denial(self._limit_message(admission, binding.tool), remediation=Remediation.UNAVAILABLE)
        assert task_id is not None
        return await self.task_answer(task_id, binding.tool, immediate=True, earlier=earlier)

    async def _decided_outcome(self, task_id: str, binding: CallBinding, owner: str) -> dict[str, Any] | None:
        """Read-your-decision for a retry without tasks: the outcome of its open request once decided.

        A decision stored at the backend (by any worker's reviewer) or an approved call already
        running is not "still open": the driver is nudged to act on it now, and the retry waits
        briefly for the outcome it then owes. ``None`` while nothing is decided (or it takes longer).
        """
        if not await self._decision_stored(task_id):
            return None
        self.nudge(task_id)
        for delay in _DECISION_WAIT_S:
            await asyncio.sleep(delay)
            outcome = await self.without_tasks.owed_outcome(binding, owner)
            if outcome is not None:
                return outcome
            workflow = await self.store.get(task_id)
            if workflow is None or workflow.phase in (Phase.FINISHED, Phase.FENCED):
                # Ended: since the look above (its outcome is ours), or an identical retry took it first.
                return await self.without_tasks.owed_outcome(binding, owner)
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

    def _limit_message(self, admission: Admission, tool: str) -> str:
        """The refusal naming the limit ``admission`` hit and its value."""
        options = self.options
        max_tasks, max_per_principal = task_limits(self.tasks.options)
        message, limit = {
            Admission.RATE_LIMITED: (RATE_LIMIT_MESSAGE, options.submissions_per_minute),
            Admission.TOO_MANY_PENDING: (PENDING_LIMIT_MESSAGE, options.max_pending_per_principal),
            Admission.TASK_LIMIT: (TASK_LIMIT_MESSAGE, max_tasks),
            Admission.PRINCIPAL_TASK_LIMIT: (PRINCIPAL_TASK_LIMIT_MESSAGE, max_per_principal),
            Admission.REFUSED: (REFUSED_MESSAGE, None),
        }[admission]
        return message.format(tool=tool, limit=limit)

    async def existing_task(
        self, task_id: str, binding: CallBinding, *, earlier: EarlierCall | None = None
    ) -> HandlerResult:
        """The live task of an identical call (SEP-2848 §At-most-once and deduplication)."""
        for delay in (0.0, *_DUPLICATE_WAIT_S):
            if delay:
                await asyncio.sleep(delay)  # the first request is between its intent and its task
            record = await self.tasks.store.get(task_id)
            if record is not None and not record.terminal:
                return await self.task_answer(task_id, binding.tool, immediate=True, earlier=earlier)
            if record is not None:
                break
        raise MCPError(code=INTERNAL_ERROR, message="An identical call is still being submitted; try again")

    async def task_answer(
        self,
        task_id: str,
        tool: str,
        *,
        immediate: bool,
        earlier: EarlierCall | None = None,
        record: TaskRecord | None = None,
    ) -> HandlerResult:
        """The ``CreateTaskResult`` of ``task_id``; ``immediate``: with the text the model reads at once,
        which names the identical ``earlier`` call whose request already ended, if there is one.

        ``record``: the task as this call just created it (else it is read back).
        """
        record = record or await self.tasks.store.get(task_id)
        if record is None:
            raise MCPError(code=INTERNAL_ERROR, message="The approval task could not be read back")
        answer = create_task_result(record)
        if immediate and not record.terminal:
            meta = dict(answer.get("_meta") or {})
            text = IMMEDIATE_TEXT.format(tool=tool)
            if earlier is not None:
                text = f"{text} {earlier_call_text(earlier)}"
            meta[META_MODEL_IMMEDIATE_RESPONSE] = sanitize_model_text(text, limit=_IMMEDIATE_CHARS)
            answer["_meta"] = meta
        return answer
