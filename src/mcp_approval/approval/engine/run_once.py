"""Running an approved call: the single claim, one invocation, the stored result.

SEP-2848 §Completion: the claim (``pending → claimed``) is the irrevocable enforcement point;
once it is won the tool runs exactly once and is carried through even if the approval expires
meanwhile. From the claim until its result is stored (however long the store takes to come back)
the worker renews its lease on the claim; a claim whose lease lapses (the worker died) ends
``outcome-unknown`` and is never invoked again.

A claim whose answer the store did not deliver (the connection went away as it committed) is in
doubt: the worker alone knows it has not run the call, so once the store answers again it reads
the workflow back, and runs the call if the claim is its own, exactly as if the answer had come.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mcp_approval.approval.binding import CallBinding
from mcp_approval.approval.persistence.endings import EndingStore
from mcp_approval.approval.persistence.executions import ExecutedBeforeError
from mcp_approval.approval.persistence.records import TaskOutcome, Workflow
from mcp_approval.approval.persistence.states import Disposition, Phase
from mcp_approval.approval.results import executed_result, outcome_unknown_result
from mcp_approval.approval.tools import ToolInvoker
from mcp_approval.clock import Clock
from mcp_approval.crashpoints import crash_point
from mcp_approval.keyring import BindingCipher
from mcp_approval.storage import StoreUnavailableError
from mcp_approval.tasks.states import TaskStatus
from mcp_approval.tracing import span

__all__ = ["Executor"]

logger = logging.getLogger("mcp_approval.approval")

#: What became of an approved call that did not run here (its span's ``mcp_approval.outcome``; else its disposition).
_EXPIRED = "expired"
_CLAIM_LOST = "claim_lost"
_EXECUTED_BEFORE = "executed_before"
#: Stands for a schema that could not be read: taken as allowing nothing more, so the result is
#: stored as the tool returned it (plus the statement in ``content``).
_UNREADABLE_SCHEMA: dict[str, Any] = {"additionalProperties": False}
# Retries of a final store write while the database is unreachable (about a minute in all).
_STORE_RETRY_S = (0.05, 0.1, 0.2, 0.5, 1.0, *([2.0] * 30))


@dataclass(frozen=True)
class _DoubtfulClaim:
    """A claim sent to the store whose answer did not come back."""

    workflow: Workflow
    binding: CallBinding
    deadline: int


class Executor:
    """Claims and runs approved calls for one worker.

    Args:
        store: the approval store's endings (the claim, its lease, the result).
        tools: runs the call.
        clock: the source of time.
        worker_id: this worker, the claim's holder.
        lease_ms: how long a claim holds without renewal.
        execution_deadline_ms: how long after its claim an unconfirmed execution ends ``outcome-unknown``.
        cipher: seals the record each claim writes before its call runs (``None``: stored unsealed).
    """

    def __init__(
        self,
        store: EndingStore,
        tools: ToolInvoker,
        clock: Clock,
        *,
        worker_id: str,
        lease_ms: int,
        execution_deadline_ms: int,
        cipher: BindingCipher | None = None,
    ) -> None:
        self.store = store
        self.cipher = cipher
        self.tools = tools
        self.clock = clock
        self.worker_id = worker_id
        self.lease_ms = lease_ms
        self.execution_deadline_ms = execution_deadline_ms
        #: The tasks whose claim this worker holds (or may hold): running, storing their result, or
        #: in doubt. Their leases are this worker's to keep; it never takes them for lost.
        self.held: set[str] = set()
        self._in_doubt: dict[str, _DoubtfulClaim] = {}

    async def run(self, workflow: Workflow, binding: CallBinding, valid_until: int | None) -> bool:
        """Claim, run once, store the result. ``False`` when the approval had already expired.

        A lost claim (another worker won it, or a cancel or expiry fenced the task) is not an
        error: whoever won decides the outcome, and this returns ``True`` without running.

        Raises:
            ExecutedBeforeError: this generation, or the request it follows, already ran (its
                sealed record is stored, whatever the workflow row says): nothing ran.
        """
        with span("execute", root=True, tool=binding.tool, task_id=workflow.task_id) as traced:
            try:
                outcome = await self._run(workflow, binding, valid_until)
            except ExecutedBeforeError:
                traced.set("outcome", _EXECUTED_BEFORE)
                raise
            traced.set("outcome", outcome)
            return outcome != _EXPIRED

    async def _run(self, workflow: Workflow, binding: CallBinding, valid_until: int | None) -> str:
        """What became of the approved call: its disposition, ``expired`` or ``claim_lost``."""
        now = self.clock.now_ms()
        if valid_until is not None and now >= valid_until:
            return _EXPIRED
        deadline = now + self.execution_deadline_ms
        task_id = workflow.task_id
        self.held.add(task_id)
        try:
            claimed = await self.store.claim(
                task_id,
                workflow.generation,
                self.worker_id,
                lease_until=min(now + self.lease_ms, deadline),
                deadline=deadline,
                cipher=self.cipher,
            )
        except StoreUnavailableError:
            self._in_doubt[task_id] = _DoubtfulClaim(workflow, binding, deadline)
            raise
        finally:
            if task_id not in self._in_doubt:
                self.held.discard(task_id)
        if not claimed:
            return _CLAIM_LOST
        crash_point("after_claim")
        return await self._execute(workflow, binding, deadline)

    async def _execute(self, workflow: Workflow, binding: CallBinding, deadline: int) -> str:
        """Run a claimed call once and store its result, keeping the claim's lease until it is stored."""
        task_id = workflow.task_id
        self.held.add(task_id)
        renewal = asyncio.create_task(self._renew(task_id, deadline))
        try:
            result = await self.tools.invoke(binding.tool, dict(binding.arguments))
            crash_point("after_side_effect")
            document, disposition = executed_result(result, await self._output_schema(binding.tool))
            outcome = TaskOutcome(TaskStatus.COMPLETED, result=document, disposition=disposition.value)
            await _persist(lambda: self.store.finish(task_id, outcome))
        finally:
            renewal.cancel()
            self.held.discard(task_id)
        logger.info("task %s: approved call ran (%s)", task_id[:8], disposition.value)
        return disposition.value

    @property
    def claims_in_doubt(self) -> bool:
        """Whether a claim's answer was lost and the store has not been asked again since."""
        return bool(self._in_doubt)

    async def resolve_doubts(self) -> None:
        """Read back each claim in doubt: run the call of one this worker holds; forget the others.

        The call never ran here (its claim's answer never came), and a claim this worker holds
        has been run by no one else: running it now is its one execution.
        """
        for task_id, doubt in list(self._in_doubt.items()):
            workflow = await self.store.get(task_id)
            del self._in_doubt[task_id]
            mine = (
                workflow is not None
                and workflow.phase is Phase.CLAIMED
                and workflow.lease_owner == self.worker_id
                and workflow.execution_deadline == doubt.deadline
            )
            if not mine:
                self.held.discard(task_id)
                continue
            logger.info("task %s: its claim was stored though its answer was lost; running it", task_id[:8])
            await self._execute(doubt.workflow, doubt.binding, doubt.deadline)

    async def _output_schema(self, tool: str) -> dict[str, Any] | None:
        """The tool's declared output schema; ``None`` when it cannot be read (the result is stored anyway)."""
        try:
            return await self.tools.output_schema(tool)
        except Exception:  # the tool ran: its result must be stored whatever the listing does
            logger.warning("the output schema of %r could not be read", tool)
            return _UNREADABLE_SCHEMA

    async def finish_unknown(self, workflow: Workflow) -> None:
        """End a claim whose worker stopped renewing it: ``outcome-unknown``, never re-invoked."""
        outcome = TaskOutcome(
            TaskStatus.COMPLETED, result=outcome_unknown_result(), disposition=Disposition.OUTCOME_UNKNOWN.value
        )
        if await self.store.finish(workflow.task_id, outcome):
            logger.warning("task %s: its execution could not be confirmed; outcome-unknown", workflow.task_id[:8])

    async def _renew(self, task_id: str, deadline: int) -> None:
        while True:
            await asyncio.sleep(max(0.05, self.lease_ms / 3000))
            now = self.clock.now_ms()
            with contextlib.suppress(StoreUnavailableError):
                await self.store.renew_execution(task_id, self.worker_id, min(now + self.lease_ms, deadline))


async def _persist(operation: Callable[[], Awaitable[bool]]) -> None:
    """Run a final store write, retrying while the database is unreachable."""
    for delay in _STORE_RETRY_S:
        try:
            await operation()
            return
        except StoreUnavailableError:
            await asyncio.sleep(delay)
    logger.error("a final approval write could not be stored; the claim will end outcome-unknown")
