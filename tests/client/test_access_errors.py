"""``mcp_client`` raises typed errors naming the URL for 401, 403 and an unreachable server (real HTTP on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from pydantic import AnyHttpUrl

from mcp_approval.client import (
    ServerAccessError,
    ServerAuthenticationError,
    ServerAuthorizationError,
    ServerConnectionError,
    SQLiteCallJournal,
    mcp_client,
)
from tests.support.oauth_server import bound_socket, origin, serve_app

pytestmark = pytest.mark.anyio

SCOPE = "tools"


class Tokens:
    """Bearer tokens the server accepts, each with its scopes; a test may revoke one."""

    def __init__(self) -> None:
        self.scopes = {"good": [SCOPE], "no-scope": []}

    async def verify_token(self, token: str) -> AccessToken | None:
        scopes = self.scopes.get(token)
        return None if scopes is None else AccessToken(token=token, client_id="agent", subject="agent", scopes=scopes)


def scoped_server(base_url: str, tokens: Tokens) -> MCPServer[Any]:
    auth = AuthSettings(
        issuer_url=AnyHttpUrl(base_url),
        resource_server_url=AnyHttpUrl(f"{base_url}/mcp"),
        validate_token_resource=False,
        required_scopes=[SCOPE],
    )
    server: MCPServer[Any] = MCPServer("scoped", token_verifier=tokens, auth=auth, log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        return text

    return server


@pytest.fixture
def served() -> Iterator[tuple[str, Tokens]]:
    """The MCP URL of a server on 127.0.0.1 that requires the ``tools`` scope, and its tokens."""
    sock, tokens = bound_socket(), Tokens()
    with serve_app(scoped_server(origin(sock), tokens).streamable_http_app(), sock) as base_url:
        yield f"{base_url}/mcp", tokens


async def test_a_wrong_token_is_an_authentication_error_naming_the_url(served: tuple[str, Tokens]) -> None:
    url, _ = served
    with pytest.raises(ServerAuthenticationError) as refused:
        async with mcp_client(url, auth="wrong"):
            pass
    assert refused.value.url == url
    assert refused.value.status == 401
    assert refused.value.challenge is not None
    assert 'error="invalid_token"' in refused.value.challenge
    assert str(refused.value).startswith(f"{url}: the server refused the credential (HTTP 401)")
    assert isinstance(refused.value, ServerAccessError)


async def test_a_token_without_the_scope_is_an_authorization_error_naming_the_url(served: tuple[str, Tokens]) -> None:
    url, _ = served
    with pytest.raises(ServerAuthorizationError) as refused:
        async with mcp_client(url, auth="no-scope"):
            pass
    assert refused.value.url == url
    assert refused.value.status == 403
    assert refused.value.challenge is not None
    assert 'error="insufficient_scope"' in refused.value.challenge


async def test_an_unreachable_server_is_a_connection_error_naming_the_url() -> None:
    sock = bound_socket()
    url = f"{origin(sock)}/mcp"
    sock.close()  # nothing listens there any more
    with pytest.raises(ServerConnectionError) as unreachable:
        async with mcp_client(url, auth="good"):
            pass
    assert unreachable.value.url == url
    assert unreachable.value.status is None
    assert "could not reach the server" in str(unreachable.value)


async def test_a_token_revoked_during_the_session_fails_the_call_typed_and_frees_its_key(
    served: tuple[str, Tokens], tmp_path: Path
) -> None:
    url, tokens = served
    journal = SQLiteCallJournal(tmp_path / "calls.sqlite3")
    async with mcp_client(url, auth="good", call_journal=journal) as client:
        assert (await client.call_tool("echo", {"text": "hi"})).is_error is False
        del tokens.scopes["good"]
        with pytest.raises(ServerAuthenticationError) as refused:
            await client.call_tool("echo", {"text": "again"}, call_key="k")
    assert refused.value.url == url
    assert await journal.get("k") is None  # refused before anything ran: the key may be used again
