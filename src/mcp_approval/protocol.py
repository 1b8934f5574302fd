"""Protocol constants: extension identifiers, reserved ``_meta`` keys, methods and error codes.

Every wire string the project emits or reads is defined here once.
"""

from typing import Final

#: The protocol revision that carries the tasks extension.
PROTOCOL_VERSION: Final = "2026-07-28"

# Extension identifiers (SEP-2133 reverse-DNS names).
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"

# Reserved `_meta` keys of the per-request envelope (SEP-2575).
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"

# Tasks extension methods (SEP-2663).
METHOD_TASKS_GET: Final = "tasks/get"
METHOD_TASKS_UPDATE: Final = "tasks/update"
METHOD_TASKS_CANCEL: Final = "tasks/cancel"
TASK_METHODS: Final = frozenset({METHOD_TASKS_GET, METHOD_TASKS_UPDATE, METHOD_TASKS_CANCEL})

# Result discriminators.
RESULT_TYPE_TASK: Final = "task"
RESULT_TYPE_COMPLETE: Final = "complete"

# HTTP routing headers (SEP-2243).
HEADER_MCP_NAME: Final = "mcp-name"
HEADER_MCP_METHOD: Final = "mcp-method"

# JSON-RPC error codes (2026-07-28 allocation).
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
HEADER_MISMATCH: Final = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

#: The one message for an unknown, expired, purged or foreign task id, so none can be told apart.
UNKNOWN_TASK_MESSAGE: Final = "Unknown or expired task"
