"""``CedarPDP``: an embedded AuthZEN PDP on the Cedar policy engine (``cedarpy``).

Request mapping (see :class:`EntityMapping`)
    - ``subject`` and ``resource`` become the Cedar principal and resource ``Type::"id"``, where
      ``Type`` is the AuthZEN ``type`` (renamed through ``EntityMapping.types``) under the
      optional ``namespace``: ``{"type": "user", "id": "alice"}`` is ``user::"alice"``, or
      ``Todo::user::"alice"`` with ``namespace="Todo"``.
    - ``action.name`` becomes ``Action::"name"`` (``Namespace::Action::"name"``).
    - ``subject.properties`` / ``resource.properties`` become the entity's attributes. An entity
      also present in the entities file keeps its stored attributes and parents; request
      properties only add attributes it does not have (the entity store wins).
    - ``context`` becomes the Cedar context; ``action.properties``, when present, appear as
      ``context.action_properties``.
    - JSON values map to Cedar values: ``null`` members are dropped (Cedar has no null), whole
      floats become Longs, other floats ``decimal`` values when Cedar can hold them exactly (at
      most four fractional digits) and strings otherwise. Objects with the Cedar JSON escape keys
      ``__entity``, ``__extn`` or ``__expr`` are refused, so request data cannot forge entity
      references.

Requestable denials (ARAP)
    A deny is *requestable* when (1) at least one ``forbid`` policy fired, (2) every forbid that
    fired, and every forbid whose evaluation failed, carries ``@requestable``, and (3) the policy
    set without its ``@requestable`` forbids would permit the request, so that an approval can
    actually lead to a permit. A default deny (no permit and no forbid matched) is never
    requestable. The decision context then carries ``evaluation_id`` (a random UUID),
    ``evaluated_at``, ``reason`` and ``access_request{expires_at, template, display}``.

Annotations (on ``forbid`` policies)
    - ``@requestable("template")``: the deny may be requested; the value is ``access_request.template``
      (``@requestable`` or ``@requestable("")``: requestable without a template).
    - ``@deadline("PT24H")``: ISO 8601 duration (weeks to seconds) after which the request hint
      expires: ``access_request.expires_at`` = decision time + deadline (default one hour).
    - ``@display("...")`` / ``@description("...")``: ``access_request.display.title`` / ``.description``.
    - ``@reason("code")``: ``context.reason`` of the deny. Without it, a requestable deny says
      ``approval_required``, and any other deny is a bare ``{"decision": false}`` (as the AuthZEN
      interop expects), except on re-evaluation, where it says ``policy_denied``.

    When several requestable forbids fire, the first in file order supplies template, display and
    reason, and the earliest deadline wins. ``@requestable``, ``@deadline``, ``@display`` and
    ``@description`` on a ``permit``, and the last three without ``@requestable``, fail loading.

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
import math
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final, Protocol

import cedarpy

from mcp_approval.clock import Clock, SystemClock, iso8601
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
from mcp_approval.policy.source import (
    LoadIssue,
    PolicyLoadError,
    Statement,
    TextSource,
    error_line,
    find_line,
    names_in_message,
    parse_duration,
    split_statements,
    statement_at_line,
)

logger = logging.getLogger("mcp_approval.policy")

ANNOTATION_REQUESTABLE: Final = "requestable"
ANNOTATION_DEADLINE: Final = "deadline"
ANNOTATION_DISPLAY: Final = "display"
ANNOTATION_DESCRIPTION: Final = "description"
ANNOTATION_REASON: Final = "reason"
_REQUESTABLE_ONLY = (ANNOTATION_DEADLINE, ANNOTATION_DISPLAY, ANNOTATION_DESCRIPTION)

_IDENTIFIER = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
_RESERVED = frozenset({"true", "false", "if", "then", "else", "in", "is", "like", "has", "__cedar"})
_ESCAPE_KEYS = frozenset({"__entity", "__extn", "__expr"})
_ERRORED_POLICY = re.compile(r"policy `([^`]+)`")
_SYNTAX_MARKERS = ("unexpected token", "invalid token", "unexpected end of input", "unrecognized token")
_I64 = (-(2**63), 2**63 - 1)
_DECIMAL_LIMIT = 922_337_203_685_477


class ApprovalVerifier(Protocol):
    """Checks a presented ``context.approval`` before policy sees it (ARAP §2.6)."""

    async def verify(self, request: EvaluationRequest, approval: Approval) -> str | None:
        """``None`` when ``approval`` is genuine and applies to ``request``; otherwise a reason code
        (``approval_unverifiable``, ``approval_expired``, ``out_of_scope``, ...)."""
        ...


@dataclass(frozen=True)
class EntityMapping:
    """How AuthZEN subjects, resources and actions name Cedar entities.

    Args:
        namespace: Cedar namespace prefixed to every entity type (``None``: no namespace).
        types: AuthZEN ``type`` → Cedar type name, for types that are not Cedar identifiers
            or should read differently in policy; other types are used as they are.
        action_type: the Cedar entity type of actions.
        action_properties_key: the context member that carries ``action.properties``.
    """

    namespace: str | None = None
    types: Mapping[str, str] = field(default_factory=dict)
    action_type: str = "Action"
    action_properties_key: str = "action_properties"

    def __post_init__(self) -> None:
        names = [self.action_type, *self.types.values()]
        if self.namespace:
            names.extend(self.namespace.split("::"))
        for name in names:
            _check_identifier(name)

    def entity_type(self, authzen_type: str) -> str:
        """The Cedar entity type of an AuthZEN subject or resource ``type``."""
        name = self.types.get(authzen_type, authzen_type)
        _check_identifier(name)
        return self._qualified(name)

    def uid(self, authzen_type: str, entity_id: str) -> dict[str, str]:
        """The Cedar entity uid (JSON form) of an AuthZEN subject or resource."""
        return {"type": self.entity_type(authzen_type), "id": entity_id}

    def action_uid(self, name: str) -> dict[str, str]:
        """The Cedar action uid (JSON form) of an AuthZEN action name."""
        return {"type": self._qualified(self.action_type), "id": name}

    def _qualified(self, name: str) -> str:
        return f"{self.namespace}::{name}" if self.namespace else name


def _check_identifier(name: str) -> None:
    if not _IDENTIFIER.match(name) or name in _RESERVED:
        raise ValueError(f"{name!r} is not a Cedar identifier; map it with EntityMapping.types")


def to_cedar_value(value: Any) -> Any:
    """Convert a JSON value to Cedar's JSON value form (see the module docstring)."""
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if _I64[0] <= value <= _I64[1] else str(value)
    if isinstance(value, float):
        return _float_value(value)
    if isinstance(value, Mapping):
        return to_cedar_record(value)
    if isinstance(value, list | tuple):
        return [to_cedar_value(item) for item in value if item is not None]
    raise ValueError(f"{type(value).__name__} is not a JSON value")


