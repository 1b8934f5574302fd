"""Transport ``insufficient_scope`` → scope step-up through the SDK's ``OAuthClientProvider``, end to end.

Two real servers on 127.0.0.1, each uvicorn in a thread: an OAuth 2.1 authorization server (the
SDK's AS routes over an in-memory provider, ``tests.support.oauth_server``) and an ``MCPServer``
resource server that requires ``mcp:read`` everywhere and, through this project's per-tool
middleware, ``payments:write`` for ``pay``. The client is the SDK ``Client`` over streamable HTTP
with the provider from :func:`mcp_approval.client.oauth_client` on its ``httpx2`` client; the only
stand-in is the "browser", which GETs the authorization URL and reads the code from ``Location``.
Every request the client sends, the auth flow's included, is logged by an ``httpx2`` event hook.

Also here: a client that does not recognize a remediation (``authorization_remediation`` on a 401)
falls back to metadata discovery, and an AS that pins the registered scope refuses the step-up.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import AuthorizationCodeResult
from mcp.shared.exceptions import MCPError
from pydantic import AnyHttpUrl

from mcp_approval.client import MemoryTokenStorage, oauth_client
from mcp_approval.client.denials import read_challenge
from mcp_approval.denials import AuthorizationRemediation, ToolRequirement, install_tool_authorization, remediation_for
from tests.support.oauth_server import (
    AuthorizationServerVerifier,
    MemoryAuthorizationServer,
    bound_socket,
    origin,
    serve_app,
    serve_authorization_server,
)
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

READ = "mcp:read"
PAY = "payments:write"
REDIRECT_URI = "http://127.0.0.1:9/oauth/callback"  # never contacted: the browser reads the redirect
TIMEOUT_S = scaled(30)


@dataclass
class Deployment:
    """The authorization server, and the resource server that trusts it."""

    authorization_server: MemoryAuthorizationServer
    verifier: AuthorizationServerVerifier
    mcp_url: str
    resource_metadata_url: str
    ran: list[tuple[str, list[str]]] = field(default_factory=list)
    """Tools that ran, with the scopes of the token they ran under."""


async def transfer_details_needed(arguments: Mapping[str, Any], token: AccessToken) -> AuthorizationRemediation:
    """Every ``transfer`` needs authorization details for its amount; this AS never issues any."""
    return remediation_for([{"type": "payment_initiation", "amount": arguments.get("amount")}], single_use=True)


@contextmanager
def deploy(authorization_server: MemoryAuthorizationServer) -> Iterator[Deployment]:
    """The payments resource server on 127.0.0.1, trusting ``authorization_server``."""
    sock = bound_socket()
    mcp_url = f"{origin(sock)}/mcp"
    metadata_url = str(build_resource_metadata_url(AnyHttpUrl(mcp_url)))
    verifier = AuthorizationServerVerifier(authorization_server)
    deployed = Deployment(authorization_server, verifier, mcp_url, metadata_url)
    server: MCPServer[Any] = MCPServer(
        "payments-rs",
        token_verifier=verifier,
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(authorization_server.issuer_url),
            resource_server_url=AnyHttpUrl(mcp_url),
            required_scopes=[READ],
            validate_token_resource=True,
        ),
        log_level="WARNING",
    )

    def scopes() -> list[str]:
        token = get_access_token()
        assert token is not None
        return sorted(token.scopes)

    @server.tool()
    async def whoami() -> list[str]:
        """The scopes of the caller's token."""
        deployed.ran.append(("whoami", scopes()))
        return scopes()

    @server.tool()
    async def transfer(amount: str) -> str:
        """Needs RFC 9396 authorization details no token here carries (a 401 RAR challenge)."""
        deployed.ran.append(("transfer", scopes()))
        return f"moved {amount}"

    @server.tool()
    async def pay(amount: str) -> str:
        """Needs ``payments:write`` (enforced by the middleware, before this runs)."""
        deployed.ran.append(("pay", scopes()))
        return f"paid {amount}"

    app = server.streamable_http_app()
    requirements = {
        "pay": ToolRequirement(scopes=frozenset({PAY})),
        "transfer": ToolRequirement(authorization=transfer_details_needed),
    }
    install_tool_authorization(app, requirements, resource_metadata_url=metadata_url, base_scopes=[READ])
    with serve_app(app, sock):
        yield deployed


