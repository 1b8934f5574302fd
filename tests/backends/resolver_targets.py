"""Resolver functions the callable-resolver tests load by ``module:function`` name."""

from __future__ import annotations

from mcp_approval.backends.contract import ApprovalSubmission

NOT_CALLABLE = 42


def by_recipient(submission: ApprovalSubmission) -> str | None:
    """Approve transfers to acct-1, deny acct-666, leave the rest to humans."""
    return {"acct-1": "approve", "acct-666": "deny"}.get(str(submission.arguments.get("to")))


async def async_deny(submission: ApprovalSubmission) -> str:
    """Deny everything, asynchronously."""
    return "deny"


def broken(submission: ApprovalSubmission) -> str:
    """Fail the way a buggy resolver does."""
    raise RuntimeError("resolver bug")


def bad_answer(submission: ApprovalSubmission) -> str:
    """Answer something that is not a verdict."""
    return "maybe"
