"""AuthZEN Authorization API 1.0 messages and the ARAP requestable-denial context.

The information model (subject, action, resource, context, decision) and the batch
("boxcar") request follow AuthZEN 1.0 §5-§7; the decision-context members of a requestable
denial and the re-evaluation input ``context.approval`` follow the Access Request and Approval
Profile (ARAP, -01 text). Receivers ignore unknown members (AuthZEN §1.2), so every model here
accepts and drops them, except :class:`AccessRequestHint`, whose extension members are kept.

Optional members that are absent serialize as absent (never as ``null``); ``null`` values inside
free-form objects (``properties``, ``context``) are kept, because ARAP compares them structurally.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictStr,
    ValidationError,
    field_validator,
    model_serializer,
)

#: The free-form context object of a request or a decision.
Context = dict[str, Any]

#: Decision-context ``reason`` codes this package emits.
REASON_APPROVAL_REQUIRED: Final = "approval_required"
REASON_POLICY_DENIED: Final = "policy_denied"
REASON_POLICY_ERROR: Final = "policy_error"
REASON_INVALID_REQUEST: Final = "invalid_request"
REASON_APPROVAL_EXPIRED: Final = "approval_expired"
REASON_OUT_OF_SCOPE: Final = "out_of_scope"
REASON_GRANT_PENDING: Final = "grant_pending"
REASON_APPROVAL_UNVERIFIABLE: Final = "approval_unverifiable"
REASON_PDP_UNAVAILABLE: Final = "pdp_unavailable"
REASON_PDP_ERROR: Final = "pdp_error"
REASON_PDP_INVALID_RESPONSE: Final = "pdp_invalid_response"


class AuthzenModel(BaseModel):
    """Base of the AuthZEN messages: unknown members ignored, absent members never sent as ``null``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if not isinstance(data, dict):
            return data
        fields = type(self).model_fields
        return {key: value for key, value in data.items() if value is not None or key not in fields}

    def to_wire(self) -> dict[str, Any]:
        """The JSON object sent on the wire."""
        wire: dict[str, Any] = self.model_dump(mode="json")
        return wire


class Subject(AuthzenModel):
    """The user or machine principal asking for access (AuthZEN §5.1)."""

    type: StrictStr
    id: StrictStr
    properties: dict[str, Any] | None = None


class Resource(AuthzenModel):
    """The target of the access (AuthZEN §5.2)."""

    type: StrictStr
    id: StrictStr
    properties: dict[str, Any] | None = None


class Action(AuthzenModel):
    """The operation the subject wants to perform (AuthZEN §5.3)."""

    name: StrictStr
    properties: dict[str, Any] | None = None


class EvaluationRequest(AuthzenModel):
    """One Access Evaluation request (AuthZEN §6.1)."""

    subject: Subject
    action: Action
    resource: Resource
    context: Context | None = None

    @property
    def approval(self) -> Approval | None:
        """The ``context.approval`` of a re-evaluation, or ``None`` when absent or malformed."""
        raw = (self.context or {}).get("approval")
        if not isinstance(raw, Mapping):
            return None
        try:
            return Approval.model_validate(raw)
        except ValidationError:
            return None

    def with_context(self, context: Context | None) -> EvaluationRequest:
        """A copy of this request with ``context`` replaced."""
        return self.model_copy(update={"context": context})


class EvaluationsSemantic(StrEnum):
    """``options.evaluations_semantic`` of a batch request (AuthZEN §7.1.2).

    - ``execute_all``: every evaluation runs; one decision per request item.
    - ``deny_on_first_deny``: stop after the first deny; the response ends with that deny.
    - ``permit_on_first_permit``: stop after the first permit; the response ends with that permit.
    """

    EXECUTE_ALL = "execute_all"
    DENY_ON_FIRST_DENY = "deny_on_first_deny"
    PERMIT_ON_FIRST_PERMIT = "permit_on_first_permit"


class EvaluationsOptions(AuthzenModel):
    """The ``options`` object of a batch request; unknown options are ignored."""

    evaluations_semantic: EvaluationsSemantic = EvaluationsSemantic.EXECUTE_ALL