@pytest.fixture
def deployment() -> Iterator[Deployment]:
    with serve_authorization_server([READ, PAY]) as authorization_server, deploy(authorization_server) as deployed:
        yield deployed


class AuthorizationRefused(Exception):
    """The authorization server redirected back with an error instead of a code."""


@dataclass
class Browser:
    """The user agent: follows the authorization URL and reads the code from the redirect, as the AS sends it."""

    authorization_urls: list[str] = field(default_factory=list)
    pending: AuthorizationCodeResult | None = None

    async def open(self, url: str) -> None:
        self.authorization_urls.append(url)
        async with httpx2.AsyncClient(timeout=TIMEOUT_S) as http:
            response = await http.get(url)
        assert response.status_code == 302, response.text
        location = response.headers["location"]
        assert location.startswith(REDIRECT_URI), location
        query = parse_qs(urlsplit(location).query)
        if "error" in query:
            raise AuthorizationRefused(query["error"][0], query.get("error_description", [""])[0])
        self.pending = AuthorizationCodeResult(code=query["code"][0], state=query["state"][0])

    async def callback(self) -> AuthorizationCodeResult:
        result, self.pending = self.pending, None
        assert result is not None, "callback before the redirect"
        return result


@dataclass(frozen=True)
class Exchange:
    """One HTTP exchange the client's ``httpx2`` client made."""

    method: str
    path: str
    status: int
    www_authenticate: str | None
    mcp_method: str | None
    mcp_name: str | None
    query: dict[str, list[str]]


@dataclass
class Connection:
    client: Client
    provider: OAuthClientProvider
    browser: Browser
    log: list[Exchange]

    def since(self, mark: int) -> list[tuple[str, str, int]]:
        """``(method, path, status)`` of the exchanges after the first ``mark``."""
        return [(item.method, item.path, item.status) for item in self.log[mark:]]


@asynccontextmanager
async def connect(deployment: Deployment, storage: TokenStorage) -> AsyncIterator[Connection]:
    """An SDK client with OAuth to the deployment's MCP server; every exchange logged."""
    browser = Browser()
    log: list[Exchange] = []

    async def record(response: httpx2.Response) -> None:
        request = response.request
        log.append(
            Exchange(
                request.method,
                request.url.path,
                response.status_code,
                response.headers.get("www-authenticate"),
                request.headers.get("mcp-method"),
                request.headers.get("mcp-name"),
                parse_qs(request.url.query.decode() if isinstance(request.url.query, bytes) else request.url.query),
            )
        )

    provider = oauth_client(
        deployment.mcp_url,
        redirect_uris=[REDIRECT_URI],
        client_name="mcp-approval tests",
        storage=storage,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )
    with anyio.fail_after(TIMEOUT_S):
        hooks = {"response": [record]}
        async with (
            httpx2.AsyncClient(auth=provider, timeout=TIMEOUT_S, event_hooks=hooks) as http,
            Client(streamable_http_client(deployment.mcp_url, http_client=http)) as client,
        ):
            yield Connection(client, provider, browser, log)


def text(result: Any) -> str:
    return " ".join(item.text for item in result.content if item.type == "text")


def prm_path(deployment: Deployment) -> str:
    return urlsplit(deployment.resource_metadata_url).path


AS_METADATA = "/.well-known/oauth-authorization-server"


async def test_a_first_401_discovers_registers_and_authorizes_with_the_resource_scope(deployment: Deployment):
    storage = MemoryTokenStorage()
    async with connect(deployment, storage) as connection:
        result = await connection.client.call_tool("whoami", {})
        log = connection.log
    assert not result.is_error, text(result)
    assert result.structured_content == {"result": [READ]}
    # The first request is refused 401; the flow reads the PRM it names, then the AS metadata.
    first = log[0]
    assert (first.method, first.path, first.status) == ("POST", "/mcp", 401)
    assert first.www_authenticate is not None
    assert f'resource_metadata="{deployment.resource_metadata_url}"' in first.www_authenticate
    assert connection.since(0)[:6] == [
        ("POST", "/mcp", 401),
        ("GET", prm_path(deployment), 200),
        ("GET", AS_METADATA, 200),
        ("POST", "/register", 201),
        ("POST", "/token", 200),
        ("POST", "/mcp", 200),
    ]
    authorization_server = deployment.authorization_server
    assert len(authorization_server.registrations) == 1
    assert authorization_server.registrations[0].scope == READ  # the PRM's scopes_supported
    [authorization] = authorization_server.authorizations
    assert authorization.scopes == (READ,)
    assert authorization.resource == deployment.mcp_url  # RFC 8707, from the PRM
    assert authorization.client_id == storage.client_info.client_id  # type: ignore[union-attr]
    # The token the resource server saw for the tool call.
    assert deployment.ran == [("whoami", [READ])]
    assert [token.scopes for token in deployment.verifier.seen if token is not None][-1] == [READ]
    assert storage.tokens is not None
    assert storage.tokens.scope == READ


