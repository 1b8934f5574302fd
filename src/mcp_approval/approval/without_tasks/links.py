"""URL elicitation for clients without tasks (``without_tasks = "request"`` with ``requester_url``).

A client that declared ``elicitation.url`` but not the tasks extension is sent to a page for the
requester: its own request's status and, once decided, the outcome (never who reviews it). Each
protocol revision gets its own mechanism:

==============  ===========================================================================
revision        answer while the request is open
==============  ===========================================================================
2026-07-28      ``InputRequiredResult``: one url-mode elicitation naming the page, and a
                ``requestState`` naming the request (sealed here with the binding keys, and
                again by the SDK's request-state boundary); SEP-2643 envelope ``available``
                with a ``url`` hint. The retry (the same call with ``inputResponses`` and that
                state) takes the outcome once it ended; while the request is still open it
                gets the pending answer (accepted or declined, the page was given: never the
                same elicitation again, so the client's round loop ends).
2025-11-25      the URL-elicitation-required error ``-32042`` naming the page, whose message
                itself names the request and its deadline (a client may show only the
                message); the retry is the identical call, answered like any retry without tasks.
==============  ===========================================================================

The page link carries an unguessable token (the request's reference and owner, sealed with the
binding keys): whoever holds the link can read that one request's status and disposition, and
nothing else; it never approves anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_approval.approval.binding import CallBinding
from mcp_approval.approval.messages import earlier_call_text
from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.approval.results import sanitize_model_text
from mcp_approval.backends.contract import EarlierCall
from mcp_approval.clock import iso8601
from mcp_approval.denials import new_context_id, url_interaction
from mcp_approval.keyring import BindingCipher, BindingIntegrityError
from mcp_approval.protocol import INVALID_PARAMS, URL_ELICITATION_REQUIRED

__all__ = [
    "INVALID_STATE_MESSAGE",
    "NO_DEADLINE",
    "PAGE_INPUT_KEY",
    "URL_REQUIRED_MESSAGE",
    "RequesterLinks",
    "UrlRevision",
    "url_required_message",
    "url_revision",
]

#: The ``inputRequests`` key of the requester page's url-mode elicitation.
PAGE_INPUT_KEY = "approval_page"
#: The one answer for a tampered, foreign, expired or mismatched ``requestState`` (the SDK's own words).
INVALID_STATE_MESSAGE = "Invalid or expired requestState"
_STATE_RECORD = "mcp-approval/url-without-tasks/state"
_PAGE_RECORD = "mcp-approval/url-without-tasks/page"
_PAGE_MESSAGE = (
    "Calling {tool} needs approval: request {reference} is open, and an approver of this server decides it. "
    "This page shows where your request stands; opening it does not approve the call."
)
_DEADLINE = " If no one decides by {deadline}, it expires and the call never runs."
_CONTINUE = " Once it is decided, continue: an approved call runs exactly once and you receive its result."

#: The ``-32042`` message: the error's ``data`` holds the page, but some clients show only this.
URL_REQUIRED_MESSAGE = (
    "URL elicitation required: {tool} did not run; it needs approval, and approval request {reference} "
    "is open until {deadline} (an approver of this server decides it). Open the page in the error's data "
    "to follow it; call {tool} again with the same arguments for the outcome."
)
#: Shorter forms of :data:`URL_REQUIRED_MESSAGE`, tried in turn until one fits the model-text bound whole.
URL_REQUIRED_SHORTER = (
    "URL elicitation required: {tool} did not run; it needs approval, and approval request {reference} is "
    "open until {deadline}. Open the page in the error's data; call {tool} again with the same arguments "
    "for the outcome.",
    "URL elicitation required: {tool} needs approval (request {reference}, open until {deadline}). Open the "
    "page in the error's data, then call the tool again with the same arguments for the outcome.",
    "URL elicitation required: {tool} needs approval (request {reference}). Open the page in the error's "
    "data, then call the tool again with the same arguments for the outcome.",
)
NO_DEADLINE = "it is decided"
#: The bound of model-facing text (``sanitize_model_text``'s): the message is built to fit it, never cut.
_MESSAGE_LIMIT = 300
#: The longest tool name or reference the message repeats whole; a longer one is shortened, never the words around it.
_MAX_NAME = 72

UrlRevision = Literal["2026-07-28", "2025-11-25"]


def url_revision(ctx: ServerRequestContext[Any, Any], options: ApprovalOptions) -> UrlRevision | None:
    """Which URL mechanism this request opens, or ``None`` (no ``requester_url``, or no ``elicitation.url``)."""
    if options.requester_url is None:
        return None
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None or elicitation.url is None:
        return None
    return "2026-07-28" if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS else "2025-11-25"


@dataclass(frozen=True)
class RequesterLinks:
    """Seals and opens the page tokens and the ``requestState`` of URL approvals without tasks."""

    cipher: BindingCipher
    options: ApprovalOptions

    # -- the requester page ------------------------------------------------------------------

    def page_link(self, reference: str, owner: str) -> str | None:
        """The requester page of request ``reference`` owned by ``owner`` (``None`` without ``requester_url``)."""
        token = self.cipher.seal({"ref": reference, "owner": owner}, record=_PAGE_RECORD)
        return self.options.requester_link(token)

    def open_page_token(self, token: str) -> tuple[str, str] | None:
        """``(reference, owner)`` a page token names, or ``None`` for anything this server did not seal."""
        try:
            document = self.cipher.open(token, record=_PAGE_RECORD)
        except (BindingIntegrityError, ValueError):
            return None
        reference, owner = document.get("ref"), document.get("owner")
        if not isinstance(reference, str) or not isinstance(owner, str):
            return None
        return reference, owner

    # -- the 2026-07-28 round ----------------------------------------------------------------

    def seal_state(self, reference: str, binding: CallBinding, owner: str) -> str:
        """The ``requestState`` naming request ``reference`` for this call and caller."""
        document = {"ref": reference, "tool": binding.tool, "digest": binding.digest, "owner": owner}
        return self.cipher.seal(document, record=_STATE_RECORD)

    def open_state(self, state: str, binding: CallBinding, owner: str) -> str:
        """The request reference ``state`` names, once it is this call's and this caller's.

        Raises:
            MCPError: ``-32602`` with the one message for any state this server did not mint for
                this call and caller (another principal's state reads like an unknown one).
        """
        try:
            document = self.cipher.open(state, record=_STATE_RECORD)
        except (BindingIntegrityError, ValueError):
            raise MCPError(code=INVALID_PARAMS, message=INVALID_STATE_MESSAGE) from None
        expected = (binding.tool, binding.digest, owner)
        reference = document.get("ref")
        if (document.get("tool"), document.get("digest"), document.get("owner")) != expected or not isinstance(
            reference, str
        ):
            raise MCPError(code=INVALID_PARAMS, message=INVALID_STATE_MESSAGE)
        return reference

    def input_required(
        self,
        reference: str,
        binding: CallBinding,
        owner: str,
        deadline_ms: int | None,
        *,
        earlier: EarlierCall | None = None,
    ) -> types.InputRequiredResult:
        """The round sending the requester to the page, with the sealed state for its retry.

        ``earlier``: the identical call whose request already ended (the message says so).
        """
        link = self._link(reference, owner)
        return url_interaction(
            url=link,
            message=_message(binding.tool, reference, deadline_ms, earlier),
            request_state=self.seal_state(reference, binding, owner),
            input_key=PAGE_INPUT_KEY,
            context_id=new_context_id(),
        )

    # -- the 2025-11-25 error ----------------------------------------------------------------

    def elicitation_required(
        self, reference: str, tool: str, owner: str, deadline_ms: int | None, *, earlier: EarlierCall | None = None
    ) -> MCPError:
        """The ``-32042`` error naming the page (its ``elicitationId`` is derived from the reference).

        ``earlier``: the identical call whose request already ended (the elicitation's message says so).
        """
        params = types.ElicitRequestURLParams(
            message=_message(tool, reference, deadline_ms, earlier),
            url=self._link(reference, owner),
            elicitation_id=f"approval-{reference}",
        )
        data = {"elicitations": [params.model_dump(by_alias=True, mode="json", exclude_none=True)]}
        return MCPError(
            code=URL_ELICITATION_REQUIRED, message=url_required_message(tool, reference, deadline_ms), data=data
        )

    def _link(self, reference: str, owner: str) -> str:
        link = self.page_link(reference, owner)
        if link is None:
            raise RuntimeError("requester_url is not set")
        return link


def url_required_message(tool: str, reference: str, deadline_ms: int | None) -> str:
    """The ``-32042`` error's own message: what a client that shows only the message must still say.

    The longest form that fits the model-text bound whole (:data:`URL_REQUIRED_MESSAGE`, then
    :data:`URL_REQUIRED_SHORTER`): a message cut at the bound would end mid-instruction.
    """
    deadline = iso8601(deadline_ms) if deadline_ms is not None else NO_DEADLINE
    tool, reference = (sanitize_model_text(part, limit=_MAX_NAME) for part in (tool, reference))
    texts = [form.format(tool=tool, reference=reference, deadline=deadline) for form in _URL_REQUIRED_FORMS]
    fitting = [text for text in texts if len(text) <= _MESSAGE_LIMIT]
    return sanitize_model_text(fitting[0] if fitting else texts[-1], limit=_MESSAGE_LIMIT)


_URL_REQUIRED_FORMS = (URL_REQUIRED_MESSAGE, *URL_REQUIRED_SHORTER)


def _message(tool: str, reference: str, deadline_ms: int | None, earlier: EarlierCall | None = None) -> str:
    text = _PAGE_MESSAGE.format(tool=tool, reference=reference)
    if earlier is not None:
        text += f" {earlier_call_text(earlier)}"
    if deadline_ms is not None:
        text += _DEADLINE.format(deadline=iso8601(deadline_ms))
    return sanitize_model_text(text + _CONTINUE, limit=1000)
