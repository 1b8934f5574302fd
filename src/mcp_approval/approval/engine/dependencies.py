"""What the approval workflow's collaborators work with, built once when approvals start.

:class:`ApprovalDependencies` is a value, not a service: the workflow driver receives it whole (it
uses nearly all of it) and hands the executor and resubmission just the parts they use.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.approval.persistence.store import ApprovalStore
from mcp_approval.approval.tools import ToolInvoker
from mcp_approval.backends import ApprovalBackend
from mcp_approval.clock import Clock
from mcp_approval.keyring import BindingCipher
from mcp_approval.policy import PolicyDecisionPoint, ToolCallMapper
from mcp_approval.tasks.store import TaskStore

__all__ = ["ApprovalDependencies", "PrincipalCheck", "always_valid"]

PrincipalCheck = Callable[[str], Awaitable[bool]]
"""Whether a principal is still valid when its approved call is about to run."""


async def always_valid(_principal: str) -> bool:
    """The default :data:`PrincipalCheck`: a requester stays valid (its token was checked at call time)."""
    return True


@dataclass(frozen=True)
class ApprovalDependencies:
    """The collaborators of pending approvals, fixed for as long as approvals run.

    Attributes:
        store: the approval workflow store (it records the audit trail in each step's transaction).
        backend: where approval requests go and whose status is authoritative.
        pdp: asked again, with the approval, before an approved call runs.
        mapper: how a call becomes a policy request.
        tools: runs approved calls from their binding, and fingerprints tools.
        cipher: seals and opens call bindings and submission bodies.
        options: limits, deadlines and intervals.
        clock: the source of time.
        principal_valid: whether a requester may still act when its call is about to run.
        task_store: the task rows (where a waiting task's submission inputs are answered).
    """

    store: ApprovalStore
    backend: ApprovalBackend
    pdp: PolicyDecisionPoint
    mapper: ToolCallMapper
    tools: ToolInvoker
    cipher: BindingCipher
    options: ApprovalOptions
    clock: Clock
    principal_valid: PrincipalCheck
    task_store: TaskStore
