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

from mcp_approval.approval.messages import DEADLINE_TEXT, earlier_call_text
from mcp_approval.approval.persistence.records import Workflow
from mcp_approval.approval.persistence.states import Phase
from mcp_approval.approval.results import denied_result, sanitize_model_text
from mcp_approval.backends.contract import EarlierCall
from mcp_approval.clock import iso8601
from mcp_approval.denials import Remediation, final_denial, new_context_id
from mcp_approval.protocol import META_TOOL_APPROVAL_DISPOSITION
from mcp_approval.safe_text import terminal_text
from mcp_approval.tasks.models import TaskRecord
from mcp_approval.tasks.states import TaskStatus

__all__ = [
    "APPROVAL_STATUS_TOOL",
    "ENDED_WITHOUT_RESULT",
    "OPENED_TEXT",
    "PENDING_AGAIN_TEXT",
    "PENDING_STATUS",
    "STATUS_STATE",
    "STOP_AND_TELL",
    "UNKNOWN_REFERENCE",
    "outcome_answer",
    "pending_answer",
    "status_answer",
    "unknown_reference",
]

#: The tool a server in ``request`` mode adds, so an agent can ask where its request stands.
APPROVAL_STATUS_TOOL = "approval_status"
#: The answer for a reference that is unknown, expired from the store, or another principal's.
UNKNOWN_REFERENCE = "No approval request with reference {reference} is known to you."

#: The first thing the pending answer asks of a model: stop and tell the user, before anything else.
STOP_AND_TELL = "Stop and tell the user:"
OPENED_TEXT = "{tool} did not run because it needs approval; an approval request is now open (reference {reference})."
PENDING_AGAIN_TEXT = (
    "{tool} did not run because its approval request (reference {reference}) is still open; no second request was made."
)
_WHO = "An approver of this server decides it (a person or a rule its operator set); you cannot approve it yourself."
_CHECK = (
    "Do not call {tool} again to wait for it. To check on the request later without calling {tool}, "
    "call approval_status with reference {reference}."
)
_CONTINUE = (
    "Once it is approved, call {tool} again with exactly the same arguments: the call runs exactly once and "
    "you receive its result (or the denial). After that the approval is spent; a further identical call asks "
    "for approval anew."
)
#: ``structuredContent["status"]`` of the pending answer (the request waits for a decision).
PENDING_STATUS = "pending"
#: The body of a request that ended without a stored result (cancelled or failed before any run).
ENDED_WITHOUT_RESULT = "The approval request for {tool} ended without a decision to run it."


def pending_answer(
    tool: str, reference: str, deadline_ms: int | None, *, opened: bool, earlier: EarlierCall | None = None
) -> types.CallToolResult:
    """The ``isError`` + ``undisclosed`` answer while the request (``reference``) is open.

    SEP-2848 keeps it ``isError``, so frameworks that turn an error into a model retry would spend
    their retries on it: its text first asks the model to stop and tell the user (the reference,
    the deadline, who decides), then how to check without calling the tool (``approval_status``).
    ``structuredContent`` carries the same facts, for clients that read only that. ``earlier``:
    the identical call whose request already ended, which this request may duplicate; the answer
    says so next to the reference (when, which reference, its outcome), so nobody takes it for a
    first request.
    """
    first = OPENED_TEXT if opened else PENDING_AGAIN_TEXT
    deadline = iso8601(deadline_ms) if deadline_ms is not None else None
    parts = [STOP_AND_TELL, first.format(tool=tool, reference=reference)]
    duplicate = sanitize_model_text(earlier_call_text(earlier, new_request=opened)) if earlier is not None else None
    if duplicate is not None:
        parts.append(duplicate)
    parts.append(_WHO)
    if deadline is not None:
        parts.append(DEADLINE_TEXT.format(deadline=deadline))
    next_step = f"{_CHECK.format(tool=tool, reference=reference)} {_CONTINUE.format(tool=tool)}"
    parts.append(next_step)
    answer = final_denial(" ".join(parts), remediation=Remediation.UNDISCLOSED, context_id=new_context_id())
    facts = _pending_facts(tool, reference, deadline, next_step)
    if earlier is not None and duplicate is not None:
        facts["duplicateOf"] = _earlier_facts(earlier, duplicate)
    return answer.model_copy(update={"structured_content": facts})