async def test_no_token_or_code_reaches_the_log_even_at_debug(deployment: Deployment, caplog: pytest.LogCaptureFixture):
    """The product page's rule "tokens are never logged", for every logger in the process."""
    with caplog.at_level(logging.DEBUG):
        async with connect(deployment, MemoryTokenStorage()) as connection:
            await connection.client.call_tool("whoami", {})
            assert not (await connection.client.call_tool("pay", {"amount": "5.00"})).is_error
    authorization_server = deployment.authorization_server
    secrets = [token.token for token in authorization_server.issued]
    secrets += list(authorization_server.refresh_tokens)
    assert len(authorization_server.issued) == 2  # the first authorization and the step-up
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert caplog.records, "nothing was logged at DEBUG: the check would prove nothing"
    for secret in secrets:
        assert secret not in logged


@pytest.mark.sep_check("sep-2643-client-oauth-discovery-fallback", "sep-2643-server-scope-challenge")
async def test_an_insufficient_scope_403_steps_up_to_the_union_of_scopes_and_the_retry_succeeds(
    deployment: Deployment,
):
    storage = MemoryTokenStorage()
    async with connect(deployment, storage) as connection:
        assert (await connection.client.call_tool("whoami", {})).structured_content == {"result": [READ]}
        mark = len(connection.log)
        paid = await connection.client.call_tool("pay", {"amount": "5.00"})
        after = await connection.client.call_tool("whoami", {})
        log = connection.log[mark:]
        steps = connection.since(mark)
    assert not paid.is_error, text(paid)
    assert text(paid) == "paid 5.00"

    # The challenge the client saw: 403 insufficient_scope naming the scopes and the metadata.
    denied = log[0]
    assert (denied.method, denied.path, denied.status, denied.mcp_name) == ("POST", "/mcp", 403, "pay")
    reading = read_challenge(denied.status, denied.www_authenticate)
    assert reading.denial is not None, reading.problem
    assert reading.denial.error == "insufficient_scope"
    assert reading.denial.scopes == (READ, PAY)
    assert reading.denial.resource_metadata == deployment.resource_metadata_url
    # Then a new authorization (already registered; metadata discovered on the 401 is reused), and the retry.
    assert steps[:3] == [("POST", "/mcp", 403), ("POST", "/token", 200), ("POST", "/mcp", 200)]
    assert log[2].mcp_name == "pay"
    assert [(item.method, item.path) for item in log if item.path in ("/register", AS_METADATA)] == []

    authorization_server = deployment.authorization_server
    assert len(authorization_server.registrations) == 1
    assert [set(item.scopes) for item in authorization_server.authorizations] == [{READ}, {READ, PAY}]
    assert {item.resource for item in authorization_server.authorizations} == {deployment.mcp_url}
    step_up_url = connection.browser.authorization_urls[-1]
    assert parse_qs(urlsplit(step_up_url).query)["scope"] == [f"{READ} {PAY}"]
    first_token, second_token = authorization_server.issued
    assert first_token.scopes == [READ]
    assert sorted(second_token.scopes) == sorted([READ, PAY])
    assert storage.tokens is not None
    assert storage.tokens.access_token == second_token.token
    # pay ran once, under the stepped-up token; the denied attempt never reached it.
    assert deployment.ran == [("whoami", [READ]), ("pay", sorted([PAY, READ])), ("whoami", sorted([PAY, READ]))]
    assert after.structured_content == {"result": sorted([PAY, READ])}


