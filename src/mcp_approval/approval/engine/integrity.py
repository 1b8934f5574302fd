"""The check before the claim: the request a task follows is the one its call was submitted as.

A task stores its backend request's handle; someone who can write the database can point the
task at another request (swap the handles of two pending calls), so that a reviewer approving
one call makes the other run. The task's call binding is sealed to the task and the request's
content to the request, so neither can be moved; what can be compared is what each says. Before
an approved call is claimed, the request's sealed content (its submission key, tool, requester
and call digest) must match the task's binding and the intent it was submitted from. Anything
else is an integrity failure: the call does not run.

Backends that seal nothing (the ARAP backend: its service binds the approval, and the policy's
re-evaluation checks it) are not asked.
"""

from __future__ import annotations

from mcp_approval.approval.binding import CallBinding
from mcp_approval.backends import RequestIntegrityError, SupportsSealedRequests
from mcp_approval.backends.contract import ApprovalBackend

__all__ = ["link_failure"]


async def link_failure(
    backend: ApprovalBackend, handle: str, binding: CallBinding, intent_key: str | None
) -> str | None:
    """Why the request ``handle`` is not the one the task's call was submitted as, or ``None``.

    Args:
        backend: the task's backend (only one that seals is asked).
        handle: the request the task follows.
        binding: the task's opened call binding.
        intent_key: the submission key of the task's current intent, when it has one.
    """
    if not isinstance(backend, SupportsSealedRequests):
        return None
    try:
        sealed = await backend.sealed_request(handle)
    except RequestIntegrityError as exc:
        return str(exc)
    if sealed is None:
        return None
    if sealed.tool != binding.tool or sealed.call_digest != binding.digest:
        return "the approval request the task follows is for another call than the task's"
    if sealed.requester != binding.principal:
        return "the approval request the task follows was made by another principal than the task's"
    if intent_key is not None and sealed.key != intent_key:
        return "the approval request the task follows was not submitted for this task"
    return None
