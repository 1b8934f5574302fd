"""A software passkey authenticator, for the demo and tests that run without a browser.

It answers WebAuthn creation and request options the way a platform authenticator does (packed
``none`` attestation, ES256, user presence and user verification flagged), with the
``cryptography`` package and the ``webauthn`` package's CBOR helper. It stands in for a person
with a phone or a security key: the demo's passkey scenario registers one and decides with it.
The browser tests use Chromium's own virtual authenticator instead.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import struct
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url, encode_cbor

__all__ = ["SoftAuthenticator"]

_UP, _UV, _AT = 0x01, 0x04, 0x40


@dataclass
class SoftAuthenticator:
    """One passkey (made by :meth:`create`), held in memory.

    Args:
        origin: the origin the "browser" is on (what ``clientDataJSON`` names).
    """

    origin: str
    credential_id: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    sign_count: int = 0
    _key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))

    def create(self, options: dict[str, Any]) -> dict[str, Any]:
        """The registration response to creation ``options`` (as the server sent them)."""
        rp_id = options["rp"]["id"]
        client_data = self._client_data("webauthn.create", options["challenge"])
        numbers = self._key.public_key().public_numbers()
        cose_key = {1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")}
        attested = bytes(16) + struct.pack(">H", len(self.credential_id)) + self.credential_id + encode_cbor(cose_key)
        auth_data = self._auth_data(rp_id, _UP | _UV | _AT) + attested
        attestation = encode_cbor({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return {
            "id": bytes_to_base64url(self.credential_id),
            "rawId": bytes_to_base64url(self.credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": bytes_to_base64url(client_data),
                "attestationObject": bytes_to_base64url(attestation),
                "transports": ["internal"],
            },
            "clientExtensionResults": {},
        }

    def get(self, options: dict[str, Any]) -> dict[str, Any]:
        """The assertion answering request ``options`` (as the server sent them)."""
        allowed = [base64url_to_bytes(c["id"]) for c in options.get("allowCredentials", [])]
        if allowed and self.credential_id not in allowed:
            raise ValueError("the options do not allow this authenticator's passkey")
        client_data = self._client_data("webauthn.get", options["challenge"])
        self.sign_count += 1
        auth_data = self._auth_data(options["rpId"], _UP | _UV)
        signature = self._key.sign(auth_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256()))
        return {
            "id": bytes_to_base64url(self.credential_id),
            "rawId": bytes_to_base64url(self.credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": bytes_to_base64url(client_data),
                "authenticatorData": bytes_to_base64url(auth_data),
                "signature": bytes_to_base64url(signature),
            },
            "clientExtensionResults": {},
        }

    def _client_data(self, kind: str, challenge: str) -> bytes:
        document = {"type": kind, "challenge": challenge, "origin": self.origin, "crossOrigin": False}
        return json.dumps(document, separators=(",", ":")).encode()

    def _auth_data(self, rp_id: str, flags: int) -> bytes:
        return hashlib.sha256(rp_id.encode()).digest() + bytes([flags]) + struct.pack(">I", self.sign_count)