def to_cedar_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """Convert a JSON object to a Cedar record, dropping ``null`` members."""
    converted: dict[str, Any] = {}
    for key, member in record.items():
        if not isinstance(key, str):
            raise ValueError("record keys must be strings")
        if key in _ESCAPE_KEYS:
            raise ValueError(f"the member name {key!r} is reserved by Cedar")
        if member is not None:
            converted[key] = to_cedar_value(member)
    return converted


def _float_value(value: float) -> Any:
    if math.isfinite(value) and value.is_integer() and _I64[0] <= value <= _I64[1]:
        return int(value)
    text = repr(value)
    if re.fullmatch(r"-?\d+\.\d{1,4}", text) and abs(value) < _DECIMAL_LIMIT:
        return {"__extn": {"fn": "decimal", "arg": text}}
    return text


@dataclass(frozen=True)
class PolicyInfo:
    """What the PDP knows about one policy of the set."""

    policy_id: str
    effect: str
    annotations: Mapping[str, str]
    deadline: timedelta | None

    @property
    def is_forbid(self) -> bool:
        """Whether this is a ``forbid`` policy."""
        return self.effect == "forbid"

    @property
    def requestable(self) -> bool:
        """Whether this policy carries ``@requestable``."""
        return ANNOTATION_REQUESTABLE in self.annotations

    @property
    def reason_annotated(self) -> bool:
        """Whether this policy names its deny reason with ``@reason``."""
        return bool(self.annotations.get(ANNOTATION_REASON))

    @property
    def order(self) -> int:
        """The policy's position in its file (Cedar's positional ids are ``policy<n>``)."""
        return int(self.policy_id[6:]) if re.fullmatch(r"policy\d+", self.policy_id) else 1 << 30

    def display(self) -> dict[str, str] | None:
        """``access_request.display`` from ``@display`` and ``@description``."""
        display: dict[str, str] = {}
        if self.annotations.get(ANNOTATION_DISPLAY):
            display["title"] = self.annotations[ANNOTATION_DISPLAY]
        if self.annotations.get(ANNOTATION_DESCRIPTION):
            display["description"] = self.annotations[ANNOTATION_DESCRIPTION]
        return display or None


