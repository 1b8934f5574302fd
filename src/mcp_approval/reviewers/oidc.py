"""OpenID Connect sign-in for the console: the authorization code flow with PKCE, and ID token checks.

:class:`OidcClient` reads the provider's discovery document (its ``issuer`` must equal the
configured one exactly, OIDC Discovery §4.3), sends the reviewer to the authorization endpoint
with a fresh ``state``, ``nonce`` and PKCE ``code_challenge`` (S256), redeems the returned code
with the ``code_verifier`` at the token endpoint, and accepts the ID token only when (OIDC Core
§3.1.3.7):

- its header names an allowed asymmetric algorithm and a ``kid`` of the provider's key set (an
  unknown ``kid`` fetches the set again, at most once a minute), and the signature verifies;
- ``iss`` is the issuer exactly; ``aud`` contains the client id (and with several audiences,
  ``azp`` is the client id); ``exp`` is in the future and ``iat`` not, within the leeway;
- ``nonce`` is the one this sign-in sent;
- the reviewer claim is a non-empty string.

The reviewer's roles come from the roles claim; :class:`ClaimedRoles` lends them to the
backend's role check for as long as the reviewer's session shows them.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus, urlencode

import httpx2
import jwt

from mcp_approval.errors import MCPApprovalError
from mcp_approval.reviewers.oidc_options import OidcOptions

__all__ = ["ClaimedRoles", "OidcClient", "OidcError", "PendingSignIn", "SignedInReviewer", "roles_in"]

_KEY_REFRESH_S = 60.0
_HTTP_TIMEOUT_S = 10.0


class OidcError(MCPApprovalError):
    """A sign-in the provider or its ID token did not complete; the message says why (never a secret)."""


@dataclass(frozen=True)
class PendingSignIn:
    """What one sign-in keeps in the browser until the provider sends the reviewer back."""

    state: str
    nonce: str
    verifier: str
    next_path: str
    started_s: float

    def to_cookie(self) -> str:
        """The value of the pending sign-in cookie (HttpOnly: only the browser that started it holds it)."""
        fields = [self.state, self.nonce, self.verifier, self.next_path, str(int(self.started_s))]
        return base64.urlsafe_b64encode(json.dumps(fields).encode()).decode()

    @classmethod
    def from_cookie(cls, value: str | None) -> PendingSignIn | None:
        """The sign-in a cookie holds, or ``None`` for a missing or malformed one."""
        if not value or len(value) > 4096:
            return None
        try:
            fields = json.loads(base64.urlsafe_b64decode(value.encode()))
            state, nonce, verifier, next_path, started = fields
            if not all(isinstance(part, str) for part in (state, nonce, verifier, next_path, started)):
                return None
            return cls(state, nonce, verifier, next_path, float(started))
        except (ValueError, TypeError):
            return None

    def state_matches(self, candidate: str | None) -> bool:
        """Whether the provider returned this sign-in's state (in constant time)."""
        return candidate is not None and hmac.compare_digest(candidate.encode(), self.state.encode())


@dataclass(frozen=True)
class SignedInReviewer:
    """Who an ID token names: the reviewer id and the roles its claims grant."""

    reviewer: str
    roles: frozenset[str]


class ClaimedRoles:
    """Roles reviewers signed in with, lent to the backend's role check beside the configured ones.

    Each console request from an OIDC session records the roles its session carries before it
    reads or decides anything, so on every worker the check sees the roles of the signed-in reviewer.
    """

    def __init__(self) -> None:
        self._roles: dict[str, frozenset[str]] = {}

    def remember(self, reviewer: str, roles: frozenset[str]) -> None:
        """The roles ``reviewer``'s current session shows."""
        self._roles[reviewer] = roles

    def of(self, reviewer: str) -> frozenset[str]:
        """The roles ``reviewer`` signed in with (none if they did not sign in with OIDC)."""
        return self._roles.get(reviewer, frozenset())


def roles_in(value: Any) -> frozenset[str]:
    """A roles claim's roles: a list of strings, or one space-separated string; anything else grants none."""
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(role for role in value if isinstance(role, str) and role)
    return frozenset()


