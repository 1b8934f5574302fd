"""``CedarPDP``: an embedded AuthZEN PDP on the Cedar policy engine (``cedarpy``).

How requests become Cedar entities and values is described in :mod:`mcp_approval.policy.cedar_values`
(:class:`EntityMapping`); the policy annotations (``@requestable``, ``@deadline``, ``@display``,
``@description``, ``@reason``) and how loading checks them in :mod:`mcp_approval.policy.cedar_loading`.

Requestable denials (ARAP)
    A deny is *requestable* when (1) at least one ``forbid`` policy fired, (2) every forbid that
    fired, and every forbid whose evaluation failed, carries ``@requestable``, and (3) the policy
    set without its ``@requestable`` forbids would permit the request, so that an approval can
    actually lead to a permit. A default deny (no permit and no forbid matched) is never
    requestable. The decision context then carries ``evaluation_id`` (a random UUID),
    ``evaluated_at``, ``reason`` and ``access_request{expires_at, template, display}``.

Re-evaluation
    The approval the PEP obtained is sent back as ``context.approval`` and is visible to policy
    as such, so "an approval is an input to a new decision" is literal Cedar::

        @requestable("manager_approval")
        forbid (principal, action == Action::"tools/call", resource == tool::"deploy")
        unless { context has approval };

    Before that, an approval that is malformed, past its ``approved_until`` or rejected by the
    optional :class:`ApprovalVerifier` is removed from the context and the deny says why
    (``approval_unverifiable`` or ``approval_expired``, with ``next_action``). A deny that still
    happens with an approval present carries ``next_action``: ``request`` with a fresh
    ``access_request`` (``reason: out_of_scope``) when requestable, else ``none``. A permit
    reached with an approval carries ``context.approval.approved_until``. Without a verifier,
    the approval is trusted as presented: the in-process approval layer resolved it itself.

Failure handling
    Evaluation never raises: a request Cedar cannot build is a deny with ``reason:
    invalid_request``; a permit while a ``forbid`` failed to evaluate is turned into a deny with
    ``reason: policy_error`` (an erroring forbid must not open access).
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import cedarpy

from mcp_approval.clock import Clock, SystemClock, iso8601, parse_iso8601
from mcp_approval.json_shape import large_json
from mcp_approval.policy.cedar_loading import (
    ANNOTATION_DEADLINE,
    ANNOTATION_DESCRIPTION,
    ANNOTATION_DISPLAY,
    ANNOTATION_REASON,
    ANNOTATION_REQUESTABLE,
    PolicyInfo,
    as_source,
    load_entities,
    load_policies,
    load_schema,
)
from mcp_approval.policy.cedar_values import EntityMapping, to_cedar_record, to_cedar_value
from mcp_approval.policy.cedar_verdicts import Verdict as _Verdict
from mcp_approval.policy.cedar_verdicts import probe_set, verdicts_from_probe
from mcp_approval.policy.models import (
    REASON_APPROVAL_EXPIRED,
    REASON_APPROVAL_REQUIRED,
    REASON_APPROVAL_UNVERIFIABLE,
    REASON_INVALID_REQUEST,
    REASON_NEXT_ACTIONS,
    REASON_OUT_OF_SCOPE,
    REASON_POLICY_DENIED,
    REASON_POLICY_ERROR,
    Approval,
    Context,
    Decision,
    EvaluationRequest,
    EvaluationsSemantic,
    NextAction,
)
from mcp_approval.policy.pdp import evaluate_in_order
from mcp_approval.policy.source import TextSource
from mcp_approval.worker_thread import off_loop

__all__ = [
    "ANNOTATION_DEADLINE",
    "ANNOTATION_DESCRIPTION",
    "ANNOTATION_DISPLAY",
    "ANNOTATION_REASON",
    "ANNOTATION_REQUESTABLE",
    "ApprovalVerifier",
    "CedarPDP",
    "EntityMapping",
    "PolicyInfo",
    "to_cedar_record",
    "to_cedar_value",
]

logger = logging.getLogger("mcp_approval.policy")
_ERRORED_POLICY = re.compile(r"policy `([^`]+)`")
_PERMIT = Decision.permit()  # the (immutable) permit without a decision context
_EMPTY_RECORD = "{}"

# cedarpy's single-request entry point: ``cedarpy.is_authorized`` wraps the request in a batch,
# copies it and wraps the answer in objects; the extension function takes the request (context as
# a JSON string) and answers the response JSON directly. Fall back to the public API without it.
_is_authorized_json: Callable[..., str] | None = getattr(getattr(cedarpy, "_internal", None), "is_authorized", None)


class ApprovalVerifier(Protocol):
    """Checks a presented ``context.approval`` before policy sees it (ARAP §2.6)."""

    async def verify(self, request: EvaluationRequest, approval: Approval) -> str | None:
        """``None`` when ``approval`` is genuine and applies to ``request``; otherwise a reason code
        (``approval_unverifiable``, ``approval_expired``, ``out_of_scope``, ...)."""
        ...


def _file_order(policy: PolicyInfo) -> int:
    return policy.order


class CedarPDP:
    """An embedded AuthZEN PDP: a Cedar policy set, an entity store and an optional schema.

    Everything is parsed and validated when the PDP is built; any problem is a
    :class:`~mcp_approval.policy.source.PolicyLoadError` naming the file and line.

    Args:
        policies: the Cedar policy text (``TextSource`` to report a file name).
        entities: the entity store, Cedar entities JSON (a list); ``None`` for no entities.
        schema: a Cedar schema, in Cedar or JSON syntax; when given, policies, entities and
            every request are validated against it.
        mapping: how AuthZEN names become Cedar entities.
        clock: the time source for ``evaluated_at``, ``expires_at`` and approval expiry.
        default_deadline: the request-hint lifetime of ``@requestable`` policies without ``@deadline``.
        approval_verifier: checks ``context.approval`` before policy sees it.
        access_request_endpoint: sent as ``access_request.endpoint`` when set.
    """

    def __init__(
        self,
        policies: TextSource | str,
        entities: TextSource | str | None = None,
        schema: TextSource | str | None = None,
        *,
        mapping: EntityMapping | None = None,
        clock: Clock | None = None,
        default_deadline: timedelta = timedelta(hours=1),
        approval_verifier: ApprovalVerifier | None = None,
        access_request_endpoint: str | None = None,
    ) -> None:
        if default_deadline <= timedelta(0):
            raise ValueError("default_deadline must be positive")
        self.mapping = mapping or EntityMapping()
        self.clock: Clock = clock or SystemClock()
        self.default_deadline = default_deadline
        self.approval_verifier = approval_verifier
        self.access_request_endpoint = access_request_endpoint
        self._schema = load_schema(as_source(schema)) if schema is not None else None
        policy_source = as_source(policies)
        self._policies, self._reduced, self._info = load_policies(policy_source, self._schema)
        # Every policy as a permit: one Cedar run answers for the set and for the set without the
        # @requestable forbids (cedar_verdicts), so a requestable denial is evaluated once.
        self._probe = probe_set(policy_source.text)
        self._stored, self._entities = load_entities(as_source(entities or "[]"), self._schema)
        # Kept for the startup checks, which name the file and line of a policy that cannot work.
        self._policy_source = policy_source
        self._entities_source = as_source(entities) if entities is not None else None
        self._entity_types: dict[str, str] = {}  # AuthZEN type -> checked Cedar entity type
        self._action_type = self.mapping.action_uid("")["type"]

    @classmethod
    def from_files(
        cls,
        policies: str | Path,
        entities: str | Path | None = None,
        schema: str | Path | None = None,
        **options: Any,
    ) -> CedarPDP:
        """Build a PDP from a ``.cedar`` file, an entities JSON file and an optional schema file."""
        return cls(
            TextSource.read(policies),
            TextSource.read(entities) if entities is not None else None,
            TextSource.read(schema) if schema is not None else None,
            **options,
        )

    @property
    def policy_source(self) -> TextSource:
        """The policy text the PDP was built from, with the name it is reported under."""
        return self._policy_source

    @property
    def entities_source(self) -> TextSource | None:
        """The entities the PDP was built from (``None``: none were given)."""
        return self._entities_source

    @property
    def policies(self) -> Mapping[str, PolicyInfo]:
        """The policies of the set, by Cedar policy id."""
        return self._info

    # -- PolicyDecisionPoint -----------------------------------------------------------------

    async def evaluate(self, request: EvaluationRequest) -> Decision:
        """Decide one request (see the module docstring for the decision context)."""
        context = request.context or {}
        large = large_json(context)  # converting and deciding a large request runs on a worker thread
        if "approval" not in context:
            return await off_loop(large, self._decide, request, approval=None)
        approval = request.approval
        problem = self._approval_problem(approval)
        if problem is None and approval is not None and self.approval_verifier is not None:
            problem = await self.approval_verifier.verify(request, approval)
        if problem is None and approval is not None:
            return await off_loop(large, self._decide, request, approval=approval)
        without = request.with_context({key: value for key, value in context.items() if key != "approval"})
        decision = await off_loop(large, self._decide, without, approval=None)
        return decision if decision.decision else _rejected_approval(decision, problem or REASON_APPROVAL_UNVERIFIABLE)

    async def evaluate_many(
        self,
        requests: Sequence[EvaluationRequest],
        semantic: EvaluationsSemantic = EvaluationsSemantic.EXECUTE_ALL,
    ) -> list[Decision]:
        """Decide several requests in order, stopping early as ``semantic`` says."""
        return await evaluate_in_order(self.evaluate, requests, semantic)

    # -- decision ----------------------------------------------------------------------------

    def _decide(self, request: EvaluationRequest, approval: Approval | None) -> Decision:
        try:
            cedar_request, entities = self._cedar_request(request)
        except ValueError as exc:
            return Decision.deny(REASON_INVALID_REQUEST, error=str(exc))
        verdict, reduced = self._verdicts(cedar_request, entities)
        if verdict.failure is not None:
            return Decision.deny(REASON_INVALID_REQUEST, error=verdict.failure)
        errored_forbids = [pid for pid in verdict.errored if self._is_forbid(pid)]
        if verdict.allowed and errored_forbids:
            logger.warning("forbid policies failed to evaluate, denying: %s", ", ".join(errored_forbids))
            return Decision.deny(REASON_POLICY_ERROR)
        if verdict.allowed:
            return Decision.permit({"approval": {"approved_until": approval.approved_until}}) if approval else _PERMIT
        determining = sorted((self._info[pid] for pid in verdict.fired if pid in self._info), key=_file_order)
        known = len(determining) == len(verdict.fired)
        if known and self._requestable(determining, errored_forbids, cedar_request, entities, reduced):
            return self._requestable_denial(determining, reevaluation=approval is not None)
        reasons = [policy.annotations[ANNOTATION_REASON] for policy in determining if policy.reason_annotated]
        if approval is not None:
            return Decision.deny(reasons[0] if reasons else REASON_POLICY_DENIED, next_action=NextAction.NONE.value)
        return Decision.deny(reasons[0] if reasons else None)

    def _requestable(
        self,
        determining: Sequence[PolicyInfo],
        errored_forbids: Sequence[str],
        cedar_request: dict[str, Any],
        entities: cedarpy.Entities,
        reduced: _Verdict | None,
    ) -> bool:
        if not determining or not all(policy.requestable for policy in determining):
            return False
        if not all(pid in self._info and self._info[pid].requestable for pid in errored_forbids):
            return False
        # Would an approval help? Only if the rest of the set permits the request.
        verdict = reduced or self._authorize(cedar_request, self._reduced, entities)
        reduced_errors = [pid for pid in verdict.errored if self._is_forbid(pid)]
        return verdict.allowed and verdict.failure is None and not reduced_errors

    def _requestable_denial(self, determining: Sequence[PolicyInfo], *, reevaluation: bool) -> Decision:
        ordered = sorted(determining, key=_file_order)
        first = ordered[0]
        deadline = min(policy.deadline or self.default_deadline for policy in ordered)
        now = self.clock.now_ms()
        hint: dict[str, Any] = {"expires_at": iso8601(now + int(deadline.total_seconds() * 1000))}
        if first.annotations.get(ANNOTATION_REQUESTABLE):
            hint["template"] = first.annotations[ANNOTATION_REQUESTABLE]
        display = first.display()
        if display:
            hint["display"] = display
        if self.access_request_endpoint:
            hint["endpoint"] = self.access_request_endpoint
        context: Context = {
            "evaluation_id": str(uuid.uuid4()),
            "evaluated_at": iso8601(now),
            "reason": first.annotations.get(ANNOTATION_REASON) or REASON_APPROVAL_REQUIRED,
            "access_request": hint,
        }
        if reevaluation:
            context["reason"] = REASON_OUT_OF_SCOPE
            context["next_action"] = NextAction.REQUEST.value
        return Decision(decision=False, context=context)

    def _approval_problem(self, approval: Approval | None) -> str | None:
        if approval is None:
            return REASON_APPROVAL_UNVERIFIABLE
        until = parse_iso8601(approval.approved_until)
        if until is None:
            return REASON_APPROVAL_UNVERIFIABLE
        if until <= self.clock.now_ms():
            return REASON_APPROVAL_EXPIRED
        return None

    def _is_forbid(self, policy_id: str) -> bool:
        info = self._info.get(policy_id)
        return info is None or info.is_forbid  # an unknown policy id is treated as the dangerous kind

    # -- Cedar plumbing ----------------------------------------------------------------------

    def _entity_type(self, authzen_type: str) -> str:
        """``mapping.entity_type``, remembered (the mapping is immutable; only valid types are kept)."""
        cedar_type = self._entity_types.get(authzen_type)
        if cedar_type is None:
            cedar_type = self._entity_types[authzen_type] = self.mapping.entity_type(authzen_type)
        return cedar_type

    def _cedar_request(self, request: EvaluationRequest) -> tuple[dict[str, Any], cedarpy.Entities]:
        """The Cedar request (its context already as the JSON text Cedar reads) and its entities."""
        subject, resource_ = request.subject, request.resource
        principal = {"type": self._entity_type(subject.type), "id": subject.id}
        resource = {"type": self._entity_type(resource_.type), "id": resource_.id}
        context = to_cedar_record(request.context) if request.context else {}
        if self.mapping.decimals and request.context:
            context = self.mapping.with_decimals(context, request.context)
        if request.action.properties:
            key = self.mapping.action_properties_key
            if key in context:
                raise ValueError(f"context member {key!r} is reserved for action.properties")
            context[key] = to_cedar_record(request.action.properties)
        if subject.properties or resource_.properties:
            entities = self._request_entities([(principal, subject.properties), (resource, resource_.properties)])
        else:
            entities = self._entities
        cedar_request = {
            "principal": principal,
            "action": {"type": self._action_type, "id": request.action.name},
            "resource": resource,
            "context": json.dumps(context) if context else _EMPTY_RECORD,
        }
        return cedar_request, entities

    def _request_entities(self, items: Sequence[tuple[dict[str, str], dict[str, Any] | None]]) -> cedarpy.Entities:
        """The entity store plus the request's subject and resource with their properties."""
        added: dict[tuple[str, str], dict[str, Any]] = {}
        for uid, properties in items:
            if not properties:
                continue
            key = (uid["type"], uid["id"])
            current = added.get(key) or self._stored.get(key) or {"uid": uid, "attrs": {}, "parents": []}
            # Attributes already known (stored, or from an earlier item) win; properties only add.
            attrs = {**to_cedar_record(properties), **current["attrs"]}
            if key not in self._stored or attrs != self._stored[key]["attrs"]:
                added[key] = {**current, "attrs": attrs}
        if not added:
            return self._entities
        if all(key not in self._stored for key in added):
            return self._entities.with_added_json_str(json.dumps(list(added.values())), self._schema)
        replaced = [added.get(key, entity) for key, entity in self._stored.items()]
        extra = [entity for key, entity in added.items() if key not in self._stored]
        return cedarpy.Entities.from_json_str(json.dumps(replaced + extra), self._schema)

    def _verdicts(self, cedar_request: dict[str, Any], entities: cedarpy.Entities) -> tuple[_Verdict, _Verdict | None]:
        """The set's verdict and, when one Cedar run gave it too, that of the set without the
        ``@requestable`` forbids (``None``: evaluate that set when it is needed)."""
        if self._probe is not None:
            both = verdicts_from_probe(self._authorize(cedar_request, self._probe, entities), self._info)
            if both is not None:
                return both
        return self._authorize(cedar_request, self._policies, entities), None

    def _authorize(
        self, cedar_request: dict[str, Any], policies: cedarpy.PolicySet, entities: cedarpy.Entities
    ) -> _Verdict:
        try:
            response = _is_authorized(cedar_request, policies, entities, self._schema)
        except ValueError as exc:
            return _Verdict(False, (), (), failure=str(exc))
        diagnostics = response.get("diagnostics") or {}
        errors = list(diagnostics.get("errors", ()))
        decision = response["decision"]
        if decision == cedarpy.Decision.NoDecision.value:
            return _Verdict(False, (), (), failure="; ".join(errors) or "Cedar reached no decision")
        if not errors:
            return _Verdict(decision == cedarpy.Decision.Allow.value, tuple(diagnostics.get("reason", ())), ())
        errored = tuple(match.group(1) for error in errors if (match := _ERRORED_POLICY.search(error)))
        if len(errored) < len(errors):
            # An error that names no policy: assume the worst about it.
            errored += ("<unknown>",)
        return _Verdict(decision == cedarpy.Decision.Allow.value, tuple(diagnostics.get("reason", ())), errored)