def _file_order(policy: PolicyInfo) -> int:
    return policy.order


@dataclass(frozen=True)
class _Verdict:
    """Cedar's answer to one request, reduced to what the decision needs."""

    allowed: bool
    fired: tuple[str, ...]
    errored: tuple[str, ...]
    failure: str | None = None


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
        self._schema = _load_schema(_source(schema)) if schema is not None else None
        policy_source = _source(policies)
        self._policies, self._reduced, self._info = _load_policies(policy_source, self._schema)
        self._stored, self._entities = _load_entities(_source(entities or "[]"), self._schema)

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
    def policies(self) -> Mapping[str, PolicyInfo]:
        """The policies of the set, by Cedar policy id."""
        return self._info

    # -- PolicyDecisionPoint -----------------------------------------------------------------

    async def evaluate(self, request: EvaluationRequest) -> Decision:
        """Decide one request (see the module docstring for the decision context)."""
        context = request.context or {}
        if "approval" not in context:
            return self._decide(request, approval=None)
        approval = request.approval
        problem = self._approval_problem(approval)
        if problem is None and approval is not None and self.approval_verifier is not None:
            problem = await self.approval_verifier.verify(request, approval)
        if problem is None and approval is not None:
            return self._decide(request, approval=approval)
        without = request.with_context({key: value for key, value in context.items() if key != "approval"})
        decision = self._decide(without, approval=None)
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
        verdict = self._authorize(cedar_request, self._policies, entities)
        if verdict.failure is not None:
            return Decision.deny(REASON_INVALID_REQUEST, error=verdict.failure)
        errored_forbids = [pid for pid in verdict.errored if self._is_forbid(pid)]
        if verdict.allowed and errored_forbids:
            logger.warning("forbid policies failed to evaluate, denying: %s", ", ".join(errored_forbids))
            return Decision.deny(REASON_POLICY_ERROR)
        if verdict.allowed:
            return Decision.permit({"approval": {"approved_until": approval.approved_until}} if approval else None)
        determining = sorted((self._info[pid] for pid in verdict.fired if pid in self._info), key=_file_order)
        known = len(determining) == len(verdict.fired)
        if known and self._requestable(determining, errored_forbids, cedar_request, entities):
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
    ) -> bool:
        if not determining or not all(policy.requestable for policy in determining):
            return False
        if not all(pid in self._info and self._info[pid].requestable for pid in errored_forbids):
            return False
        # Would an approval help? Only if the rest of the set permits the request.
        verdict = self._authorize(cedar_request, self._reduced, entities)
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
        try:
            until = datetime.fromisoformat(approval.approved_until)
        except ValueError:
            return REASON_APPROVAL_UNVERIFIABLE
        if until.tzinfo is None:
            return REASON_APPROVAL_UNVERIFIABLE
        if until.timestamp() * 1000 <= self.clock.now_ms():
            return REASON_APPROVAL_EXPIRED
        return None

    def _is_forbid(self, policy_id: str) -> bool:
        info = self._info.get(policy_id)
        return info is None or info.is_forbid  # an unknown policy id is treated as the dangerous kind

    # -- Cedar plumbing ----------------------------------------------------------------------

    def _cedar_request(self, request: EvaluationRequest) -> tuple[dict[str, Any], cedarpy.Entities]:
        principal = self.mapping.uid(request.subject.type, request.subject.id)
        resource = self.mapping.uid(request.resource.type, request.resource.id)
        context = to_cedar_record(request.context or {})
        if request.action.properties:
            key = self.mapping.action_properties_key
            if key in context:
                raise ValueError(f"context member {key!r} is reserved for action.properties")
            context[key] = to_cedar_record(request.action.properties)
        entities = self._request_entities(
            [(principal, request.subject.properties), (resource, request.resource.properties)]
        )
        cedar_request = {
            "principal": principal,
            "action": self.mapping.action_uid(request.action.name),
            "resource": resource,
            "context": context,
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

    def _authorize(
        self, cedar_request: dict[str, Any], policies: cedarpy.PolicySet, entities: cedarpy.Entities
    ) -> _Verdict:
        try:
            result = cedarpy.is_authorized(cedar_request, policies, entities, schema=self._schema)
        except ValueError as exc:
            return _Verdict(False, (), (), failure=str(exc))
        errors = list(result.diagnostics.errors)
        if result.decision is cedarpy.Decision.NoDecision:
            return _Verdict(False, (), (), failure="; ".join(errors) or "Cedar reached no decision")
        errored = tuple(match.group(1) for error in errors if (match := _ERRORED_POLICY.search(error)))
        if len(errored) < len(errors):
            # An error that names no policy: assume the worst about it.
            errored += ("<unknown>",)
        return _Verdict(result.allowed, tuple(result.diagnostics.reasons), errored)


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


# -- loading --------------------------------------------------------------------------------------


def _source(value: TextSource | str) -> TextSource:
    return value if isinstance(value, TextSource) else TextSource(value)


def _is_syntax_error(message: str) -> bool:
    return any(marker in message for marker in _SYNTAX_MARKERS)


def _load_schema(source: TextSource) -> cedarpy.Schema:
    text = source.text
    is_json = text.lstrip().startswith("{")
    if is_json:
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise PolicyLoadError([LoadIssue(source.name, exc.lineno, f"invalid JSON: {exc.msg}")]) from exc
    try:
        return cedarpy.Schema.from_json_str(text) if is_json else cedarpy.Schema.from_str(text)
    except ValueError as exc:
        message = str(exc)
        line = None if is_json else error_line(text, cedarpy.Schema.from_str)
        if not _is_syntax_error(message):
            line = find_line(text, names_in_message(message)) or line
        raise PolicyLoadError([LoadIssue(source.name, line, f"invalid schema: {message}")]) from exc


def _load_policies(
    source: TextSource, schema: cedarpy.Schema | None
) -> tuple[cedarpy.PolicySet, cedarpy.PolicySet, dict[str, PolicyInfo]]:
    text = source.text
    statements = split_statements(text)
    try:
        policies = cedarpy.PolicySet.from_str(text)
    except ValueError as exc:
        raise PolicyLoadError([_parse_issue(source, statements, str(exc))]) from exc
    if schema is not None:
        _validate(source, statements, schema)
    est = json.loads(cedarpy.policies_to_json_str(text))
    info = _policy_info(source, statements, est)
    reduced = dict(est)
    reduced["staticPolicies"] = {
        pid: body
        for pid, body in est.get("staticPolicies", {}).items()
        if not (info[pid].is_forbid and info[pid].requestable)
    }
    return policies, cedarpy.PolicySet.from_json_str(json.dumps(reduced)), info


def _parse_issue(source: TextSource, statements: Sequence[Statement], message: str) -> LoadIssue:
    line = error_line(source.text, cedarpy.PolicySet.from_str)
    statement = statement_at_line(statements, line) if line is not None else None
    if statement is not None and not _is_syntax_error(message):
        nth = 2 if message.startswith("duplicate") else 1  # point at the repetition, not the original
        refined = find_line(source.text, names_in_message(message), statement.first_line, line, nth=nth)
        line = refined or statement.first_line
    policy = statement.describe() if statement is not None else None
    return LoadIssue(source.name, line, message, policy)


def _validate(source: TextSource, statements: Sequence[Statement], schema: cedarpy.Schema) -> None:
    result = cedarpy.validate_policies(source.text, schema)
    if result.validation_passed:
        return
    by_id = {statement.policy_id: statement for statement in statements}
    issues = []
    for error in result.errors:
        statement = by_id.get(error.policy_id)
        line = None
        if statement is not None:
            needles = names_in_message(error.error)
            line = find_line(source.text, needles, statement.first_line, statement.last_line) or statement.first_line
        policy = statement.describe() if statement is not None else error.policy_id or None
        issues.append(LoadIssue(source.name, line, f"does not match the schema: {error.error}", policy))
    raise PolicyLoadError(issues)


def _policy_info(source: TextSource, statements: Sequence[Statement], est: Mapping[str, Any]) -> dict[str, PolicyInfo]:
    by_id = {statement.policy_id: statement for statement in statements}
    info: dict[str, PolicyInfo] = {}
    issues: list[LoadIssue] = []
    bodies = {**est.get("templates", {}), **est.get("staticPolicies", {})}
    for pid, body in bodies.items():
        annotations = {str(k): "" if v is None else str(v) for k, v in (body.get("annotations") or {}).items()}
        statement = by_id.get(pid)
        problem, deadline = _annotation_problem(str(body.get("effect")), annotations)
        if problem is not None:
            name, detail = problem
            first, last = (statement.first_line, statement.last_line) if statement else (1, None)
            line = find_line(source.text, [f"@{name}"], first, last) or first
            issues.append(LoadIssue(source.name, line, detail, statement.describe() if statement else pid))
            continue
        info[pid] = PolicyInfo(pid, str(body.get("effect")), annotations, deadline)
    if issues:
        raise PolicyLoadError(issues)
    return info


def _annotation_problem(effect: str, annotations: Mapping[str, str]) -> tuple[tuple[str, str] | None, timedelta | None]:
    """``((annotation, message), None)`` for a misused annotation, else ``(None, deadline)``."""
    requestable = ANNOTATION_REQUESTABLE in annotations
    if requestable and effect != "forbid":
        return (ANNOTATION_REQUESTABLE, "@requestable applies to forbid policies only"), None
    for name in _REQUESTABLE_ONLY:
        if name in annotations and not requestable:
            return (name, f"@{name} needs @requestable on the same policy"), None
    if ANNOTATION_DEADLINE not in annotations:
        return None, None
    try:
        return None, parse_duration(annotations[ANNOTATION_DEADLINE])
    except ValueError as exc:
        return (ANNOTATION_DEADLINE, f"@deadline: {exc}"), None


def _load_entities(
    source: TextSource, schema: cedarpy.Schema | None
) -> tuple[dict[tuple[str, str], dict[str, Any]], cedarpy.Entities]:
    items = _entity_items(source)
    stored: dict[tuple[str, str], dict[str, Any]] = {}
    for line, entity in items:
        stored[_entity_key(source, line, entity)] = {
            "uid": entity["uid"],
            "attrs": entity.get("attrs") or {},
            "parents": entity.get("parents") or [],
            **{k: v for k, v in entity.items() if k not in {"uid", "attrs", "parents"}},
        }
    try:
        return stored, cedarpy.Entities.from_json_str(source.text, schema)
    except ValueError as exc:
        raise PolicyLoadError([_entity_issue(source, items, schema, str(exc))]) from exc


def _entity_items(source: TextSource) -> list[tuple[int, dict[str, Any]]]:
    """The entities of a JSON list, each with the line it starts on."""
    text = source.text
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PolicyLoadError([LoadIssue(source.name, exc.lineno, f"invalid JSON: {exc.msg}")]) from exc
    if not isinstance(document, list):
        raise PolicyLoadError([LoadIssue(source.name, 1, "the entities file must hold a JSON list of entities")])
    decoder = json.JSONDecoder()
    offset = text.index("[") + 1
    items: list[tuple[int, dict[str, Any]]] = []
    for _ in document:
        while text[offset] in " \t\r\n,":
            offset += 1
        value, end = decoder.raw_decode(text, offset)
        line = text.count("\n", 0, offset) + 1
        if not isinstance(value, dict):
            raise PolicyLoadError([LoadIssue(source.name, line, "each entity must be a JSON object")])
        items.append((line, value))
        offset = end
    return items


def _entity_key(source: TextSource, line: int, entity: Mapping[str, Any]) -> tuple[str, str]:
    uid = entity.get("uid")
    if not isinstance(uid, dict) or not isinstance(uid.get("type"), str) or not isinstance(uid.get("id"), str):
        raise PolicyLoadError([LoadIssue(source.name, line, 'an entity needs "uid": {"type": ..., "id": ...}')])
    return uid["type"], uid["id"]


def _entity_issue(
    source: TextSource, items: Sequence[tuple[int, dict[str, Any]]], schema: cedarpy.Schema | None, message: str
) -> LoadIssue:
    """Find the entity Cedar refused by loading them one at a time."""
    for line, entity in items:
        uid = entity["uid"]
        name = f'{uid["type"]}::"{uid["id"]}"'
        try:
            cedarpy.Entities.from_json_str(json.dumps([entity]))
        except ValueError as exc:
            return LoadIssue(source.name, line, f"entity {name} is malformed: {exc}")
        if schema is None:
            continue
        try:
            cedarpy.Entities.from_json_str(json.dumps([entity]), schema)
        except ValueError as exc:
            detail = f"does not match the schema (undeclared type, or attributes of the wrong shape): {exc}"
            return LoadIssue(source.name, line, f"entity {name} {detail}")
    return LoadIssue(source.name, None, f"invalid entities: {message}")
