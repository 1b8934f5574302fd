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

The layer, by folder, top down (a gated call goes down this list and never back up):

- this folder: the enforcement point and what a call is bound to. ``gate`` (the PEP: it maps,
  decides and sizes a call once, and hands on a :class:`GatedCall` carrying what it learned),
  ``service`` (:class:`ToolApproval`: where each requestable call goes, cancellation),
  ``options``, ``binding`` (the sealed call), ``tools`` (running a tool from its binding),
  ``messages`` and ``results`` (what clients and models read), ``url_approval`` (url-mode
  approval links for task clients);
- ``without_tasks/``: the answers to clients that did not declare tasks, their URL rounds and the
  requester page; they open their requests through ``creation/``;
- ``creation/``: creating approval tasks, crash-consistently, from the one value the service
  hands down, and what the creating call is answered;
- ``engine/``: following pending approvals to their end (:class:`~.engine.driver.WorkflowDriver`),
  re-evaluation, the execution claim, chained and recovered submissions, a request's values;
- ``persistence/``: the workflow tables, their rows as values, the phase and intent tables, the
  store in the parts its collaborators are handed, the outcome read API the reviewer surface,
  notifications and metrics use;
- ``call/``: what a call may carry and how it is read: argument and body limits, the tool's
  input schema, submission inputs.

The public names below are imported on first access, so that importing one module of the layer
(a table, a state) does not load the engine.
"""

from typing import TYPE_CHECKING

from mcp_approval._lazy import lazy_getattr

if TYPE_CHECKING:
    from mcp_approval.approval.binding import CallBinding
    from mcp_approval.approval.gate import DegradedRequestable, GatedCall, PolicyGate, RequestableHandler, token_subject
    from mcp_approval.approval.options import ApprovalOptions
    from mcp_approval.approval.persistence.outcomes import WorkflowOutcomes
    from mcp_approval.approval.persistence.states import Disposition
    from mcp_approval.approval.service import APPROVAL_HANDLER, ToolApproval, ToolApprovalExtension
    from mcp_approval.approval.tools import ServerTools, ToolInvoker
    from mcp_approval.tasks.options import PrincipalLookup

# Name -> the module that defines it.
_LAZY = {
    "APPROVAL_HANDLER": "mcp_approval.approval.service",
    "ApprovalOptions": "mcp_approval.approval.options",
    "CallBinding": "mcp_approval.approval.binding",
    "DegradedRequestable": "mcp_approval.approval.gate",
    "Disposition": "mcp_approval.approval.persistence.states",
    "GatedCall": "mcp_approval.approval.gate",
    "PolicyGate": "mcp_approval.approval.gate",
    "PrincipalLookup": "mcp_approval.tasks.options",
    "RequestableHandler": "mcp_approval.approval.gate",
    "ServerTools": "mcp_approval.approval.tools",
    "ToolApproval": "mcp_approval.approval.service",
    "ToolApprovalExtension": "mcp_approval.approval.service",
    "ToolInvoker": "mcp_approval.approval.tools",
    "WorkflowOutcomes": "mcp_approval.approval.persistence.outcomes",
    "token_subject": "mcp_approval.approval.gate",
}

__all__ = [
    "APPROVAL_HANDLER",
    "ApprovalOptions",
    "CallBinding",
    "DegradedRequestable",
    "Disposition",
    "GatedCall",
    "PolicyGate",
    "PrincipalLookup",
    "RequestableHandler",
    "ServerTools",
    "ToolApproval",
    "ToolApprovalExtension",
    "ToolInvoker",
    "WorkflowOutcomes",
    "token_subject",
]

__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
