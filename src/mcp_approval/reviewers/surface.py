"""The whole reviewer surface of one server: the reviewer API and the console, mounted together."""

from __future__ import annotations

from starlette.routing import BaseRoute

from mcp_approval.backends import SupportsReview
from mcp_approval.backends.outcomes import OutcomeReader
from mcp_approval.clock import Clock
from mcp_approval.reviewers.api import Authenticator, reviewer_routes
from mcp_approval.reviewers.console import AuditReader, console_routes
from mcp_approval.reviewers.oidc_routes import OidcSignIn
from mcp_approval.reviewers.passkey_routes import passkey_routes
from mcp_approval.reviewers.passkeys import PasskeyStepUp
from mcp_approval.reviewers.session_table import SqlSessionTable
from mcp_approval.reviewers.sessions import SessionStore
from mcp_approval.storage.database import Database
from mcp_approval.web.throttle import FailedLoginThrottle

__all__ = ["reviewer_surface"]


def reviewer_surface(
    backend: SupportsReview,
    authenticate: Authenticator,
    audit: AuditReader,
    *,
    database: Database,
    clock: Clock,
    throttle: FailedLoginThrottle,
    outcomes: OutcomeReader | None = None,
    oidc: OidcSignIn | None = None,
    token_sign_in: bool = True,
    passkeys: PasskeyStepUp | None = None,
) -> list[BaseRoute]:
    """The reviewer API at ``/approvals`` and the console at ``/console``, for every worker alike.

    Args:
        backend: the backend holding the requests.
        authenticate: bearer token → reviewer, or ``None`` for an unknown token.
        audit: the audit log the console's request pages show.
        database: where console sessions live, so a sign-in holds on every worker.
        clock: the source of time.
        throttle: the one limit on failed sign-ins both count against (pass the same one to
            anything else that checks tokens, such as ``/mcp``, to share it).
        outcomes: what happened to each request's call, when the server knows it.
        oidc: the console's sign-in with an OpenID Connect provider, if any.
        token_sign_in: whether the console offers the bearer-token form beside OIDC.
        passkeys: reviewers' passkeys, for templates with ``step_up = "passkey"``: adds the
            passkey pages to the console and the passkey decision to the API
            (:mod:`~mcp_approval.reviewers.passkey_routes`).
    """
    sessions = SessionStore(clock, table=SqlSessionTable(database))
    extra: list[BaseRoute] = []
    if passkeys is not None:
        extra = passkey_routes(backend, authenticate, passkeys, sessions=sessions, throttle=throttle, clock=clock)
    return [
        *extra,
        *reviewer_routes(backend, authenticate, throttle=throttle, outcomes=outcomes),
        *console_routes(
            backend,
            authenticate,
            audit,
            clock=clock,
            sessions=sessions,
            throttle=throttle,
            outcomes=outcomes,
            oidc=oidc,
            token_sign_in=token_sign_in,
        ),
    ]
