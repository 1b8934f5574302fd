"""Parsing an Access Request submission and checking its denial binding (ARAP §2.3, §2.10).

The order is the one ARAP §2.10 gives: resolve the key by ``kid`` and verify signature, ``aud``
and expiry; the ``jti`` replay check; compare the binding to the submission; then freshness (the
earlier of ``exp`` and the protected ``denial_expires_at``, which the echoed ``expires_at`` must
equal). Without a token the ``evaluation_id`` is looked up (the shared-state binding) and its
*recorded* deadline is enforced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import rfc8785
from pydantic import ValidationError

from mcp_approval.clock import Clock, parse_iso8601
from mcp_approval.errors import MCPApprovalError
from mcp_approval.policy.models import Action, Resource, Subject
from mcp_approval.protocol import (
    ARAP_ERROR_PREFIX,
    ARAP_ERROR_STATUS,
    ARAP_EXPIRED_DENIAL,
    ARAP_INVALID_DENIAL_BINDING,
    ARAP_NOT_REQUESTABLE,
)
from mcp_approval.reference.ars_store import ArapStore
from mcp_approval.reference.binding import binding_hash, valid_members
from mcp_approval.reference.signing import KeySet, TokenError

__all__ = ["ArapError", "BoundDenial", "DenialChecker", "Submission", "parse_submission"]


class ArapError(MCPApprovalError):
    """An ARAP error answered as ``application/problem+json`` (``code`` = ``about:blank`` for plain 4xx)."""

    def __init__(
        self, code: str | None, detail: str, status: int | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.headers = headers or {}
        self.status = status if status is not None else ARAP_ERROR_STATUS.get(code or "", 400)

    def to_json(self) -> dict[str, Any]:
        """The RFC 9457 problem document."""
        kind = ARAP_ERROR_PREFIX + self.code if self.code else "about:blank"
        titles = {401: "Unauthorized", 403: "Forbidden", 413: "Content Too Large", 429: "Too Many Requests"}
        title = self.code or titles.get(self.status, "Bad Request")
        return {"type": kind, "title": title, "status": self.status, "detail": self.detail}


@dataclass(frozen=True)
class Submission:
    """A well-formed submission body."""

    body: dict[str, Any]
    subject: dict[str, Any]
    resource: dict[str, Any]
    action: dict[str, Any]
    context: dict[str, Any] | None
    denial: dict[str, Any]

    @property
    def digest_input(self) -> bytes:
        """The canonical (RFC 8785) body: equal bytes mean equivalent submissions."""
        return rfc8785.dumps(self.body)


@dataclass(frozen=True)
class BoundDenial:
    """What a verified denial binding established."""

    binding_hash: str
    members: list[str]
    template: str | None
    display: dict[str, Any] | None
    evaluation_id: str | None
    #: The token's ``jti`` and its expiry (epoch ms), to be marked used with the task.
    jti: tuple[str, int] | None


def parse_submission(body: Any) -> Submission:
    """The submission in a JSON body.

    Raises:
        ArapError: not an object, bad ``subject``/``resource``/``action``/``context`` (400), or no
            usable ``denial`` (``not_requestable``).
    """
    if not isinstance(body, dict):
        raise ArapError(None, "the request body must be a JSON object")
    try:
        subject = Subject.model_validate(body.get("subject")).to_wire()
        resource = Resource.model_validate(body.get("resource")).to_wire()
        action = Action.model_validate(body.get("action")).to_wire()
    except ValidationError as exc:
        where = ", ".join(".".join(str(p) for p in e["loc"]) or "value" for e in exc.errors()[:3])
        raise ArapError(None, f"subject, resource and action must be AuthZEN objects ({where})") from None
    context = body.get("context")
    if context is not None and not isinstance(context, dict):
        raise ArapError(None, "context must be a JSON object")
    denial = body.get("denial")
    if not isinstance(denial, dict) or not isinstance(denial.get("expires_at"), str):
        raise ArapError(ARAP_NOT_REQUESTABLE, "a submission needs the requestable denial's denial.expires_at")
    try:
        rfc8785.dumps(body)
    except rfc8785.CanonicalizationError:
        raise ArapError(None, "the request body holds values JSON canonicalization cannot represent") from None
    return Submission(body, subject, resource, action, context, denial)


class DenialChecker:
    """Verifies the denial binding of a submission (see the module docstring).

    Args:
        keys: the PDP's keys (this reference PDP signs with the ARS's key set).
        pdp_id: the expected ``iss``.
        ars_id: the expected ``aud`` (the Access Request endpoint).
        store: recorded evaluations and used ``jti`` values.
        skew_s: tolerated clock skew.
        clock: the source of time.
    """

    def __init__(self, *, keys: KeySet, pdp_id: str, ars_id: str, store: ArapStore, skew_s: float, clock: Clock):
        self._keys = keys
        self._pdp_id = pdp_id
        self._ars_id = ars_id
        self._store = store
        self._skew_ms = int(skew_s * 1000)
        self._clock = clock

    async def check(self, submission: Submission) -> BoundDenial:
        """The verified binding.

        Raises:
            ArapError: ``invalid_denial_binding`` or ``expired_denial``.
        """
        token = submission.denial.get("binding_token")
        if token is not None:
            return await self._check_token(submission, token)
        evaluation_id = submission.denial.get("evaluation_id")
        if not isinstance(evaluation_id, str):
            raise ArapError(ARAP_INVALID_DENIAL_BINDING, "the denial carries neither binding_token nor evaluation_id")
        return await self._check_recorded(submission, evaluation_id)

    async def _check_token(self, submission: Submission, token: Any) -> BoundDenial:
        try:
            claims = self._keys.verify(
                token,
                issuer=self._pdp_id,
                audience=self._ars_id,
                now_s=self._clock.now_ms() / 1000,
                leeway_s=self._skew_ms / 1000,
            )
        except TokenError as exc:
            if exc.expired:
                raise ArapError(ARAP_EXPIRED_DENIAL, "the denial's binding_token has expired") from None
            raise ArapError(ARAP_INVALID_DENIAL_BINDING, f"binding_token does not verify: {exc}") from None
        jti, now = claims.get("jti"), self._clock.now_ms()
        if not isinstance(jti, str) or await self._store.jti_used(jti, now):
            raise ArapError(ARAP_INVALID_DENIAL_BINDING, "binding_token was already used (jti replay)")
        members = valid_members(claims.get("binding_context_members"))
        if members is None or not isinstance(claims.get("binding_hash"), str):
            raise ArapError(ARAP_INVALID_DENIAL_BINDING, "binding_token lacks binding_hash or its member set")
        self._compare(submission, claims["binding_hash"], members)
        for name in ("evaluation_id", "template"):
            echoed = submission.denial.get(name)
            if echoed is not None and echoed != claims.get(name):
                raise ArapError(ARAP_INVALID_DENIAL_BINDING, f"denial.{name} differs from the signed one")
        protected = claims.get("denial_expires_at")
        if protected is not None and protected != submission.denial["expires_at"]:
            raise ArapError(ARAP_INVALID_DENIAL_BINDING, "denial.expires_at differs from the signed deadline")
        exp_ms = int(claims["exp"]) * 1000
        deadline = min(exp_ms, parse_iso8601(protected) or exp_ms) if isinstance(protected, str) else exp_ms
        if protected is None and (parse_iso8601(submission.denial["expires_at"]) or 0) < exp_ms:
            raise ArapError(ARAP_INVALID_DENIAL_BINDING, "the token outlives the echoed denial.expires_at")
        self._fresh(deadline, now)
        recorded = await self._store.evaluation(claims["evaluation_id"]) if "evaluation_id" in claims else None
        return BoundDenial(
            claims["binding_hash"], members, claims.get("template"), recorded.display if recorded else None,
            claims.get("evaluation_id"), (jti, exp_ms + self._skew_ms),
        )  # fmt: skip

    async def _check_recorded(self, submission: Submission, evaluation_id: str) -> BoundDenial:
        recorded = await self._store.evaluation(evaluation_id)
        if recorded is None:
            raise ArapError(ARAP_INVALID_DENIAL_BINDING, "unknown evaluation_id (or its binding window closed)")
        self._compare(submission, recorded.binding_hash, recorded.members)
        template = submission.denial.get("template")
        if template is not None and template != recorded.template:
            raise ArapError(ARAP_INVALID_DENIAL_BINDING, "denial.template differs from the recorded one")
        self._fresh(recorded.expires_at, self._clock.now_ms())
        return BoundDenial(
            recorded.binding_hash, recorded.members, recorded.template, recorded.display, evaluation_id, None
        )

    def _compare(self, submission: Submission, expected: str, members: list[str]) -> None:
        actual = binding_hash(submission.subject, submission.resource, submission.action, submission.context, members)
        if actual != expected:
            raise ArapError(ARAP_INVALID_DENIAL_BINDING, "the submission is not the denied request (binding mismatch)")

    def _fresh(self, deadline_ms: int, now: int) -> None:
        if now > deadline_ms + self._skew_ms:
            raise ArapError(ARAP_EXPIRED_DENIAL, "the denial's deadline has passed")
