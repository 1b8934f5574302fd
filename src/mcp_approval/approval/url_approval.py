"""URL-mode elicitation for approval tasks (``ApprovalOptions.approval_url``).

When the deployment names the page where reviewers decide approvals, an approval task created
by a request that declared URL elicitation starts ``input_required`` with exactly one
url-mode ``elicitation/create`` pointing at that page for its approval request. The client shows
the link; a ``tasks/update`` answering it (any action, any content) only moves the task back to
``working``. It never approves: the workflow driver still reads the decision from the backend.

The approval's id is the one thing of the backend a client can see this way, and only because
the deployment opted in by configuring ``approval_url``; the backend's handle (when it differs
from the reviewer-facing id), status URLs, reviewers, comments and approval material never
reach the client.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

import mcp_types as types
from mcp.server.context import ServerRequestContext

from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.approval.persistence.records import NewWorkflow
from mcp_approval.approval.results import sanitize_model_text
from mcp_approval.backends import ApprovalBackend
from mcp_approval.denials.placement import Interaction, declared_interactions

__all__ = [
    "APPROVAL_LINK_KEY",
    "LINK_MESSAGE",
    "ReviewerPageIds",
    "approval_page_id",
    "declares_url_elicitation",
    "link_request",
    "with_approval_link",
]

logger = logging.getLogger("mcp_approval.approval")

#: The key of the approval page's input request in a task's ``inputRequests``.
APPROVAL_LINK_KEY = "approval-link"
LINK_MESSAGE = (
    "Calling {tool} needs approval. A reviewer decides it on this page; opening it or answering "
    "this request does not approve the call."
)


@runtime_checkable
class ReviewerPageIds(Protocol):
    """Optional on a backend: the reviewer-facing id of a request, when its handle is something else."""

    def approval_page_id(self, handle: str) -> str | None:
        """The id reviewers know the request by (``None``: the request has no reviewer page)."""
        ...


def declares_url_elicitation(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether *this* request is on the 2026-07-28 wire and declared ``elicitation.url``."""
    capabilities = ctx.session.client_capabilities
    return Interaction.URL in declared_interactions(capabilities, protocol_version=ctx.protocol_version)


def approval_page_id(backend: ApprovalBackend, handle: str) -> str | None:
    """The id the approval page names for ``handle``, or ``None`` when the backend has no such page.

    A backend says so itself (:class:`ReviewerPageIds`): the local backend's handle is its request
    id, the id of ``/approvals/{id}``; another's may be a status URL or carry material a client
    must not see.
    """
    if isinstance(backend, ReviewerPageIds):
        return backend.approval_page_id(handle)
    return None


def link_request(options: ApprovalOptions, approval_id: str, tool: str) -> dict[str, Any] | None:
    """The url-mode ``elicitation/create`` input request for one approval, or ``None`` without a page."""
    url = options.approval_link(approval_id)
    if url is None:
        return None
    params = types.ElicitRequestURLParams(message=sanitize_model_text(LINK_MESSAGE.format(tool=tool)), url=url)
    request = types.ElicitRequest(params=params)
    return request.model_dump(by_alias=True, mode="json", exclude_none=True)


def with_approval_link(
    new: NewWorkflow, *, options: ApprovalOptions, backend: ApprovalBackend, handle: str
) -> NewWorkflow:
    """``new`` starting ``input_required`` with the approval page's link, when one can be made."""
    if options.approval_url is None:
        return new
    approval_id = approval_page_id(backend, handle)
    if approval_id is None:
        logger.info("approval_url is set, but backend %r names no reviewer page; no link", backend.name)
        return new
    request = link_request(options, approval_id, new.tool_name)
    if request is None:
        return new
    return replace(new, input_requests={APPROVAL_LINK_KEY: request})
