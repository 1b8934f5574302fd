"""The agent side: tasks-aware tool calls, acting on authorization denials, reading approval outcomes."""

from mcp_approval.client.authorization import AuthorizationDenied, AuthorizingCaller, CredentialRemediator
from mcp_approval.client.dispositions import ExecutionDisposition, read_disposition
from mcp_approval.client.journal import OpenTask, TaskJournal
from mcp_approval.client.oauth import MemoryTokenStorage, oauth_client
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
    "AuthorizationDenied",
    "AuthorizingCaller",
    "CreateTaskResult",
    "CredentialRemediator",
    "DetailedTask",
    "ExecutionDisposition",
    "MemoryTokenStorage",
    "OpenTask",
    "TaskCancelledError",
    "TaskError",
    "TaskExpiredError",
    "TaskFailedError",
    "TaskInputRequiredError",
    "TaskJournal",
    "TaskPendingError",
    "TasksClient",
    "oauth_client",
    "read_disposition",
]
