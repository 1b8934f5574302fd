"""What approval tasks say: every text a client or a model reads, in one place.

Final answers say what happened to the call (it did not run, or why); ``{tool}`` and ``{fields}``
are filled in by the caller.
"""

from __future__ import annotations

from mcp_approval.backends.contract import EarlierCall
from mcp_approval.clock import iso8601

__all__ = [
    "APPROVAL_EXPIRED",
    "ARGUMENTS_REFUSED",
    "BACKEND_DOWN_MESSAGE",
    "BACKEND_FAILED",
    "BINDING_BROKEN",
    "DEADLINE_TEXT",
    "DENIED",
    "EARLIER_ENDED_OPEN_TEXT",
    "EARLIER_ENDED_TEXT",
    "EARLIER_RAN_OPEN_TEXT",
    "EARLIER_RAN_TEXT",
    "EXPIRED",
    "IMMEDIATE_TEXT",
    "INPUTS_DECLINED",
    "INPUTS_IN_TASK",
    "INPUTS_NOT_GIVEN",
    "INPUTS_UNSUPPORTED",
    "PENDING_LIMIT_MESSAGE",
    "PENDING_TEXT",
    "POLICY_DENIED",
    "PRINCIPAL_INVALID",
    "PRINCIPAL_TASK_LIMIT_MESSAGE",
    "RATE_LIMIT_MESSAGE",
    "REFUSED_MESSAGE",
    "TASK_LIMIT_MESSAGE",
    "TOOL_CHANGED",
    "TOO_MANY_ROUNDS",
    "denied_because",
    "earlier_call_text",
]

# -- answers to the tools/call itself ------------------------------------------------------

# One answer per limit, so the caller knows which one it hit and what lifts it; ``{limit}`` is its value.
RATE_LIMIT_MESSAGE = (
    "Too many approval requests were made by this caller in the last minute (at most {limit} a minute), "
    "so {tool} was not submitted for approval and did not run. Wait a minute before asking again."
)
PENDING_LIMIT_MESSAGE = (
    "Too many approval requests by this caller are waiting for a decision (at most {limit} at a time), "
    "so {tool} was not submitted for approval and did not run. Wait for pending requests to be decided "
    "before asking again."
)
TASK_LIMIT_MESSAGE = (
    "The server holds too many open tasks (at most {limit}) to take another approval request, so {tool} "
    "was not submitted for approval and did not run. Try again later."
)
PRINCIPAL_TASK_LIMIT_MESSAGE = (
    "This caller has too many open tasks (at most {limit}) to take another approval request, so {tool} "
    "was not submitted for approval and did not run. Wait for some of them to finish before asking again."
)
PENDING_TEXT = "Calling {tool} needs approval. It has been submitted and will run only if approved."
#: The request's deadline, after the pending text (``{deadline}``: ISO 8601, UTC).
DEADLINE_TEXT = "If no one decides by {deadline}, it expires and the call never runs."
#: A new request for a call whose identical earlier call already ran (``{reference}``: that call's
#: task, ``{at}``: when it ended, ISO 8601, ``{outcome}``: its disposition).
EARLIER_RAN_TEXT = (
    "This is a new request: an identical call (reference {reference}) already ran at {at} with outcome "
    "{outcome}; if this one is approved, the call runs again."
)
#: :data:`EARLIER_RAN_TEXT` for an identical earlier call that was decided not to run (denied, expired).
EARLIER_ENDED_TEXT = (
    "This is a new request: an identical call (reference {reference}) was already asked for and ended "
    "without running at {at} with outcome {outcome}."
)
#: :data:`EARLIER_RAN_TEXT` in the answer to a call that joined a request already open (no new request was made).
EARLIER_RAN_OPEN_TEXT = (
    "This open request may be a repeat: an identical call (reference {reference}) already ran at {at} with "
    "outcome {outcome}; if this one is approved, the call runs again."
)
#: :data:`EARLIER_ENDED_TEXT` in the answer to a call that joined a request already open.
EARLIER_ENDED_OPEN_TEXT = (
    "This open request may be a repeat: an identical call (reference {reference}) was already asked for "
    "and ended without running at {at} with outcome {outcome}."
)
IMMEDIATE_TEXT = "{tool} has not run: it is waiting for approval. You can continue other work and check the task later."
INPUTS_DECLINED = (
    "Calling {tool} needs approval, and approvers need {fields}; none was given, so nothing was submitted "
    "and the tool did not run. Call it again to provide them."
)
INPUTS_IN_TASK = "Calling {tool} needs approval; approvers need {fields} first. Nothing has been submitted yet."
INPUTS_UNSUPPORTED = (
    "Calling {tool} needs approval, and approvers need {fields}, which this client cannot be asked for "
    "(it declared no form elicitation). Nothing was submitted and the tool did not run."
)
BACKEND_DOWN_MESSAGE = "The approval service is unavailable; the call was not submitted and did not run"
REFUSED_MESSAGE = (
    "Calling {tool} needs approval, but the approval service does not accept a request for it, "
    "so nothing was submitted and the tool did not run."
)

# -- how a task ends without running its call ----------------------------------------------

DENIED = "The approval request was denied."
EXPIRED = "The approval request expired before anyone decided it."
APPROVAL_EXPIRED = "The approval expired before the call could run."
POLICY_DENIED = "Policy denied the call when it was re-checked after approval."
PRINCIPAL_INVALID = "The caller is no longer authorized to act, so the approved call was not run."
TOOL_CHANGED = "The tool changed after approval was requested, so the approved call was not run."
ARGUMENTS_REFUSED = "The tool refuses the call's arguments, so the approved call was not run."
BINDING_BROKEN = "The stored call could not be verified, so it was not run."
INTEGRITY_FAILED = "The approval request failed its integrity check, so the call was not run."
TOO_MANY_ROUNDS = "The call needed more approval rounds than allowed."
INPUTS_NOT_GIVEN = "The inputs the approvers need were not given, so nothing was submitted."
BACKEND_FAILED = "The approval service failed; the call did not run"


def denied_because(note: str | None) -> str:
    """Why a denied call did not run: :data:`DENIED`, with the denier's note when the backend shares one."""
    return f"{DENIED} Comment: {note}" if note else DENIED


def earlier_call_text(earlier: EarlierCall, *, new_request: bool = True) -> str:
    """What a model reads about the identical earlier call a request may duplicate.

    ``new_request``: the answer opened the request; ``False`` for a call that joined one already
    open, whose answer says no second request was made (so it must not call this one new).
    """
    if new_request:
        text = EARLIER_RAN_TEXT if earlier.ran else EARLIER_ENDED_TEXT
    else:
        text = EARLIER_RAN_OPEN_TEXT if earlier.ran else EARLIER_ENDED_OPEN_TEXT
    return text.format(reference=earlier.task_id, at=iso8601(earlier.ended_at_ms), outcome=earlier.outcome)
