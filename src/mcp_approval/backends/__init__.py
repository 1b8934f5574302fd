"""Approval backends: the SEP-2848 backend contract and its implementations.

A backend takes an approval submission and answers its status; the approval layer follows it:

- :class:`ApprovalBackend` is the contract (:mod:`mcp_approval.backends.contract`).
- :class:`LocalApprovalBackend` keeps requests in the deployment's own database; reviewers decide
  through the HTTP API of :func:`reviewer_routes`, the pages of :func:`console_routes` or
  ``mcp-approval review``, and :class:`RuleResolver`/:class:`CallableResolver` decide some
  requests automatically.
- :class:`ArapBackend` submits to an ARAP Access Request Service (:class:`ArapSettings`).

Everything else in the subpackage's modules is an implementation detail of these.
"""

from mcp_approval.backends.arap import ArapBackend, ArapSettings
from mcp_approval.backends.console import console_routes
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
    SupportsChangeFeed,
    SupportsFindSubmitted,
    SupportsStatusMany,
    UnknownRequestError,
)
from mcp_approval.backends.local import AUDITOR_ROLE, LocalApprovalBackend, UnverifiedRequestError
from mcp_approval.backends.local_records import (
    AlreadyDecidedError,
    ApprovalRecord,
    DecisionRecord,
    NotEligibleError,
    RequestExpiredError,
    RequestPage,
    ReviewError,
)
from mcp_approval.backends.local_rules import ApprovalTemplate, ResolverRule
from mcp_approval.backends.outcomes import OutcomeReader, RequestOutcome
from mcp_approval.backends.resolvers import AutoResolver, CallableResolver, RuleResolver
from mcp_approval.backends.reviewer_api import Authenticator, reviewer_routes

__all__ = [
    "AUDITOR_ROLE",
    "AlreadyDecidedError",
    "ApprovalBackend",
    "ApprovalBackendError",
    "ApprovalRecord",
    "ApprovalState",
    "ApprovalStatus",
    "ApprovalSubmission",
    "ApprovalTemplate",
    "ArapBackend",
    "ArapSettings",
    "Authenticator",
    "AutoResolver",
    "CallableResolver",
    "DecisionRecord",
    "DeniedEvaluation",
    "IdempotencyConflictError",
    "LocalApprovalBackend",
    "NotEligibleError",
    "OutcomeReader",
    "RequestExpiredError",
    "RequestOutcome",
    "RequestPage",
    "ResolverRule",
    "ReviewError",
    "RuleResolver",
    "StatusListener",
    "SubmissionRejectedError",
    "SupportsChangeFeed",
    "SupportsFindSubmitted",
    "SupportsStatusMany",
    "UnknownRequestError",
    "UnverifiedRequestError",
    "console_routes",
    "reviewer_routes",
]
