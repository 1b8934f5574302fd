"""JWT access tokens (RFC 9068) from one authorization server, verified against its key set.

:class:`JwtTokenVerifier` is the SDK's ``TokenVerifier`` for a resource server whose
authorization server issues signed JWT access tokens::

    verifier = JwtTokenVerifier(
        issuer="https://login.example.com",
        audience="https://mcp.example.com/mcp",
        jwks_url="https://login.example.com/.well-known/jwks.json",
    )
    server = MCPServer("payments", token_verifier=verifier, auth=AuthSettings(...))

A token is accepted only when all of these hold (anything else is "no token": a 401):

- its header names an allowed asymmetric ``alg`` (never ``none``, never an HMAC) and a ``typ``
  of ``at+jwt`` (RFC 9068 §4; configurable for servers that still issue plain ``JWT``);
- its ``kid`` names a key of the set whose ``kty``, ``use`` and ``alg`` fit, and the signature
  verifies with it. An unknown ``kid`` refreshes the set once (key rotation), at most every
  ``min_refresh_s`` however many forged ids arrive;
- ``iss`` is the issuer exactly, ``aud`` names the audience (this server's resource URL),
  ``exp`` is in the future and ``nbf``/``iat`` are not, within ``leeway_s`` (time comes from
  the injectable clock);
- the principal claim (``sub`` by default) is a non-empty string.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import httpx2
import jwt
from mcp.server.auth.provider import AccessToken

from mcp_approval.clock import Clock, SystemClock
from mcp_approval.errors import MCPApprovalError

__all__ = [
    "ACCESS_TOKEN_TYPES",
    "ASYMMETRIC_ALGORITHMS",
    "JwksError",
    "JwtTokenVerifier",
    "VerificationKey",
    "fetch_keys",
    "keys_of",
    "scopes_of",
]

logger = logging.getLogger("mcp_approval.auth")

#: The signature algorithms a verifier may accept: asymmetric only, so a public key can never
#: double as an HMAC secret (the classic algorithm-confusion attack).
ASYMMETRIC_ALGORITHMS: Final = frozenset(
    {"ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA"}
)
#: RFC 9068 §2.1: the ``typ`` of a JWT access token.
ACCESS_TOKEN_TYPES: Final = ("at+jwt", "application/at+jwt")
_KEY_TYPES: Final = {"ES": "EC", "RS": "RSA", "PS": "RSA", "Ed": "OKP"}


class JwksError(MCPApprovalError):
    """A key set that cannot be read or holds no usable key; the message names where it came from."""


class JwtTokenVerifier:
    """Verifies JWT access tokens of one issuer for one audience (see the module docstring).

    Args:
        issuer: the authorization server's issuer identifier, compared exactly with ``iss``.
        audience: this resource server's identifier (its MCP endpoint URL), required in ``aud``.
        jwks_url: where the issuer publishes its JSON Web Key Set; fetched on first use and again
            when a token names an unknown ``kid``, or after ``refresh_s``.
        jwks: a key set given directly (e.g. read from a file); never refreshed. Exactly one of
            ``jwks_url`` and ``jwks``.
        algorithms: accepted ``alg`` values (a subset of :data:`ASYMMETRIC_ALGORITHMS`).
        token_types: accepted ``typ`` header values, compared without case.
        principal_claim: the claim naming the principal (the policy's subject, the task owner).
        scopes_claim: the claim holding granted scopes (a space-separated string or a list).
        leeway_s: tolerated clock skew for ``exp``, ``nbf`` and ``iat``.
        refresh_s: how long a fetched key set is used before it is fetched again.
        min_refresh_s: the shortest interval between two fetches.
        timeout_s: the key-set request's timeout.
        clock: the source of time.

    Raises:
        ValueError: an algorithm that is not asymmetric, an empty issuer, audience, algorithm or
            type list, or not exactly one of ``jwks_url`` and ``jwks``.
        JwksError: ``jwks`` is not a key set with at least one usable signing key.
    """

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks_url: str | None = None,
        jwks: Mapping[str, Any] | None = None,
        algorithms: Sequence[str] = ("ES256", "RS256"),
        token_types: Sequence[str] = ACCESS_TOKEN_TYPES,
        principal_claim: str = "sub",
        scopes_claim: str = "scope",
        leeway_s: float = 30.0,
        refresh_s: float = 300.0,
        min_refresh_s: float = 30.0,
        timeout_s: float = 5.0,
        clock: Clock | None = None,
    ) -> None:
        if not issuer or not audience:
            raise ValueError("JwtTokenVerifier needs an issuer and an audience")
        if (jwks_url is None) == (jwks is None):
            raise ValueError("JwtTokenVerifier needs exactly one of jwks_url and jwks")
        unsafe = sorted(set(algorithms) - ASYMMETRIC_ALGORITHMS)
        if unsafe or not algorithms:
            raise ValueError(f"algorithms must be asymmetric signature algorithms, not {unsafe or 'none'}")
        if not token_types:
            raise ValueError("token_types needs at least one accepted typ")
        self.issuer = issuer
        self.audience = audience
        self.algorithms = frozenset(algorithms)
        self.token_types = frozenset(kind.lower() for kind in token_types)
        self.principal_claim = principal_claim
        self.scopes_claim = scopes_claim
        self.leeway_s = leeway_s
        self._jwks_url = jwks_url
        self._refresh_ms = round(refresh_s * 1000)
        self._min_refresh_ms = round(min_refresh_s * 1000)
        self._timeout_s = timeout_s
        self._clock = clock or SystemClock()
        self._keys: dict[str | None, VerificationKey] = {}
        self._fetched_at: int | None = None
        self._fetching = asyncio.Lock()
        if jwks is not None:
            self._keys = keys_of(jwks, source="the given key set")

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's :class:`AccessToken`, or ``None`` when it is not an acceptable access token."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return None
        alg, kid, typ = header.get("alg"), header.get("kid"), header.get("typ")
        # Header members are attacker-controlled JSON: anything but strings is refused before use.
        if not isinstance(alg, str) or alg not in self.algorithms:
            return None
        if not isinstance(typ, str) or typ.lower() not in self.token_types:
            return None
        key = await self._key_for(kid if isinstance(kid, str) else None, alg)
        if key is None:
            return None
        claims = self._verified_claims(token, key, alg)
        return None if claims is None else self._access_token(token, claims)

    def _verified_claims(self, token: str, key: VerificationKey, alg: str) -> dict[str, Any] | None:
        """The claims when the signature, issuer, audience and times all check out."""
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key.jwk.key,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.issuer,
                # Times are checked below against the injectable clock, not the wall clock.
                options={"verify_exp": False, "verify_nbf": False, "verify_iat": False, "require": ["exp"]},
            )
        except jwt.PyJWTError as exc:
            logger.info("access token refused: %s", exc)
            return None
        return claims if self._timely(claims) else None

    def _timely(self, claims: Mapping[str, Any]) -> bool:
        now_s = self._clock.now_ms() / 1000
        expires, not_before, issued = (_seconds(claims.get(name, 0)) for name in ("exp", "nbf", "iat"))
        if expires is None or not_before is None or issued is None:
            logger.info("access token refused: exp, nbf or iat is not a number")
            return False
        if now_s > expires + self.leeway_s:
            logger.info("access token refused: expired")
            return False
        if max(not_before, issued) - self.leeway_s > now_s:
            logger.info("access token refused: not valid yet")
            return False
        return True

    def _access_token(self, token: str, claims: Mapping[str, Any]) -> AccessToken | None:
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal:
            logger.info("access token refused: no %r claim naming the principal", self.principal_claim)
            return None
        client = claims.get("client_id") or claims.get("azp") or principal
        return AccessToken(
            token=token,
            client_id=str(client),
            scopes=scopes_of(claims.get(self.scopes_claim)),
            expires_at=int(claims["exp"]),
            resource=self.audience,
            subject=principal,
            claims={"iss": claims["iss"]},
        )

    # -- the key set -----------------------------------------------------------------------

    async def _key_for(self, kid: str | None, alg: str) -> VerificationKey | None:
        """The key ``kid`` names (the only key, when the token names none) if it fits ``alg``."""
        if self._jwks_url is not None and self._stale():
            await self._refresh()
        key = self._pick(kid)
        if key is None and self._jwks_url is not None and self._may_refresh():
            await self._refresh()  # perhaps a rotation: the issuer published a new key
            key = self._pick(kid)
        if key is None or not key.fits(alg):
            logger.info("access token refused: no key %r for %s", kid, alg)
            return None
        return key

    def _pick(self, kid: str | None) -> VerificationKey | None:
        if kid is not None:
            return self._keys.get(kid)
        return next(iter(self._keys.values())) if len(self._keys) == 1 else None

    def _stale(self) -> bool:
        return self._fetched_at is None or self._clock.now_ms() - self._fetched_at >= self._refresh_ms

    def _may_refresh(self) -> bool:
        return self._fetched_at is None or self._clock.now_ms() - self._fetched_at >= self._min_refresh_ms

    async def _refresh(self) -> None:
        """Fetch the key set; on failure keep the keys already held (and log why)."""
        async with self._fetching:
            if self._fetched_at is not None and self._clock.now_ms() - self._fetched_at < self._min_refresh_ms:
                return  # another request fetched it meanwhile
            self._fetched_at = self._clock.now_ms()
            assert self._jwks_url is not None
            try:
                self._keys = await fetch_keys(self._jwks_url, timeout_s=self._timeout_s)
            except JwksError as exc:
                logger.warning("%s; keeping the %d keys already held", exc, len(self._keys))


async def fetch_keys(url: str, *, timeout_s: float) -> dict[str | None, VerificationKey]:
    """The usable signing keys of the key set at ``url``.

    Raises:
        JwksError: the set cannot be fetched or read, or holds no usable key.
    """
    try:
        async with httpx2.AsyncClient(timeout=timeout_s, follow_redirects=False) as http:
            response = await http.get(url, headers={"accept": "application/json"})
    except httpx2.HTTPError as exc:
        raise JwksError(f"key set {url}: {type(exc).__name__}: {exc}") from None
    if response.status_code != 200:
        raise JwksError(f"key set {url}: HTTP {response.status_code}")
    try:
        document = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise JwksError(f"key set {url}: not JSON ({exc})") from None
    return keys_of(document, source=url)


def keys_of(document: Any, *, source: str) -> dict[str | None, VerificationKey]:
    """The signing keys of a JWKS document, by ``kid`` (keys PyJWT cannot use are skipped).

    Raises:
        JwksError: ``document`` is not ``{"keys": [...]}`` or no key in it can verify signatures.
    """
    entries = document.get("keys") if isinstance(document, Mapping) else None
    if not isinstance(entries, list):
        raise JwksError(f'{source}: not a JSON Web Key Set (no "keys" list)')
    keys: dict[str | None, VerificationKey] = {}
    for entry in entries:
        if not isinstance(entry, Mapping) or entry.get("use", "sig") != "sig" or "d" in entry:
            continue  # encryption keys and private keys never verify tokens
        try:
            jwk = jwt.PyJWK(dict(entry))
        except jwt.PyJWTError as exc:
            logger.info("%s: key %r skipped (%s)", source, entry.get("kid"), exc)
            continue
        declared = entry.get("alg")
        keys[entry.get("kid")] = VerificationKey(
            jwk, str(entry.get("kty")), declared if isinstance(declared, str) else None
        )
    if not keys:
        raise JwksError(f"{source}: no usable signing key")
    return keys


@dataclass(frozen=True)
class VerificationKey:
    """One signing key of a key set: the PyJWT key, and the ``kty`` and ``alg`` its JWK declares."""

    jwk: jwt.PyJWK
    kty: str
    alg: str | None

    def fits(self, alg: str) -> bool:
        """Whether this key may verify ``alg``: its ``kty`` matches, and its own ``alg`` (if any) is ``alg``."""
        return self.kty == _KEY_TYPES.get(alg[:2]) and self.alg in (None, alg)


def _seconds(value: Any) -> float | None:
    """A NumericDate claim as a float; ``None`` when it is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def scopes_of(value: Any) -> list[str]:
    """Granted scopes from ``scope`` (space-separated, RFC 9068) or a list claim such as ``scp``."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []
