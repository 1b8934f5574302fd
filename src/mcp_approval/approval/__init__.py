"""SEP-2848 tool approval, the policy enforcement point side.

:class:`PolicyGate` decides every ``tools/call`` with a PDP before the tool runs::

    from mcp_approval.approval import PolicyGate
    from mcp_approval.policy import CedarPDP

    gate = PolicyGate(CedarPDP.from_files("policy.cedar"))
    server = MCPServer("demo", extensions=[gate])

A requestable denial goes to the gate's :class:`RequestableHandler`; the default,
:class:`DegradedRequestable`, answers ``isError`` with ``remediation: "undisclosed"`` and
next-step guidance.
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
from mcp_approval.approval.service import ToolApproval, ToolApprovalExtension
from mcp_approval.approval.states import Disposition
from mcp_approval.approval.tools import ServerTools, ToolInvoker

__all__ = [
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
    "token_subject",
]
