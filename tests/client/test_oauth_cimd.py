"""OAuth with a client ID metadata document, end to end, through ``mcp_client`` and a loopback redirect receiver.

Four real servers on 127.0.0.1: the authorization server (advertising
``client_id_metadata_document_supported``), an https server (certificate from a test CA made with
``trustme``) serving the client's metadata document, which the authorization server fetches, the
payments resource server of ``test_oauth_step_up``, and the agent's own loopback receiver. The
"browser" is a thread that GETs the authorization URL and follows the redirect to the receiver.
"""

from __future__ import annotations

import logging
import threading
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import httpx2
import pytest
import trustme
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp_approval.client import (
    AgentClient,
    AuthorizationResponseError,
    LoopbackRedirectReceiver,
    MemoryTokenStorage,
    client_metadata_document,
    mcp_client,
    oauth_client,
)
from tests.client.test_oauth_step_up import PAY, READ, Deployment, deploy
from tests.support.oauth_server import bound_socket, serve_authorization_server, serve_https, trusting
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

TIMEOUT_S = scaled(30)
DOCUMENT_PATH = "/clients/payments-agent.json"


@dataclass
class Browser:
    """Opens the authorization URL in a thread (as a real browser runs beside the agent) and follows redirects."""

    authorization_urls: list[str] = field(default_factory=list)
    pages: list[tuple[int, str]] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    def open(self, url: str) -> None:
        self.authorization_urls.append(url)
        threading.Thread(target=self._visit, args=(url,), daemon=True).start()

    def _visit(self, url: str) -> None:
        try:
            # urllib, not httpx: a real browser does not write the code into the agent's log.
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
                self.pages.append((response.status, response.read().decode()))
        finally:
            self.done.set()


@dataclass
class Setup:
    deployment: Deployment
    client_id: str
    receiver: LoopbackRedirectReceiver
    browser: Browser
    log: list[tuple[str, str, int, str | None]] = field(default_factory=list)
    """``(method, path, status, grant_type)`` of every exchange the agent's HTTP client made."""

    def paths(self, since: int = 0) -> list[tuple[str, str, int]]:
        return [(method, path, status) for method, path, status, _ in self.log[since:]]


@contextmanager
def setup(*, cimd: bool, code_token_expires_in_s: int = 3600) -> Iterator[Setup]:
    ca = trustme.CA()
    document_socket = bound_socket()
    client_id = f"https://127.0.0.1:{document_socket.getsockname()[1]}{DOCUMENT_PATH}"
    browser = Browser()
    with LoopbackRedirectReceiver(open_browser=browser.open, timeout_s=TIMEOUT_S) as receiver:
        document = client_metadata_document(
            client_id, redirect_uris=[receiver.redirect_uri], scope=f"{READ} {PAY}", client_name="payments agent"
        )

        async def serve_document(_request: Request) -> JSONResponse:
            return JSONResponse(document)

        documents = Starlette(routes=[Route(DOCUMENT_PATH, serve_document)])
        with (
            serve_https(documents, document_socket, ca),
            serve_authorization_server([READ, PAY], cimd_trust=trusting(ca) if cimd else None) as authorization_server,
            deploy(authorization_server) as deployment,
        ):
            authorization_server.code_token_expires_in_s = code_token_expires_in_s
            yield Setup(deployment, client_id, receiver, browser)


@asynccontextmanager
async def agent(setup: Setup, storage: MemoryTokenStorage) -> AsyncIterator[AgentClient]:
    provider = oauth_client(
        setup.deployment.mcp_url, receiver=setup.receiver, client_metadata_url=setup.client_id, storage=storage
    )
    client = mcp_client(setup.deployment.mcp_url, auth=provider, timeout_s=TIMEOUT_S)

    async def record(response: httpx2.Response) -> None:
        request = response.request
        grant = None
        if request.url.path == "/token":
            grant = parse_qs(request.content.decode()).get("grant_type", [None])[0]
        setup.log.append((request.method, request.url.path, response.status_code, grant))

    assert client.http_client is not None
    client.http_client.event_hooks["response"].append(record)
    with anyio.fail_after(TIMEOUT_S):
        async with client:
            yield client


def authorization_query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


