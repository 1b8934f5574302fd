"""SEP-2643 structured authorization denials, server side.

One envelope, ``_meta["io.modelcontextprotocol/authorization"]``, on whichever result expresses
the denial; the HTTP challenges that can stand in for it; and the correlation handle a retry
echoes. Typical use in a tool::

    placement = choose_placement(ctx.client_capabilities, [Interaction.URL])
    if placement is Placement.URL_INTERACTION:
        return url_interaction(url=approval_url, message="Approve access", context_id=new_context_id())
    return final_denial("Ask an administrator for access to this folder.",
                        remediation=Remediation(placement.value), context_id=new_context_id())
"""

from mcp_approval.denials.builders import (
    EnvelopeAfterExecutionError,
    challenge_result,
    credential_remediation,
    denial_envelope,
    final_denial,
    operation_executing,
    operation_started,
    ordinary_failure,
    task_created,
    task_status,
    url_interaction,
)
from mcp_approval.denials.challenges import (
    authentication_required,
    decode_remediation,
    encode_remediation,
    insufficient_authorization,
    insufficient_scope,
)
from mcp_approval.denials.context import (
    context_correlation_middleware,
    echoed_context_id,
    is_usable_context_id,
    new_context_id,
    note_retry,
)
from mcp_approval.denials.http import (
    Shortfall,
    ToolAuthorizationMiddleware,
    ToolRequirement,
    assess,
    install_tool_authorization,
    shortfall_result,
)
from mcp_approval.denials.models import (
    AuthorizationDenialEnvelope,
    AuthorizationRemediation,
    AuthorizationRemediationHint,
    Remediation,
    RemediationHint,
    TaskHint,
    UrlHint,
    validate_authorization_details,
)
from mcp_approval.denials.placement import Interaction, Placement, choose_placement, declared_interactions
from mcp_approval.denials.references import AuthorizationReferences, canonical_details, remediation_for

__all__ = [
    "AuthorizationDenialEnvelope",
    "AuthorizationReferences",
    "AuthorizationRemediation",
    "AuthorizationRemediationHint",
    "EnvelopeAfterExecutionError",
    "Interaction",
    "Placement",
    "Remediation",
    "RemediationHint",
    "Shortfall",
    "TaskHint",
    "ToolAuthorizationMiddleware",
    "ToolRequirement",
    "UrlHint",
    "assess",
    "authentication_required",
    "canonical_details",
    "challenge_result",
    "choose_placement",
    "context_correlation_middleware",
    "credential_remediation",
    "declared_interactions",
    "decode_remediation",
    "denial_envelope",
    "echoed_context_id",
    "encode_remediation",
    "final_denial",
    "install_tool_authorization",
    "insufficient_authorization",
    "insufficient_scope",
    "is_usable_context_id",
    "new_context_id",
    "note_retry",
    "operation_executing",
    "operation_started",
    "ordinary_failure",
    "remediation_for",
    "shortfall_result",
    "task_created",
    "task_status",
    "url_interaction",
    "validate_authorization_details",
]
