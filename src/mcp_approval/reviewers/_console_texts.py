"""What the console says about a request: why it offers no decision, what a decision did, and the
badge of each call outcome."""

from __future__ import annotations

from mcp_approval.backends import ApprovalRecord, SupportsReview
from mcp_approval.reviewers.views import RequestView

__all__ = ["OUTCOME_BADGES", "decided_text", "why_no_buttons"]

#: The badge colour of each call outcome: it ran, it did not, or nobody can tell.
OUTCOME_BADGES = {
    "approved-executed": "approved",
    "denied-not-executed": "denied",
    "cancelled": "denied",
    "execution-error": "failed",
    "outcome-unknown": "failed",
    "failed": "failed",
}


def why_no_buttons(view: RequestView, principal: str, backend: SupportsReview) -> str | None:
    """Why ``principal`` is offered no decision buttons on this request, or ``None`` if they are."""
    record = view.record
    if record.status.terminal:
        return f"This request is {record.status.value}; it takes no more decisions."
    if record.integrity_failure is not None:
        return "This request was altered after it was submitted, so it cannot be approved and will not run."
    if view.decided_by(principal):
        return "You already decided this request; it waits for other reviewers."
    refusal = backend.why_ineligible(principal, record)
    if refusal is None:
        return None
    if record.requester == principal:
        return "You made this request, so another reviewer has to decide it."
    return "You are not a reviewer for this kind of request."


def decided_text(record: ApprovalRecord, verdict: str) -> str:
    """What a successful decision did, for the flash message."""
    if record.status.value == "approved":
        return "Approved. The call is checked against policy once more and then runs."
    if record.status.value == "denied":
        return "Denied. The call will not run."
    progress = RequestView(record, 0).progress
    return f"Your {'approval' if verdict == 'approve' else 'decision'} is recorded ({progress}); waiting for others."
