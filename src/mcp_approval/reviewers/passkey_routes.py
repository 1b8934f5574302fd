"""The passkey routes: registering passkeys in the console, and deciding step-up requests with one.

Console (signed in with the console's session cookie; JSON posts carry the session's CSRF token
in ``X-CSRF-Token`` and are refused when the browser says they came from another site):

- ``GET /console/passkeys``: the reviewer's passkeys and a button that registers one;
  ``POST /console/passkeys/options`` and ``POST /console/passkeys`` (``{"credential": ...}``):
  the registration ceremony.
- ``GET /console/requests/{id}/passkey``: the request and Approve / Deny buttons that ask the
  reviewer's authenticator for an assertion; ``POST .../passkey/options`` (``{"decision"}``) issues
  the challenge, ``POST .../passkey/decide`` (``{"decision", "comment", "credential"}``) verifies
  it and decides, answering ``{"status", "location"}``.

Reviewer API (bearer token): ``POST /approvals/{id}/passkey/options`` and
``POST /approvals/{id}/passkey/decide``, the same bodies, answering the options and the request's
record. Errors are ``application/problem+json`` everywhere. The pages load one script,
``/console/static/passkey.js``, which their Content-Security-Policy allows (``script-src 'self'``);
the rest of the console keeps its policy that allows no script at all.
"""

from __future__ import annotations

import hmac
from importlib import resources
from typing import Any, Literal
from urllib.parse import quote, urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mcp_approval.backends import ApprovalRecord, NotEligibleError, ReviewError, SupportsReview
from mcp_approval.backends.contract import UnknownRequestError
from mcp_approval.clock import Clock
from mcp_approval.reviewers.api import Authenticator
from mcp_approval.reviewers.console import COOKIE
from mcp_approval.reviewers.limits import MAX_COMMENT_CHARS, STORE_RETRY_AFTER_S
from mcp_approval.reviewers.passkeys import PasskeyRefusedError, PasskeyStepUp
from mcp_approval.reviewers.sessions import Session, SessionStore
from mcp_approval.reviewers.views import RequestView, environment
from mcp_approval.web.problems import Endpoint, answering_problems, json_object_body
from mcp_approval.web.problems import Problem as _Problem
from mcp_approval.web.throttle import FailedLoginThrottle, TooManyFailuresError, bearer_caller

__all__ = ["MAX_CEREMONY_BYTES", "passkey_routes"]

