"""The reviewer console: web pages over the local approval backend.

Reviewers sign in with their bearer token, see pending approval requests (tool, redacted
arguments, requester, template, age, deadline, progress of N-of-M), approve or deny with a
comment, and read the decided history and each request's audit trail. ``/console/find?q=`` (the
search box) and ``/console/requests/{id}`` take a request's id or the reference its requester was
given (:mod:`mcp_approval.reviewers.lookup`). Decisions go through
:meth:`LocalApprovalBackend.decide`, so the console has the reviewer API's eligibility rules
(the template's role, no self-approval, N distinct approvers, one decision per reviewer).

Mount it in any Starlette app whose requests a :class:`LocalApprovalBackend` holds::

    from mcp_approval.reviewers.console import console_routes

    app.router.routes[0:0] = console_routes(backend, authenticate, audit_log)  # pages under /console

``authenticate`` maps a bearer token to a principal (or ``None``), as for
:func:`~mcp_approval.reviewers.api.reviewer_routes`; ``audit_log`` is anything with
``await events(subject=..., limit=...)`` (an :class:`~mcp_approval.storage.audit.AuditLog`).

Security: sessions are server-side (:mod:`mcp_approval.reviewers.sessions`); the
cookie is HttpOnly, SameSite=Strict, scoped to the console's path and Secure over https. Every
form carries the session's CSRF token, checked in constant time, and a POST whose ``Origin``
or ``Sec-Fetch-Site`` names another site is refused before anything is read. Pages are
autoescaped and served with a Content-Security-Policy that allows no script at all. Failed
sign-ins are limited per client address (:mod:`mcp_approval.web.throttle`): over the
limit, ``POST /login`` answers 429 with ``Retry-After`` and does not look at the token. While the
store cannot be reached, a page that needs it is a 503 page with ``Retry-After``, never a 500.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from importlib import resources
from typing import Any, Literal, Protocol
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mcp_approval.backends import (
    AlreadyDecidedError,
    ApprovalRecord,
    NotEligibleError,
    RequestPage,
    ReviewError,
    SupportsReview,
)
from mcp_approval.backends.contract import UnknownRequestError
from mcp_approval.backends.outcomes import OutcomeReader
from mcp_approval.clock import Clock, SystemClock
from mcp_approval.reviewers._console_delegations import DelegationPages
from mcp_approval.reviewers._console_rules import RulePages, similar_context
from mcp_approval.reviewers._console_texts import OUTCOME_BADGES as _OUTCOME_BADGES
from mcp_approval.reviewers._console_texts import decided_text as _outcome
from mcp_approval.reviewers._console_texts import why_no_buttons as _why_not
from mcp_approval.reviewers.api import Authenticator
from mcp_approval.reviewers.limits import MAX_COMMENT_CHARS, STORE_RETRY_AFTER_S
from mcp_approval.reviewers.lookup import find_request
from mcp_approval.reviewers.oidc_routes import OidcSignIn, oidc_routes, session_roles
from mcp_approval.reviewers.sessions import Session, SessionStore
from mcp_approval.reviewers.views import EventView, RequestView, environment
from mcp_approval.storage.audit import AuditEvent
from mcp_approval.storage.database import StoreUnavailableError
from mcp_approval.web.forms import MAX_FORM_BYTES as MAX_FORM_BYTES
from mcp_approval.web.forms import Refused as _Refused
from mcp_approval.web.forms import check_origin as _check_origin
from mcp_approval.web.forms import path_request_id as _request_id
from mcp_approval.web.forms import read_form as _form
from mcp_approval.web.throttle import FailedLoginThrottle, client_key

__all__ = ["COOKIE", "PAGE_SIZE", "AuditReader", "console_routes"]

#: How many requests one console page lists.
PAGE_SIZE = 100

#: The session cookie's name.
COOKIE = "mcp_approval_console"
#: No script, no frames, forms and styles from this origin only.
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # "same-origin", not "no-referrer": with no-referrer Chromium sends "Origin: null" on the console's own POSTs.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_AUDIT_EVENTS = 200
Endpoint = Callable[[Request], Awaitable[Response]]


class AuditReader(Protocol):
    """Where the console reads a request's audit trail (an :class:`~mcp_approval.storage.audit.AuditLog`)."""

    async def events(self, subject: str | None = None, limit: int = 100) -> list[AuditEvent]:
        """The latest ``limit`` events about ``subject``, oldest first."""
        ...


