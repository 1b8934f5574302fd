"""A real OAuth 2.1 authorization server on 127.0.0.1 for tests, built on the ``mcp`` SDK's AS building blocks.

:class:`MemoryAuthorizationServer` is an in-memory ``OAuthAuthorizationServerProvider``: dynamic
client registration, an ``authorize`` that approves at once (it redirects to the client's
redirect URI with a code, as a consenting user would), the authorization code grant with PKCE
(checked by the SDK's token handler), refresh tokens, and opaque access tokens that record the
client, the scopes and the RFC 8707 resource. Every registration, authorization and issued
token is kept for assertions.

:func:`serve_authorization_server` serves it (``create_auth_routes``) with uvicorn in a thread;
:func:`serve_app` serves any ASGI app that way (a resource server, for instance), on a socket
bound before the server starts, so no test waits on a port. :class:`AuthorizationServerVerifier`
is the resource server's ``TokenVerifier``: it asks the provider object in this process.
"""

from __future__ import annotations

import secrets
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trustme
import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.routes import build_metadata, create_auth_routes
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from mcp_approval.hosts import unused_loopback_port
from tests.support.timing import scaled

ACCESS_TOKEN_LIFETIME_S = 3600
CODE_LIFETIME_S = 300
SUBJECT = "alice"


@dataclass(frozen=True)
class Authorization:
    """One approved authorization request, as ``authorize`` received it."""

    client_id: str
    scopes: tuple[str, ...]
    resource: str | None
    redirect_uri: str


