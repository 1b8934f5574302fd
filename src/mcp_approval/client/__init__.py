"""The agent side: tasks-aware tool calls."""

from mcp_approval.client.journal import OpenTask, TaskJournal
from mcp_approval.client.tasks import (
    CreateTaskResult,
    DetailedTask,
    TaskCancelledError,
    TaskError,
    TaskExpiredError,
    TaskFailedError,
    TaskInputRequiredError,
    TaskPendingError,
    TasksClient,
)

__all__ = [
    "CreateTaskResult",
    "DetailedTask",
    "OpenTask",
    "TaskCancelledError",
    "TaskError",
    "TaskExpiredError",
    "TaskFailedError",
    "TaskInputRequiredError",
    "TaskJournal",
    "TaskPendingError",
    "TasksClient",
]
