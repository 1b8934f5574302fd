"""ES256 compact JWS for the reference PDP and ARS: one key set, published at ``jwks_uri``.

The PDP signs ``binding_token`` and the ARS signs ``approval.state`` (ARAP §2.10). Both live in
one process here, so one :class:`KeySet` holds the signing key (and, during a rotation, older
verification-only keys). A token is accepted only when its header names ``alg: ES256`` and a
``kid`` of this set: an unknown ``kid`` is rejected, never tried against another key.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from jwt.algorithms import ECAlgorithm

from mcp_approval.errors import MCPApprovalError

__all__ = ["ALGORITHM", "KeySet", "SigningKey", "TokenError", "load_key_set"]

logger = logging.getLogger("mcp_approval.reference")

ALGORITHM: Final = "ES256"


class TokenError(MCPApprovalError):
    """A compact JWS that does not verify; ``expired`` tells a lapsed but genuine token apart."""

    def __init__(self, message: str, *, expired: bool = False) -> None:
        super().__init__(message)
        self.expired = expired


@dataclass(frozen=True)
class SigningKey:
    """A P-256 private key and its ``kid``."""

    kid: str
    private_key: ec.EllipticCurvePrivateKey

    @classmethod
    def generate(cls, kid: str | None = None) -> SigningKey:
        """A fresh key (development only: tokens it signed do not verify after a restart)."""
        return cls(kid or "dev-" + secrets.token_hex(4), ec.generate_private_key(ec.SECP256R1()))

    @classmethod
    def from_pem_file(cls, path: Path, kid: str) -> SigningKey:
        """The EC P-256 private key in a PEM file.

        Raises:
            ValueError: the file is unreadable, not a PEM private key, or not P-256 (naming it).
        """
        try:
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        except (OSError, ValueError, TypeError) as exc:
            raise ValueError(f"cannot load a PEM private key from {path} ({exc})") from None
        if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
            raise ValueError(f"{path}: the signing key must be an EC P-256 key (ES256)")
        return cls(kid, key)

    def derive_secret(self, purpose: str) -> bytes:
        """A 32-byte secret for another use of this key (HKDF-SHA256 over the private scalar, ``purpose`` as info).

        It lives as long as the key: the same key file gives the same secret in every process.
        """
        scalar = self.private_key.private_numbers().private_value.to_bytes(32, "big")
        return HKDF(algorithm=SHA256(), length=32, salt=None, info=f"mcp-approval/{purpose}".encode()).derive(scalar)

    def to_pem(self) -> bytes:
        """The private key as unencrypted PKCS#8 PEM."""
        return self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )


class KeySet:
    """The signing key plus verification-only keys, by ``kid``.

    Args:
        signing: the key new tokens are signed with.
        verify_only: older public keys still accepted (key rotation).
    """

    def __init__(self, signing: SigningKey, verify_only: Sequence[tuple[str, ec.EllipticCurvePublicKey]] = ()) -> None:
        self.signing = signing
        self._public: dict[str, ec.EllipticCurvePublicKey] = dict(verify_only)
        self._public[signing.kid] = signing.private_key.public_key()

    def jwks(self) -> dict[str, Any]:
        """The JWK Set document served at ``jwks_uri`` (public keys only)."""
        keys = []
        for kid, public in self._public.items():
            jwk: dict[str, Any] = ECAlgorithm.to_jwk(public, as_dict=True)
            keys.append({**jwk, "kid": kid, "use": "sig", "alg": ALGORITHM})
        return {"keys": keys}

    def sign(self, claims: Mapping[str, Any]) -> str:
        """``claims`` as a compact JWS, header ``{alg: ES256, kid}``."""
        return jwt.encode(
            dict(claims), self.signing.private_key, algorithm=ALGORITHM, headers={"kid": self.signing.kid}
        )

    def verify(self, token: Any, *, issuer: str, audience: str, now_s: float, leeway_s: float = 0) -> dict[str, Any]:
        """The claims of ``token`` after checking ``kid``, signature, ``iss``, ``aud`` and ``exp``.

        Time comes from the caller (``now_s``, the injectable clock), not from the JOSE library.

        Raises:
            TokenError: anything does not verify (``expired=True`` when only ``exp`` has passed).
        """
        if not isinstance(token, str) or token.count(".") != 2:
            raise TokenError("not a compact JWS")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenError("malformed JWS header") from None
        if header.get("alg") != ALGORITHM:
            raise TokenError(f"alg must be {ALGORITHM}")
        kid = header.get("kid")
        public = self._public.get(kid) if isinstance(kid, str) else None
        if public is None:
            raise TokenError("unknown kid")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                public,
                algorithms=[ALGORITHM],
                audience=audience,
                issuer=issuer,
                options={
                    "require": ["exp", "iat", "iss", "aud"],
                    "verify_exp": False,
                    "verify_iat": False,
                    "verify_nbf": False,
                },
            )
        except jwt.PyJWTError as exc:
            raise TokenError(str(exc) or type(exc).__name__) from None
        exp = claims.get("exp")
        if isinstance(exp, bool) or not isinstance(exp, int | float):
            raise TokenError("exp is not a number")
        if now_s > exp + leeway_s:
            raise TokenError("expired", expired=True)
        return claims


def load_key_set(key_file: Path | None, kid: str, *, dev_mode: bool) -> KeySet:
    """The key set from a PEM file, or (dev mode only) a fresh key with a WARNING.

    Raises:
        ValueError: no key file outside dev mode, or a key file that does not load.
    """
    if key_file is not None:
        return KeySet(SigningKey.from_pem_file(key_file, kid))
    if not dev_mode:
        raise ValueError("arap.signing_key_file is required (an EC P-256 PEM key) unless arap.dev_mode = true")
    logger.warning(
        "dev mode: binding tokens and approval states are signed with a per-process key; "
        "none of them verifies after a restart (set arap.signing_key_file)"
    )
    return KeySet(SigningKey.generate(kid))
