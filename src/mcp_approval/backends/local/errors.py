"""The errors reviewer operations on the local backend raise (listing, reading, deciding)."""

from __future__ import annotations

from mcp_approval.errors import MCPApprovalError

__all__ = [
    "AlreadyDecidedError",
    "NotEligibleError",
    "RequestExpiredError",
    "ReviewError",
    "UnverifiedRequestError",
]


class ReviewError(MCPApprovalError):
    """A reviewer operation was refused."""


class NotEligibleError(ReviewError):
    """The reviewer may not decide this request (missing role, or self-approval)."""


class AlreadyDecidedError(ReviewError):
    """The request is terminal, or this reviewer already decided it."""


class RequestExpiredError(AlreadyDecidedError):
    """The request's deadline passed before the decision; it is now expired."""


class UnverifiedRequestError(ReviewError):
    """The request's stored rows do not match their seals (or lack them), so nobody may approve it.

    Attributes:
        why: the integrity failure, as the request's record names it.
    """

    def __init__(self, message: str, *, why: str = "") -> None:
        super().__init__(message)
        self.why = why
