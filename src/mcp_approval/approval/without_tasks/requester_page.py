"""The requester page: one request made without tasks, as its requester follows it in a browser.

``GET /requests/{request_token}`` shows the request's tool, reference, state, deadline and, once
decided, its disposition. It never shows who reviews or decided it, their comments, the call's
arguments or the tool's result (the result goes to the client when it calls again).

Threat model: the token is the request's reference and owner sealed (AES-GCM) with the binding
keys, so it cannot be guessed or forged, and a link made for one request opens nothing else. The
link is a bearer capability: whoever holds it reads that request's status, which is why the page
says so little, and why it is served with ``no-store``, ``no-referrer`` and ``noindex``. Reading
it never approves, denies or runs anything. A token that does not open, or whose request is gone
or now owned by no one it names, gets the same 404 page.
"""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from mcp_approval.approval.persistence.records import Workflow
from mcp_approval.approval.persistence.states import Phase
from mcp_approval.approval.without_tasks.links import RequesterLinks
from mcp_approval.clock import iso8601

__all__ = ["REQUESTER_PAGE_PATH", "UNKNOWN_PAGE_TEXT", "requester_page_route"]

#: Where the page is served; ``requester_url`` points here (or at a proxy in front of it).
REQUESTER_PAGE_PATH = "/requests/{request_token}"
UNKNOWN_PAGE_TEXT = "No such approval request. The link may be incomplete, or the request is no longer kept."
_HEADERS = {
    "cache-control": "no-store",
    "referrer-policy": "no-referrer",
    "x-robots-tag": "noindex",
    "x-content-type-options": "nosniff",
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'",
}
_STATE_TEXT = {
    Phase.PENDING: "Waiting for a decision. The call has not run.",
    Phase.CLAIMED: "Approved: the call is running now (once).",
    Phase.FINISHED: "Decided. Your client receives the outcome when it continues (calls the tool again).",
    Phase.FENCED: "Decided: the call did not run and never will for this request.",
}
_DISPOSITION_TEXT = {
    "approved-executed": "approved-executed: the call was approved and ran once.",
    "denied-not-executed": "denied-not-executed: the call did not run.",
    "execution-error": "execution-error: the call was approved and ran, but reported an error.",
    "outcome-unknown": "outcome-unknown: the call was approved and may have run; its outcome is unknown.",
}

WorkflowLookup = Callable[[str], Awaitable[Workflow | None]]


def requester_page_route(links: RequesterLinks, lookup: WorkflowLookup) -> Route:
    """The ``GET`` route of the requester page; ``lookup`` reads a workflow by reference."""

    async def page(request: Request) -> HTMLResponse:
        opened = links.open_page_token(request.path_params["request_token"])
        workflow = await lookup(opened[0]) if opened is not None else None
        if opened is None or workflow is None or workflow.principal_digest != opened[1]:
            return _html("Approval request", f"<p>{html.escape(UNKNOWN_PAGE_TEXT)}</p>", status=404)
        return _html(f"Approval request {workflow.task_id}", _body(workflow))

    return Route(REQUESTER_PAGE_PATH, page, methods=["GET"])


def _body(workflow: Workflow) -> str:
    rows = [("Tool", workflow.tool_name), ("Reference", workflow.task_id), ("State", _STATE_TEXT[workflow.phase])]
    if workflow.phase is Phase.PENDING and workflow.request_deadline is not None:
        rows.append(("Deadline", f"{iso8601(workflow.request_deadline)} (then it expires and the call never runs)"))
    if workflow.phase in (Phase.FINISHED, Phase.FENCED):
        disposition = workflow.disposition or "denied-not-executed"
        rows.append(("Outcome", _DISPOSITION_TEXT.get(disposition, disposition)))
    cells = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    note = (
        "An approver of this server decides this request. This page only shows where it stands; "
        "nothing here approves or runs the call."
    )
    return f'<table id="request">{cells}</table><p>{html.escape(note)}</p>'


def _html(title: str, body: str, *, status: int = 200) -> HTMLResponse:
    document = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        '<meta name="referrer" content="no-referrer"></head>'
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    return HTMLResponse(document, status_code=status, headers=_HEADERS)
