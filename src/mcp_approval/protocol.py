"""Protocol constants: extension identifiers, reserved ``_meta`` keys, methods and error codes.

Every wire string the project emits or reads is defined here once.
"""

from typing import Final

__all__ = [
    "ARAP_CAPABILITY",
    "ARAP_DUPLICATE_REQUEST",
    "ARAP_ERROR_PREFIX",
    "ARAP_ERROR_STATUS",
    "ARAP_EXPIRED_DENIAL",
    "ARAP_INVALID_DENIAL_BINDING",
    "ARAP_INVALID_TASK_STATE",
    "ARAP_MODE_REEVALUATE",
    "ARAP_NOT_REQUESTABLE",
    "ARAP_TASK_EXPIRED",
    "ARAP_UNKNOWN_TASK",
    "CHALLENGE_INSUFFICIENT_AUTHORIZATION",
    "CHALLENGE_INSUFFICIENT_SCOPE",
    "CHALLENGE_INVALID_TOKEN",
    "DENIALS_EXTENSION",
    "DISPOSITION_APPROVED_EXECUTED",
    "DISPOSITION_DENIED_NOT_EXECUTED",
    "DISPOSITION_EXECUTION_ERROR",
    "DISPOSITION_OUTCOME_UNKNOWN",
    "HEADER_MCP_NAME",
    "HEADER_MISMATCH",
    "HEADER_WWW_AUTHENTICATE",
    "HINT_AUTHORIZATION_REMEDIATION",
    "HINT_TASK",
    "HINT_URL",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "META_AUTHORIZATION",
    "META_AUTHORIZATION_CONTEXT_ID",
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_MODEL_IMMEDIATE_RESPONSE",
    "META_PROTOCOL_VERSION",
    "META_TOOL_APPROVAL_DEADLINE",
    "META_TOOL_APPROVAL_DISPOSITION",
    "METHOD_ELICITATION_CREATE",
    "METHOD_NOTIFICATIONS_TASKS",
    "METHOD_NOT_FOUND",
    "METHOD_SUBSCRIPTIONS_LISTEN",
    "METHOD_TASKS_CANCEL",
    "METHOD_TASKS_GET",
    "METHOD_TASKS_UPDATE",
    "METHOD_TOOLS_CALL",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "PARSE_ERROR",
    "PROTOCOL_VERSION_2026",
    "REASON_INSUFFICIENT_AUTHORIZATION",
    "REMEDIATION_AVAILABLE",
    "REMEDIATION_UNAVAILABLE",
    "REMEDIATION_UNDISCLOSED",
    "RESULT_TYPE_COMPLETE",
    "RESULT_TYPE_INPUT_REQUIRED",
    "RESULT_TYPE_TASK",
    "STRUCTURED_TOOL_APPROVAL",
    "TASKS_EXTENSION",
    "TASK_METHODS",
    "TOOL_APPROVAL_EXTENSION",
    "UNKNOWN_TASK_MESSAGE",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "URL_ELICITATION_REQUIRED",
]

# Extension identifiers (SEP-2133 reverse-DNS names).
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"

# Reserved `_meta` keys of the per-request envelope (SEP-2575).
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
#: The protocol revision whose requests carry that envelope (no ``initialize``).
PROTOCOL_VERSION_2026: Final = "2026-07-28"

# Tasks extension methods (SEP-2663).
METHOD_TASKS_GET: Final = "tasks/get"
METHOD_TASKS_UPDATE: Final = "tasks/update"
METHOD_TASKS_CANCEL: Final = "tasks/cancel"
TASK_METHODS: Final = frozenset({METHOD_TASKS_GET, METHOD_TASKS_UPDATE, METHOD_TASKS_CANCEL})
METHOD_SUBSCRIPTIONS_LISTEN: Final = "subscriptions/listen"
#: The task status notification (the prefix ``notifications/tasks/`` is reserved by the SEP).
METHOD_NOTIFICATIONS_TASKS: Final = "notifications/tasks"

# Result discriminators.
RESULT_TYPE_TASK: Final = "task"
RESULT_TYPE_COMPLETE: Final = "complete"

# HTTP routing headers (SEP-2243).
HEADER_MCP_NAME: Final = "mcp-name"

# JSON-RPC error codes (2026-07-28 allocation).
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
HEADER_MISMATCH: Final = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
#: 2025-11-25 only: the request needs the URL elicitations in ``error.data.elicitations`` first
#: (retired, never reused, in 2026-07-28).
URL_ELICITATION_REQUIRED: Final = -32042

#: The one message for an unknown, expired, purged or foreign task id, so none can be told apart.
UNKNOWN_TASK_MESSAGE: Final = "Unknown or expired task"

