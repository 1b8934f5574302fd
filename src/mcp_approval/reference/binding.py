"""The ARAP ``binding_hash`` (ARAP §2.10): what binds a denial, a request and an approval together.

``binding_hash = base64url-nopad(SHA-256(JCS({subject, resource, action, context})))`` where
``subject.properties.act`` is removed (an actor chain never changes what is approved) and
``context`` is projected to the authorization-relevant members the PDP declared
(``binding_context_members``): a member absent from the request stays absent, a ``null`` one is
kept (absent and ``null`` differ). The projected ``context`` is always present, possibly ``{}``.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

import rfc8785

__all__ = ["MACHINERY_MEMBERS", "binding_hash", "binding_input", "project", "valid_members"]

#: Decision-context "machinery" members that are never authorization-relevant (ARAP §2.10).
MACHINERY_MEMBERS: Final = frozenset({"access_request", "evaluation_id", "evaluated_at", "reason", "approval"})


def binding_input(
    subject: Mapping[str, Any],
    resource: Mapping[str, Any],
    action: Mapping[str, Any],
    context: Mapping[str, Any] | None,
    members: Sequence[str],
) -> dict[str, Any]:
    """The object whose canonical form is hashed."""
    return {
        "subject": _without_actor(subject),
        "resource": dict(resource),
        "action": dict(action),
        "context": project(context, members),
    }


def project(context: Mapping[str, Any] | None, members: Sequence[str]) -> dict[str, Any]:
    """``context`` reduced to ``members`` (absent members stay absent; machinery never counts)."""
    source = context or {}
    return {name: source[name] for name in members if name in source and name not in MACHINERY_MEMBERS}


def binding_hash(
    subject: Mapping[str, Any],
    resource: Mapping[str, Any],
    action: Mapping[str, Any],
    context: Mapping[str, Any] | None,
    members: Sequence[str],
) -> str:
    """The ``binding_hash`` of one request.

    Raises:
        rfc8785.CanonicalizationError: a value JCS cannot represent (e.g. a non-finite float).
    """
    digest = hashlib.sha256(rfc8785.dumps(binding_input(subject, resource, action, context, members))).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def valid_members(value: Any) -> list[str] | None:
    """``value`` as a ``binding_context_members`` list, or ``None`` when it is not a list of strings."""
    if isinstance(value, list) and all(isinstance(name, str) for name in value):
        return list(value)
    return None


def _without_actor(subject: Mapping[str, Any]) -> dict[str, Any]:
    copy = dict(subject)
    properties = copy.get("properties")
    if isinstance(properties, Mapping) and "act" in properties:
        copy["properties"] = {key: value for key, value in properties.items() if key != "act"}
    return copy