def console_routes(
    backend: SupportsReview,
    authenticate: Authenticator,
    audit: AuditReader,
    *,
    clock: Clock | None = None,
    prefix: str = "/console",
    sessions: SessionStore | None = None,
    throttle: FailedLoginThrottle | None = None,
    outcomes: OutcomeReader | None = None,
    oidc: OidcSignIn | None = None,
    token_sign_in: bool = True,
) -> list[BaseRoute]:
    """The console's routes, all under ``prefix``.

    Args:
        backend: the backend holding the requests; decisions go through its ``decide``.
        authenticate: bearer token → principal, or ``None`` for an unknown token.
        audit: the audit log the request pages show.
        clock: the source of time (ages, deadlines, session expiry).
        prefix: the path the pages live under (no trailing slash).
        sessions: the session table (by default a new in-memory one).
        throttle: the limit on failed sign-ins (by default a new one on ``clock``); pass the
            reviewer API's so that failures on either count against both.
        outcomes: what happened to each request's call (a request page then shows whether it
            ran, and the task's audit events beside the request's).
        oidc: sign-in with an OpenID Connect provider (:mod:`mcp_approval.reviewers.oidc_routes`).
        token_sign_in: whether the bearer-token form is offered (a deployment keeps it for dev mode).
    """
    if not prefix.startswith("/") or prefix.endswith("/"):
        raise ValueError(f"console prefix must start with '/' and not end with it, not {prefix!r}")
    clock = clock or SystemClock()
    sessions = sessions or SessionStore(clock)
    throttle = throttle or FailedLoginThrottle(clock)
    console = _Console(backend, authenticate, audit, clock, prefix, sessions, throttle, outcomes)
    console.oidc, console.token_sign_in = oidc, token_sign_in or oidc is None
    return console.routes()