# Structured authorization denials (SEP-2643).
DENIALS_EXTENSION: Final = "io.modelcontextprotocol/structured-authorization-denials"
#: Result ``_meta`` key of the authorization denial envelope.
META_AUTHORIZATION: Final = "io.modelcontextprotocol/authorization"
#: Request ``_meta`` key under which a retry echoes the envelope's ``authorizationContextId``.
META_AUTHORIZATION_CONTEXT_ID: Final = "io.modelcontextprotocol/authorization-context-id"
#: The one ``reason`` SEP-2643 defines.
REASON_INSUFFICIENT_AUTHORIZATION: Final = "insufficient_authorization"
REMEDIATION_AVAILABLE: Final = "available"
REMEDIATION_UNAVAILABLE: Final = "unavailable"
REMEDIATION_UNDISCLOSED: Final = "undisclosed"
HINT_URL: Final = "url"
HINT_TASK: Final = "task"
HINT_AUTHORIZATION_REMEDIATION: Final = "authorization_remediation"
RESULT_TYPE_INPUT_REQUIRED: Final = "input_required"
METHOD_TOOLS_CALL: Final = "tools/call"
METHOD_ELICITATION_CREATE: Final = "elicitation/create"

# HTTP authorization challenges (RFC 6750; draft-ietf-oauth-rar-metadata-remediation).
HEADER_WWW_AUTHENTICATE: Final = "www-authenticate"
CHALLENGE_INVALID_TOKEN: Final = "invalid_token"  # noqa: S105 (an RFC 6750 error code, not a secret)
CHALLENGE_INSUFFICIENT_SCOPE: Final = "insufficient_scope"
CHALLENGE_INSUFFICIENT_AUTHORIZATION: Final = "insufficient_authorization"

# Tool approval (SEP-2848).
TOOL_APPROVAL_EXTENSION: Final = "io.modelcontextprotocol/tool-approval"
#: ``_meta`` key of a completed approval task's execution outcome.
META_TOOL_APPROVAL_DISPOSITION: Final = "io.modelcontextprotocol/tool-approval-disposition"
#: ``_meta`` key of a pending approval task's request deadline (ISO 8601, UTC), so a tasks client
#: can wait that long before it gives up (a ``tasks/cancel`` withdraws the request).
META_TOOL_APPROVAL_DEADLINE: Final = "io.modelcontextprotocol/tool-approval-deadline"
#: ``structuredContent`` key of an executed approved call's disposition and its sentence, for
#: clients that show a model only ``structuredContent`` (this library's, not SEP-2848's).
STRUCTURED_TOOL_APPROVAL: Final = "toolApproval"
#: ``_meta`` key of a string the model reads at once, on a ``CreateTaskResult``.
META_MODEL_IMMEDIATE_RESPONSE: Final = "io.modelcontextprotocol/model-immediate-response"
DISPOSITION_APPROVED_EXECUTED: Final = "approved-executed"
DISPOSITION_DENIED_NOT_EXECUTED: Final = "denied-not-executed"
DISPOSITION_EXECUTION_ERROR: Final = "execution-error"
DISPOSITION_OUTCOME_UNKNOWN: Final = "outcome-unknown"

# AuthZEN Access Request and Approval Profile (ARAP).
#: PDP metadata capability of a PDP with an Access Request Service.
ARAP_CAPABILITY: Final = "urn:openid:authzen:capability:access-request"
#: Prefix of the ``type`` of ARAP problem+json errors; the code follows it.
ARAP_ERROR_PREFIX: Final = "urn:openid:authzen:access-request:error:"
ARAP_NOT_REQUESTABLE: Final = "not_requestable"
ARAP_INVALID_DENIAL_BINDING: Final = "invalid_denial_binding"
ARAP_EXPIRED_DENIAL: Final = "expired_denial"
ARAP_DUPLICATE_REQUEST: Final = "duplicate_request"
ARAP_UNKNOWN_TASK: Final = "unknown_task"
ARAP_TASK_EXPIRED: Final = "task_expired"
ARAP_INVALID_TASK_STATE: Final = "invalid_task_state"
#: HTTP status of each ARAP error code (ARAP §2.9).
ARAP_ERROR_STATUS: Final = {
    ARAP_NOT_REQUESTABLE: 400,
    ARAP_INVALID_DENIAL_BINDING: 400,
    ARAP_EXPIRED_DENIAL: 410,
    ARAP_DUPLICATE_REQUEST: 409,
    ARAP_UNKNOWN_TASK: 404,
    ARAP_TASK_EXPIRED: 410,
    ARAP_INVALID_TASK_STATE: 409,
}
#: The only ``result.mode`` of ARAP base.
ARAP_MODE_REEVALUATE: Final = "reevaluate"
