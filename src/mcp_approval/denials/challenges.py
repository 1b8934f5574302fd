"""``WWW-Authenticate`` values for the HTTP form of a denial (SEP-2643 case 5).

- 403 ``Bearer error="insufficient_scope", scope="...", resource_metadata="..."`` (RFC 6750 §3.1,
  RFC 9728 §5.1): the client obtains a token for the named scopes and retries.
- 401 ``Bearer error="insufficient_authorization", resource_metadata="...", error_description="...",
  authorization_remediation=<base64url JSON>`` (draft-ietf-oauth-rar-metadata-remediation): the
  client decodes it and sends the ``authorization_details`` to its authorization server.
- 401 without an error code when the request carried no credentials (RFC 6750 §3.1), and
  ``error="invalid_token"`` when it carried an unusable one.

Each challenge means ``reason: insufficient_authorization`` and ``remediation: available``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Sequence
from typing import Final

from mcp_approval.denials.models import AuthorizationRemediation
from mcp_approval.protocol import (
    CHALLENGE_INSUFFICIENT_AUTHORIZATION,
    CHALLENGE_INSUFFICIENT_SCOPE,
    CHALLENGE_INVALID_TOKEN,
)

__all__ = [
    "MAX_REMEDIATION_PARAMETER",
    "authentication_required",
    "bearer_challenge",
    "decode_remediation",
    "encode_remediation",
    "insufficient_authorization",
    "insufficient_scope",
    "scope_tokens",
]

#: Longest ``authorization_remediation`` parameter a client decodes (base64url characters).
MAX_REMEDIATION_PARAMETER = 24 * 1024
#: RFC 6749 §3.3 scope-token characters (NQCHAR).
_SCOPE_TOKEN: Final = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
_BASE64URL: Final = re.compile(r"[A-Za-z0-9_-]+={0,2}")


def scope_tokens(scopes: Iterable[str]) -> tuple[str, ...]:
    """Validated, de-duplicated scope tokens in first-seen order."""
    seen: dict[str, None] = {}
    for scope in scopes:
        if not isinstance(scope, str) or _SCOPE_TOKEN.fullmatch(scope) is None:
            raise ValueError(f"not an RFC 6749 scope token: {scope!r}")
        seen.setdefault(scope)
    return tuple(seen)


def bearer_challenge(parameters: Sequence[tuple[str, str]]) -> str:
    """A ``Bearer`` challenge with each parameter as a quoted string (``\\`` and ``"`` escaped)."""
    parts = []
    for name, value in parameters:
        if any(ord(char) < 0x20 or ord(char) == 0x7F for char in value):
            raise ValueError(f"challenge parameter {name} contains a control character")
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        parts.append(f'{name}="{escaped}"')
    return "Bearer " + ", ".join(parts) if parts else "Bearer"


def insufficient_scope(scopes: Iterable[str], *, resource_metadata: str, description: str | None = None) -> str:
    """The 403 challenge naming every scope the request needs."""
    tokens = scope_tokens(scopes)
    if not tokens:
        raise ValueError("an insufficient_scope challenge names at least one scope")
    parameters = [
        ("error", CHALLENGE_INSUFFICIENT_SCOPE),
        ("scope", " ".join(tokens)),
        ("resource_metadata", resource_metadata),
    ]
    if description:
        parameters.append(("error_description", description))
    return bearer_challenge(parameters)


def insufficient_authorization(
    remediation: AuthorizationRemediation,
    *,
    resource_metadata: str,
    description: str = "Additional authorization is required",
) -> str:
    """The 401 RAR step-up challenge carrying ``remediation`` base64url-encoded."""
    return bearer_challenge(
        [
            ("error", CHALLENGE_INSUFFICIENT_AUTHORIZATION),
            ("resource_metadata", resource_metadata),
            ("error_description", description),
            ("authorization_remediation", encode_remediation(remediation)),
        ]
    )


def authentication_required(scopes: Iterable[str], *, resource_metadata: str, credentials_presented: bool) -> str:
    """The 401 challenge for a request without a usable token: an error code only if it presented one."""
    parameters = [("error", CHALLENGE_INVALID_TOKEN)] if credentials_presented else []
    tokens = scope_tokens(scopes)
    if tokens:
        parameters.append(("scope", " ".join(tokens)))
    parameters.append(("resource_metadata", resource_metadata))
    return bearer_challenge(parameters)


def encode_remediation(remediation: AuthorizationRemediation) -> str:
    """base64url (no padding) of the remediation's compact JSON."""
    text = json.dumps(remediation.document(), separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode("utf-8")).rstrip(b"=").decode("ascii")


def decode_remediation(value: str) -> AuthorizationRemediation:
    """Decode an ``authorization_remediation`` parameter, padded or not, within the size limits.

    Raises :class:`ValueError` with the reason for anything that is not base64url of a JSON
    object holding valid ``authorization_details``.
    """
    if len(value) > MAX_REMEDIATION_PARAMETER:
        limit = MAX_REMEDIATION_PARAMETER
        raise ValueError(f"authorization_remediation is {len(value)} characters; the limit is {limit}")
    if _BASE64URL.fullmatch(value) is None:
        raise ValueError("authorization_remediation is not base64url")
    try:
        raw = base64.urlsafe_b64decode(value.rstrip("=") + "=" * (-len(value.rstrip("=")) % 4))
        document = json.loads(raw.decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"authorization_remediation does not decode to JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise ValueError("authorization_remediation is not a JSON object")
    try:
        return AuthorizationRemediation.model_validate(
            {key: document[key] for key in ("authorization_details", "authorization_reference") if key in document}
        )
    except ValueError as exc:
        raise ValueError(f"authorization_remediation is ill-formed: {exc}") from exc