@pytest.mark.sep_check("sep-2643-client-oauth-discovery-fallback")
async def test_a_fresh_client_with_a_stored_token_discovers_metadata_from_the_403_challenge(deployment: Deployment):
    storage = MemoryTokenStorage()
    async with connect(deployment, storage) as earlier:
        await earlier.client.call_tool("whoami", {})
    registered = storage.client_info
    assert registered is not None
    # A new provider (a restarted agent) starts from the stored token and registration: no
    # metadata known. Its first challenge is the 403; it discovers from there.
    async with connect(deployment, storage) as later:
        assert (await later.client.call_tool("whoami", {})).structured_content == {"result": [READ]}
        assert all(item.status in (200, 202) for item in later.log), later.since(0)
        mark = len(later.log)
        paid = await later.client.call_tool("pay", {"amount": "7.00"})
        steps = later.since(mark)
    assert text(paid) == "paid 7.00"
    assert steps[:5] == [
        ("POST", "/mcp", 403),
        ("GET", prm_path(deployment), 200),  # the challenge's resource_metadata
        ("GET", AS_METADATA, 200),
        ("POST", "/token", 200),  # same issuer: the stored registration is kept
        ("POST", "/mcp", 200),
    ]
    authorization_server = deployment.authorization_server
    assert len(authorization_server.registrations) == 1
    assert storage.client_info is not None
    assert storage.client_info.client_id == registered.client_id
    # The stored token's granted scope is folded into the step-up (the new provider requested nothing yet).
    assert [set(item.scopes) for item in authorization_server.authorizations] == [{READ}, {READ, PAY}]
    assert deployment.ran[-1] == ("pay", sorted([PAY, READ]))


@pytest.mark.sep_check("sep-2643-client-oauth-discovery-fallback")
async def test_an_unrecognized_rar_remediation_falls_back_to_metadata_discovery(deployment: Deployment):
    """The SDK client does not know ``authorization_remediation``: on that 401 it rediscovers the PRM
    and AS metadata and re-authorizes with the resource's scopes, without authorization details."""
    async with connect(deployment, MemoryTokenStorage()) as connection:
        await connection.client.call_tool("whoami", {})
        mark = len(connection.log)
        with pytest.raises(MCPError):
            await connection.client.call_tool("transfer", {"amount": "9.00"})
        steps = connection.since(mark)
        challenge = connection.log[mark].www_authenticate
        # The connection survives the failed call.
        assert (await connection.client.call_tool("whoami", {})).structured_content == {"result": [READ]}
    reading = read_challenge(401, challenge)
    assert reading.denial is not None, reading.problem
    assert reading.denial.remediation is not None
    assert steps[:5] == [
        ("POST", "/mcp", 401),
        ("GET", prm_path(deployment), 200),
        ("GET", AS_METADATA, 200),
        ("POST", "/token", 200),
        ("POST", "/mcp", 401),  # the retry: the new token carries no authorization details either
    ]
    authorization_server = deployment.authorization_server
    assert len(authorization_server.registrations) == 1
    assert [item.scopes for item in authorization_server.authorizations] == [(READ,), (READ,)]
    assert "authorization_details" not in connection.browser.authorization_urls[-1]
    assert [name for name, _ in deployment.ran] == ["whoami", "whoami"]


async def test_an_authorization_server_that_pins_the_registered_scope_refuses_the_step_up(deployment: Deployment):
    """The SDK's ``/authorize`` handler allows only the scope a client registered with, and the SDK
    client registers once, with the scope of its first challenge: a step-up beyond it is refused.
    The fixture's AS avoids this by recording registrations with every supported scope."""
    deployment.authorization_server.registered_scope = "requested"
    log: list[tuple[str, str, int]] = []

    async def whoami_then_pay() -> None:
        async with connect(deployment, MemoryTokenStorage()) as connection:
            try:
                await connection.client.call_tool("whoami", {})
                await connection.client.call_tool("pay", {"amount": "5.00"})
            finally:
                log.extend(connection.since(0))

    with pytest.raises(BaseExceptionGroup) as caught:
        await whoami_then_pay()
    # The refusal does not come back from call_tool: it fails the transport's task group, ending the connection.
    assert caught.group_contains(AuthorizationRefused, match="invalid_scope")
    assert [set(item.scopes) for item in deployment.authorization_server.authorizations] == [{READ}]
    assert log[-1] == ("POST", "/mcp", 403)
    assert [name for name, _ in deployment.ran] == ["whoami"]
