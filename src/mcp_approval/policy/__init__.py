"""Policy decisions for approval-gated tool calls: AuthZEN 1.0 models, PDPs and the call mapping.

Typical use::

    from mcp_approval.policy import CedarPDP, ToolCallMapper

    pdp = CedarPDP.from_files("policy.cedar", "entities.json", "policy.cedarschema")
    request = ToolCallMapper().map_call(principal="alice", tool="deploy", arguments={"env": "prod"})
    decision = await pdp.evaluate(request)
    if not decision.decision and (denial := decision.requestable_denial) is not None:
        ...  # start an approval: denial.access_request.template, .expires_at, ...

``CedarPDP`` is the embedded PDP (Cedar, ``cedarpy``); ``HttpPDP`` asks a remote AuthZEN PDP and
fails closed. Both satisfy :class:`PolicyDecisionPoint`.
"""

from typing import TYPE_CHECKING

from mcp_approval._lazy import lazy_getattr

if TYPE_CHECKING:
    from mcp_approval.policy.cedar import ApprovalVerifier, CedarPDP, EntityMapping, PolicyInfo
    from mcp_approval.policy.http import HttpPDP, PDPError
    from mcp_approval.policy.mapping import ToolCallMapper, ToolMappingError, ToolRule
    from mcp_approval.policy.models import (
        AccessRequestHint,
        Action,
        Approval,
        BatchItemError,
        Context,
        Decision,
        EvaluationItem,
        EvaluationRequest,
        EvaluationsOptions,
        EvaluationsRequest,
        EvaluationsResponse,
        EvaluationsSemantic,
        NextAction,
        PDPMetadata,
        RequestableDenial,
        Resource,
        Subject,
    )
    from mcp_approval.policy.pdp import PolicyDecisionPoint, evaluate_batch
    from mcp_approval.policy.source import LoadIssue, PolicyLoadError, TextSource

# Name -> the module that defines it, imported on first access (cedarpy loads only with CedarPDP).
_LAZY = {
    "AccessRequestHint": "mcp_approval.policy.models",
    "Action": "mcp_approval.policy.models",
    "Approval": "mcp_approval.policy.models",
    "ApprovalVerifier": "mcp_approval.policy.cedar",
    "BatchItemError": "mcp_approval.policy.models",
    "CedarPDP": "mcp_approval.policy.cedar",
    "Context": "mcp_approval.policy.models",
    "Decision": "mcp_approval.policy.models",
    "EntityMapping": "mcp_approval.policy.cedar",
    "EvaluationItem": "mcp_approval.policy.models",
    "EvaluationRequest": "mcp_approval.policy.models",
    "EvaluationsOptions": "mcp_approval.policy.models",
    "EvaluationsRequest": "mcp_approval.policy.models",
    "EvaluationsResponse": "mcp_approval.policy.models",
    "EvaluationsSemantic": "mcp_approval.policy.models",
    "HttpPDP": "mcp_approval.policy.http",
    "LoadIssue": "mcp_approval.policy.source",
    "NextAction": "mcp_approval.policy.models",
    "PDPError": "mcp_approval.policy.http",
    "PDPMetadata": "mcp_approval.policy.models",
    "PolicyDecisionPoint": "mcp_approval.policy.pdp",
    "PolicyInfo": "mcp_approval.policy.cedar",
    "PolicyLoadError": "mcp_approval.policy.source",
    "RequestableDenial": "mcp_approval.policy.models",
    "Resource": "mcp_approval.policy.models",
    "Subject": "mcp_approval.policy.models",
    "TextSource": "mcp_approval.policy.source",
    "ToolCallMapper": "mcp_approval.policy.mapping",
    "ToolMappingError": "mcp_approval.policy.mapping",
    "ToolRule": "mcp_approval.policy.mapping",
    "evaluate_batch": "mcp_approval.policy.pdp",
}

__all__ = [
    "AccessRequestHint",
    "Action",
    "Approval",
    "ApprovalVerifier",
    "BatchItemError",
    "CedarPDP",
    "Context",
    "Decision",
    "EntityMapping",
    "EvaluationItem",
    "EvaluationRequest",
    "EvaluationsOptions",
    "EvaluationsRequest",
    "EvaluationsResponse",
    "EvaluationsSemantic",
    "HttpPDP",
    "LoadIssue",
    "NextAction",
    "PDPError",
    "PDPMetadata",
    "PolicyDecisionPoint",
    "PolicyInfo",
    "PolicyLoadError",
    "RequestableDenial",
    "Resource",
    "Subject",
    "TextSource",
    "ToolCallMapper",
    "ToolMappingError",
    "ToolRule",
    "evaluate_batch",
]

__getattr__ = lazy_getattr(__name__, _LAZY)
