"""Static bearer tokens for development and tests (never for production)."""

from __future__ import annotations

from collections.abc import Mapping

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from pydantic import AnyHttpUrl


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
