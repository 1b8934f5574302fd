"""``[console]`` and ``[console.oidc]`` of a deployment file: how reviewers sign in to the console.

::

    [console.oidc]
    issuer = "https://login.example.com/realms/acme"   # compared exactly with the discovery document and iss
    client_id = "mcp-approval-console"
    client_secret_file = "console-client-secret"        # omit for a public client (PKCE alone)
    redirect_url = "https://approvals.example.com/console/oidc/callback"
    roles_claim = "roles"                                # a list, or a space-separated string
    reviewer_claim = "preferred_username"                # the reviewer id; "sub" by default

Paths are relative to the deployment file. Reviewers then sign in with the organization's identity
provider (authorization code with PKCE); the bearer-token form stays for dev mode and when
``token_sign_in = true`` (machines use the reviewer API with bearer tokens either way).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DEFAULT_ID_TOKEN_ALGORITHMS", "ConsoleSection", "OidcOptions"]

#: Asymmetric signatures only: a client secret never doubles as an HMAC key for ID tokens.
DEFAULT_ID_TOKEN_ALGORITHMS = ("RS256", "ES256", "PS256", "EdDSA")
_ALLOWED_ALGORITHMS = frozenset(
    {"ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA"}
)


class OidcOptions(BaseModel):
    """``[console.oidc]``: the identity provider reviewers sign in with (OpenID Connect)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The issuer identifier: its discovery document is ``{issuer}/.well-known/openid-configuration``
    #: and must name exactly this issuer, as must every ID token's ``iss``.
    issuer: str = Field(min_length=1)
    #: This console's client id at the provider; every ID token's ``aud`` must contain it.
    client_id: str = Field(min_length=1)
    #: A file holding the client secret (sent with HTTP Basic); none: a public client, PKCE alone.
    client_secret_file: Path | None = None
    #: The callback URL registered at the provider: ``<the console's public URL>/oidc/callback``.
    redirect_url: str = Field(min_length=1)
    #: Scopes asked for (``openid`` is always sent).
    scopes: list[str] = Field(default_factory=lambda: ["openid", "profile"])
    #: The ID token claim naming the reviewer (a non-empty string).
    reviewer_claim: str = Field(default="sub", min_length=1)
    #: The ID token claim holding the reviewer's roles (a list of strings or a space-separated string).
    roles_claim: str = Field(default="roles", min_length=1)
    #: Accepted ID token signature algorithms.
    algorithms: list[str] = Field(default_factory=lambda: list(DEFAULT_ID_TOKEN_ALGORITHMS), min_length=1)
    #: Tolerated clock skew for ``exp`` and ``iat``, in seconds.
    leeway_s: float = Field(default=30.0, ge=0, le=300)
    #: How long a sign-in may take at the provider before its state is forgotten, in seconds.
    login_timeout_s: float = Field(default=600.0, ge=30, le=3600)
    #: The sign-in button's text.
    label: str = Field(default="Sign in with your organization", min_length=1, max_length=80)

    @field_validator("algorithms")
    @classmethod
    def _asymmetric(cls, algorithms: list[str]) -> list[str]:
        unknown = [name for name in algorithms if name not in _ALLOWED_ALGORITHMS]
        if unknown:
            raise ValueError(f"not an asymmetric JWS algorithm: {', '.join(unknown)}")
        return algorithms


class ConsoleSection(BaseModel):
    """``[console]``: how reviewers sign in to the console."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Sign-in with an OpenID Connect provider (none: bearer tokens only).
    oidc: OidcOptions | None = None
    #: Keep the bearer-token form beside OIDC sign-in (it is always there in dev mode and without OIDC).
    token_sign_in: bool = False
