"""Approval backends: the SEP-2848 backend contract and its implementations.

A backend takes an approval submission and answers its status; the approval layer follows it:

- :class:`ApprovalBackend` is the contract (:mod:`mcp_approval.backends.contract`).
- :class:`LocalApprovalBackend` keeps requests in the deployment's own database; reviewers decide
  through the reviewer surface (:mod:`mcp_approval.reviewers`: the HTTP API and the console) or
  ``mcp-approval review``, and :class:`RuleResolver`/:class:`CallableResolver` decide some
  requests automatically.
- :class:`ArapBackend` submits to an ARAP Access Request Service (:class:`ArapSettings`).

Everything else in the subpackage's modules is an implementation detail of these, except
:mod:`mcp_approval.backends.callbacks` (signing and checking backend callbacks, used by the
enforcement point and the reference ARS alike). The names above are imported on first access,
so that module, the contract or a table loads neither backend.

``reviewer_routes``, ``console_routes`` and ``Authenticator`` moved to :mod:`mcp_approval.reviewers`;
importing them from here still works, with a ``DeprecationWarning``.
"""

from typing import TYPE_CHECKING

from mcp_approval._lazy import lazy_getattr

if TYPE_CHECKING:
    from mcp_approval.backends.arap import ArapBackend, ArapSettings
    from mcp_approval.backends.contract import (
        ApprovalBackend,
        ApprovalBackendError,
        ApprovalState,
        ApprovalStatus,
        ApprovalSubmission,
        DeniedEvaluation,
        EarlierCall,
        IdempotencyConflictError,
        RequestIntegrityError,
        SealedRequest,
        StatusListener,
        SubmissionRejectedError,
        SupportsChangeFeed,
        SupportsFindSubmitted,
        SupportsSealedRequests,
        SupportsStatusMany,
        SupportsSubmitInTransaction,
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
    from mcp_approval.backends.local_rules import ApprovalTemplate, RequestRules, ResolverRule
    from mcp_approval.backends.outcomes import OutcomeReader, RequestOutcome
    from mcp_approval.backends.resolvers import AutoResolver, CallableResolver, RuleResolver

# Name -> the module that defines it, imported on first access (the callback signing, the contract
# or a table does not load both backends).
_LAZY = {
    "AUDITOR_ROLE": "mcp_approval.backends.local",
    "AlreadyDecidedError": "mcp_approval.backends.local_records",
    "ApprovalBackend": "mcp_approval.backends.contract",
    "ApprovalBackendError": "mcp_approval.backends.contract",
    "ApprovalRecord": "mcp_approval.backends.local_records",
    "ApprovalState": "mcp_approval.backends.contract",
    "ApprovalStatus": "mcp_approval.backends.contract",
    "ApprovalSubmission": "mcp_approval.backends.contract",
    "ApprovalTemplate": "mcp_approval.backends.local_rules",
    "ArapBackend": "mcp_approval.backends.arap",
    "ArapSettings": "mcp_approval.backends.arap",
    "AutoResolver": "mcp_approval.backends.resolvers",
    "CallableResolver": "mcp_approval.backends.resolvers",
    "DecisionRecord": "mcp_approval.backends.local_records",
    "DeniedEvaluation": "mcp_approval.backends.contract",
    "EarlierCall": "mcp_approval.backends.contract",
    "IdempotencyConflictError": "mcp_approval.backends.contract",
    "LocalApprovalBackend": "mcp_approval.backends.local",
    "NotEligibleError": "mcp_approval.backends.local_records",
    "OutcomeReader": "mcp_approval.backends.outcomes",
    "RequestExpiredError": "mcp_approval.backends.local_records",
    "RequestIntegrityError": "mcp_approval.backends.contract",
    "RequestRules": "mcp_approval.backends.local_rules",
    "SealedRequest": "mcp_approval.backends.contract",
    "SupportsSealedRequests": "mcp_approval.backends.contract",
    "RequestOutcome": "mcp_approval.backends.outcomes",
    "RequestPage": "mcp_approval.backends.local_records",
    "ResolverRule": "mcp_approval.backends.local_rules",
    "ReviewError": "mcp_approval.backends.local_records",
    "RuleResolver": "mcp_approval.backends.resolvers",
    "StatusListener": "mcp_approval.backends.contract",
    "SubmissionRejectedError": "mcp_approval.backends.contract",
    "SupportsChangeFeed": "mcp_approval.backends.contract",
    "SupportsFindSubmitted": "mcp_approval.backends.contract",
    "SupportsStatusMany": "mcp_approval.backends.contract",
    "SupportsSubmitInTransaction": "mcp_approval.backends.contract",
    "UnknownRequestError": "mcp_approval.backends.contract",
    "UnverifiedRequestError": "mcp_approval.backends.local",
}

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
    "AutoResolver",
    "CallableResolver",
    "DecisionRecord",
    "DeniedEvaluation",
    "EarlierCall",
    "IdempotencyConflictError",
    "LocalApprovalBackend",
    "NotEligibleError",
    "OutcomeReader",
    "RequestExpiredError",
    "RequestIntegrityError",
    "RequestOutcome",
    "RequestPage",
    "RequestRules",
    "ResolverRule",
    "ReviewError",
    "RuleResolver",
    "SealedRequest",
    "StatusListener",
    "SubmissionRejectedError",
    "SupportsChangeFeed",
    "SupportsFindSubmitted",
    "SupportsSealedRequests",
    "SupportsStatusMany",
    "SupportsSubmitInTransaction",
    "UnknownRequestError",
    "UnverifiedRequestError",
]

# Names that moved to the reviewer surface, resolved on first access (this package sits below it).
__getattr__ = lazy_getattr(
    __name__,
    _LAZY,
    moved={name: "mcp_approval.reviewers" for name in ("Authenticator", "console_routes", "reviewer_routes")},
)
