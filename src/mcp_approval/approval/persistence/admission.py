"""The approval store's part for creation: admission, the intent, and the new task, each in one transaction.

Every creation admits its call first (:func:`~.statements.refusal`: an owed outcome, a live
duplicate, the per-principal and task limits), under the call's dedup lock, in the transaction
that records it. Two shapes follow: the intent alone, then its handle, then the task (a backend
across a network), or all of it at once (a backend writing to this database).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from sqlalchemy import Connection

from mcp_approval.approval.persistence import statements as sql
from mcp_approval.approval.persistence.core import StoreCore
from mcp_approval.approval.persistence.records import (
    APPROVAL_HANDLER,
    Admission,
    Creation,
    Intent,
    NewWorkflow,
    intent_row,
    workflow_row,
)
from mcp_approval.approval.persistence.states import IntentState
from mcp_approval.backends.contract import SubmissionRejectedError
from mcp_approval.crashpoints import crash_point
from mcp_approval.tasks.states import TaskStatus
from mcp_approval.tasks.store import NewTask

__all__ = ["AdmissionStore"]


class AdmissionStore(StoreCore):
    """Admits new approval tasks and writes their intents and rows (what task creation uses)."""

    async def record_intent(
        self,
        intent: Intent,
        *,
        submissions_per_minute: int,
        max_pending: int,
        task_limits: tuple[int | None, int | None] = (None, None),
        owed_first: bool = False,
    ) -> tuple[Admission, str | None]:
        """Persist ``intent`` unless a duplicate or a limit stops it; returns (admission, task id).

        ``task_limits``: the tasks extension's ``(max_tasks, max_per_principal)``. ``owed_first``:
        an ended request made without tasks that owes this call its outcome comes first
        (:attr:`Admission.OUTCOME_OWED`).
        """
        now = self.clock.now_ms()

        def record(conn: Connection) -> tuple[Admission, str | None]:
            refused = sql.refusal(
                conn, intent, now, submissions_per_minute, max_pending, task_limits, owed_first=owed_first
            )
            if refused is not None:
                return refused
            conn.execute(sql.INSERT_INTENT, intent_row(intent, now))
            return Admission.RECORDED, intent.task_id

        return await self.database.write(record)

    async def create_at_once(
        self,
        intent: Intent,
        submit: Callable[[Connection], str],
        workflow_for: Callable[[str], NewWorkflow],
        *,
        submissions_per_minute: int,
        max_pending: int,
        task_limits: tuple[int | None, int | None] = (None, None),
        owed_first: bool = False,
    ) -> Creation:
        """Admit ``intent``, submit it, and create its task, all in one transaction.

        For a backend that writes to this database
        (:class:`~mcp_approval.backends.contract.SupportsSubmitInTransaction`): ``submit`` opens
        the request in the transaction and returns its handle; ``workflow_for(handle)`` is the new
        task. Everything commits together or not at all, so nothing is ever in flight: the intent
        is stored already bound. The same dedup and limits as :meth:`record_intent` apply. A
        submission the backend refuses for good leaves the intent ``abandoned``, with its event.
        """
        now = self.clock.now_ms()

        def create(conn: Connection) -> Creation:
            refused = sql.refusal(
                conn, intent, now, submissions_per_minute, max_pending, task_limits, owed_first=owed_first
            )
            if refused is not None:
                return Creation(*refused)
            try:
                handle = submit(conn)
            except SubmissionRejectedError:
                conn.execute(sql.INSERT_INTENT, intent_row(replace(intent, state=IntentState.ABANDONED), now))
                digest, generation = intent.arguments_digest, intent.generation
                self._event(conn, now, "approval.intent_abandoned", intent.task_id, digest, generation=generation)
                return Creation(Admission.REFUSED, None)
            new = workflow_for(handle)
            conn.execute(sql.INSERT_INTENT, intent_row(replace(intent, state=IntentState.BOUND, handle=handle), now))
            task = self.tasks.insert(conn, _new_task(new), now, input_requests=new.input_requests)
            conn.execute(sql.INSERT_WORKFLOW, workflow_row(new, now))
            self._created(conn, now, new)
            crash_point("in_creation_transaction")
            return Creation(Admission.RECORDED, new.task_id, handle, task)

        return await self.database.write(create)

    async def mark_submitted(self, key: str, handle: str) -> bool:
        """Persist the backend's handle for an open intent."""
        return await self._move_intent(key, IntentState.SUBMITTED, handle=handle)

    async def create_waiting_task(
        self,
        new: NewWorkflow,
        draft: Intent,
        *,
        submissions_per_minute: int,
        max_pending: int,
        task_limits: tuple[int | None, int | None] = (None, None),
    ) -> tuple[Admission, str | None]:
        """Create a task that waits in ``input_required`` for its submission inputs (generation 0).

        Nothing is submitted yet. ``draft`` keeps the request body (generation 0, never sent);
        :meth:`chain` from generation 0 records the real submission once the inputs arrived. The
        same dedup and limits as :meth:`record_intent` apply; returns (admission, task id).
        """
        now = self.clock.now_ms()

        def create(conn: Connection) -> tuple[Admission, str | None]:
            refused = sql.refusal(conn, draft, now, submissions_per_minute, max_pending, task_limits)
            if refused is not None:
                return refused
            self.tasks.insert(conn, _new_task(new), now, input_requests=new.input_requests)
            conn.execute(sql.INSERT_WORKFLOW, {**workflow_row(new, now), "generation": 0})
            conn.execute(sql.INSERT_INTENT, intent_row(draft, now))
            self._created(conn, now, new)
            return Admission.RECORDED, new.task_id

        return await self.database.write(create)

    async def create_task(self, new: NewWorkflow) -> bool:
        """Create the task and its workflow and bind the intent, in one transaction.

        Returns ``False`` (and writes nothing) if the intent is no longer ``submitted``, i.e. the
        reconciler abandoned it meanwhile.
        """
        now = self.clock.now_ms()

        def create(conn: Connection) -> bool:
            if conn.execute(sql.BIND_INTENT, {"key": new.intent_key, "now": now}).rowcount != 1:
                return False
            self.tasks.insert(conn, _new_task(new), now, input_requests=new.input_requests)
            conn.execute(sql.INSERT_WORKFLOW, workflow_row(new, now))
            self._created(conn, now, new)
            return True

        return await self.database.write(create)

    def _created(self, conn: Connection, now: int, new: NewWorkflow) -> None:
        data = {"tool": new.tool_name, "template": new.template}
        self._event(conn, now, "approval.task_created", new.task_id, new.arguments_digest, **data)


def _new_task(new: NewWorkflow) -> NewTask:
    """The approval task's row: waiting for its inputs, else working; driven by the approval layer."""
    status = TaskStatus.INPUT_REQUIRED if new.input_requests else TaskStatus.WORKING
    return NewTask(
        task_id=new.task_id,
        principal_digest=new.principal_digest,
        tool_name=new.tool_name,
        ttl_ms=new.ttl_ms,
        poll_interval_ms=new.poll_interval_ms,
        owner=None,
        lease_ms=None,
        status=status,
        status_message=new.status_message,
        handler=APPROVAL_HANDLER,
        meta=new.meta,
    )