class _Console:
    def __init__(
        self,
        backend: SupportsReview,
        authenticate: Authenticator,
        audit: AuditReader,
        clock: Clock,
        prefix: str,
        sessions: SessionStore,
        throttle: FailedLoginThrottle,
        outcomes: OutcomeReader | None = None,
    ) -> None:
        self.backend = backend
        self.authenticate = authenticate
        self.audit = audit
        self.clock = clock
        self.prefix = prefix
        self.sessions = sessions
        self.throttle = throttle
        self.outcomes = outcomes
        self.env = environment()
        self.css = resources.files("mcp_approval.reviewers").joinpath("static/console.css").read_bytes()
        self.oidc: OidcSignIn | None = None
        self.token_sign_in = True

    def routes(self) -> list[BaseRoute]:
        p, guard = self.prefix, self._guard
        return [
            Route(p, guard(self.pending), methods=["GET"]),
            Route(f"{p}/decided", guard(self.decided), methods=["GET"]),
            Route(f"{p}/find", guard(self.find), methods=["GET"]),
            Route(f"{p}/requests/{{request_id}}", guard(self.detail), methods=["GET"]),
            Route(f"{p}/requests/{{request_id}}/decide", guard(self.decide), methods=["POST"]),
            Route(f"{p}/login", guard(self.login_page), methods=["GET"]),
            Route(f"{p}/login", guard(self.login), methods=["POST"]),
            Route(f"{p}/logout", guard(self.logout), methods=["POST"]),
            Route(f"{p}/static/console.css", self.stylesheet, methods=["GET"]),
            *DelegationPages(
                self.backend, self.sessions, p, self._signed_in, self._posted_form_session, self._render, self._to_login
            ).routes(guard),
            *RulePages(self).routes(guard),
            *(oidc_routes(self.oidc, self.sessions, p, COOKIE, self._page_without_session) if self.oidc else []),
        ]

    # -- pages ----------------------------------------------------------------------------------

    async def pending(self, request: Request) -> Response:
        session = await self._signed_in(request)
        if session is None:
            return self._to_login(request)
        return await self.pending_page(request, session)

    async def pending_page(
        self, request: Request, session: Session, status: int = 200, error: str | None = None
    ) -> Response:
        """The pending list (with ``error`` shown on it), each request the reviewer may decide selectable."""
        page = await self._page(request, session, "pending")
        views = self._views(page.records)
        selectable = {  # a request that needs a passkey for each decision is decided on its own page
            view.record.id
            for view in views
            if _why_not(view, session.principal, self.backend) is None
            and not (view.record.rules is not None and view.record.rules.step_up)
        }
        return self._render(
            "pending.html",
            session,
            status=status,
            error=error,
            tab="pending",
            views=views,
            page=page,
            selectable=selectable,
            max_comment=MAX_COMMENT_CHARS,
        )

    async def decided(self, request: Request) -> Response:
        session = await self._signed_in(request)
        if session is None:
            return self._to_login(request)
        page = await self._page(request, session, "decided")
        return self._render("decided.html", session, tab="decided", views=self._views(page.records), page=page)

    async def detail(self, request: Request) -> Response:
        session = await self._signed_in(request)
        if session is None:
            return self._to_login(request)
        wanted = _request_id(request)
        record = await find_request(self.backend, wanted, session.principal, self.outcomes)
        if record is not None and record.id != wanted:  # a requester's reference: the request's own page
            return self._to_request(record.id)
        return await self._detail(session, wanted)

    async def find(self, request: Request) -> Response:
        session = await self._signed_in(request)
        if session is None:
            return self._to_login(request)
        record = await find_request(self.backend, request.query_params.get("q", ""), session.principal, self.outcomes)
        if record is None:  # the same answer for a request this reviewer may not see
            raise _Refused(404, "No approval request you may see has that id or reference.")
        return self._to_request(record.id)

    async def decide(self, request: Request) -> Response:
        session = await self._posted_form_session(request)
        form = await _form(request)
        if not session.csrf_matches(form.get("csrf")):
            raise _Refused(403, "The form's security token is missing or wrong; nothing was decided. Reload the page.")
        request_id = _request_id(request)
        decision = form.get("decision")
        if decision not in ("approve", "deny"):
            raise _Refused(400, "The decision must be approve or deny.")
        comment = (form.get("comment") or "").strip() or None
        if comment is not None and len(comment) > MAX_COMMENT_CHARS:
            return await self._detail(session, request_id, 400, f"A comment is at most {MAX_COMMENT_CHARS} characters.")
        if comment is not None and "\x00" in comment:
            return await self._detail(session, request_id, 400, "A comment cannot contain NUL characters.")
        verdict: Literal["approve", "deny"] = "approve" if decision == "approve" else "deny"
        try:
            record = await self.backend.decide(request_id, session.principal, verdict, comment)
        except UnknownRequestError:
            raise _Refused(404, "There is no such approval request.") from None
        except NotEligibleError as exc:
            if await self.backend.get_request(request_id, viewer=session.principal) is None:
                raise _Refused(403, f"You may not decide this request: {exc}.") from None  # nor see it
            return await self._detail(session, request_id, 403, f"You may not decide this request: {exc}.")
        except AlreadyDecidedError as exc:
            return await self._detail(session, request_id, 409, f"Nothing was recorded: {exc}.")
        except ReviewError as exc:
            return await self._detail(session, request_id, 409, f"Nothing was recorded: {exc}.")
        await self.sessions.flash(session, "ok", _outcome(record, verdict))
        return self._to_request(request_id)

    async def login_page(self, request: Request) -> Response:
        if await self._signed_in(request) is not None:
            return RedirectResponse(self.prefix, 303, _PAGE_HEADERS)
        notice = "You are signed out." if "signed_out" in request.query_params else None
        return self._login_page(request, notice=notice)

    async def login(self, request: Request) -> Response:
        _check_origin(request)
        if not self.token_sign_in:
            raise _Refused(403, "Sign in with the identity provider; this console takes no bearer tokens.")
        client = client_key(request)
        # Checked before the form is read, so a throttled client learns nothing about the token it sends.
        wait_s = await self.throttle.retry_after_s(client)
        if wait_s is not None:
            return self._too_many_sign_ins(wait_s)
        token = (await _form(request)).get("token", "").strip()
        principal = await self.authenticate(token) if token else None
        if principal is None:
            await self.throttle.record_failure(client)
            return self._login_page(request, status=401, error="That token was not accepted.")
        await self.sessions.drop(request.cookies.get(COOKIE))
        cookie, _session = await self.sessions.create(principal, token)
        response = RedirectResponse(self.prefix, 303, _PAGE_HEADERS)
        response.set_cookie(
            COOKIE,
            cookie,
            max_age=self.sessions.max_age_s,
            path=self.prefix,
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )
        return response

    async def logout(self, request: Request) -> Response:
        session = await self._posted_form_session(request)
        if not session.csrf_matches((await _form(request)).get("csrf")):
            raise _Refused(403, "The form's security token is missing or wrong. Reload the page.")
        await self.sessions.drop(request.cookies.get(COOKIE))
        response = RedirectResponse(f"{self.prefix}/login?signed_out", 303, _PAGE_HEADERS)
        response.delete_cookie(COOKIE, path=self.prefix, httponly=True, samesite="strict")
        return response

    async def stylesheet(self, _request: Request) -> Response:
        headers = {"Cache-Control": "max-age=3600", "X-Content-Type-Options": "nosniff"}
        return Response(self.css, media_type="text/css", headers=headers)

    # -- helpers --------------------------------------------------------------------------------

    def _guard(self, endpoint: Endpoint) -> Endpoint:
        """``endpoint`` with :class:`_Refused` turned into an error page, and an unreachable store
        into a 503 page that asks the reviewer to try again (as the reviewer API does)."""

        async def handle(request: Request) -> Response:
            try:
                return await endpoint(request)
            except _Refused as refused:
                return self._render("error.html", None, status=refused.status, message=refused.message)
            except StoreUnavailableError:
                message = "The approval store cannot be reached, so nothing was read or changed. Try again shortly."
                response = self._render("error.html", None, status=503, message=message)
                response.headers["Retry-After"] = str(STORE_RETRY_AFTER_S)
                return response

        return handle

    async def _signed_in(self, request: Request) -> Session | None:
        """The request's session, if it has one whose token is still accepted for the same principal."""
        cookie = request.cookies.get(COOKIE)
        session = await self.sessions.get(cookie)
        if session is None:
            return None
        roles = session_roles(session) if self.oidc is not None else None
        if roles is not None and self.oidc is not None:  # signed in with the provider: its roles, for this request
            self.oidc.claimed.remember(session.principal, roles)
            return session
        if await self.authenticate(session.token) != session.principal:
            await self.sessions.drop(cookie)
            return None
        return session

    async def _posted_form_session(self, request: Request) -> Session:
        _check_origin(request)
        session = await self._signed_in(request)
        if session is None:
            raise _Refused(403, "Your session has ended, so nothing was done. Sign in again.")
        return session

    async def _detail(
        self,
        session: Session,
        request_id: str,
        status: int = 200,
        error: str | None = None,
        similar_fields: Mapping[str, str] | None = None,
    ) -> Response:
        record = await self.backend.get_request(request_id, viewer=session.principal)
        if record is None:
            raise _Refused(404, "There is no such approval request.")
        outcome = await self.outcomes.outcome(request_id) if self.outcomes is not None else None
        events: list[AuditEvent] = []  # the trail names reviewers: shown to those who may see them
        if self.backend.sees_reviewers(session.principal, record):
            events = await self.audit.events(subject=request_id, limit=_AUDIT_EVENTS)
            if outcome is not None:  # the call's own steps (claimed, finished, fenced) join the trail
                task_events = await self.audit.events(subject=outcome.task_id, limit=_AUDIT_EVENTS)
                events = sorted([*events, *task_events], key=lambda event: event.event_id)
        view = RequestView(record, self.clock.now_ms())
        refusal = _why_not(view, session.principal, self.backend)
        return self._render(
            "detail.html",
            session,
            status=status,
            error=error,
            view=view,
            events=[EventView(event) for event in events],
            refusal=refusal,
            similar=None if refusal is not None else similar_context(self.backend, record, similar_fields),
            outcome=outcome,
            outcome_badges=_OUTCOME_BADGES,
            max_comment=MAX_COMMENT_CHARS,
        )

    async def _page(self, request: Request, session: Session, status: Literal["pending", "decided"]) -> RequestPage:
        """The page of requests the ``offset`` query parameter names (a bad one is the first page)."""
        text = request.query_params.get("offset", "0")
        offset = int(text) if text.isascii() and text.isdigit() and len(text) < 10 else 0
        return await self.backend.page_requests(status, viewer=session.principal, offset=offset, limit=PAGE_SIZE)

    def _views(self, records: list[ApprovalRecord]) -> list[RequestView]:
        now = self.clock.now_ms()
        return [RequestView(record, now) for record in records]

    def _render(self, name: str, session: Session | None, *, status: int = 200, **context: Any) -> Response:
        flashes = session.take_flashes() if session is not None else []
        error = context.pop("error", None)
        if error:
            flashes.append(("error", error))
        html = self.env.get_template(name).render(
            base=self.prefix,
            viewer=session.principal if session else None,
            csrf=session.csrf if session else None,
            flashes=flashes,
            status=status,
            **context,
        )
        return HTMLResponse(html, status, _PAGE_HEADERS)

    def _too_many_sign_ins(self, wait_s: int) -> Response:
        minutes = -(-wait_s // 60)
        when = f"{minutes} minute{'s' if minutes != 1 else ''}"
        error = f"Too many failed sign-ins from your address. Try again in {when}; no token was checked."
        response = self._render("login.html", None, status=429, error=error, token_sign_in=True)
        response.headers["Retry-After"] = str(wait_s)
        return response

    def _to_request(self, request_id: str) -> Response:
        return RedirectResponse(f"{self.prefix}/requests/{quote(request_id, safe='')}", 303, _PAGE_HEADERS)

    def _to_login(self, request: Request) -> Response:
        """To the sign-in page; with the provider's sign-in, one that comes back to this page."""
        if self.oidc is None:
            return RedirectResponse(f"{self.prefix}/login", 303, _PAGE_HEADERS)
        wanted = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"{self.prefix}/login?next={quote(wanted, safe='/')}", 303, _PAGE_HEADERS)

    def _login_page(self, request: Request, *, status: int = 200, **context: Any) -> Response:
        wanted = request.query_params.get("next", self.prefix)
        return self._render(
            "login.html",
            None,
            status=status,
            oidc_label=self.oidc.client.options.label if self.oidc is not None else None,
            token_sign_in=self.token_sign_in,
            next_path=wanted if wanted.startswith(self.prefix) else self.prefix,
            **context,
        )

    # What the pages of _console_rules use (ConsoleHost).
    signed_in = _signed_in
    posted_form_session = _posted_form_session
    to_login = _to_login
    render = _render
    detail_page = _detail

    def redirect(self, path: str) -> Response:
        """A 303 to ``path`` under the console's prefix."""
        return RedirectResponse(self.prefix + path, 303, _PAGE_HEADERS)

    def _page_without_session(self, name: str, *, status: int = 200, **context: Any) -> Response:
        return self._render(name, None, status=status, **context)
