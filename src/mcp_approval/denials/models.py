"""The SEP-2643 authorization denial envelope, its remediation hints, and RAR authorization details.

The envelope is carried in a result's ``_meta`` under :data:`~mcp_approval.protocol.META_AUTHORIZATION`::

    {"reason": "insufficient_authorization", "remediation": "available",
     "authorizationContextId": "...", "remediationHints": [{"type": "url"}]}

Envelope members are camelCase; the members of an ``authorization_remediation`` hint are
snake_case, as the SEP (and RFC 9396 before it) spells them.
"""

from __future__ import annotations

import json
import math
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializeAsAny,
    Tag,
    field_validator,
    model_validator,
)

from mcp_approval.protocol import (
    HINT_AUTHORIZATION_REMEDIATION,
    HINT_TASK,
    HINT_URL,
    META_AUTHORIZATION,
    REASON_INSUFFICIENT_AUTHORIZATION,
    REMEDIATION_AVAILABLE,
    REMEDIATION_UNAVAILABLE,
    REMEDIATION_UNDISCLOSED,
)

__all__ = [
    "MAX_AUTHORIZATION_DETAILS",
    "MAX_DETAILS_BYTES",
    "MAX_DETAILS_DEPTH",
    "MAX_REFERENCE_LENGTH",
    "MAX_TYPE_LENGTH",
    "AnyHint",
    "AuthorizationDenialEnvelope",
    "AuthorizationRemediation",
    "AuthorizationRemediationHint",
    "Remediation",
    "RemediationHint",
    "TaskHint",
    "UrlHint",
    "validate_authorization_details",
]

#: Most authorization details objects one remediation may carry.
MAX_AUTHORIZATION_DETAILS = 32
#: Deepest nesting of objects and arrays inside one authorization details object.
MAX_DETAILS_DEPTH = 8
#: Largest compact JSON serialization of an ``authorization_details`` array, in bytes.
MAX_DETAILS_BYTES = 16 * 1024
#: Longest ``type`` of a hint or of an authorization details object.
MAX_TYPE_LENGTH = 256
#: Longest ``authorization_reference``.
MAX_REFERENCE_LENGTH = 512


class Remediation(StrEnum):
    """Whether a denial can be acted on (the envelope's ``remediation``)."""

    AVAILABLE = REMEDIATION_AVAILABLE
    UNAVAILABLE = REMEDIATION_UNAVAILABLE
    UNDISCLOSED = REMEDIATION_UNDISCLOSED


def validate_authorization_details(value: object) -> list[dict[str, Any]]:
    """Check an RFC 9396 ``authorization_details`` array against the shape and the size limits.

    Returns a deep copy made of plain JSON values. Raises :class:`ValueError` naming the first
    problem: not a non-empty array of objects, an object without a string ``type``, a non-JSON
    value (``NaN``, infinities, non-string keys), nesting deeper than :data:`MAX_DETAILS_DEPTH`,
    more than :data:`MAX_AUTHORIZATION_DETAILS` objects or more than :data:`MAX_DETAILS_BYTES`.
    """
    if not isinstance(value, list) or not value:
        raise ValueError("authorization_details must be a non-empty array")
    if len(value) > MAX_AUTHORIZATION_DETAILS:
        raise ValueError(f"authorization_details has {len(value)} objects; the limit is {MAX_AUTHORIZATION_DETAILS}")
    for index, detail in enumerate(value):
        if not isinstance(detail, dict):
            raise ValueError(f"authorization_details[{index}] is not an object")
        kind = detail.get("type")
        if not isinstance(kind, str) or not kind or len(kind) > MAX_TYPE_LENGTH:
            raise ValueError(f"authorization_details[{index}].type must be a non-empty string")
        _check_json(detail, depth=1, where=f"authorization_details[{index}]")
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:  # unreachable after _check_json; kept as a last guard
        raise ValueError(f"authorization_details is not JSON: {exc}") from exc
    size = len(text.encode("utf-8"))
    if size > MAX_DETAILS_BYTES:
        raise ValueError(f"authorization_details is {size} bytes; the limit is {MAX_DETAILS_BYTES}")
    copied: list[dict[str, Any]] = json.loads(text)
    return copied


