"""OAuth for the agent over HTTP: the ``mcp`` SDK's :class:`OAuthClientProvider`, with in-memory storage.

The provider is an ``httpx2.Auth``; :func:`~mcp_approval.client.mcp_client` puts it on the
``httpx2.AsyncClient`` the Streamable HTTP transport uses::

    with LoopbackRedirectReceiver() as receiver:
        provider = oauth_client(url, receiver=receiver, client_metadata_url=CLIENT_ID)
        async with mcp_client(url, auth=provider) as client:
            await client.call_tool("pay", {"amount": "5.00"})

On a 401, and on a 403 ``insufficient_scope`` challenge (SEP-2643's transport scope denial), the
provider discovers the protected resource metadata (RFC 9728) and the authorization server metadata
(RFC 8414), registers the client when it has no credentials (dynamic registration, or a client ID
metadata document when ``client_metadata_url`` is given and the server supports it), runs the
authorization code flow with PKCE, and retries the request once with the new token. A step-up
requests the union of the scopes held and the scopes the challenge names.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl

from mcp_approval.client.redirect import LoopbackRedirectReceiver
from mcp_approval.hosts import is_safe_transport

__all__ = ["CallbackHandler", "MemoryTokenStorage", "RedirectHandler", "client_metadata_document", "oauth_client"]

RedirectHandler = Callable[[str], Awaitable[None]]
"""Sends the user to the authorization URL it is given (opens a browser, prints a link)."""

CallbackHandler = Callable[[], Awaitable[AuthorizationCodeResult]]
"""Waits for the authorization response at the redirect URI: its ``code``, ``state`` and ``iss``."""


class MemoryTokenStorage(TokenStorage):
    """The SDK's :class:`TokenStorage` in memory: one token set and one client registration.

    Shared between providers it lets a later connection start from the tokens and the
    registration an earlier one obtained; nothing survives the process.
    """

    def __init__(self, tokens: OAuthToken | None = None, client_info: OAuthClientInformationFull | None = None) -> None:
        self.tokens = tokens
        self.client_info = client_info

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens, if any."""
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Replace the stored tokens."""
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The stored client registration, if any."""
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Replace the stored client registration."""
        self.client_info = client_info


def oauth_client(
    server_url: str,
    *,
    receiver: LoopbackRedirectReceiver | None = None,
    redirect_uris: Sequence[str] | None = None,
    client_name: str = "mcp-approval agent",
    storage: TokenStorage | None = None,
    redirect_handler: RedirectHandler | None = None,
    callback_handler: CallbackHandler | None = None,
    client_metadata_url: str | None = None,
    scope: str | None = None,
) -> OAuthClientProvider:
    """An authorization-code (PKCE) :class:`OAuthClientProvider` for the MCP server at ``server_url``.

    Give either a ``receiver`` (a :class:`LoopbackRedirectReceiver`: its redirect URI and handlers
    are used) or ``redirect_uris``, ``redirect_handler`` and ``callback_handler`` yourself.

    Args:
        server_url: the MCP endpoint (its URL is the RFC 8707 resource, checked against the
            protected resource metadata).
        receiver: receives the redirect on 127.0.0.1 and shows the user the authorization URL.
        redirect_uris: where the authorization server sends the user back; the first is used.
        client_name: the name registered for the client (dynamic registration).
        storage: where tokens and the registration are kept; a new :class:`MemoryTokenStorage` if omitted.
        redirect_handler: sends the user to the authorization URL.
        callback_handler: returns the authorization response received at the redirect URI.
        client_metadata_url: an ``https`` client ID metadata document URL (CIMD), used as the
            ``client_id`` when the authorization server advertises support; otherwise (and when
            omitted) the client registers dynamically. Serve :func:`client_metadata_document` there.
        scope: the scope of the *initial* request only. The SDK takes the scope from the server:
            a 401 replaces it with the challenge's ``scope=``, else the resource metadata's
            ``scopes_supported``, else the authorization server's; a 403 ``insufficient_scope``
            adds the challenged scopes to those already requested or granted.

    Raises:
        ValueError: ``server_url`` is not ``https`` (plain ``http`` only on a loopback host: the
            provider sends bearer tokens there), ``client_metadata_url`` is not an ``https`` URL
            with a non-root path, ``redirect_uris`` is empty or holds an invalid URL, or neither
            a ``receiver`` nor the redirect URIs and both handlers are given.
    """
    _check_server_url(server_url)
    if receiver is not None:
        redirect_uris = redirect_uris or [receiver.redirect_uri]
        redirect_handler = redirect_handler or receiver.redirect_handler
        callback_handler = callback_handler or receiver.callback_handler
    if not redirect_uris or redirect_handler is None or callback_handler is None:
        raise ValueError(
            "oauth_client needs receiver= (a LoopbackRedirectReceiver), or redirect_uris, redirect_handler"
            " and callback_handler"
        )
    metadata = OAuthClientMetadata(
        redirect_uris=[AnyUrl(uri) for uri in redirect_uris],
        client_name=client_name,
        scope=scope,
    )
    return OAuthClientProvider(
        server_url=server_url,
        client_metadata=metadata,
        storage=storage if storage is not None else MemoryTokenStorage(),
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=client_metadata_url,
    )


def client_metadata_document(
    client_id: str,
    *,
    redirect_uris: Sequence[str],
    scope: str | None = None,
    client_name: str | None = None,
    client_uri: str | None = None,
) -> dict[str, Any]:
    """The client ID metadata document to serve (as JSON) at ``client_id``.

    A public client (``token_endpoint_auth_method = "none"``; PKCE protects its codes) using the
    authorization code grant with refresh tokens.

    Args:
        client_id: the document's own URL: ``https`` with a path.
        redirect_uris: the client's redirect URIs (for a native agent, its loopback receiver's).
        scope: the scopes the client may ask for, space-separated (include any it steps up to).
        client_name: shown to the user on the consent screen.
        client_uri: the client's home page.

    Raises:
        ValueError: ``client_id`` is not an https URL with a path, or ``redirect_uris`` is empty
            or holds a URL that is not absolute.
    """
    parts = urlsplit(client_id)
    if parts.scheme != "https" or not parts.hostname or parts.path in ("", "/"):
        raise ValueError(f"client_id {client_id!r} must be an https URL with a path (it is the document's URL)")
    if not redirect_uris:
        raise ValueError("redirect_uris needs at least one URI")
    for uri in redirect_uris:
        if not urlsplit(uri).scheme or not urlsplit(uri).netloc:
            raise ValueError(f"redirect_uris: {uri!r} is not an absolute URL")
    document: dict[str, Any] = {
        "client_id": client_id,
        "redirect_uris": list(redirect_uris),
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    optional = {"scope": scope, "client_name": client_name, "client_uri": client_uri}
    document.update({key: value for key, value in optional.items() if value is not None})
    return document


def _check_server_url(server_url: str) -> None:
    """Tokens never cross plain http: ``https``, or ``http`` to this machine only."""
    if is_safe_transport(server_url):
        return
    raise ValueError(
        f"server_url {server_url!r} must be an https URL (plain http only on a loopback host): "
        "the provider sends bearer tokens to it"
    )
