"""The agent side: tasks-aware tool calls, reading and acting on authorization denials, reading approval outcomes."""

from mcp_approval.client.authorization import AuthorizationDenied, AuthorizingCaller, CredentialRemediator
from mcp_approval.client.calls import (
    CallJournal,
    CallJournalIntegrityError,
    CallOutcome,
    CallRecord,
    CallTarget,
    SQLiteCallJournal,
)
from mcp_approval.client.connect import (
    AgentClient,
    CallInDoubtError,
    ClientUsageError,
    default_call_journal_path,
    mcp_client,
)
from mcp_approval.client.denials import (
    AuthorizationDenial,
    ChallengeDenial,
    ChallengeReading,
    DenialReading,
    ResultKind,
    denial_of,
    read_challenge,
    read_denial,
)
from mcp_approval.client.dispositions import ExecutionDisposition, read_disposition
from mcp_approval.client.errors import (
    ServerAccessError,
    ServerAuthenticationError,
    ServerAuthorizationError,
    ServerConnectionError,
)
from mcp_approval.client.journal import OpenTask, TaskJournal
from mcp_approval.client.oauth import MemoryTokenStorage, client_metadata_document, oauth_client
from mcp_approval.client.redirect import AuthorizationResponseError, LoopbackRedirectReceiver, open_in_browser
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
    task_wait,
)

__all__ = [
    "AgentClient",
    "AuthorizationDenial",
    "AuthorizationDenied",
    "AuthorizationResponseError",
    "AuthorizingCaller",
    "CallInDoubtError",
    "CallJournal",
    "CallJournalIntegrityError",
    "CallOutcome",
    "CallRecord",
    "CallTarget",
    "ChallengeDenial",
    "ChallengeReading",
    "ClientUsageError",
    "CreateTaskResult",
    "CredentialRemediator",
    "DenialReading",
    "DetailedTask",
    "ExecutionDisposition",
    "LoopbackRedirectReceiver",
    "MemoryTokenStorage",
    "OpenTask",
    "ResultKind",
    "SQLiteCallJournal",
    "ServerAccessError",
    "ServerAuthenticationError",
    "ServerAuthorizationError",
    "ServerConnectionError",
    "TaskCancelledError",
    "TaskError",
    "TaskExpiredError",
    "TaskFailedError",
    "TaskInputRequiredError",
    "TaskJournal",
    "TaskPendingError",
    "TasksClient",
    "client_metadata_document",
    "default_call_journal_path",
    "denial_of",
    "mcp_client",
    "oauth_client",
    "open_in_browser",
    "read_challenge",
    "read_denial",
    "read_disposition",
    "task_wait",
]