@dataclass
class MemoryAuthorizationServer(OAuthAuthorizationServerProvider[AuthorizationCode, RefreshToken, AccessToken]):
    """An in-memory ``OAuthAuthorizationServerProvider`` that approves every authorization request.

    Args:
        issuer_url: this server's issuer (its origin on 127.0.0.1).
        scopes_supported: the scopes it issues, advertised in its metadata.
        registered_scope: ``"supported"`` (the default) records each registered client as
            allowed every supported scope; ``"requested"`` keeps the scope the client
            registered with. The SDK's ``/authorize`` handler refuses any scope outside the
            client's registered one, so a client that registered with ``mcp:read`` can step up
            to ``payments:write`` only under ``"supported"`` (RFC 7591 lets the server replace
            requested metadata).
        cimd_trust: when set, the server advertises ``client_id_metadata_document_supported``
            and, for an ``https`` client id it does not know, fetches the client ID metadata
            document over TLS trusting this context (a test CA), checks it and caches the client.
        code_token_expires_in_s: the ``expires_in`` sent with access tokens issued for an
            authorization code (``0`` makes the client refresh before its next request; the
            server keeps accepting the token). Refreshed tokens say the full lifetime.
    """

    issuer_url: str
    scopes_supported: Sequence[str]
    registered_scope: str = "supported"
    clients: dict[str, OAuthClientInformationFull] = field(default_factory=dict)
    registrations: list[OAuthClientInformationFull] = field(default_factory=list)
    authorizations: list[Authorization] = field(default_factory=list)
    issued: list[AccessToken] = field(default_factory=list)
    codes: dict[str, AuthorizationCode] = field(default_factory=dict)
    access_tokens: dict[str, AccessToken] = field(default_factory=dict)
    refresh_tokens: dict[str, RefreshToken] = field(default_factory=dict)
    cimd_trust: ssl.SSLContext | None = None
    code_token_expires_in_s: int = ACCESS_TOKEN_LIFETIME_S
    fetched_documents: list[str] = field(default_factory=list)
    rejected_documents: list[str] = field(default_factory=list)
    issued_codes: list[str] = field(default_factory=list)

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        known = self.clients.get(client_id)
        if known is not None or self.cimd_trust is None or not client_id.startswith("https://"):
            return known
        return await self._client_from_document(client_id)

    async def _client_from_document(self, client_id: str) -> OAuthClientInformationFull | None:
        """Fetch and check the client ID metadata document at ``client_id`` (the CIMD rules)."""
        async with httpx.AsyncClient(verify=self.cimd_trust, timeout=scaled(10), follow_redirects=False) as http:
            response = await http.get(client_id)
        self.fetched_documents.append(client_id)
        try:
            document = response.json() if response.status_code == 200 else {}
            client = OAuthClientInformationFull.model_validate(document)
        except (ValueError, ValidationError):
            client = None
        if client is None or client.client_id != client_id or client.token_endpoint_auth_method != "none":
            self.rejected_documents.append(client_id)
            return None
        self.clients[client_id] = client
        return client

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.registrations.append(client_info)
        if self.registered_scope == "supported":
            client_info = client_info.model_copy(update={"scope": " ".join(self.scopes_supported)})
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        scopes = tuple(params.scopes or ())
        self.authorizations.append(Authorization(client.client_id, scopes, params.resource, str(params.redirect_uri)))
        code = secrets.token_urlsafe(32)
        self.issued_codes.append(code)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=list(scopes),
            expires_at=time.time() + CODE_LIFETIME_S,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=SUBJECT,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        code = self.codes.get(authorization_code)
        return code if code is not None and code.client_id == client.client_id else None

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        if self.codes.pop(authorization_code.code, None) is None:
            raise TokenError("invalid_grant", "authorization code already used")
        return self._issue(
            client.client_id, authorization_code.scopes, authorization_code.resource, self.code_token_expires_in_s
        )

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        token = self.refresh_tokens.get(refresh_token)
        return token if token is not None and token.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        if not set(scopes) <= set(refresh_token.scopes):
            raise TokenError("invalid_scope", "a refresh cannot widen the grant")
        self.refresh_tokens.pop(refresh_token.token, None)
        return self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        held = self.access_tokens.get(token)
        if held is None or (held.expires_at is not None and held.expires_at < time.time()):
            return None
        return held

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access_tokens.pop(token.token, None)
        self.refresh_tokens.pop(token.token, None)

    def _issue(
        self, client_id: str, scopes: Sequence[str], resource: str | None, expires_in: int = ACCESS_TOKEN_LIFETIME_S
    ) -> OAuthToken:
        access = AccessToken(
            token=secrets.token_urlsafe(32),
            client_id=client_id,
            scopes=list(scopes),
            expires_at=int(time.time()) + ACCESS_TOKEN_LIFETIME_S,
            resource=resource,
            subject=SUBJECT,
            claims={"iss": self.issuer_url},
        )
        refresh = RefreshToken(
            token=secrets.token_urlsafe(32),
            client_id=client_id,
            scopes=list(scopes),
            resource=resource,
            subject=SUBJECT,
        )
        self.access_tokens[access.token] = access
        self.refresh_tokens[refresh.token] = refresh
        self.issued.append(access)
        return OAuthToken(
            access_token=access.token,
            expires_in=expires_in,
            scope=" ".join(scopes),
            refresh_token=refresh.token,
        )


@dataclass
class AuthorizationServerVerifier:
    """The resource server's ``TokenVerifier``: asks the authorization server's provider; records what it saw."""

    provider: MemoryAuthorizationServer
    seen: list[AccessToken | None] = field(default_factory=list)

    async def verify_token(self, token: str) -> AccessToken | None:
        verified = await self.provider.load_access_token(token)
        self.seen.append(verified)
        return verified


class _ThreadedServer(uvicorn.Server):
    """A uvicorn server that says when its startup (lifespan included) has finished."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


def bound_socket() -> socket.socket:
    """A listening TCP socket on a free 127.0.0.1 port: connections queue until a server accepts them."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", unused_loopback_port()))  # from the handout: never a port promised to a server
    sock.listen(128)
    return sock


def origin(sock: socket.socket) -> str:
    """``http://127.0.0.1:<port>`` of a bound socket."""
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


