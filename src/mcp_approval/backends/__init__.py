"""Approval backends: the SEP-2848 backend contract and its implementations.

A backend takes an approval submission and answers its status; the approval layer follows it:

- :class:`ApprovalBackend` is the contract (:mod:`mcp_approval.backends.contract`); what a backend
  may offer beyond it are capabilities (:mod:`mcp_approval.backends.capabilities`:
  :class:`SupportsReview`, :class:`SupportsTemplates`, …), which the server asks a backend for
  instead of asking which class it is.
- :class:`LocalApprovalBackend` keeps requests in the deployment's own database; reviewers decide
  through the reviewer surface (:mod:`mcp_approval.reviewers`: the HTTP API and the console) or
  ``mcp-approval review``, and :class:`RuleResolver`/:class:`CallableResolver` decide some
  requests automatically. Its package, ``backends.local``, is internal except its ``schema``.
- :class:`ToldRecord` is one reminder or escalation a channel delivered about a request
  (:mod:`mcp_approval.backends.told`: who was told, when, on which channel, from the audit log).
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
    from mcp_approval.backends.capabilities import (
        SupportsChangeFeed,
        SupportsDelegations,
        SupportsFindSubmitted,
        SupportsReview,
        SupportsSealedRequests,
        SupportsSealing,
        SupportsSimilarRules,
        SupportsStatusMany,
        SupportsSubmitInTransaction,
        SupportsTables,
        SupportsTemplates,
    )
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
        UnknownRequestError,
    )
    from mcp_approval.backends.local.backend import LocalApprovalBackend
    from mcp_approval.backends.local.delegation_rows import Delegation, DelegationError
    from mcp_approval.backends.local.endings import TerminalHook
    from mcp_approval.backends.local.errors import (
        AlreadyDecidedError,
        NotEligibleError,
        RequestExpiredError,
        ReviewError,
        UnverifiedRequestError,
    )
    from mcp_approval.backends.local.listing import AUDITOR_ROLE
    from mcp_approval.backends.local.records import REDACTED, ApprovalRecord, DecisionRecord, RequestPage
    from mcp_approval.backends.local.resolvers import (
        AutoResolver,
        CallableResolver,
        RuleResolver,
        resolvers_from_config,
    )
    from mcp_approval.backends.local.rules import ApprovalTemplate, RequestRules, ResolverRule
    from mcp_approval.backends.local.seals import RequestSeal
    from mcp_approval.backends.local.similar import SimilarRuleError
    from mcp_approval.backends.local.similar_rows import RuleDecision, SimilarCallRule
    from mcp_approval.backends.local.similar_store import SimilarRuleSpec
    from mcp_approval.backends.local.step_up import StepUp, StepUpRequiredError
    from mcp_approval.backends.outcomes import OutcomeReader, RequestOutcome
    from mcp_approval.backends.told import ToldRecord

# Name -> the module that defines it, imported on first access (the callback signing, the contract
# or a table does not load both backends).
_LAZY = {
    "AUDITOR_ROLE": "mcp_approval.backends.local.listing",
    "AlreadyDecidedError": "mcp_approval.backends.local.errors",
    "ApprovalBackend": "mcp_approval.backends.contract",
    "ApprovalBackendError": "mcp_approval.backends.contract",
    "ApprovalRecord": "mcp_approval.backends.local.records",
    "ApprovalState": "mcp_approval.backends.contract",
    "ApprovalStatus": "mcp_approval.backends.contract",
    "ApprovalSubmission": "mcp_approval.backends.contract",
    "ApprovalTemplate": "mcp_approval.backends.local.rules",
    "ArapBackend": "mcp_approval.backends.arap",
    "ArapSettings": "mcp_approval.backends.arap",
    "AutoResolver": "mcp_approval.backends.local.resolvers",
    "CallableResolver": "mcp_approval.backends.local.resolvers",
    "DecisionRecord": "mcp_approval.backends.local.records",
    "Delegation": "mcp_approval.backends.local.delegation_rows",
    "DelegationError": "mcp_approval.backends.local.delegation_rows",
    "DeniedEvaluation": "mcp_approval.backends.contract",
    "EarlierCall": "mcp_approval.backends.contract",
    "IdempotencyConflictError": "mcp_approval.backends.contract",
    "LocalApprovalBackend": "mcp_approval.backends.local.backend",
    "NotEligibleError": "mcp_approval.backends.local.errors",
    "REDACTED": "mcp_approval.backends.local.records",
    "OutcomeReader": "mcp_approval.backends.outcomes",
    "RequestExpiredError": "mcp_approval.backends.local.errors",
    "RequestIntegrityError": "mcp_approval.backends.contract",
    "RequestOutcome": "mcp_approval.backends.outcomes",
    "RequestPage": "mcp_approval.backends.local.records",
    "RequestRules": "mcp_approval.backends.local.rules",
    "RequestSeal": "mcp_approval.backends.local.seals",
    "ResolverRule": "mcp_approval.backends.local.rules",
    "ReviewError": "mcp_approval.backends.local.errors",
    "RuleResolver": "mcp_approval.backends.local.resolvers",
    "SealedRequest": "mcp_approval.backends.contract",
    "RuleDecision": "mcp_approval.backends.local.similar_rows",
    "SimilarCallRule": "mcp_approval.backends.local.similar_rows",
    "SimilarRuleError": "mcp_approval.backends.local.similar",
    "SimilarRuleSpec": "mcp_approval.backends.local.similar_store",
    "StatusListener": "mcp_approval.backends.contract",
    "StepUp": "mcp_approval.backends.local.step_up",
    "StepUpRequiredError": "mcp_approval.backends.local.step_up",
    "SubmissionRejectedError": "mcp_approval.backends.contract",
    "SupportsChangeFeed": "mcp_approval.backends.capabilities",
    "SupportsDelegations": "mcp_approval.backends.capabilities",
    "SupportsFindSubmitted": "mcp_approval.backends.capabilities",
    "SupportsReview": "mcp_approval.backends.capabilities",
    "SupportsSealedRequests": "mcp_approval.backends.capabilities",
    "SupportsSealing": "mcp_approval.backends.capabilities",
    "SupportsSimilarRules": "mcp_approval.backends.capabilities",
    "SupportsStatusMany": "mcp_approval.backends.capabilities",
    "SupportsSubmitInTransaction": "mcp_approval.backends.capabilities",
    "SupportsTables": "mcp_approval.backends.capabilities",
    "SupportsTemplates": "mcp_approval.backends.capabilities",
    "TerminalHook": "mcp_approval.backends.local.endings",
    "ToldRecord": "mcp_approval.backends.told",
    "UnknownRequestError": "mcp_approval.backends.contract",
    "UnverifiedRequestError": "mcp_approval.backends.local.errors",
    "resolvers_from_config": "mcp_approval.backends.local.resolvers",
}

__all__ = [
    "AUDITOR_ROLE",
    "REDACTED",
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
    "Delegation",
    "DelegationError",
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
    "RequestSeal",
    "ResolverRule",
    "ReviewError",
    "RuleDecision",
    "RuleResolver",
    "SealedRequest",
    "SimilarCallRule",
    "SimilarRuleError",
    "SimilarRuleSpec",
    "StatusListener",
    "StepUp",
    "StepUpRequiredError",
    "SubmissionRejectedError",
    "SupportsChangeFeed",
    "SupportsDelegations",
    "SupportsFindSubmitted",
    "SupportsReview",
    "SupportsSealedRequests",
    "SupportsSealing",
    "SupportsSimilarRules",
    "SupportsStatusMany",
    "SupportsSubmitInTransaction",
    "SupportsTables",
    "SupportsTemplates",
    "TerminalHook",
    "ToldRecord",
    "UnknownRequestError",
    "UnverifiedRequestError",
    "resolvers_from_config",
]

# Names that moved to the reviewer surface, resolved on first access (this package sits below it).
__getattr__ = lazy_getattr(
    __name__,
    _LAZY,
    moved={name: "mcp_approval.reviewers" for name in ("Authenticator", "console_routes", "reviewer_routes")},
)
