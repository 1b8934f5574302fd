"""The reference PDP's ARAP additions around any ``PolicyDecisionPoint`` (e.g. ``CedarPDP``).

:class:`BindingPDP` decorates decisions; it never decides. Every requestable denial gets
``access_request.endpoint`` and a ``binding_token`` (ES256 JWS: ``iss`` = the PDP, ``aud`` = the
ARS, ``iat``, ``exp`` no later than the denial's ``expires_at``, ``jti``, ``denial_expires_at``,
``evaluation_id``, ``binding_context_members``, ``binding_hash``, plus the private claim
``template``), and is recorded so that the ``evaluation_id``-only (shared-state) binding works
too. A ``grant_pending`` deny gets ``retry_after``.

:class:`IssuedApprovalVerifier` is the ``approval_verifier`` the wrapped ``CedarPDP`` uses on
re-evaluation: it verifies the signed ``approval.state`` (``kid``, signature, ``iss`` = the ARS,
``aud`` = this PDP, ``exp``), cross-checks ``approval_id``, looks the approval up in the ARS store
(issued, not revoked, same ``approved_until``), then checks scope by ``binding_hash``.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from mcp_approval.clock import Clock, iso8601, parse_iso8601
from mcp_approval.policy.models import (
    REASON_APPROVAL_EXPIRED,
    REASON_APPROVAL_UNVERIFIABLE,
    REASON_GRANT_PENDING,
    REASON_OUT_OF_SCOPE,
    Approval,
    Decision,
    EvaluationRequest,
    EvaluationsSemantic,
)
from mcp_approval.policy.pdp import PolicyDecisionPoint, evaluate_in_order
from mcp_approval.reference.ars_store import ArapStore, EvaluationRecord
from mcp_approval.reference.binding import binding_hash, valid_members
from mcp_approval.reference.signing import KeySet, TokenError

__all__ = ["BindingPDP", "IssuedApprovalVerifier", "request_hash"]


def request_hash(request: EvaluationRequest, members: Sequence[str]) -> str:
    """The ``binding_hash`` of an evaluation request."""
    wire = request.to_wire()
    return binding_hash(wire["subject"], wire["resource"], wire["action"], wire.get("context"), members)


class BindingPDP:
    """Adds ARAP binding material to the decisions of ``inner`` (see the module docstring).

    Args:
        inner: what decides.
        keys: signs ``binding_token``.
        pdp_id: this PDP's identifier (``iss``).
        ars_endpoint: the Access Request endpoint (``aud``, and ``access_request.endpoint``).
        store: where denials are recorded.
        members: ``binding_context_members``.
        token_lifetime_s: the longest a token lives.
        retry_after_s: the ``retry_after`` of a ``grant_pending`` deny without one.
        clock: the source of time.
    """

    def __init__(
        self,
        inner: PolicyDecisionPoint,
        *,
        keys: KeySet,
        pdp_id: str,
        ars_endpoint: str,
        store: ArapStore,
        members: Sequence[str],
        token_lifetime_s: float,
        retry_after_s: int,
        clock: Clock,
    ) -> None:
        self.inner = inner
        self._keys = keys
        self._pdp_id = pdp_id
        self._ars = ars_endpoint
        self._store = store
        self._members = list(members)
        self._token_lifetime_ms = int(token_lifetime_s * 1000)
        self._retry_after_s = retry_after_s
        self._clock = clock

    async def evaluate(self, request: EvaluationRequest) -> Decision:
        """The inner decision, with binding material on a requestable denial."""
        decision = await self.inner.evaluate(request)
        if decision.decision or not decision.context:
            return decision
        context = dict(decision.context)
        if decision.requestable_denial is not None:
            context["access_request"] = await self._bound_hint(request, context)
        if context.get("reason") == REASON_GRANT_PENDING and "retry_after" not in context:
            context["retry_after"] = self._retry_after_s
        return Decision(decision=False, context=context)

    async def evaluate_many(
        self,
        requests: Sequence[EvaluationRequest],
        semantic: EvaluationsSemantic = EvaluationsSemantic.EXECUTE_ALL,
    ) -> list[Decision]:
        """Each request through :meth:`evaluate`, in order, stopping where ``semantic`` says."""
        return await evaluate_in_order(self.evaluate, requests, semantic)

    async def _bound_hint(self, request: EvaluationRequest, context: dict[str, Any]) -> dict[str, Any]:
        hint = dict(context["access_request"])
        now = self._clock.now_ms()
        expires_ms = parse_iso8601(hint["expires_at"]) or now
        evaluation_id = context.get("evaluation_id") or "eval_" + secrets.token_urlsafe(16)
        context["evaluation_id"] = evaluation_id
        digest = request_hash(request, self._members)
        claims: dict[str, Any] = {
            "iss": self._pdp_id,
            "aud": self._ars,
            "iat": now // 1000,
            # Whole seconds, never past the denial's own deadline.
            "exp": min(now + self._token_lifetime_ms, expires_ms) // 1000,
            "jti": secrets.token_urlsafe(18),
            "denial_expires_at": hint["expires_at"],
            "evaluation_id": evaluation_id,
            "binding_context_members": self._members,
            "binding_hash": digest,
        }
        if isinstance(hint.get("template"), str):
            claims["template"] = hint["template"]
        display = hint.get("display") if isinstance(hint.get("display"), dict) else None
        record = EvaluationRecord(evaluation_id, digest, self._members, claims.get("template"), display, expires_ms)
        await self._store.record_evaluation(record, now)
        hint["endpoint"] = self._ars
        hint["binding_token"] = self._keys.sign(claims)
        return hint


class IssuedApprovalVerifier:
    """``ApprovalVerifier`` for approvals this reference ARS issued (see the module docstring).

    Args:
        keys: verifies ``approval.state``.
        pdp_id: this PDP (the state's required ``aud``).
        ars_id: the ARS (the state's required ``iss``).
        store: the ARS store (lookup, revocation).
        grant_delay_s: approvals younger than this answer ``grant_pending``.
        clock: the source of time.
    """

    def __init__(
        self, *, keys: KeySet, pdp_id: str, ars_id: str, store: ArapStore, grant_delay_s: float, clock: Clock
    ) -> None:
        self._keys = keys
        self._pdp_id = pdp_id
        self._ars_id = ars_id
        self._store = store
        self._grant_delay_ms = int(grant_delay_s * 1000)
        self._clock = clock

    async def verify(self, request: EvaluationRequest, approval: Approval) -> str | None:
        """``None`` when ``approval`` is ours, current and covers ``request``; else the reason code."""
        try:
            now_s = self._clock.now_ms() / 1000
            claims = self._keys.verify(approval.state, issuer=self._ars_id, audience=self._pdp_id, now_s=now_s)
        except TokenError as exc:
            return REASON_APPROVAL_EXPIRED if exc.expired else REASON_APPROVAL_UNVERIFIABLE
        if claims.get("approval_id") != approval.id:
            return REASON_APPROVAL_UNVERIFIABLE
        issued = await self._store.approval(approval.id)
        if (
            issued is None
            or issued.state != approval.state
            or iso8601(issued.approved_until) != approval.approved_until
        ):
            return REASON_APPROVAL_UNVERIFIABLE
        now = self._clock.now_ms()
        if issued.revoked_at is not None or issued.approved_until <= now:
            return REASON_APPROVAL_EXPIRED
        members = valid_members(claims.get("binding_context_members"))
        if members is None or claims.get("binding_hash") != issued.binding_hash:
            return REASON_APPROVAL_UNVERIFIABLE
        if request_hash(request, members) != issued.binding_hash:
            return REASON_OUT_OF_SCOPE
        if now < issued.approved_at + self._grant_delay_ms:
            return REASON_GRANT_PENDING
        return None