async def test_cimd_registration_code_flow_with_pkce_and_a_tool_call() -> None:
    storage = MemoryTokenStorage()
    with setup(cimd=True) as ready:
        async with agent(ready, storage) as client:
            result = await client.call_tool("whoami", {})
    authorization_server = ready.deployment.authorization_server
    assert result.structured_content == {"result": [READ]}
    # The client id is the document's URL; the server fetched the document over https, once; no registration.
    assert authorization_server.fetched_documents == [ready.client_id]
    assert authorization_server.rejected_documents == []
    assert authorization_server.registrations == []
    assert ("POST", "/register") not in [(method, path) for method, path, _ in ready.paths()]
    [authorization] = authorization_server.authorizations
    assert authorization.client_id == ready.client_id
    assert authorization.redirect_uri == ready.receiver.redirect_uri
    assert storage.client_info is not None
    assert storage.client_info.client_id == ready.client_id
    assert storage.client_info.token_endpoint_auth_method == "none"
    # PKCE S256 and a state; the browser landed on the receiver's page.
    query = authorization_query(ready.browser.authorization_urls[0])
    assert query["code_challenge_method"] == ["S256"]
    assert len(query["code_challenge"][0]) >= 43
    assert query["client_id"] == [ready.client_id]
    assert query["state"]
    assert ready.browser.pages == [(200, ready.browser.pages[0][1])]
    assert "Authorization received" in ready.browser.pages[0][1]
    assert ready.deployment.ran == [("whoami", [READ])]


async def test_an_expired_token_is_refreshed_without_a_new_authorization() -> None:
    """The first token says ``expires_in: 0``: the client's next request refreshes it first."""
    with setup(cimd=True, code_token_expires_in_s=0) as ready:
        async with agent(ready, MemoryTokenStorage()) as client:
            first = await client.call_tool("whoami", {})
            again = await client.call_tool("whoami", {})
    authorization_server = ready.deployment.authorization_server
    assert first.structured_content == again.structured_content == {"result": [READ]}
    grants = [grant for _, path, status, grant in ready.log if path == "/token" and status == 200]
    assert grants == ["authorization_code", "refresh_token"]
    assert len(authorization_server.authorizations) == 1
    code_token, refreshed = authorization_server.issued
    seen = [token.token for token in ready.deployment.verifier.seen if token is not None]
    assert seen[-1] == refreshed.token != code_token.token


async def test_an_insufficient_scope_403_steps_up_through_the_receiver_again() -> None:
    storage = MemoryTokenStorage()
    with setup(cimd=True) as ready:
        async with agent(ready, storage) as client:
            await client.call_tool("whoami", {})
            mark = len(ready.log)
            paid = await client.call_tool("pay", {"amount": "5.00"})
    authorization_server = ready.deployment.authorization_server
    assert not paid.is_error
    assert ready.paths(mark)[:3] == [("POST", "/mcp", 403), ("POST", "/token", 200), ("POST", "/mcp", 200)]
    assert [set(item.scopes) for item in authorization_server.authorizations] == [{READ}, {READ, PAY}]
    assert {item.client_id for item in authorization_server.authorizations} == {ready.client_id}
    assert authorization_server.fetched_documents == [ready.client_id]  # cached by the server
    assert len(ready.browser.pages) == 2  # the receiver took a second redirect
    assert ready.deployment.ran[-1] == ("pay", sorted([PAY, READ]))


async def test_without_cimd_support_the_client_registers_dynamically() -> None:
    storage = MemoryTokenStorage()
    with setup(cimd=False) as ready:
        async with agent(ready, storage) as client:
            result = await client.call_tool("whoami", {})
    authorization_server = ready.deployment.authorization_server
    assert result.structured_content == {"result": [READ]}
    assert ("POST", "/register", 201) in ready.paths()
    assert authorization_server.fetched_documents == []
    [registration] = authorization_server.registrations
    assert registration.client_id != ready.client_id
    assert [item.client_id for item in authorization_server.authorizations] == [registration.client_id]
    assert storage.client_info is not None
    assert storage.client_info.client_id == registration.client_id


async def test_no_token_or_code_reaches_the_log_in_the_cimd_flow(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG), setup(cimd=True, code_token_expires_in_s=0) as ready:
        async with agent(ready, MemoryTokenStorage()) as client:
            await client.call_tool("whoami", {})
            await client.call_tool("whoami", {})  # a refresh
            await client.call_tool("pay", {"amount": "5.00"})  # a step-up
    authorization_server = ready.deployment.authorization_server
    secrets = [token.token for token in authorization_server.issued] + authorization_server.issued_codes
    secrets += [token for token in authorization_server.refresh_tokens]
    assert len(authorization_server.issued) >= 3
    assert len(authorization_server.issued_codes) == 2
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert caplog.records, "nothing was logged at DEBUG: the check would prove nothing"
    for secret in secrets:
        assert secret not in logged


# The receiver alone.