def _check_json(value: object, *, depth: int, where: str) -> None:
    if depth > MAX_DETAILS_DEPTH:
        raise ValueError(f"{where} nests deeper than {MAX_DETAILS_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has a non-string key")
            _check_json(item, depth=depth + 1, where=where)
    elif isinstance(value, list):
        for item in value:
            _check_json(item, depth=depth + 1, where=where)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where} holds a non-finite number")
    elif value is not None and not isinstance(value, str | int | float | bool):
        raise ValueError(f"{where} holds a {type(value).__name__}, which is not JSON")


class RemediationHint(BaseModel):
    """A remediation hint: a ``type`` plus members determined by that type.

    Instances of this class stand for hint types this library does not define; they keep their
    members so a server can emit them, and a client ignores them.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    type: str = Field(min_length=1, max_length=MAX_TYPE_LENGTH)


class UrlHint(RemediationHint):
    """The user completes an interaction at a URL (the URL is in the ``InputRequiredResult``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["url"] = HINT_URL


class TaskHint(RemediationHint):
    """Remediation proceeds out of band; the task holds the request until it is decided."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["task"] = HINT_TASK


class AuthorizationRemediation(BaseModel):
    """What a new credential must carry: RFC 9396 ``authorization_details`` and, optionally, a reference.

    This is also the JSON object that an HTTP ``insufficient_authorization`` challenge carries,
    base64url-encoded, in its ``authorization_remediation`` parameter.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    authorization_details: list[dict[str, Any]]
    authorization_reference: str | None = Field(default=None, min_length=1, max_length=MAX_REFERENCE_LENGTH)

    @field_validator("authorization_details", mode="before")
    @classmethod
    def _details(cls, value: object) -> list[dict[str, Any]]:
        return validate_authorization_details(value)

    def document(self) -> dict[str, Any]:
        """The JSON object, without absent members."""
        return self.model_dump(mode="json", exclude_none=True)


class AuthorizationRemediationHint(AuthorizationRemediation, RemediationHint):
    """A new credential is needed; it must carry these authorization details."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["authorization_remediation"] = HINT_AUTHORIZATION_REMEDIATION

    @classmethod
    def of(cls, remediation: AuthorizationRemediation) -> AuthorizationRemediationHint:
        """The hint carrying ``remediation``."""
        return cls(
            authorization_details=remediation.authorization_details,
            authorization_reference=remediation.authorization_reference,
        )


def _hint_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in (HINT_URL, HINT_TASK, HINT_AUTHORIZATION_REMEDIATION) else "other"


AnyHint = Annotated[
    Annotated[UrlHint, Tag(HINT_URL)]
    | Annotated[TaskHint, Tag(HINT_TASK)]
    | Annotated[AuthorizationRemediationHint, Tag(HINT_AUTHORIZATION_REMEDIATION)]
    | Annotated[SerializeAsAny[RemediationHint], Tag("other")],
    Discriminator(_hint_tag),
]
"""A hint of a known type as its own model, any other as :class:`RemediationHint`."""


class AuthorizationDenialEnvelope(BaseModel):
    """The envelope itself. Hints are allowed only when ``remediation`` is ``available``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    reason: str = Field(default=REASON_INSUFFICIENT_AUTHORIZATION, min_length=1)
    remediation: Remediation
    authorization_context_id: str | None = Field(default=None, alias="authorizationContextId", min_length=1)
    remediation_hints: tuple[AnyHint, ...] | None = Field(default=None, alias="remediationHints")

    @model_validator(mode="after")
    def _hints_only_when_available(self) -> AuthorizationDenialEnvelope:
        if self.remediation_hints is not None and self.remediation is not Remediation.AVAILABLE:
            raise ValueError(f"remediationHints must not be present when remediation is {self.remediation.value}")
        return self

    def document(self) -> dict[str, Any]:
        """The envelope as JSON, without absent members."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def meta(self) -> dict[str, Any]:
        """A ``_meta`` object holding just this envelope."""
        return {META_AUTHORIZATION: self.document()}

    def hint_types(self) -> tuple[str, ...]:
        """The ``type`` of each hint, in order."""
        return tuple(hint.type for hint in self.remediation_hints or ())
