"""The console's delegations page: a signed-in reviewer's delegations (made and received), a form
that hands their role for a template to another reviewer for some hours, and a button that revokes
one they made. Everything goes through the backend's delegation operations, so the console has
the API's rules (the template's role in one's own right, ``delegation``, ``delegation_max_s``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mcp_approval.backends import DelegationError, NotEligibleError, SupportsDelegations, SupportsReview
from mcp_approval.reviewers.sessions import Session, SessionStore
from mcp_approval.safe_text import storable
from mcp_approval.web.forms import Refused, read_form

__all__ = ["DelegationPages"]

Endpoint = Callable[[Request], Awaitable[Response]]
#: The longest delegate or template name the form takes (the columns' width).
_MAX_NAME = 256


class DelegationPages:
    """``GET {prefix}/delegations``, ``POST {prefix}/delegations`` and ``POST {prefix}/delegations/{id}/revoke``.

    Args:
        backend: the reviewer backend (one without delegations shows an error page).
        sessions: the console's sessions (messages for the next page).
        prefix: the console's path.
        signed_in: the request's session, or ``None``.
        posted: the session of a posted form (refusing a cross-site post or an ended session).
        render: renders a page for a session.
        to_login: the redirect to the sign-in page.
    """

    def __init__(
        self,
        backend: SupportsReview,
        sessions: SessionStore,
        prefix: str,
        signed_in: Callable[[Request], Awaitable[Session | None]],
        posted: Callable[[Request], Awaitable[Session]],
        render: Callable[..., Response],
        to_login: Callable[[Request], Response],
    ) -> None:
        self._backend = backend
        self._sessions = sessions
        self._prefix = prefix
        self._signed_in = signed_in
        self._posted = posted
        self._render = render
        self._to_login = to_login

    def routes(self, guard: Callable[[Endpoint], Endpoint]) -> list[BaseRoute]:
        """The routes, each behind the console's ``guard`` (error pages, an unreachable store)."""
        p = self._prefix
        return [
            Route(f"{p}/delegations", guard(self.page), methods=["GET"]),
            Route(f"{p}/delegations", guard(self.create), methods=["POST"]),
            Route(f"{p}/delegations/{{delegation_id}}/revoke", guard(self.revoke), methods=["POST"]),
        ]

    def _delegations(self) -> SupportsDelegations:
        if not isinstance(self._backend, SupportsDelegations):
            raise Refused(404, "This approval backend keeps no delegations.")
        return self._backend

    async def page(self, request: Request) -> Response:
        """The reviewer's delegations and the form."""
        session = await self._signed_in(request)
        if session is None:
            return self._to_login(request)
        return await self._page(session)

    async def _page(self, session: Session, status: int = 200, error: str | None = None, **form: Any) -> Response:
        found = await self._delegations().delegations(viewer=session.principal)
        return self._render(
            "delegations.html",
            session,
            status=status,
            error=error,
            tab="delegations",
            delegations=[item.to_json() for item in found],
            form=form,
        )

    async def create(self, request: Request) -> Response:
        """Write the delegation the form asks for; back to the page, saying what was done or why not."""
        session = await self._posted(request)
        form = await read_form(request)
        if not session.csrf_matches(form.get("csrf")):
            raise Refused(403, "The form's security token is missing or wrong; nothing was done. Reload the page.")
        delegate, template = (form.get("delegate") or "").strip(), (form.get("template") or "").strip()
        hours_text = (form.get("hours") or "").strip()
        kept = {"delegate": delegate, "template": template, "hours": hours_text}
        for name, value in (("delegate", delegate), ("template", template)):
            if not value or len(value) > _MAX_NAME or not storable(value):
                return await self._page(
                    session, 400, f"Give the {name}: a name of at most {_MAX_NAME} characters.", **kept
                )
        try:
            hours = float(hours_text)
        except ValueError:
            hours = 0.0
        if not 0 < hours < float("inf"):
            return await self._page(
                session, 400, "Give how many hours the delegation lasts: a positive number.", **kept
            )
        try:
            made = await self._delegations().delegate(session.principal, delegate, template, hours * 3600)
        except (NotEligibleError, DelegationError) as exc:
            status = 403 if isinstance(exc, NotEligibleError) else 400
            return await self._page(session, status, f"Nothing was delegated: {exc}.", **kept)
        ends = made.to_json()["ends_at"]
        await self._sessions.flash(session, "ok", f"{made.delegate} decides {made.template} for you until {ends}.")
        return RedirectResponse(f"{self._prefix}/delegations", 303)

    async def revoke(self, request: Request) -> Response:
        """Revoke one of the reviewer's delegations at once."""
        session = await self._posted(request)
        form = await read_form(request)
        if not session.csrf_matches(form.get("csrf")):
            raise Refused(403, "The form's security token is missing or wrong; nothing was done. Reload the page.")
        delegation_id = request.path_params["delegation_id"]
        if not storable(delegation_id):
            raise Refused(404, "There is no such delegation.")
        try:
            revoked = await self._delegations().revoke_delegation(delegation_id, session.principal)
        except (NotEligibleError, DelegationError) as exc:
            return await self._page(session, 403 if isinstance(exc, NotEligibleError) else 409, f"{exc}.")
        await self._sessions.flash(session, "ok", f"Revoked: {revoked.delegate} no longer decides {revoked.template}.")
        return RedirectResponse(f"{self._prefix}/delegations", 303)
