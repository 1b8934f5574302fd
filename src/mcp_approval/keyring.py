"""The key ring: sealing call bindings and request content at rest under rotating keys.

:class:`BindingCipher` seals a JSON document to one record (AES-256-GCM, the record's id as
associated data) under the first of its keys and opens what any of them sealed, so keys rotate by
putting the new one first. :func:`binding_cipher` builds one from the keys a deployment names,
inline or in a key file. The enforcement point seals call bindings with it; the local backend and
the reference Access Request Service seal what reviewers see.

Key files are secrets: :func:`warn_if_readable_by_others` is what a server calls at start for each
one it reads.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mcp_approval.errors import MCPApprovalError

__all__ = [
    "EPHEMERAL_KEY_ID",
    "BindingCipher",
    "BindingIntegrityError",
    "binding_cipher",
    "warn_if_readable_by_others",
]

logger = logging.getLogger(__name__)

_NONCE_BYTES = 12


class _Secret(Protocol):
    """A value that prints masked (pydantic's ``SecretStr``, as a deployment file's keys are read)."""

    def get_secret_value(self) -> str: ...


#: The key id of the ephemeral key a dev-mode server makes up when none is configured.
EPHEMERAL_KEY_ID = "ephemeral"


class BindingIntegrityError(MCPApprovalError):
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


def binding_cipher(
    keys: Mapping[str, str | _Secret], *, key_file: Path | None = None, ephemeral: bool = False
) -> BindingCipher:
    """The cipher of ``keys`` (key id → base64 of 32 bytes, as text or a secret) and then those of ``key_file``.

    ``key_file`` is TOML holding such keys (``key_id = "base64"``). With no key at all,
    ``ephemeral`` makes one up for this process (development: what it sealed does not survive a
    restart). The messages name the deployment file's settings, ``[approval] binding_keys`` and
    ``binding_key_file``, where the keys come from.

    Raises:
        ValueError: the key file cannot be read or holds a bad key, or there is no key and
            ``ephemeral`` is off (naming the setting).
    """
    ring = {key_id: key if isinstance(key, str) else key.get_secret_value() for key_id, key in keys.items()}
    if key_file is not None:
        try:
            ring.update(tomllib.loads(key_file.read_text(encoding="utf-8")))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"approval.binding_key_file: cannot read {key_file} ({exc})") from None
    if ring:
        try:
            return BindingCipher.from_base64(ring)
        except ValueError as exc:
            raise ValueError(f"approval.binding_keys: {exc}") from None
    if not ephemeral:
        raise ValueError(
            "approval.binding_keys: a key is required to encrypt stored tool calls (set binding_keys or "
            "binding_key_file, or ephemeral_binding_key = true (server.dev_mode = true) for development)"
        )
    logger.warning(
        "dev mode: call bindings are sealed with a per-process key; pending approvals will not survive a restart"
    )
    return BindingCipher.ephemeral()


def warn_if_readable_by_others(path: Path, *, setting: str) -> bool:
    """Log one WARNING, naming ``path``, ``setting`` and the file's mode, when group or others may read it.

    A warning, not a refusal: the file may be readable on purpose (a group the server's account
    shares with its operators), and a server that refused would first fail in the middle of an
    upgrade. A file that cannot be read at all is left to its loader, which says so. Returns
    whether it warned; never on Windows, whose modes do not say who may read.
    """
    if os.name == "nt":
        return False
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return False
    if not mode & (stat.S_IRGRP | stat.S_IROTH):
        return False
    logger.warning(
        "%s: the secret file %s is readable by group or others (mode %04o); chmod 600 it", setting, path, mode
    )
    return True