class OidcClient:
    """One console's client at one OpenID Connect provider (see the module docstring).

    Args:
        options: the ``[console.oidc]`` settings.
        client_secret: the client secret (``None``: a public client).
        now: the source of time in seconds (injectable for tests).
    """

    def __init__(self, options: OidcOptions, client_secret: str | None = None, *, now: Any = time.time) -> None:
        self.options = options
        self._secret = client_secret
        self._now = now
        self._metadata: dict[str, Any] | None = None
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._keys_at = float("-inf")
        self._lock = asyncio.Lock()

    # -- the flow -------------------------------------------------------------------------------

    async def start(self, next_path: str) -> tuple[str, PendingSignIn]:
        """The provider's authorization URL for a new sign-in, and what the browser keeps meanwhile."""
        metadata = await self._discovery()
        pending = PendingSignIn(
            state=secrets.token_urlsafe(32),
            nonce=secrets.token_urlsafe(32),
            verifier=secrets.token_urlsafe(64),
            next_path=next_path,
            started_s=self._now(),
        )
        challenge = base64.urlsafe_b64encode(hashlib.sha256(pending.verifier.encode()).digest()).rstrip(b"=").decode()
        scopes = ["openid", *(scope for scope in self.options.scopes if scope != "openid")]
        query = {
            "response_type": "code",
            "client_id": self.options.client_id,
            "redirect_uri": self.options.redirect_url,
            "scope": " ".join(scopes),
            "state": pending.state,
            "nonce": pending.nonce,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        return f"{metadata['authorization_endpoint']}?{urlencode(query)}", pending

    async def finish(self, pending: PendingSignIn, code: str) -> SignedInReviewer:
        """Redeem ``code`` with the sign-in's PKCE verifier and check the ID token it yields.

        Raises:
            OidcError: the sign-in took too long, the provider refused the code, or the ID token fails a check.
        """
        if self._now() - pending.started_s > self.options.login_timeout_s:
            raise OidcError("the sign-in took too long; start it again")
        metadata = await self._discovery()
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.options.redirect_url,
            "code_verifier": pending.verifier,
        }
        headers = {"accept": "application/json"}
        if self._secret is None:
            form["client_id"] = self.options.client_id
        else:  # client_secret_basic: both parts form-encoded first (RFC 6749 §2.3.1)
            pair = f"{quote_plus(self.options.client_id)}:{quote_plus(self._secret)}".encode()
            headers["authorization"] = "Basic " + base64.b64encode(pair).decode()
        try:
            async with httpx2.AsyncClient(timeout=_HTTP_TIMEOUT_S, follow_redirects=False) as http:
                response = await http.post(metadata["token_endpoint"], data=form, headers=headers)
        except httpx2.HTTPError as exc:
            raise OidcError(f"the identity provider could not be reached ({type(exc).__name__})") from None
        body = _json_object(response)
        if response.status_code != 200 or not isinstance(body.get("id_token"), str):
            error = body.get("error") if isinstance(body.get("error"), str) else f"HTTP {response.status_code}"
            raise OidcError(f"the identity provider did not accept the sign-in ({error})")
        return await self.check_id_token(body["id_token"], pending.nonce)

    async def check_id_token(self, id_token: str, nonce: str) -> SignedInReviewer:
        """The reviewer ``id_token`` names, once every check of the module docstring holds.

        Raises:
            OidcError: naming the check that failed.
        """
        try:
            header = jwt.get_unverified_header(id_token)
        except jwt.PyJWTError:
            raise OidcError("the ID token is not a JWT") from None
        alg = header.get("alg")
        if alg not in self.options.algorithms:
            raise OidcError(f"the ID token's algorithm {alg!r} is not accepted")
        key = await self._key(header.get("kid"))
        try:
            claims: dict[str, Any] = jwt.decode(
                id_token,
                key.key,
                algorithms=[alg],
                audience=self.options.client_id,
                issuer=self.options.issuer,
                leeway=self.options.leeway_s,
                options={"require": ["iss", "aud", "exp", "iat", "sub"]},
            )
        except jwt.InvalidAudienceError:
            raise OidcError("the ID token was issued for another client (aud)") from None
        except jwt.InvalidIssuerError:
            raise OidcError("the ID token was issued by another issuer (iss)") from None
        except jwt.ExpiredSignatureError:
            raise OidcError("the ID token has expired (exp)") from None
        except jwt.InvalidSignatureError:
            raise OidcError("the ID token's signature does not verify") from None
        except jwt.PyJWTError as exc:
            raise OidcError(f"the ID token is not valid ({exc})") from None
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.options.client_id:
            raise OidcError("the ID token names several audiences and another authorized party (azp)")
        sent = claims.get("nonce")
        if not isinstance(sent, str) or not hmac.compare_digest(sent.encode(), nonce.encode()):
            raise OidcError("the ID token's nonce is not this sign-in's")
        reviewer = claims.get(self.options.reviewer_claim)
        if not isinstance(reviewer, str) or not reviewer.strip() or "\x00" in reviewer:
            raise OidcError(f"the ID token has no reviewer id in claim {self.options.reviewer_claim!r}")
        return SignedInReviewer(reviewer, roles_in(claims.get(self.options.roles_claim)))

    # -- the provider's documents ---------------------------------------------------------------

    async def _discovery(self) -> dict[str, Any]:
        if self._metadata is not None:
            return self._metadata
        url = self.options.issuer.rstrip("/") + "/.well-known/openid-configuration"
        document = await _get_json(url, "discovery document")
        if document.get("issuer") != self.options.issuer:
            raise OidcError(f"the discovery document names issuer {document.get('issuer')!r}, not the configured one")
        for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            if not isinstance(document.get(name), str):
                raise OidcError(f"the discovery document has no {name}")
        self._metadata = document
        return document

    async def _key(self, kid: Any) -> jwt.PyJWK:
        async with self._lock:
            if kid not in self._keys and self._now() - self._keys_at >= _KEY_REFRESH_S:
                document = await _get_json((await self._discovery())["jwks_uri"], "key set")
                try:
                    key_set = jwt.PyJWKSet.from_dict(document)
                except jwt.PyJWTError as exc:
                    raise OidcError(f"the provider's key set cannot be read ({exc})") from None
                self._keys = {key.key_id: key for key in key_set.keys if key.public_key_use in (None, "sig")}
                self._keys_at = self._now()
            found = self._keys.get(kid)
        if found is None:
            raise OidcError("the ID token is signed with a key the provider does not publish")
        return found


async def _get_json(url: str, what: str) -> dict[str, Any]:
    try:
        async with httpx2.AsyncClient(timeout=_HTTP_TIMEOUT_S, follow_redirects=False) as http:
            response = await http.get(url, headers={"accept": "application/json"})
    except httpx2.HTTPError as exc:
        raise OidcError(f"the identity provider's {what} could not be fetched ({type(exc).__name__})") from None
    if response.status_code != 200:
        raise OidcError(f"the identity provider's {what} answered HTTP {response.status_code}")
    document = _json_object(response)
    if not document:
        raise OidcError(f"the identity provider's {what} is not a JSON object")
    return document


def _json_object(response: httpx2.Response) -> dict[str, Any]:
    try:
        document = response.json()
    except (ValueError, UnicodeDecodeError):
        return {}
    return dict(document) if isinstance(document, Mapping) else {}