async def receive_from(receiver: LoopbackRedirectReceiver, url: str) -> tuple[Any, httpx.Response]:
    """Start an authorization for ``state=s1``, then visit ``url``; the receiver's result (or error) and the page."""
    await receiver.redirect_handler("https://as.example/authorize?state=s1&code_challenge=x")
    outcome: list[Any] = []

    async def wait() -> None:
        try:
            outcome.append(await receiver.callback_handler())
        except AuthorizationResponseError as refused:
            outcome.append(refused)

    async with anyio.create_task_group() as group:
        group.start_soon(wait)
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            stray = await http.get(receiver.redirect_uri.replace("/callback", "/favicon.ico"))
            page = await http.get(url)
    assert stray.status_code == 404
    return outcome[0], page


async def test_the_receiver_returns_the_code_of_the_matching_state() -> None:
    with LoopbackRedirectReceiver(open_browser=lambda _url: None) as receiver:
        result, page = await receive_from(receiver, f"{receiver.redirect_uri}?code=c1&state=s1&iss=https://as.example")
    assert (result.code, result.state, result.iss) == ("c1", "s1", "https://as.example")
    assert page.status_code == 200


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("error=access_denied&state=s1", "access_denied"),
        ("state=s1", "invalid_request"),
    ],
)
async def test_the_receiver_refuses_a_bad_response(query: str, error: str) -> None:
    with LoopbackRedirectReceiver(open_browser=lambda _url: None) as receiver:
        result, page = await receive_from(receiver, f"{receiver.redirect_uri}?{query}")
    assert isinstance(result, AuthorizationResponseError)
    assert result.error == error
    assert page.status_code == 400


async def test_the_receiver_ignores_a_response_with_another_state_and_keeps_waiting() -> None:
    with LoopbackRedirectReceiver(open_browser=lambda _url: None, timeout_s=TIMEOUT_S) as receiver:
        await receiver.redirect_handler("https://as.example/authorize?state=s1&code_challenge=x")
        outcome: list[Any] = []

        async def wait() -> None:
            outcome.append(await receiver.callback_handler())

        async with anyio.create_task_group() as group, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            group.start_soon(wait)
            wrong = await http.get(f"{receiver.redirect_uri}?code=planted&state=other")
            missing = await http.get(f"{receiver.redirect_uri}?code=planted")
            right = await http.get(f"{receiver.redirect_uri}?code=c1&state=s1")
    assert (wrong.status_code, missing.status_code) == (400, 400)
    assert b"not for the authorization in progress" in wrong.content
    assert right.status_code == 200
    assert (outcome[0].code, outcome[0].state) == ("c1", "s1")


async def test_an_idle_connection_does_not_hold_the_receiver() -> None:
    receiver = LoopbackRedirectReceiver(open_browser=lambda _url: None, timeout_s=TIMEOUT_S, connection_timeout_s=0.2)
    with receiver:
        await receiver.redirect_handler("https://as.example/authorize?state=s1&code_challenge=x")
        outcome: list[Any] = []

        async def wait() -> None:
            outcome.append(await receiver.callback_handler())

        port = httpx.URL(receiver.redirect_uri).port
        assert port is not None
        idle = await anyio.connect_tcp("127.0.0.1", port)  # connects, then sends nothing
        async with idle, anyio.create_task_group() as group, httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            group.start_soon(wait)
            right = await http.get(f"{receiver.redirect_uri}?code=c1&state=s1")
    assert right.status_code == 200
    assert outcome[0].code == "c1"


def test_the_receiver_timeouts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="connection_timeout_s must be positive"):
        LoopbackRedirectReceiver(connection_timeout_s=0)


@pytest.mark.parametrize(
    ("client_id", "redirect_uris", "words"),
    [
        ("http://agent.example/client.json", ["http://127.0.0.1:1/cb"], "https URL with a path"),
        ("https://agent.example/", ["http://127.0.0.1:1/cb"], "https URL with a path"),
        ("https://agent.example/client.json", [], "at least one"),
        ("https://agent.example/client.json", ["/cb"], "not an absolute URL"),
    ],
)
def test_client_metadata_document_refuses_what_cimd_forbids(
    client_id: str, redirect_uris: list[str], words: str
) -> None:
    with pytest.raises(ValueError, match=words):
        client_metadata_document(client_id, redirect_uris=redirect_uris)


def test_client_metadata_document_is_a_public_client() -> None:
    document = client_metadata_document(
        "https://agent.example/client.json", redirect_uris=["http://127.0.0.1:8765/callback"], scope="tools"
    )
    assert document == {
        "client_id": "https://agent.example/client.json",
        "redirect_uris": ["http://127.0.0.1:8765/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "scope": "tools",
    }


def test_oauth_client_alone_names_what_it_needs() -> None:
    with pytest.raises(ValueError, match="receiver="):
        oauth_client("https://mcp.example.com/mcp")