def _is_authorized(
    cedar_request: dict[str, Any],
    policies: cedarpy.PolicySet,
    entities: cedarpy.Entities,
    schema: cedarpy.Schema | None,
) -> dict[str, Any]:
    """Cedar's response object (``decision``, ``diagnostics``) to one request; ``ValueError`` on bad input."""
    if _is_authorized_json is not None:
        response: dict[str, Any] = json.loads(
            _is_authorized_json(cedar_request, policies, entities._inner, schema, False)
        )
        return response
    result = cedarpy.is_authorized(cedar_request, policies, entities, schema=schema)
    diagnostics = {"errors": result.diagnostics.errors, "reason": result.diagnostics.reasons}
    return {"decision": result.decision.value, "diagnostics": diagnostics}


def _rejected_approval(decision: Decision, reason: str) -> Decision:
    """The deny answered when the presented approval cannot be used (ARAP §2.7)."""
    requestable = decision.requestable_denial is not None
    default = REASON_NEXT_ACTIONS.get(reason, NextAction.REQUEST if requestable else NextAction.NONE)
    next_action = default if requestable or default is not NextAction.REQUEST else NextAction.NONE
    if next_action is not NextAction.REQUEST:
        return Decision.deny(reason, next_action=next_action.value)
    context = dict(decision.context or {})
    context.update(reason=reason, next_action=next_action.value)
    return Decision(decision=False, context=context)
