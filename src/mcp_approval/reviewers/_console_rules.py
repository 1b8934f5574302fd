"""The console's pages for approval fatigue: approving a request with a similar-call rule, deciding
several pending requests at once, and the rules a reviewer may see (each with the calls it decided,
and a button that revokes it at once).

Every form here is checked as the console's others are (origin, session, CSRF token) before
anything is decided; decisions go through the backend as the reviewer API's do: a rule through
``approve_similar``, a batch through :func:`~mcp_approval.reviewers.batch.decide_each`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mcp_approval.backends import (
    ApprovalRecord,
    NotEligibleError,
    ReviewError,
    SimilarRuleError,
    SupportsReview,
    SupportsSimilarRules,
)
from mcp_approval.backends.contract import UnknownRequestError
from mcp_approval.clock import Clock
from mcp_approval.reviewers._console_similar import SimilarForm, similar_form, spec_of_form
from mcp_approval.reviewers.batch import decide_each
from mcp_approval.reviewers.limits import MAX_BATCH_SIZE, MAX_COMMENT_CHARS
from mcp_approval.reviewers.sessions import Session, SessionStore
from mcp_approval.reviewers.views import timestamp
from mcp_approval.safe_text import storable
from mcp_approval.web.forms import Refused, path_request_id, read_form

__all__ = ["ConsoleHost", "RulePages", "similar_context"]


class ConsoleHost(Protocol):
    """What these pages use of the console: its backend, sessions and page helpers."""

    backend: SupportsReview
    prefix: str
    sessions: SessionStore
    clock: Clock

    async def signed_in(self, request: Request) -> Session | None:
        """The request's live session, or ``None``."""
        ...

    async def posted_form_session(self, request: Request) -> Session:
        """The session of a same-origin POST (refused otherwise)."""
        ...

    def to_login(self, request: Request) -> Response:
        """To the sign-in page."""
        ...

    def redirect(self, path: str) -> Response:
        """A 303 to ``path`` under the console's prefix."""
        ...

    def render(self, name: str, session: Session | None, *, status: int = 200, **context: Any) -> Response:
        """A page from the console's templates."""
        ...

    async def detail_page(
        self,
        session: Session,
        request_id: str,
        status: int = 200,
        error: str | None = None,
        similar_fields: Mapping[str, str] | None = None,
    ) -> Response:
        """A request's page, with an error shown on it."""
        ...

    async def pending_page(
        self, request: Request, session: Session, status: int = 200, error: str | None = None
    ) -> Response:
        """The pending list, with an error shown on it."""
        ...


def similar_context(
    backend: SupportsReview, record: ApprovalRecord, submitted: Mapping[str, str] | None
) -> SimilarForm | None:
    """The similar-call form a request's page offers, or ``None`` when its template allows no rule."""
    if not isinstance(backend, SupportsSimilarRules) or record.integrity_failure is not None:
        return None
    if record.rules is not None and record.rules.step_up is not None:
        return None  # each decision needs a second factor the form cannot carry
    limits = backend.similar_rule_limits(record)
    return None if limits is None else similar_form(record, limits, submitted)


