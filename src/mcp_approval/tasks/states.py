"""The task state machine (SEP-2663 §Statuses), as one explicit table."""

from __future__ import annotations

from enum import StrEnum
from typing import Final

__all__ = ["ACTIVE", "TERMINAL", "TRANSITIONS", "TaskStatus", "can_transition", "sources_of"]


class TaskStatus(StrEnum):
    """The five wire statuses of a task."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: For each status, the statuses it may move to. Terminal statuses absorb every later write.
TRANSITIONS: Final[dict[TaskStatus, frozenset[TaskStatus]]] = {
    TaskStatus.WORKING: frozenset(
        {TaskStatus.INPUT_REQUIRED, TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED}
    ),
    TaskStatus.INPUT_REQUIRED: frozenset(
        {TaskStatus.WORKING, TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED}
    ),
    TaskStatus.COMPLETED: frozenset(),
    TaskStatus.FAILED: frozenset(),
    TaskStatus.CANCELLED: frozenset(),
}

TERMINAL: Final = frozenset(status for status, targets in TRANSITIONS.items() if not targets)
ACTIVE: Final = frozenset(TaskStatus) - TERMINAL


def can_transition(source: TaskStatus, target: TaskStatus) -> bool:
    """Whether the table allows ``source`` → ``target``."""
    return target in TRANSITIONS[source]


def sources_of(target: TaskStatus) -> frozenset[TaskStatus]:
    """Every status from which ``target`` may be reached: the guard of a compare-and-set."""
    return frozenset(source for source, targets in TRANSITIONS.items() if target in targets)
