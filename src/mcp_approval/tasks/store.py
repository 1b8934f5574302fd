"""The ``TaskStore`` contract: small, atomic operations on task rows.

Every operation is one transaction or one conditional UPDATE. Status changes are
compare-and-set against the state table (:mod:`mcp_approval.tasks.states`), so a terminal
task absorbs every later write, whichever worker sends it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mcp_approval.errors import MCPApprovalError
from mcp_approval.tasks.models import TaskRecord
from mcp_approval.tasks.states import TaskStatus

__all__ = ["MAX_PER_PRINCIPAL", "MAX_TASKS", "NewTask", "TaskLimitReachedError", "TaskSignal", "TaskStore"]

#: The :attr:`TaskLimitReachedError.limit` of the server-wide limit on unfinished tasks.
MAX_TASKS = "max_tasks"
#: The :attr:`TaskLimitReachedError.limit` of the limit on one principal's unfinished tasks.
MAX_PER_PRINCIPAL = "max_per_principal"


@dataclass(frozen=True)
class NewTask:
    """What a worker supplies to create a task; the store stamps the times."""

    task_id: str
    principal_digest: str | None
    tool_name: str
    ttl_ms: int | None
    poll_interval_ms: int | None
    owner: str | None
    lease_ms: int | None
    status: TaskStatus = TaskStatus.WORKING
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    handler: str | None = None
    meta: dict[str, Any] | None = None


class TaskLimitReachedError(MCPApprovalError):
    """Creating the task would exceed ``limit`` (``max_tasks`` or ``max_per_principal``)."""

    def __init__(self, limit: str, active: int) -> None:
        super().__init__(f"{limit} reached ({active} unfinished tasks)")
        self.limit = limit
        self.active = active


@dataclass(frozen=True)
class TaskSignal:
    """What a worker's heartbeat learns about a task it runs."""

    task_id: str
    cancel_requested: bool
    has_input_responses: bool


class TaskStore(Protocol):
    """Durable task state shared by every worker.

    Implementations raise :class:`mcp_approval.storage.StoreUnavailableError` when the
    database cannot be reached; callers treat that as "fail closed", never as "not found".
    """

    async def open(self) -> None:
        """Connect and bring the schema up to date."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...

    async def create(
        self, task: NewTask, *, max_active: int | None = None, max_active_per_principal: int | None = None
    ) -> TaskRecord:
        """Insert a task; it is committed (readable by any worker) when this returns.

        An unfinished task is refused with :class:`TaskLimitReachedError` when the store already
        holds ``max_active`` unfinished tasks, or ``max_active_per_principal`` of its principal's.
        The check shares the insert's transaction; concurrent creations on PostgreSQL may
        overshoot a limit by the number of racing workers.
        """
        ...

    async def get(self, task_id: str) -> TaskRecord | None:
        """Read one task, or ``None`` if there is no such row."""
        ...

    async def transition(
        self,
        task_id: str,
        target: TaskStatus,
        *,
        status_message: str | None = None,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        owner: str | None = None,
    ) -> bool:
        """Move a task to ``target`` if the state table allows it from its current status.

        Returns whether the write happened. Moving to a terminal status releases the lease and
        clears outstanding input. With ``owner``, the write is also fenced on the task's owner:
        it happens only while that worker still holds the task (a late write from a worker that
        lost it, e.g. to the sweeper after a lapsed lease, changes nothing).
        """
        ...

    async def add_input_requests(self, task_id: str, requests: Sequence[Mapping[str, Any]]) -> list[str] | None:
        """Issue input requests under fresh keys and set ``input_required``.

        Returns the new keys (never used before on this task), or ``None`` if the task is
        terminal or gone.
        """
        ...

    async def submit_input_responses(self, task_id: str, responses: Mapping[str, Any]) -> list[str]:
        """Record answers to outstanding requests; keys that are not outstanding are ignored.

        When no request remains outstanding the task returns to ``working``. Returns the keys
        accepted.
        """
        ...

    async def take_input_responses(self, task_id: str) -> dict[str, Any]:
        """Remove and return the answers recorded for a task and not yet taken."""
        ...

    async def request_cancel(self, task_id: str) -> TaskRecord | None:
        """Flag a non-terminal task for cancellation; returns the task as it now stands."""
        ...

    async def extend_ttl(self, task_id: str, ttl_ms: int | None) -> bool:
        """Set a new retention period (counted from ``createdAt``); ``None`` means unlimited."""
        ...

    async def heartbeat(self, owner: str, task_ids: Sequence[str], lease_ms: int) -> list[TaskSignal]:
        """Renew ``owner``'s worker lease and report the pending signals of the tasks it owns.

        One lease per worker covers every unfinished task it owns, so the cost does not grow
        with the number of tasks; ``task_ids`` (the tasks the worker holds) only tells whether
        it holds any: a worker holding none renews nothing and its lease lapses.
        """
        ...

    async def fail_lapsed(self, error: dict[str, Any], status_message: str) -> list[str]:
        """Mark ``failed`` every non-terminal task whose worker's lease has lapsed.

        A new task carries its own lease until its owner first renews its worker lease; a task
        counts as lapsed when neither lease holds.
        """
        ...

    async def purge_expired(self) -> list[str]:
        """Delete every task whose retention period has elapsed; returns their ids."""
        ...

    async def count_active(self, principal_digest: str | None = None) -> int:
        """Count non-terminal tasks, overall or for one principal."""
        ...


#: URL schemes served by :class:`~mcp_approval.tasks.redis_store.RedisTaskStore` (TLS with ``rediss``).
#: Defined here, below both the Redis store and :mod:`~mcp_approval.tasks.store_url`, which use it.
REDIS_URL_SCHEMES = frozenset({"redis", "rediss"})
