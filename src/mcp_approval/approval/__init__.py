"""SEP-2848 tool approval, the policy enforcement point side.

:class:`PolicyGate` decides every ``tools/call`` with a PDP before the tool runs::

    from mcp_approval.approval import PolicyGate
    from mcp_approval.policy import CedarPDP

    gate = PolicyGate(CedarPDP.from_files("policy.cedar"))
    server = MCPServer("demo", extensions=[gate])

A requestable denial goes to the gate's :class:`RequestableHandler`. Without approvals that is
:class:`DegradedRequestable` (``isError`` with ``remediation: "undisclosed"`` and next-step
guidance); with :class:`ToolApproval` it becomes a durable task that an approval backend
resolves, after which the call is re-evaluated, claimed once and run from its sealed binding.

Modules: ``gate`` (the PEP), ``service`` (task creation, cancellation; the composition of the
rest), ``dependencies`` (what the workflow runs with), ``requests`` (a new request, its intent
and its task rows), ``resolver`` (following pending approvals, re-evaluation), ``resubmission``
(chained requests, crash recovery), ``execution`` (the claim and the single run), ``store`` and
``records`` (the workflow tables), ``states`` (phase and intent tables), ``binding`` (the sealed
call), ``inputs`` (submission inputs), ``results`` (dispositions), ``callbacks`` (HMAC wake-ups),
``crashpoints`` (test-only kill points), ``without_tasks`` and ``without_tasks_flow`` (clients
without tasks), ``url_approval`` and ``url_without_tasks`` (url-mode links for task and non-task
clients), ``requester_page`` (the requester's status page).
"""

from mcp_approval.approval.binding import BindingCipher, CallBinding
from mcp_approval.approval.gate import (
    DegradedRequestable,
    GatedCall,
    PolicyGate,
    PrincipalResolver,
    RequestableHandler,
    token_subject,
)
from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.approval.outcomes import WorkflowOutcomes
from mcp_approval.approval.service import APPROVAL_HANDLER, ToolApproval, ToolApprovalExtension
from mcp_approval.approval.states import Disposition
from mcp_approval.approval.tools import ServerTools, ToolInvoker

__all__ = [
    "APPROVAL_HANDLER",
    "ApprovalOptions",
    "BindingCipher",
    "CallBinding",
    "DegradedRequestable",
    "Disposition",
    "GatedCall",
    "PolicyGate",
    "PrincipalResolver",
    "RequestableHandler",
    "ServerTools",
    "ToolApproval",
    "ToolApprovalExtension",
    "ToolInvoker",
    "WorkflowOutcomes",
    "token_subject",
]
