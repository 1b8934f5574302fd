"""The console's OpenID Connect routes: ``{prefix}/oidc/start`` and ``{prefix}/oidc/callback``.

``start`` sends the reviewer to the provider, keeping the sign-in's ``state``, ``nonce`` and PKCE
verifier in an HttpOnly cookie scoped to ``{prefix}/oidc`` (SameSite=Lax: the provider's redirect
back is a cross-site navigation, which a Strict cookie would not join). ``callback`` accepts
only the state that cookie holds, redeems the code with its verifier (so a stolen code is useless
to anyone else, and a code is redeemed once: the cookie is dropped whatever happens), checks the
ID token (:class:`~mcp_approval.reviewers.oidc.OidcClient`) and opens a console session like the
token form's. The session's SameSite=Strict cookie is not sent on the rest of a redirect chain
that began at another site, so the callback answers with a page that moves on to the console
itself (a meta refresh and a link; the console's pages run no script).

An OIDC session carries the roles its ID token granted, not a bearer token: the console does not
re-check it with the provider on every request (the provider has no such check), so it lasts the
session's idle and maximum ages, and signing out ends it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mcp_approval.reviewers.oidc import ClaimedRoles, OidcClient, OidcError, PendingSignIn
from mcp_approval.reviewers.sessions import Session, SessionStore

__all__ = ["PENDING_COOKIE", "OidcSignIn", "oidc_routes", "session_roles"]

#: The cookie holding a sign-in under way.
PENDING_COOKIE = "mcp_approval_oidc"
# What an OIDC session keeps where a token-form session keeps its bearer token. No bearer token
# starts with a NUL character, so the two never mix.
_SESSION_MARK = "\x00oidc\x00"

Render = Callable[..., Response]


@dataclass
class OidcSignIn:
    """OpenID Connect sign-in for one console: the provider's client and the roles its reviewers hold."""

    client: OidcClient
    claimed: ClaimedRoles = field(default_factory=ClaimedRoles)


def session_token(roles: frozenset[str]) -> str:
    """What an OIDC session stores in place of a bearer token: the roles its ID token granted."""
    return _SESSION_MARK + json.dumps(sorted(roles))


def session_roles(session: Session) -> frozenset[str] | None:
    """The roles of an OIDC session, or ``None`` for a session opened with a bearer token."""
    if not session.token.startswith(_SESSION_MARK):
        return None
    try:
        roles: Any = json.loads(session.token[len(_SESSION_MARK) :])
    except ValueError:
        return frozenset()
    return frozenset(role for role in roles if isinstance(role, str)) if isinstance(roles, list) else frozenset()


def oidc_routes(
    sign_in: OidcSignIn, sessions: SessionStore, prefix: str, cookie_name: str, render: Render
) -> list[BaseRoute]:
    """The two routes; ``render(template, status=..., **context)`` draws a page without a session."""
    timeout_s = int(sign_in.client.options.login_timeout_s)

    def refused(status: int, message: str) -> Response:
        response = render("error.html", status=status, message=message)
        response.delete_cookie(PENDING_COOKIE, path=f"{prefix}/oidc", httponly=True, samesite="lax")
        return response

    async def start(request: Request) -> Response:
        wanted = request.query_params.get("next", prefix)
        next_path = wanted if _own_page(wanted, prefix) else prefix
        try:
            url, pending = await sign_in.client.start(next_path)
        except OidcError as exc:
            return refused(502, f"Sign-in is not available: {exc}.")
        response = RedirectResponse(url, 303, {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"})
        response.set_cookie(
            PENDING_COOKIE,
            pending.to_cookie(),
            max_age=timeout_s,
            path=f"{prefix}/oidc",
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="lax",
        )
        return response

    async def callback(request: Request) -> Response:
        pending = PendingSignIn.from_cookie(request.cookies.get(PENDING_COOKIE))
        query = request.query_params
        if pending is None:
            return refused(400, "This sign-in was not started in this browser, or it has already been used.")
        if not pending.state_matches(query.get("state")):
            return refused(400, "The sign-in's state does not match; nothing was signed in. Start again.")
        if "error" in query:
            return refused(401, f"The identity provider refused the sign-in ({query['error'][:80]}).")
        code = query.get("code")
        if not code:
            return refused(400, "The identity provider sent no authorization code.")
        try:
            reviewer = await sign_in.client.finish(pending, code)
        except OidcError as exc:
            return refused(401, f"Sign-in failed: {exc}.")
        sign_in.claimed.remember(reviewer.reviewer, reviewer.roles)
        await sessions.drop(request.cookies.get(cookie_name))
        cookie, _session = await sessions.create(reviewer.reviewer, session_token(reviewer.roles))
        response = render("signed_in.html", status=200, next_path=pending.next_path, reviewer=reviewer.reviewer)
        response.set_cookie(
            cookie_name,
            cookie,
            max_age=sessions.max_age_s,
            path=prefix,
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )
        response.delete_cookie(PENDING_COOKIE, path=f"{prefix}/oidc", httponly=True, samesite="lax")
        return response

    return [
        Route(f"{prefix}/oidc/start", start, methods=["GET"]),
        Route(f"{prefix}/oidc/callback", callback, methods=["GET"]),
    ]


def _own_page(path: str, prefix: str) -> bool:
    """Whether ``path`` is one of the console's own pages (never another site: no open redirect)."""
    return (
        (path == prefix or path.startswith(prefix + "/"))
        and "//" not in path
        and "\\" not in path
        and all(0x20 < ord(ch) < 0x7F for ch in path)
    )
