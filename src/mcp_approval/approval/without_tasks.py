"""What a client without tasks reads about its approval request (SEP-2848 "Client maturity").

With ``ApprovalOptions.without_tasks = "request"`` a requestable denial of a client that did not
declare tasks still opens a real approval request: the same workflow and task row as a task-backed
one (owned by the caller), marked ``owed_to_retry``. The call is answered ``isError`` with the
SEP-2643 envelope ``undisclosed`` (the client declared no interaction this server could name) and
a fresh ``authorizationContextId``; the content says what is true and how to continue. Once the
request ends, the identical retry (same principal, tool and canonical arguments) takes its outcome,
once. These are the texts and results of those answers; :class:`~mcp_approval.approval.ToolApproval`
decides when each is given.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from mcp_approval.approval.results import denied_result
from mcp_approval.clock import iso8601
from mcp_approval.denials import Remediation, final_denial, new_context_id
from mcp_approval.protocol import META_TOOL_APPROVAL_DISPOSITION
from mcp_approval.tasks.models import TaskRecord
from mcp_approval.tasks.states import TaskStatus

__all__ = ["ENDED_WITHOUT_RESULT", "OPENED_TEXT", "PENDING_AGAIN_TEXT", "outcome_answer", "pending_answer"]

OPENED_TEXT = "{tool} did not run: it needs approval, and an approval request is now open (reference {reference})."
PENDING_AGAIN_TEXT = (
    "{tool} did not run: its approval request (reference {reference}) is still open; no second request was made."
)
_WHO = "An approver of this server decides it (a person or a rule its operator set); you cannot approve it yourself."
_DEADLINE = "If no one decides by {deadline}, it expires and the call never runs."
_CONTINUE = (
    "Once it is approved the call runs exactly once. To continue, call {tool} again with exactly the same "
    "arguments: before a decision you get this status again, after it the call's result (or the denial). "
    "After that the approval is spent; a further identical call asks for approval anew."
)
#: The body of a request that ended without a stored result (cancelled or failed before any run).
ENDED_WITHOUT_RESULT = "The approval request for {tool} ended without a decision to run it."


def pending_answer(tool: str, reference: str, deadline_ms: int | None, *, opened: bool) -> types.CallToolResult:
    """The ``isError`` + ``undisclosed`` answer while the request (``reference``) is open."""
    first = OPENED_TEXT if opened else PENDING_AGAIN_TEXT
    parts = [first.format(tool=tool, reference=reference), _WHO]
    if deadline_ms is not None:
        parts.append(_DEADLINE.format(deadline=iso8601(deadline_ms)))
    parts.append(_CONTINUE.format(tool=tool))
    return final_denial(" ".join(parts), remediation=Remediation.UNDISCLOSED, context_id=new_context_id())


def outcome_answer(record: TaskRecord) -> dict[str, Any]:
    """The ended request's outcome, as the retry's result, with its disposition in ``_meta`` and body.

    An executed call answers its stored result (``approved-executed``, ``execution-error`` or
    ``outcome-unknown``); a denial or expiry its ``denied-not-executed`` result; a request cancelled
    or failed before any run answers ``denied-not-executed`` too (the call did not run).
    """
    if record.status is TaskStatus.COMPLETED and record.result is not None:
        document = dict(record.result)
        if document.get("_meta", {}).get(META_TOOL_APPROVAL_DISPOSITION):
            return document
    return denied_result(record.tool_name, ENDED_WITHOUT_RESULT.format(tool=record.tool_name))
