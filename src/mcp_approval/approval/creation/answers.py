"""What a call asking for a new approval task is answered, once admission has spoken.

For a client that declared tasks: the new task (with the text the model reads at once), or the
live task of an identical call. For every client: a refusal naming the limit that was hit (the
other answers to a client without tasks are :mod:`~mcp_approval.approval.without_tasks`').
"""

from __future__ import annotations

import asyncio
import logging

import mcp_types as types
from mcp.server.context import HandlerResult
from mcp.shared.exceptions import MCPError

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
from mcp_approval.approval.persistence.records import Admission, Creation
from mcp_approval.approval.results import sanitize_model_text
from mcp_approval.backends import EarlierCall
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
# The immediate response's bound: room for the waiting text and the identical earlier call it names.
_IMMEDIATE_CHARS = 600


def task_limits(options: TaskOptions) -> tuple[int | None, int | None]:
    """The tasks extension's ``(max_tasks, max_per_principal)``: approval tasks count against them."""
    return options.max_tasks, options.max_per_principal


class CreationAnswers:
    """Answers the calls that asked for a new approval task.

    Args:
        tasks: the tasks extension; its store holds the approval tasks and its options' limits
            are named in refusals (read at each answer: a deployment may replace the options).
        options: the approval options (the limits a refusal names).
    """

    def __init__(self, *, tasks: TasksExtension, options: ApprovalOptions) -> None:
        self.tasks = tasks
        self.options = options

    async def admitted(
        self, creation: Creation, tool: str, owner: str, *, earlier: EarlierCall | None = None
    ) -> HandlerResult:
        """The answer for an admitted, duplicate or refused new approval task of ``tool`` by ``owner``.

        ``earlier``: the identical call whose request already ended, which the answer names.
        """
        admission, task_id = creation.admission, creation.task_id
        if admission is Admission.DUPLICATE:
            assert task_id is not None
            return await self.existing_task(task_id, tool, earlier=earlier)
        if admission is not Admission.RECORDED:
            return self.refusal(admission, tool, owner)
        assert task_id is not None
        return await self.task_answer(task_id, tool, earlier=earlier, record=creation.task)

    def refusal(self, admission: Admission, tool: str, owner: str) -> types.CallToolResult:
        """The denial of a request ``admission`` refused: the limit it hit and its value (``unavailable``)."""
        logger.warning("approval submission refused for %s on %r: %s", owner[:8], tool, admission.value)
        return final_denial(self._limit_message(admission, tool), remediation=Remediation.UNAVAILABLE)

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

    async def existing_task(self, task_id: str, tool: str, *, earlier: EarlierCall | None = None) -> HandlerResult:
        """The live task of an identical call (SEP-2848 §At-most-once and deduplication)."""
        for delay in (0.0, *_DUPLICATE_WAIT_S):
            if delay:
                await asyncio.sleep(delay)  # the first request is between its intent and its task
            record = await self.tasks.store.get(task_id)
            if record is not None and not record.terminal:
                return await self.task_answer(task_id, tool, earlier=earlier)
            if record is not None:
                break
        raise MCPError(code=INTERNAL_ERROR, message="An identical call is still being submitted; try again")

    async def task_answer(
        self, task_id: str, tool: str, *, earlier: EarlierCall | None = None, record: TaskRecord | None = None
    ) -> HandlerResult:
        """The ``CreateTaskResult`` of ``task_id``, with the text the model reads at once, which names
        the identical ``earlier`` call whose request already ended, if there is one.

        ``record``: the task as this call just created it (else it is read back).
        """
        record = record or await self.tasks.store.get(task_id)
        if record is None:
            raise MCPError(code=INTERNAL_ERROR, message="The approval task could not be read back")
        answer = create_task_result(record)
        if not record.terminal:
            meta = dict(answer.get("_meta") or {})
            text = IMMEDIATE_TEXT.format(tool=tool)
            if earlier is not None:
                text = f"{text} {earlier_call_text(earlier)}"
            meta[META_MODEL_IMMEDIATE_RESPONSE] = sanitize_model_text(text, limit=_IMMEDIATE_CHARS)
            answer["_meta"] = meta
        return answer