class EvaluationItem(AuthzenModel):
    """One entry of ``evaluations``: any member it names replaces the top-level default whole."""

    subject: Subject | None = None
    action: Action | None = None
    resource: Resource | None = None
    context: Context | None = None


class BatchItemError(AuthzenModel):
    """A batch entry that is not a complete evaluation after the defaults are applied."""

    index: int
    message: str


class EvaluationsRequest(AuthzenModel):
    """An Access Evaluations (batch) request (AuthZEN §7.1).

    The top-level ``subject``, ``action``, ``resource`` and ``context`` are defaults for every
    entry of ``evaluations``; an entry that names one of them replaces it whole (no member merging).
    """

    subject: Subject | None = None
    action: Action | None = None
    resource: Resource | None = None
    context: Context | None = None
    evaluations: list[EvaluationItem] | None = None
    options: EvaluationsOptions | None = None

    @field_validator("subject", "action", "resource", mode="before")
    @classmethod
    def _empty_default_is_absent(cls, value: Any) -> Any:
        # The Todo interop payloads send `"resource": {}` as a top-level default: treat it as absent.
        return None if value == {} else value

    @property
    def semantic(self) -> EvaluationsSemantic:
        """The requested evaluation semantic (``execute_all`` when unspecified)."""
        return self.options.evaluations_semantic if self.options else EvaluationsSemantic.EXECUTE_ALL

    def resolve(self) -> list[EvaluationRequest | BatchItemError]:
        """Every entry as a complete request, or as the error that makes it incomplete, in order.

        A request without ``evaluations`` (or with an empty list) is one evaluation of the
        top-level members, as AuthZEN §7.1 prescribes.
        """
        items = self.evaluations or [EvaluationItem()]
        return [self._resolve_item(index, item) for index, item in enumerate(items)]

    def _resolve_item(self, index: int, item: EvaluationItem) -> EvaluationRequest | BatchItemError:
        subject = item.subject or self.subject
        action = item.action or self.action
        resource = item.resource or self.resource
        present = {"subject": subject, "action": action, "resource": resource}
        missing = [name for name, value in present.items() if value is None]
        if missing or subject is None or action is None or resource is None:
            return BatchItemError(index=index, message=f"evaluation {index} has no {', '.join(missing)}")
        context = item.context if item.context is not None else self.context
        return EvaluationRequest(subject=subject, action=action, resource=resource, context=context)


class Approval(AuthzenModel):
    """An ARS approval result (ARAP §2.6), copied unchanged into ``context.approval`` on re-evaluation."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: StrictStr = Field(min_length=1)
    approved_until: StrictStr
    approved_at: StrictStr | None = None
    state: Any = None


class AccessRequestHint(AuthzenModel):
    """``context.access_request`` of a requestable denial (ARAP §2.2); extension members are kept."""

    model_config = ConfigDict(extra="allow", frozen=True)

    expires_at: StrictStr
    endpoint: StrictStr | None = None
    template: StrictStr | None = None
    display: dict[str, Any] | None = None
    binding_token: StrictStr | None = None
    form_url: StrictStr | None = None
    request_schema_url: StrictStr | None = None
    request_catalogs_url: StrictStr | None = None


class RequestableDenial(AuthzenModel):
    """The typed view of a requestable denial's decision context (ARAP §2.2)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    access_request: AccessRequestHint
    evaluation_id: StrictStr | None = None
    evaluated_at: StrictStr | None = None
    reason: StrictStr | None = None
    next_action: StrictStr | None = None


class NextAction(StrEnum):
    """What a PEP does after a denied re-evaluation (ARAP §2.7)."""

    REQUEST = "request"
    RETRY = "retry"
    NONE = "none"


#: Default ``next_action`` of the registered re-evaluation ``reason`` codes (ARAP §2.7).
REASON_NEXT_ACTIONS: Final[Mapping[str, NextAction]] = {
    REASON_APPROVAL_EXPIRED: NextAction.REQUEST,
    REASON_OUT_OF_SCOPE: NextAction.REQUEST,
    REASON_GRANT_PENDING: NextAction.RETRY,
    REASON_POLICY_DENIED: NextAction.NONE,
    REASON_APPROVAL_UNVERIFIABLE: NextAction.NONE,
}