#: The largest ceremony body accepted (an attestation with its certificates stays far below).
MAX_CEREMONY_BYTES = 64 * 1024
#: The console's policy, plus this origin's scripts and fetches.
_CSP = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = {
    "Content-Security-Policy": _CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def passkey_routes(
    backend: SupportsReview,
    authenticate: Authenticator,
    passkeys: PasskeyStepUp,
    *,
    sessions: SessionStore,
    throttle: FailedLoginThrottle,
    clock: Clock,
    prefix: str = "/console",
) -> list[BaseRoute]:
    """The passkey routes of the console under ``prefix`` and of the reviewer API under ``/approvals``.

    Args:
        backend: decides, with the verified step-up.
        authenticate: bearer token → reviewer (the console's sessions are checked with it too).
        passkeys: registers passkeys and verifies assertions.
        sessions: the console's sessions (the same store as the console's, so one sign-in serves both).
        throttle: the limit on failed sign-ins the reviewer API counts against.
        clock: the source of time.
        prefix: the console's path.
    """
    return _PasskeyRoutes(backend, authenticate, passkeys, sessions, throttle, clock, prefix).routes()


class _PasskeyRoutes:
    def __init__(
        self,
        backend: SupportsReview,
        authenticate: Authenticator,
        passkeys: PasskeyStepUp,
        sessions: SessionStore,
        throttle: FailedLoginThrottle,
        clock: Clock,
        prefix: str,
    ) -> None:
        self.backend = backend
        self.authenticate = authenticate
        self.passkeys = passkeys
        self.sessions = sessions
        self.throttle = throttle
        self.clock = clock
        self.prefix = prefix
        self.env = environment()
        self.script = resources.files("mcp_approval.reviewers").joinpath("static/passkey.js").read_bytes()

    def routes(self) -> list[BaseRoute]:
        p, g = self.prefix, _guard
        request = f"{p}/requests/{{request_id}}/passkey"
        return [
            Route(f"{p}/passkeys", g(self.passkeys_page), methods=["GET"]),
            Route(f"{p}/passkeys/options", g(self.registration_options), methods=["POST"]),
            Route(f"{p}/passkeys", g(self.register), methods=["POST"]),
            Route(request, g(self.decide_page), methods=["GET"]),
            Route(f"{request}/options", g(self.console_options), methods=["POST"]),
            Route(f"{request}/decide", g(self.console_decide), methods=["POST"]),
            Route(f"{p}/static/passkey.js", self.static_script, methods=["GET"]),
            Route("/approvals/{request_id}/passkey/options", g(self.api_options), methods=["POST"]),
            Route("/approvals/{request_id}/passkey/decide", g(self.api_decide), methods=["POST"]),
        ]

    # -- console pages -----------------------------------------------------------------------------

    async def passkeys_page(self, request: Request) -> Response:
        session = await self._session(request)
        if session is None:
            return RedirectResponse(f"{self.prefix}/login", 303, _HEADERS)
        passkeys = await self.passkeys.passkeys(session.principal)
        return self._render("passkeys.html", session, passkeys=passkeys)

    async def decide_page(self, request: Request) -> Response:
        session = await self._session(request)
        if session is None:
            return RedirectResponse(f"{self.prefix}/login", 303, _HEADERS)
        record = await self._record(request, session.principal)
        view = RequestView(record, self.clock.now_ms())
        passkeys = await self.passkeys.passkeys(session.principal)
        refusal = self._refusal(session.principal, record)
        return self._render(
            "passkey_decide.html", session, view=view, passkeys=passkeys, refusal=refusal, max_comment=MAX_COMMENT_CHARS
        )

    async def static_script(self, _request: Request) -> Response:
        headers = {"Cache-Control": "max-age=3600", "X-Content-Type-Options": "nosniff"}
        return Response(self.script, media_type="text/javascript", headers=headers)

    # -- console ceremonies ------------------------------------------------------------------------

    async def registration_options(self, request: Request) -> Response:
        session = await self._posted_session(request)
        await _body(request)
        return JSONResponse(await self.passkeys.registration_options(session.principal), headers=_HEADERS)

    async def register(self, request: Request) -> Response:
        session = await self._posted_session(request)
        body = await _body(request)
        try:
            row = await self.passkeys.register(session.principal, body.get("credential"))
        except PasskeyRefusedError as exc:
            raise _Problem(400, str(exc)) from None
        await self.sessions.flash(session, "ok", "Your passkey is registered.")
        return JSONResponse({"credential_id": row.credential_id}, 201, headers=_HEADERS)

    async def console_options(self, request: Request) -> Response:
        session = await self._posted_session(request)
        return await self._options(request, session.principal)

    async def console_decide(self, request: Request) -> Response:
        session = await self._posted_session(request)
        record = await self._decide(request, session.principal)
        await self.sessions.flash(session, "ok", _outcome(record))
        location = f"{self.prefix}/requests/{quote(record.id, safe='')}"
        return JSONResponse({"status": record.status.value, "location": location}, headers=_HEADERS)

    # -- reviewer API ------------------------------------------------------------------------------

    async def api_options(self, request: Request) -> Response:
        return await self._options(request, await self._bearer(request))

    async def api_decide(self, request: Request) -> Response:
        record = await self._decide(request, await self._bearer(request))
        return JSONResponse(record.to_json())

    # -- shared steps ------------------------------------------------------------------------------

    async def _options(self, request: Request, reviewer: str) -> Response:
        verdict = _verdict(await _body(request))
        record = await self._record(request, reviewer)
        refusal = self._refusal(reviewer, record)
        if refusal is not None:
            raise _Problem(403 if "may not" in refusal else 409, refusal)
        try:
            options = await self.passkeys.decision_options(reviewer, record, verdict)
        except PasskeyRefusedError as exc:
            raise _Problem(403, str(exc)) from None
        return JSONResponse(options, headers=_HEADERS)

    async def _decide(self, request: Request, reviewer: str) -> ApprovalRecord:
        body = await _body(request)
        verdict = _verdict(body)
        comment = body.get("comment") or None
        if comment is not None and (
            not isinstance(comment, str) or len(comment) > MAX_COMMENT_CHARS or "\x00" in comment
        ):
            raise _Problem(
                400, f"field 'comment' must be a string of at most {MAX_COMMENT_CHARS} characters, without NUL"
            )
        record = await self._record(request, reviewer)
        try:
            step_up = await self.passkeys.verify_decision(reviewer, record, verdict, body.get("credential"))
            decided = await self.backend.decide(record.id, reviewer, verdict, comment, step_up=step_up)
        except PasskeyRefusedError as exc:
            raise _Problem(403, str(exc)) from None
        except UnknownRequestError:
            raise _Problem(404, "no such approval request") from None
        except NotEligibleError as exc:
            raise _Problem(403, str(exc)) from None
        except ReviewError as exc:  # already decided, expired, kept changing, altered
            raise _Problem(409, str(exc)) from None
        return decided

    async def _record(self, request: Request, reviewer: str) -> ApprovalRecord:
        request_id: str = request.path_params["request_id"]
        record = None if "\x00" in request_id else await self.backend.get_request(request_id, viewer=reviewer)
        if record is None:
            raise _Problem(404, "no such approval request")
        return record

    def _refusal(self, reviewer: str, record: ApprovalRecord) -> str | None:
        """Why ``reviewer`` cannot decide ``record`` with a passkey here, or ``None``."""
        if record.status.terminal:
            return f"This request is {record.status.value}; it takes no more decisions."
        if record.rules is None or record.rules.step_up != "passkey":
            return "This request needs no passkey: decide it on its page."
        if any(decision.reviewer == reviewer for decision in record.decisions):
            return "You already decided this request; it waits for other reviewers."
        why = self.backend.why_ineligible(reviewer, record)
        return None if why is None else f"You may not decide this request: {why}."

    async def _session(self, request: Request) -> Session | None:
        """The console session the request carries, if its token is still accepted for its principal."""
        cookie = request.cookies.get(COOKIE)
        session = await self.sessions.get(cookie)
        if session is not None and await self.authenticate(session.token) != session.principal:
            await self.sessions.drop(cookie)
            return None
        return session

    async def _posted_session(self, request: Request) -> Session:
        """The session of a same-site JSON post carrying its CSRF token."""
        if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            raise _Problem(403, "cross-site requests are refused")
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
            raise _Problem(403, "cross-site requests are refused")
        session = await self._session(request)
        if session is None:
            raise _Problem(401, "your console session has ended: sign in again")
        token = request.headers.get("x-csrf-token", "")
        if not hmac.compare_digest(token.encode(), session.csrf.encode()):
            raise _Problem(403, "the request's security token is missing or wrong: reload the page")
        return session

    async def _bearer(self, request: Request) -> str:
        try:
            reviewer = await bearer_caller(request, self.throttle, self.authenticate)
        except TooManyFailuresError as exc:
            detail = "too many failed authentications from this address"
            raise _Problem(429, detail, {"Retry-After": str(exc.retry_after_s)}) from None
        if reviewer is None:
            raise _Problem(401, "a valid bearer token is required", {"WWW-Authenticate": "Bearer"})
        return reviewer

    def _render(self, name: str, session: Session, **context: Any) -> Response:
        html = self.env.get_template(name).render(
            base=self.prefix,
            viewer=session.principal,
            csrf=session.csrf,
            flashes=session.take_flashes(),
            **context,
        )
        return HTMLResponse(html, 200, _HEADERS)


def _guard(endpoint: Endpoint) -> Endpoint:
    """``endpoint`` answering its refusals as problem details (see :func:`answering_problems`)."""
    return answering_problems(endpoint, store_retry_after_s=STORE_RETRY_AFTER_S)


async def _body(request: Request) -> dict[str, Any]:
    """The request's JSON object body (a ceremony's, at most :data:`MAX_CEREMONY_BYTES`)."""
    return await json_object_body(request, MAX_CEREMONY_BYTES)


def _verdict(body: dict[str, Any]) -> Literal["approve", "deny"]:
    decision = body.get("decision")
    if decision not in ("approve", "deny"):
        raise _Problem(400, "field 'decision' must be 'approve' or 'deny'")
    return "approve" if decision == "approve" else "deny"


def _outcome(record: ApprovalRecord) -> str:
    """What a decision confirmed with a passkey did, for the flash message."""
    if record.status.value == "approved":
        return "Approved with your passkey. The call is checked against policy once more and then runs."
    if record.status.value == "denied":
        return "Denied with your passkey. The call will not run."
    return f"Your approval is recorded with your passkey ({RequestView(record, 0).progress}); waiting for others."
