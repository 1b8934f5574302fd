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
