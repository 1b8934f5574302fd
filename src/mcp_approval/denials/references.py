"""Stable, opaque ``authorization_reference`` values, and the reference rule for single-use credentials."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Sequence
from typing import Any

from mcp_approval.denials.models import AuthorizationRemediation, validate_authorization_details

__all__ = ["MIN_KEY_BYTES", "AuthorizationReferences", "canonical_details", "remediation_for"]

#: Shortest key :class:`AuthorizationReferences` accepts.
MIN_KEY_BYTES = 32


def canonical_details(details: Sequence[dict[str, Any]]) -> bytes:
    """A canonical serialization of ``authorization_details`` for comparing them.

    Object members are sorted and whitespace removed; the objects of the outer array are sorted
    too, because RFC 9396 gives their order no meaning. Arrays inside an object keep their
    order: their meaning is the detail type's to define.
    """
    encoded = sorted(_compact(detail) for detail in validate_authorization_details(list(details)))
    return ("[" + ",".join(encoded) + "]").encode("utf-8")


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class AuthorizationReferences:
    """Issues ``authorization_reference`` values: an HMAC of the canonical details under a server key.

    The same key gives the same reference for semantically equivalent details (member order
    and outer array order aside), so a client can pick an existing credential by it; without
    the key nobody can compute or invert one. Keep the key stable across restarts and workers.
    """

    def __init__(self, key: bytes) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"the reference key needs at least {MIN_KEY_BYTES} bytes")
        self._key = key

    def reference(self, details: Sequence[dict[str, Any]]) -> str:
        """The reference for ``details``."""
        digest = hmac.new(self._key, canonical_details(details), hashlib.sha256).digest()
        return "ar_" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def remediation_for(
    details: Sequence[dict[str, Any]],
    *,
    single_use: bool,
    references: AuthorizationReferences | None = None,
) -> AuthorizationRemediation:
    """The remediation for a denial that ``details`` would satisfy.

    A reference is included only when credentials for ``details`` are reusable and ``references``
    is given; credentials meant for a single use never get one.
    """
    reference = None if single_use or references is None else references.reference(details)
    return AuthorizationRemediation(authorization_details=list(details), authorization_reference=reference)
