"""Reading SEP-2643 authorization denials on the client: the HTTP ``WWW-Authenticate`` challenge.

An unreadable or unclassifiable challenge never raises: :attr:`ChallengeReading.problem` says why.
The envelope in a result is read by :mod:`mcp_approval.client.denials`, which re-exports these names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from mcp_approval.denials.challenges import decode_remediation
from mcp_approval.denials.models import AuthorizationRemediation, Remediation
from mcp_approval.protocol import (
    CHALLENGE_INSUFFICIENT_AUTHORIZATION,
    CHALLENGE_INSUFFICIENT_SCOPE,
    REASON_INSUFFICIENT_AUTHORIZATION,
)

__all__ = [
    "CHALLENGE_TRANSACTION_AUTHORIZATION",
    "MAX_CHALLENGE_LENGTH",
    "ChallengeDenial",
    "ChallengeReading",
    "read_challenge",
]

#: ``error`` of the OAuth transaction authorization challenge (draft-rosomakho-oauth-txn-challenge).
CHALLENGE_TRANSACTION_AUTHORIZATION: Final = "transaction_authorization_required"
_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_QUOTED: Final = re.compile(r'"((?:[^"\\]|\\.)*)"')
_BARE_VALUE: Final = re.compile(r"[^\s,\"]+")
#: Longest ``WWW-Authenticate`` value the reader parses.
MAX_CHALLENGE_LENGTH: Final = 32 * 1024


@dataclass(frozen=True)
class ChallengeDenial:
    """A denial expressed as a ``Bearer`` challenge: always ``insufficient_authorization``, ``available``."""

    status: int
    error: str
    resource_metadata: str | None = None
    scopes: tuple[str, ...] = ()
    remediation: AuthorizationRemediation | None = None
    transaction_challenge: str | None = None
    description: str | None = None
    reason: str = REASON_INSUFFICIENT_AUTHORIZATION
    remediation_posture: Remediation = Remediation.AVAILABLE


@dataclass(frozen=True)
class ChallengeReading:
    """What reading a challenge found: a denial, or why it could not be classified."""

    denial: ChallengeDenial | None = None
    problem: str | None = None


def read_challenge(status: int, www_authenticate: str | None) -> ChallengeReading:
    """Classify a 401/403 by its ``Bearer`` challenge. Never raises.

    ``insufficient_scope`` carries ``scope``; ``insufficient_authorization`` a base64url
    ``authorization_remediation``; ``transaction_authorization_required`` a
    ``transaction_challenge``. Anything else (a bare 403, ``invalid_token``) is not classifiable
    as a SEP-2643 denial from the challenge alone.
    """
    if status not in (401, 403) or not www_authenticate:
        return ChallengeReading(problem=f"HTTP {status} without a challenge cannot be classified")
    try:
        parameters = _bearer_parameters(www_authenticate)
    except ValueError as exc:
        return ChallengeReading(problem=f"unreadable WWW-Authenticate: {exc}")
    error = parameters.get("error")
    metadata, description = parameters.get("resource_metadata"), parameters.get("error_description")
    if error == CHALLENGE_INSUFFICIENT_SCOPE:
        scopes = tuple(parameters.get("scope", "").split())
        return ChallengeReading(ChallengeDenial(status, error, metadata, scopes=scopes, description=description))
    if error == CHALLENGE_INSUFFICIENT_AUTHORIZATION:
        try:
            remediation = decode_remediation(parameters.get("authorization_remediation", ""))
        except ValueError as exc:
            return ChallengeReading(problem=str(exc))
        return ChallengeReading(
            ChallengeDenial(status, error, metadata, remediation=remediation, description=description)
        )
    challenge = parameters.get("transaction_challenge")
    if error == CHALLENGE_TRANSACTION_AUTHORIZATION and challenge:
        return ChallengeReading(
            ChallengeDenial(status, error, metadata, transaction_challenge=challenge, description=description)
        )
    return ChallengeReading(problem=f"a challenge with error={str(error)[:64]!r} is not a classifiable denial")


def _bearer_parameters(header: str) -> dict[str, str]:
    """The auth-params of the ``Bearer`` challenge in a ``WWW-Authenticate`` value (names lower-cased)."""
    if len(header) > MAX_CHALLENGE_LENGTH:
        raise ValueError(f"longer than {MAX_CHALLENGE_LENGTH} characters")
    challenges: list[tuple[str, dict[str, str]]] = []
    position = 0
    while True:
        position = _skip(header, position, " \t,")
        if position >= len(header):
            break
        token = _TOKEN.match(header, position)
        if token is None:
            raise ValueError(f"unexpected {header[position]!r} at {position}")
        after = _skip(header, token.end(), " \t")
        if challenges and after < len(header) and header[after] == "=":
            value, position = _parameter_value(header, _skip(header, after + 1, " \t"))
            name = token.group().lower()
            if name in challenges[-1][1]:
                raise ValueError(f"parameter {name} appears twice")
            challenges[-1][1][name] = value
        else:
            challenges.append((token.group().lower(), {}))
            position = after
    bearer = [parameters for scheme, parameters in challenges if scheme == "bearer"]
    if not bearer:
        raise ValueError("no Bearer challenge")
    return bearer[0]


def _parameter_value(header: str, position: int) -> tuple[str, int]:
    quoted = _QUOTED.match(header, position)
    if quoted is not None:
        return re.sub(r"\\(.)", r"\1", quoted.group(1)), quoted.end()
    bare = _BARE_VALUE.match(header, position)
    if bare is None:
        raise ValueError(f"a parameter without a value at {position}")
    return bare.group(), bare.end()


def _skip(text: str, position: int, characters: str) -> int:
    while position < len(text) and text[position] in characters:
        position += 1
    return position
