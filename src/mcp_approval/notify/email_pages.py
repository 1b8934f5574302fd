"""What an e-mail's decision link does: ``GET`` shows a confirmation page, only its ``POST`` decides.

``GET /console/email/{token}/{approve|deny}`` checks the link and shows the request and one
button; it changes nothing, so a link scanner that follows every link in a message (Outlook Safe
Links, Proofpoint, Mimecast) decides nothing and uses nothing up. The button ``POST``\\ s the same
path, and that request decides, once every check holds:

- the token's hash is stored (a mistyped, forged or replaced link is not), and unused;
- it has not expired (a link lives ``link_ttl_s`` at most, and never past its request's deadline);
- the request still takes decisions, and its content digest (content, rules, the sealed digest of
  its arguments) is the one the link was bound to when the message was sent;
- a browser signed in to the console is signed in as the reviewer the link was sent to (a
  forwarded message opened by another reviewer decides nothing), and a template that requires it
  (``links_require_sign_in``, or ``risk = "high"``) has that reviewer signed in;
- the form is this page's: ``Origin`` / ``Sec-Fetch-Site`` say the same site, and its CSRF token
  matches the cookie the page set (``SameSite=Strict``, ``HttpOnly``).

The link is then burned (marked used, with an ``approval.link_used`` audit event naming the
channel) before the backend's ``decide`` records the decision as the link's reviewer: the
console's rules (role, N-of-M, no self-approval, sealed decisions) apply unchanged. A refusal
decides nothing and, but for a link already used, leaves the link as it was.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from mcp_approval.backends import ApprovalRecord, ApprovalTemplate, ReviewError, SupportsReview
from mcp_approval.backends.contract import UnknownRequestError
from mcp_approval.clock import Clock
from mcp_approval.notify.email import sealed_digest
from mcp_approval.notify.email_links import EmailLink, EmailLinks
from mcp_approval.notify.email_message import LINK_PATH
from mcp_approval.reviewers.console import COOKIE, CSP
from mcp_approval.reviewers.limits import MAX_COMMENT_CHARS, STORE_RETRY_AFTER_S
from mcp_approval.reviewers.session_table import SqlSessionTable
from mcp_approval.reviewers.sessions import SessionStore
from mcp_approval.reviewers.views import RequestView, environment
from mcp_approval.storage.database import Database, StoreUnavailableError
from mcp_approval.web.forms import Refused, check_origin, read_form

__all__ = ["CSRF_COOKIE", "email_link_paths", "email_link_routes"]

#: The cookie holding the confirmation page's CSRF token (the form carries the same value).
CSRF_COOKIE: Final = "mcp_approval_link_csrf"
_PREFIX: Final = "/console/email"
_HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Robots-Tag": "noindex, nofollow",
}

Authenticator = Callable[[str], Awaitable[str | None]]


@dataclass(frozen=True)
class _Checked:
    link: EmailLink
    record: ApprovalRecord
    signed_in: str | None
    needs_sign_in: bool


def email_link_routes(
    backend: SupportsReview,
    links: EmailLinks,
    authenticate: Authenticator,
    templates: Mapping[str, ApprovalTemplate],
    *,
    database: Database,
    clock: Clock,
) -> list[BaseRoute]:
    """``GET`` and ``POST /console/email/{token}/{decision}`` (see the module's description).

    Args:
        backend: the requests; decisions go through its ``decide``.
        links: the e-mail channels' links.
        authenticate: bearer token -> reviewer, to tell who a console session belongs to.
        templates: the configured templates (their ``links_require_sign_in`` and ``risk``).
        database: where console sessions live.
        clock: the source of time.
    """
    sessions = SessionStore(clock, table=SqlSessionTable(database))  # the console's, shared through the store
    pages = _LinkPages(backend, links, authenticate, templates, sessions, clock)
    return [
        Route(LINK_PATH, pages.guarded(pages.show), methods=["GET"]),
        Route(LINK_PATH, pages.guarded(pages.decide), methods=["POST"]),
    ]


def email_link_paths() -> dict[str, Any]:
    """The OpenAPI path item of :func:`email_link_routes` (HTML pages, for browsers)."""
    html = {"content": {"text/html": {"schema": {"type": "string"}}}}
    parameters = [
        {"name": "token", "in": "path", "required": True, "schema": {"type": "string"}},
        {"name": "decision", "in": "path", "required": True, "schema": {"type": "string", "enum": ["approve", "deny"]}},
    ]
    refusals = {
        "401": {"description": "the template needs the reviewer signed in to the console", **html},
        "403": {"description": "signed in as another reviewer, a cross-site form or a wrong CSRF token", **html},
        "404": {"description": "no such link", **html},
        "409": {"description": "the request ended, changed, or this reviewer may not decide it", **html},
        "410": {"description": "the link was used or has expired", **html},
        "503": {"description": "the store cannot be reached", **html},
    }
    form = {
        "type": "object",
        "properties": {
            "csrf": {"type": "string"},
            "decision": {"type": "string", "enum": ["approve", "deny"]},
            "comment": {"type": "string", "maxLength": MAX_COMMENT_CHARS},
        },
        "required": ["csrf", "decision"],
    }
    return {
        LINK_PATH: {
            "get": {
                "summary": "An e-mail's decision link: the confirmation page (decides nothing)",
                "parameters": parameters,
                "responses": {"200": {"description": "the page, with its form", **html}, **refusals},
            },
            "post": {
                "summary": "The confirmation page's form: decides once, as the link's reviewer",
                "parameters": parameters,
                "requestBody": {
                    "required": True,
                    "content": {"application/x-www-form-urlencoded": {"schema": form}},
                },
                "responses": {
                    "200": {"description": "the decision was recorded", **html},
                    "400": {"description": "an unreadable form", **html},
                    **refusals,
                    "413": {"description": "the form is too large", **html},
                    "415": {"description": "not a urlencoded form", **html},
                },
            },
        }
    }


class _LinkPages:
    def __init__(
        self,
        backend: SupportsReview,
        links: EmailLinks,
        authenticate: Authenticator,
        templates: Mapping[str, ApprovalTemplate],
        sessions: SessionStore,
        clock: Clock,
    ) -> None:
        self.backend = backend
        self.links = links
        self.authenticate = authenticate
        self.templates = templates
        self.sessions = sessions
        self.clock = clock
        self.env = environment()

    def guarded(self, endpoint: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            try:
                return await endpoint(request)
            except Refused as refused:
                return self._page(refused.status, "Nothing was decided", message=refused.message, kind="error")
            except StoreUnavailableError:
                message = "The approval store cannot be reached, so nothing was read or decided. Try again shortly."
                response = self._page(503, "Nothing was decided", message=message, kind="error")
                response.headers["Retry-After"] = str(STORE_RETRY_AFTER_S)
                return response

        return handle

    async def show(self, request: Request) -> Response:
        """The confirmation page: the request and one button. Decides nothing."""
        token, decision = _token(request), _decision(request)
        checked = await self._check(request, token, posting=False)
        # One token per browser, so two open pages of the same link both submit.
        held = request.cookies.get(CSRF_COOKIE, "")
        csrf = held if len(held) == 43 and all(ch.isalnum() or ch in "-_" for ch in held) else secrets.token_urlsafe(32)
        heading = "Approve this request?" if decision == "approve" else "Deny this request?"
        response = self._page(
            200,
            heading,
            view=RequestView(checked.record, self.clock.now_ms()),
            form=True,
            form_csrf=csrf,
            action=request.url.path,
            decision=decision,
            reviewer=checked.link.reviewer,
            sign_in=checked.needs_sign_in and checked.signed_in is None,
            request_page=f"/console/requests/{quote(checked.record.id, safe='')}",
        )
        response.set_cookie(
            CSRF_COOKIE,
            csrf,
            max_age=3600,
            path=_PREFIX,
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )
        return response

    async def decide(self, request: Request) -> Response:
        """Decide as the link's reviewer, once every check holds (see the module's description)."""
        check_origin(request)
        token, decision = _token(request), _decision(request)
        form = await read_form(request)
        cookie = request.cookies.get(CSRF_COOKIE) or ""
        sent = form.get("csrf") or ""
        if not (cookie and hmac.compare_digest(cookie.encode(), sent.encode())):
            raise Refused(
                403, "The form's security token is missing or wrong; nothing was decided. Open the link again."
            )
        if form.get("decision") != decision:
            raise Refused(400, "The decision must be the one this link is for.")
        comment = (form.get("comment") or "").strip() or None
        if comment is not None and (len(comment) > MAX_COMMENT_CHARS or "\x00" in comment):
            raise Refused(400, f"A comment is at most {MAX_COMMENT_CHARS} characters, without NUL characters.")
        checked = await self._check(request, token, posting=True)
        link, record = checked.link, checked.record
        refusal = self.backend.why_ineligible(link.reviewer, record)
        if refusal is not None:
            raise Refused(403, f"You may not decide this request ({refusal}).")
        if any(d.reviewer == link.reviewer for d in record.decisions):
            raise Refused(409, "You already decided this request.")
        if not await self.links.burn(link, self.clock.now_ms(), decision):
            raise Refused(410, "This link was already used.")
        try:
            decided = await self.backend.decide(record.id, link.reviewer, decision, comment)
        except UnknownRequestError:
            raise Refused(404, "There is no such approval request.") from None
        except ReviewError as exc:  # not eligible, already decided, expired, altered, kept changing
            raise Refused(409, f"Nothing was recorded: {exc}. The link is used up; decide in the console.") from None
        return self._page(
            200,
            "Decision recorded",
            message=_outcome(decided, decision),
            kind="ok",
            view=RequestView(decided, self.clock.now_ms()),
            request_page=f"/console/requests/{quote(decided.id, safe='')}",
        )

    async def _check(self, request: Request, token: str, *, posting: bool) -> _Checked:
        link = await self.links.find(token)
        if link is None:
            raise Refused(404, "This link is not valid: it was mistyped, or a newer e-mail replaced it.")
        if link.used_at is not None:
            raise Refused(410, "This link was already used.")
        record = await self.backend.get_request(link.request_id)
        if record is None:
            raise Refused(404, "There is no such approval request.")
        if record.status.terminal:
            raise Refused(409, f"This request is already {record.status.value}; it takes no more decisions.")
        if self.clock.now_ms() >= link.expires_at:
            raise Refused(410, "This link has expired. Decide in the console, if the request still waits.")
        digest = await sealed_digest(self.backend, record)
        if digest is None or not hmac.compare_digest(digest, link.content_digest):
            raise Refused(
                409, "This request changed after the e-mail was sent, so its links no longer work. Nothing was decided."
            )
        signed_in = await self._signed_in(request)
        if signed_in is not None and signed_in != link.reviewer:
            raise Refused(
                403,
                f"This link was sent to another reviewer, and you are signed in as {signed_in}: "
                "a link decides only for the reviewer it was sent to.",
            )
        template = self.templates.get(record.template or "")
        needs = template.links_need_sign_in if template is not None else False
        if posting and needs and signed_in is None:
            raise Refused(
                401,
                f"This kind of request needs you signed in to the console as {link.reviewer} as well: "
                "sign in, then open the link from the e-mail again.",
            )
        return _Checked(link, record, signed_in, needs)

    async def _signed_in(self, request: Request) -> str | None:
        """Who the browser is signed in to the console as (its session's token still accepted), or ``None``."""
        cookie = request.cookies.get(COOKIE)
        session = await self.sessions.get(cookie)
        if session is None or await self.authenticate(session.token) != session.principal:
            return None
        return session.principal

    def _page(self, status: int, heading: str, **context: Any) -> Response:
        context.setdefault("max_comment", MAX_COMMENT_CHARS)
        html = self.env.get_template("email_link.html").render(
            base="/console", viewer=None, csrf=None, flashes=[], heading=heading, status=status, **context
        )
        return HTMLResponse(html, status, _HEADERS)


def _outcome(record: ApprovalRecord, decision: str) -> str:
    if record.status.value == "approved":
        return "Recorded: approved. The call is checked against policy once more and then runs."
    if record.status.value == "denied":
        return "Recorded: denied. The call will not run."
    progress = RequestView(record, 0).progress
    return f"Recorded: your {'approval' if decision == 'approve' else 'denial'} ({progress}); waiting for others."


def _token(request: Request) -> str:
    token: str = request.path_params["token"]
    if not (16 <= len(token) <= 100 and token.isascii() and all(ch.isalnum() or ch in "-_" for ch in token)):
        raise Refused(404, "This link is not valid: it was mistyped, or a newer e-mail replaced it.")
    return token


def _decision(request: Request) -> Literal["approve", "deny"]:
    decision = request.path_params["decision"]
    if decision == "approve":
        return "approve"
    if decision == "deny":
        return "deny"
    raise Refused(404, "This link is not valid: it was mistyped.")