@contextmanager
def serve_app(
    app: ASGIApp, sock: socket.socket, *, startup_timeout_s: float | None = None, **config_options: Any
) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a background thread on ``sock``; yields its origin URL.

    Returns once uvicorn has finished its startup (the app's lifespan included; up to
    ``startup_timeout_s``, by default ``scaled(20)``) and stops the server on exit. ``config_options`` go to
    ``uvicorn.Config`` (``ssl_certfile``, for instance).
    """
    config = uvicorn.Config(app, log_level="warning", lifespan="auto", timeout_graceful_shutdown=5, **config_options)
    server = _ThreadedServer(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn-{origin(sock)}")
    thread.start()
    try:
        deadline = time.monotonic() + (scaled(20) if startup_timeout_s is None else startup_timeout_s)
        while not server.ready.wait(0.05):  # an event wait, bounded so a failed startup is seen
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start at {origin(sock)}")
        yield origin(sock)
    finally:
        server.should_exit = True
        thread.join(scaled(15))
        sock.close()


def authorization_server_app(provider: MemoryAuthorizationServer) -> Starlette:
    """The SDK's AS routes (metadata, ``/authorize``, ``/token``, ``/register``, ``/revoke``) over ``provider``."""
    registration = ClientRegistrationOptions(enabled=True, valid_scopes=list(provider.scopes_supported))
    routes = create_auth_routes(
        provider,
        AnyHttpUrl(provider.issuer_url),
        client_registration_options=registration,
        revocation_options=RevocationOptions(enabled=True),
    )
    if provider.cimd_trust is not None:
        routes.insert(0, _cimd_metadata_route(provider, registration))
    return Starlette(routes=routes)


def _cimd_metadata_route(provider: MemoryAuthorizationServer, registration: ClientRegistrationOptions) -> Route:
    """The SDK's metadata plus ``client_id_metadata_document_supported`` and the ``none`` client auth method."""
    metadata = build_metadata(
        AnyHttpUrl(provider.issuer_url), None, registration, RevocationOptions(enabled=True)
    ).model_copy(
        update={
            "client_id_metadata_document_supported": True,
            "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic", "none"],
        }
    )
    body = metadata.model_dump(mode="json", exclude_none=True)

    async def serve(_request: Request) -> JSONResponse:
        return JSONResponse(body)

    return Route("/.well-known/oauth-authorization-server", serve, methods=["GET"])


@contextmanager
def serve_authorization_server(
    scopes_supported: Sequence[str], *, registered_scope: str = "supported", cimd_trust: ssl.SSLContext | None = None
) -> Iterator[MemoryAuthorizationServer]:
    """A :class:`MemoryAuthorizationServer` served over HTTP on 127.0.0.1 (its ``issuer_url``)."""
    sock = bound_socket()
    provider = MemoryAuthorizationServer(origin(sock), list(scopes_supported), registered_scope, cimd_trust=cimd_trust)
    with serve_app(authorization_server_app(provider), sock):
        yield provider


@contextmanager
def serve_https(app: ASGIApp, sock: socket.socket, ca: trustme.CA) -> Iterator[str]:
    """Serve ``app`` over TLS on ``sock`` with a certificate for 127.0.0.1 issued by the test ``ca``."""
    certificate = ca.issue_cert("127.0.0.1")
    with tempfile.TemporaryDirectory() as directory:
        pem = Path(directory) / "server.pem"
        certificate.private_key_and_cert_chain_pem.write_to_path(str(pem))
        with serve_app(app, sock, ssl_certfile=str(pem), ssl_keyfile=str(pem)):
            yield f"https://127.0.0.1:{sock.getsockname()[1]}"


def trusting(ca: trustme.CA) -> ssl.SSLContext:
    """A client TLS context that trusts the test ``ca`` (and nothing else)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ca.configure_trust(context)
    return context