class Decision(AuthzenModel):
    """An Access Evaluation response (AuthZEN §6.2): ``decision`` plus an optional context."""

    decision: StrictBool
    context: Context | None = None

    @classmethod
    def permit(cls, context: Context | None = None) -> Decision:
        """A permit, with an optional decision context."""
        return cls(decision=True, context=context)

    @classmethod
    def deny(cls, reason: str | None = None, **context: Any) -> Decision:
        """A deny whose context carries ``reason`` (when given) and the other members."""
        body = {"reason": reason, **context} if reason is not None else dict(context)
        return cls(decision=False, context=body or None)

    @property
    def reason(self) -> str | None:
        """The ``context.reason`` code, when it is a string."""
        reason = (self.context or {}).get("reason")
        return reason if isinstance(reason, str) else None

    @property
    def requestable_denial(self) -> RequestableDenial | None:
        """The requestable-denial context of a deny, or ``None``.

        ``context.access_request`` is the only requestability signal (ARAP §2.2); a permit, a deny
        without it, or one whose ``access_request`` is malformed (no ``expires_at``) is not
        requestable.
        """
        if self.decision or not self.context or not isinstance(self.context.get("access_request"), Mapping):
            return None
        try:
            return RequestableDenial.model_validate(self.context)
        except ValidationError:
            return None

    @property
    def retry_after(self) -> int | None:
        """``context.retry_after`` in seconds, when it is a non-negative integer."""
        value = (self.context or {}).get("retry_after")
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    def next_action(self) -> NextAction:
        """The PEP's next step after this decision, resolved in the order ARAP §2.7 prescribes.

        A recognized ``next_action`` wins, then the default of a recognized ``reason``, then
        ``request`` if and only if a well-formed ``access_request`` is present. ``request`` without
        an ``access_request`` is ``none``.
        """
        if self.decision:
            return NextAction.NONE
        requestable = self.requestable_denial is not None
        raw = (self.context or {}).get("next_action")
        reason = self.reason
        action: NextAction | None = None
        if isinstance(raw, str) and raw in NextAction.__members__.values():
            action = NextAction(raw)
        elif reason is not None and reason in REASON_NEXT_ACTIONS:
            action = REASON_NEXT_ACTIONS[reason]
        if action is None:
            action = NextAction.REQUEST if requestable else NextAction.NONE
        if action is NextAction.REQUEST and not requestable:
            return NextAction.NONE
        return action


class EvaluationsResponse(AuthzenModel):
    """An Access Evaluations response: one decision per evaluated entry, in request order."""

    evaluations: list[Decision]


class PDPMetadata(AuthzenModel):
    """The PDP metadata document (AuthZEN §9), with the ARAP additions."""

    model_config = ConfigDict(extra="allow", frozen=True)

    policy_decision_point: StrictStr
    access_evaluation_endpoint: StrictStr
    access_evaluations_endpoint: StrictStr | None = None
    search_subject_endpoint: StrictStr | None = None
    search_resource_endpoint: StrictStr | None = None
    search_action_endpoint: StrictStr | None = None
    access_request_endpoint: StrictStr | None = None
    jwks_uri: StrictStr | None = None
    capabilities: list[StrictStr] | None = None
    signed_metadata: StrictStr | None = None


__all__ = [
    "REASON_APPROVAL_EXPIRED",
    "REASON_APPROVAL_REQUIRED",
    "REASON_APPROVAL_UNVERIFIABLE",
    "REASON_GRANT_PENDING",
    "REASON_INVALID_REQUEST",
    "REASON_NEXT_ACTIONS",
    "REASON_OUT_OF_SCOPE",
    "REASON_PDP_ERROR",
    "REASON_PDP_INVALID_RESPONSE",
    "REASON_PDP_UNAVAILABLE",
    "REASON_POLICY_DENIED",
    "REASON_POLICY_ERROR",
    "AccessRequestHint",
    "Action",
    "Approval",
    "AuthzenModel",
    "BatchItemError",
    "Context",
    "Decision",
    "EvaluationItem",
    "EvaluationRequest",
    "EvaluationsOptions",
    "EvaluationsRequest",
    "EvaluationsResponse",
    "EvaluationsSemantic",
    "NextAction",
    "PDPMetadata",
    "Resource",
    "Subject",
]
