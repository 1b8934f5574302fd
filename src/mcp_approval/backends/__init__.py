"""Approval backends: the SEP-2848 backend contract and its implementations."""

from mcp_approval.backends.contract import (
    ApprovalBackend,
    ApprovalBackendError,
    ApprovalState,
    ApprovalStatus,
    ApprovalSubmission,
    DeniedEvaluation,
    IdempotencyConflictError,
    StatusListener,
    SubmissionRejectedError,
    SupportsFindSubmitted,
    SupportsStatusMany,
    UnknownRequestError,
)

__all__ = [
    "ApprovalBackend",
    "ApprovalBackendError",
    "ApprovalState",
    "ApprovalStatus",
    "ApprovalSubmission",
    "DeniedEvaluation",
    "IdempotencyConflictError",
    "StatusListener",
    "SubmissionRejectedError",
    "SupportsFindSubmitted",
    "SupportsStatusMany",
    "UnknownRequestError",
]
