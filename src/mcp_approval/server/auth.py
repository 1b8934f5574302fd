"""Who is calling: static bearer tokens for development, JWT access tokens (``[auth]``) for production.

:func:`auth_from_config` builds the SDK's token verifier and resource-server settings for a
deployment; :func:`reviewer_authenticator` maps a reviewer's bearer token to a principal with the
same rules, so callers, reviewers and the console authenticate alike.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence

from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from pydantic import AnyHttpUrl

from mcp_approval.clock import Clock
from mcp_approval.config import ConfigError, DeploymentConfig
from mcp_approval.server.jwt_auth import JwksError, JwtTokenVerifier

__all__ = [
    "FirstAcceptingVerifier",
    "StaticTokenVerifier",
    "auth_from_config",
    "jwt_verifier",
    "local_auth_settings",
    "reviewer_authenticator",
]


class StaticTokenVerifier:
    """Accepts a fixed set of bearer tokens, each naming one principal.

    Args:
        tokens: bearer token → principal name.
    """

    def __init__(self, tokens: Mapping[str, str]) -> None:
        if not tokens:
            raise ValueError("StaticTokenVerifier needs at least one token")
        self._tokens = dict(tokens)

    async def verify_token(self, token: str) -> AccessToken | None:
        """The principal's access token, or ``None`` for an unknown token."""
        principal = self._tokens.get(token)
        if principal is None:
            return None
        return AccessToken(token=token, client_id=principal, subject=principal, scopes=[])


def local_auth_settings(base_url: str) -> AuthSettings:
    """Resource-server settings for a server at ``base_url`` that checks static tokens itself."""
    return AuthSettings(
        issuer_url=AnyHttpUrl(base_url),
        resource_server_url=AnyHttpUrl(f"{base_url}/mcp"),
        # Static tokens are issued for this server alone; there is no audience to compare.
        validate_token_resource=False,
    )


class FirstAcceptingVerifier:
    """Asks each verifier in turn; the first that accepts the token wins (dev tokens next to ``[auth]``)."""

    def __init__(self, verifiers: Sequence[TokenVerifier]) -> None:
        self._verifiers = tuple(verifiers)

    async def verify_token(self, token: str) -> AccessToken | None:
        """The first verifier's access token for ``token``, or ``None`` if none accepts it."""
        for verifier in self._verifiers:
            access = await verifier.verify_token(token)
            if access is not None:
                return access
        return None


def auth_from_config(
    config: DeploymentConfig, base_url: str, *, clock: Clock | None = None
) -> tuple[TokenVerifier, AuthSettings] | None:
    """The token verifier and resource-server settings for ``config`` (``None``: no bearer auth).

    Static ``[[principals]]`` tokens (dev mode) and ``[auth]`` JWT access tokens may be combined;
    with ``[auth]`` the protected resource metadata names its issuer and audience.

    Raises:
        ConfigError: the ``[auth]`` key set file cannot be read or holds no usable key.
    """
    verifiers: list[TokenVerifier] = []
    if config.tokens():
        verifiers.append(StaticTokenVerifier(config.tokens()))
    if config.auth is None:
        return (verifiers[0], local_auth_settings(base_url)) if verifiers else None
    verifiers.append(jwt_verifier(config, clock=clock))
    # Validated from strings, so an issuer without a path keeps its exact form (RFC 8414 compares
    # issuers as strings: no trailing slash may be added).
    settings = AuthSettings.model_validate(
        {
            "issuer_url": config.auth.issuer,
            "resource_server_url": config.auth.audience,
            "required_scopes": config.auth.required_scopes or None,
            # The verifier requires the audience in every token's aud; there is nothing left to compare.
            "validate_token_resource": False,
        }
    )
    return FirstAcceptingVerifier(verifiers), settings


def jwt_verifier(config: DeploymentConfig, *, clock: Clock | None = None) -> JwtTokenVerifier:
    """The ``[auth]`` section's :class:`JwtTokenVerifier` (token times read from ``clock``).

    Raises:
        ConfigError: the key set file cannot be read or holds no usable key (naming the file).
    """
    auth = config.auth
    assert auth is not None
    jwks = None
    if auth.jwks_file is not None:
        path = config.resolve(auth.jwks_file)
        try:
            jwks = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{config.path}: auth.jwks_file: cannot read {path} ({exc})") from None
    try:
        return JwtTokenVerifier(
            issuer=auth.issuer,
            audience=auth.audience,
            jwks_url=auth.jwks_url,
            jwks=jwks,
            algorithms=auth.algorithms,
            token_types=auth.token_types,
            principal_claim=auth.principal_claim,
            scopes_claim=auth.scopes_claim,
            leeway_s=auth.leeway_s,
            refresh_s=auth.jwks_refresh_s,
            clock=clock,
        )
    except JwksError as exc:
        raise ConfigError(f"{config.path}: auth.jwks_file: {exc}") from None


def reviewer_authenticator(
    config: DeploymentConfig, verifier: TokenVerifier | None = None
) -> Callable[[str], Awaitable[str | None]]:
    """Maps a reviewer's bearer token to its principal: a static token, else ``verifier``'s subject."""
    tokens = config.tokens()

    async def authenticate(token: str) -> str | None:
        # Compare every static token in constant time, so timing reveals nothing about which one matched.
        found = None
        for known, principal in tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = principal
        if found is not None or verifier is None:
            return found
        access = await verifier.verify_token(token)
        return None if access is None else access.subject or access.client_id

    return authenticate
