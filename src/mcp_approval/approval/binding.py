"""The immutable call binding (SEP-2848 §The task handle is not authority).

The binding is captured on the first ``tools/call`` and never changes: the tool, the complete
arguments (execution runs from them, long after the call), and the originating caller. It is
stored sealed by the key ring (:class:`mcp_approval.keyring.BindingCipher`: AES-GCM under a
configured key, the key id beside the ciphertext so keys can rotate). The arguments' digest
(RFC 8785 canonical JSON, SHA-256) is kept in clear for deduplication and as an integrity check.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import rfc8785

__all__ = ["CallBinding", "arguments_digest"]


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    """SHA-256 hex digest of the arguments' RFC 8785 canonical JSON."""
    return hashlib.sha256(rfc8785.dumps(dict(arguments))).hexdigest()


@dataclass(frozen=True)
class CallBinding:
    """What an approval is bound to.

    Attributes:
        tool: the tool name.
        arguments: the complete arguments, as called.
        principal: the requester's identity (the AuthZEN subject id).
        client: the client info the call carried (part of the policy request).
        tool_fingerprint: the tool's definition hash when the call was made.
    """

    tool: str
    arguments: Mapping[str, Any]
    principal: str
    client: Mapping[str, str] | None = None
    tool_fingerprint: str | None = None

    @functools.cached_property
    def digest(self) -> str:
        """The arguments' canonical digest (computed once: canonicalizing large arguments is costly)."""
        return arguments_digest(self.arguments)

    def to_json(self) -> dict[str, Any]:
        """The binding as a JSON object."""
        return {
            "tool": self.tool,
            "arguments": dict(self.arguments),
            "principal": self.principal,
            "client": dict(self.client) if self.client is not None else None,
            "tool_fingerprint": self.tool_fingerprint,
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> CallBinding:
        """The binding a :meth:`to_json` document describes."""
        return cls(
            tool=str(body["tool"]),
            arguments=dict(body["arguments"]),
            principal=str(body["principal"]),
            client=body.get("client"),
            tool_fingerprint=body.get("tool_fingerprint"),
        )