def _earlier_facts(earlier: EarlierCall, text: str) -> dict[str, Any]:
    """The identical earlier call as ``structuredContent`` facts: its reference, outcome and when it ended."""
    return {
        "reference": earlier.task_id,
        "outcome": earlier.outcome,
        "ran": earlier.ran,
        "endedAt": iso8601(earlier.ended_at_ms),
        "text": text,
    }


def _pending_facts(tool: str, reference: str, deadline: str | None, next_step: str) -> dict[str, Any]:
    """The pending answer's facts as ``structuredContent`` (the same as its text says)."""
    facts: dict[str, Any] = {
        "status": PENDING_STATUS,
        "ran": False,
        "tool": tool,
        "reference": reference,
        "decidedBy": _WHO,
        "nextStep": f"{STOP_AND_TELL} approval is needed (reference {reference}). {next_step}",
        "checkWith": {"tool": APPROVAL_STATUS_TOOL, "arguments": {"reference": reference}},
    }
    if deadline is not None:
        facts["deadline"] = deadline
    return facts


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


#: ``structuredContent["state"]`` of ``approval_status`` per phase: words for the caller, not the workflow's
#: own phases (a denied or expired request is ``ended``, never ``fenced``); ``disposition`` says how it ended.
STATUS_STATE: dict[Phase, str] = {
    Phase.PENDING: "pending",
    Phase.CLAIMED: "running",
    Phase.FINISHED: "ended",
    Phase.FENCED: "ended",
}
_STATUS_TEXT: dict[Phase, str] = {
    Phase.PENDING: "open: waiting for a decision; {tool} has not run.",
    Phase.CLAIMED: "approved: {tool} is running now (once).",
    Phase.FINISHED: "decided ({disposition}). Call {tool} again with exactly the same arguments "
    "to receive the outcome.",
    Phase.FENCED: "decided ({disposition}); {tool} did not run. Call {tool} again with exactly the same "
    "arguments to receive the outcome.",
}


def status_answer(workflow: Workflow, *, poll_interval_ms: int) -> types.CallToolResult:
    """Where the caller's request stands, in words and as structured next-step fields.

    SEP-2848 (Client maturity): the interim tools carry the same next-step fields a task would
    (the state, the deadline, a poll interval), never a reviewer's identity or backend artifacts.
    """
    disposition = workflow.disposition or "denied-not-executed"
    state = _STATUS_TEXT[workflow.phase].format(tool=workflow.tool_name, disposition=disposition)
    parts = [f"Approval request {workflow.task_id} for {workflow.tool_name}: {state}"]
    structured: dict[str, Any] = {
        "reference": workflow.task_id,
        "tool": workflow.tool_name,
        "state": STATUS_STATE[workflow.phase],
        "pollIntervalMs": poll_interval_ms,
    }
    if workflow.phase is Phase.PENDING and workflow.request_deadline is not None:
        deadline = iso8601(workflow.request_deadline)
        parts.append(DEADLINE_TEXT.format(deadline=deadline))
        structured["deadline"] = deadline
    if workflow.phase in (Phase.FINISHED, Phase.FENCED):
        structured["disposition"] = disposition
    text = types.TextContent(type="text", text=" ".join(parts))
    return types.CallToolResult(content=[text], structured_content=structured, is_error=False)


def unknown_reference(reference: str) -> types.CallToolResult:
    """The same answer for an unknown reference and for another principal's.

    The reference is the caller's own string: echoed escaped (control characters, newlines, ESC
    sequences and bidirectional overrides shown, never acted on), so it cannot add a line of its own.
    """
    text = UNKNOWN_REFERENCE.format(reference=terminal_text(reference[:80], lines=False))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
