"""The immutable call binding (SEP-2848 §The task handle is not authority) and its sealing at rest.

The binding is captured on the first ``tools/call`` and never changes: the tool, the complete
arguments (execution runs from them, long after the call), and the originating caller. It is
stored encrypted with AES-GCM under a configured key; the key id is stored beside the
ciphertext so keys can rotate. The arguments' digest (RFC 8785 canonical JSON, SHA-256) is
kept in clear for deduplication and as an integrity check.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import rfc8785
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = ["EPHEMERAL_KEY_ID", "BindingCipher", "BindingIntegrityError", "CallBinding", "arguments_digest"]

_NONCE_BYTES = 12
#: The key id of the ephemeral key a dev-mode server makes up when none is configured.
EPHEMERAL_KEY_ID = "ephemeral"


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


class BindingIntegrityError(Exception):
    """A sealed record could not be opened: unknown key id, tampering, or the wrong record."""


class BindingCipher:
    """AES-256-GCM sealing of call bindings and submission bodies under rotating keys.

    Args:
        keys: key id → 32-byte key; the first one seals new records, all of them open old ones.
    """

    def __init__(self, keys: Mapping[str, bytes]) -> None:
        if not keys:
            raise ValueError("BindingCipher needs at least one key")
        for key_id, key in keys.items():
            if not key_id or ":" in key_id:
                raise ValueError(f"binding key id {key_id!r} must be non-empty and contain no ':'")
            if len(key) != 32:
                raise ValueError(f"binding key {key_id!r} must be 32 bytes (AES-256), not {len(key)}")
        self._keys = {key_id: AESGCM(key) for key_id, key in keys.items()}
        self._material = {key_id: bytes(key) for key_id, key in keys.items()}
        self.current_key_id = next(iter(keys))

    @classmethod
    def from_base64(cls, keys: Mapping[str, str]) -> BindingCipher:
        """Keys given as base64 text (the configuration's form).

        Raises:
            ValueError: naming the key id whose value is not base64 of 32 bytes.
        """
        decoded: dict[str, bytes] = {}
        for key_id, text in keys.items():
            try:
                decoded[key_id] = base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(f"binding key {key_id!r} is not valid base64") from None
        return cls(decoded)

    @classmethod
    def ephemeral(cls) -> BindingCipher:
        """A random key that lives as long as the process (development only: a restart loses it)."""
        return cls({EPHEMERAL_KEY_ID: os.urandom(32)})

    def derived_keys(self, purpose: str) -> list[bytes]:
        """One 32-byte key per binding key for another use (HKDF-SHA256, ``purpose`` as its info).

        The current key's comes first, so a ring built from them rotates with the binding keys.
        """
        return [
            HKDF(algorithm=SHA256(), length=32, salt=None, info=f"mcp-approval/{purpose}".encode()).derive(key)
            for key in self._material.values()
        ]

    def seal(self, document: Mapping[str, Any], *, record: str) -> str:
        """Encrypt ``document``; ``record`` (e.g. the task id) is authenticated with it.

        The associated data ties the ciphertext to its row, so a sealed binding copied onto
        another task fails to open.
        """
        nonce = os.urandom(_NONCE_BYTES)
        plaintext = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
        aad = self._aad(self.current_key_id, record)
        sealed = self._keys[self.current_key_id].encrypt(nonce, plaintext, aad)
        return f"{self.current_key_id}:{base64.urlsafe_b64encode(nonce + sealed).decode()}"

    def open(self, sealed: str, *, record: str) -> dict[str, Any]:
        """Decrypt a :meth:`seal` result for ``record``.

        Raises:
            BindingIntegrityError: unknown key id, a forged or altered ciphertext, or another record's.
        """
        key_id, _, payload = sealed.partition(":")
        cipher = self._keys.get(key_id)
        if cipher is None:
            raise BindingIntegrityError(f"sealed with unknown key id {key_id!r}")
        try:
            raw = base64.urlsafe_b64decode(payload.encode())
            plaintext = cipher.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], self._aad(key_id, record))
        except (InvalidTag, ValueError, binascii.Error):
            raise BindingIntegrityError("the sealed record does not authenticate") from None
        value = json.loads(plaintext)
        if not isinstance(value, dict):
            raise BindingIntegrityError("the sealed record is not a JSON object")
        return value

    @staticmethod
    def _aad(key_id: str, record: str) -> bytes:
        return f"mcp-approval/v1|{key_id}|{record}".encode()