class RulePages:
    """The routes; ``host`` is the console they belong to."""

    def __init__(self, host: ConsoleHost) -> None:
        self.host = host

    def routes(self, guard: Any) -> list[BaseRoute]:
        """The routes under the console's prefix, each wrapped by ``guard`` (error pages)."""
        p = self.host.prefix
        return [
            Route(f"{p}/decide", guard(self.decide_many), methods=["POST"]),
            Route(f"{p}/requests/{{request_id}}/similar", guard(self.approve_similar), methods=["POST"]),
            Route(f"{p}/rules", guard(self.rules), methods=["GET"]),
            Route(f"{p}/rules/{{rule_id}}", guard(self.rule), methods=["GET"]),
            Route(f"{p}/rules/{{rule_id}}/revoke", guard(self.revoke), methods=["POST"]),
        ]

    # -- approve similar ------------------------------------------------------------------------

    async def approve_similar(self, request: Request) -> Response:
        """``POST /requests/{id}/similar``: approve the request and write the rule the form chose."""
        host = self.host
        session = await host.posted_form_session(request)
        request_id = path_request_id(request)
        record = await host.backend.get_request(request_id, viewer=session.principal)
        if record is None:
            raise Refused(404, "There is no such approval request.")
        form = similar_context(host.backend, record, None)
        fields = await read_form(request, max_fields=form.field_count if form is not None else 10)
        if not session.csrf_matches(fields.get("csrf")):
            raise Refused(403, "The form's security token is missing or wrong; nothing was decided. Reload the page.")
        if form is None:
            return await host.detail_page(
                session, request_id, 400, "This request's template allows no similar-call rule."
            )
        submitted = similar_form(record, (form.max_s, form.max_uses_cap), fields)
        comment = submitted.comment.strip() or None
        try:
            if comment is not None and (len(comment) > MAX_COMMENT_CHARS or "\x00" in comment):
                raise SimilarRuleError(f"A comment is at most {MAX_COMMENT_CHARS} characters, none of them NUL.")
            spec = spec_of_form(submitted, record)
            rules = host.backend
            assert isinstance(rules, SupportsSimilarRules)  # similar_context offers no form otherwise
            approved, rule = await rules.approve_similar(request_id, session.principal, spec, comment)
        except SimilarRuleError as exc:
            message = f"Nothing was recorded: {exc}"
            return await host.detail_page(session, request_id, 400, message, similar_fields=fields)
        except UnknownRequestError:
            raise Refused(404, "There is no such approval request.") from None
        except NotEligibleError as exc:
            return await host.detail_page(session, request_id, 403, f"You may not decide this request: {exc}.")
        except ReviewError as exc:
            return await host.detail_page(session, request_id, 409, f"Nothing was recorded: {exc}.")
        done = "Approved" if approved.status.value == "approved" else "Your approval is recorded"
        until = timestamp(rule.expires_at)
        text = f"{done}, and rule {rule.id} decides up to {rule.max_uses} similar calls until {until}."
        await host.sessions.flash(session, "ok", text)
        return self._to_rule(rule.id)

    # -- batch ------------------------------------------------------------------------------------

    async def decide_many(self, request: Request) -> Response:
        """``POST /decide``: the pending list's "Approve selected" / "Deny selected"."""
        host = self.host
        session = await host.posted_form_session(request)
        fields = await read_form(request, max_fields=MAX_BATCH_SIZE + 4)
        if not session.csrf_matches(fields.get("csrf")):
            raise Refused(403, "The form's security token is missing or wrong; nothing was decided. Reload the page.")
        decision = fields.get("decision")
        if decision not in ("approve", "deny"):
            raise Refused(400, "The decision must be approve or deny.")
        ids = [value for name, value in fields.items() if name.startswith("id.")]
        comment = (fields.get("comment") or "").strip() or None
        error = None
        if not ids:
            error = "Select at least one request; nothing was decided."
        elif len(ids) > MAX_BATCH_SIZE:
            error = f"Select at most {MAX_BATCH_SIZE} requests at once; nothing was decided."
        elif comment is not None and (len(comment) > MAX_COMMENT_CHARS or "\x00" in comment):
            error = f"A comment is at most {MAX_COMMENT_CHARS} characters, none of them NUL; nothing was decided."
        elif decision == "deny" and comment is None:
            error = "Denying several requests needs a comment saying why; nothing was decided."
        if error is not None:
            return await host.pending_page(request, session, 400, error)
        verdict: Literal["approve", "deny"] = "approve" if decision == "approve" else "deny"
        results = await decide_each(host.backend, ids, session.principal, verdict, comment)
        return host.render(
            "batch.html",
            session,
            tab="pending",
            verdict=verdict,
            results=results,
            decided=sum(1 for result in results if result.ok),
        )

    # -- rules ------------------------------------------------------------------------------------

    async def rules(self, request: Request) -> Response:
        """``GET /rules[?state=all]``: the rules the reviewer may see, active ones unless asked."""
        host = self.host
        session = await host.signed_in(request)
        if session is None:
            return host.to_login(request)
        everything = request.query_params.get("state") == "all"
        rules = await self._store().similar_rules(viewer=session.principal, active_only=not everything)
        return host.render("rules.html", session, tab="rules", rules=rules, everything=everything)

    async def rule(self, request: Request) -> Response:
        """``GET /rules/{id}``: one rule, the calls it decided, and (while it is live) its Revoke button."""
        host = self.host
        session = await host.signed_in(request)
        if session is None:
            return host.to_login(request)
        return await self._rule_page(session, _rule_id(request))

    async def revoke(self, request: Request) -> Response:
        """``POST /rules/{id}/revoke``: revoke the rule at once, pending calls included."""
        host = self.host
        session = await host.posted_form_session(request)
        rule_id = _rule_id(request)
        if not session.csrf_matches((await read_form(request)).get("csrf")):
            raise Refused(403, "The form's security token is missing or wrong; nothing was revoked. Reload the page.")
        try:
            await self._store().revoke_similar_rule(rule_id, session.principal)
        except NotEligibleError as exc:
            return await self._rule_page(session, rule_id, 403, f"Nothing was revoked: {exc}.")
        except SimilarRuleError as exc:
            if str(exc).startswith("no similar-call rule"):
                raise Refused(404, "There is no such similar-call rule.") from None
            return await self._rule_page(session, rule_id, 409, f"Nothing was revoked: {exc}.")
        await host.sessions.flash(session, "ok", f"Rule {rule_id} is revoked: it decides no further call.")
        return self._to_rule(rule_id)

    async def _rule_page(self, session: Session, rule_id: str, status: int = 200, error: str | None = None) -> Response:
        store = self._store()
        rule = await store.similar_rule(rule_id, viewer=session.principal)
        decided = await store.similar_rule_decisions(rule_id, viewer=session.principal)
        if rule is None or decided is None:
            raise Refused(404, "There is no such similar-call rule.")
        return self.host.render(
            "rule.html", session, tab="rules", status=status, error=error, rule=rule, decided=decided
        )

    def _store(self) -> SupportsSimilarRules:
        backend = self.host.backend
        if not isinstance(backend, SupportsSimilarRules):
            raise Refused(404, "This approval backend keeps no similar-call rules.")
        return backend

    def _to_rule(self, rule_id: str) -> Response:
        return self.host.redirect(f"/rules/{quote(rule_id, safe='')}")


def _rule_id(request: Request) -> str:
    rule_id: str = request.path_params["rule_id"]
    if not storable(rule_id):
        raise Refused(404, "There is no such similar-call rule.")
    return rule_id
