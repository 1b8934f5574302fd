"""The product page's client-side OAuth rules, as far as ``mcp_approval.client.oauth_client`` has them.

The flow itself (discovery, registration, PKCE, step-up) is covered by
``tests/client/test_oauth_step_up.py``; these are the construction rules.
"""

from __future__ import annotations

import pytest
from mcp.shared.auth import AuthorizationCodeResult

from mcp_approval.client import MemoryTokenStorage, oauth_client

REDIRECT = "http://127.0.0.1:3030/callback"


async def _redirect(_url: str) -> None:
    """Never called: these tests only build the provider."""


async def _callback() -> AuthorizationCodeResult:
    raise AssertionError("no authorization flow runs in these tests")


def provider(server_url: str = "https://mcp.example.test/mcp", **options: str):  # type: ignore[no-untyped-def]
    return oauth_client(
        server_url,
        redirect_uris=[REDIRECT],
        client_name="agent",
        redirect_handler=_redirect,
        callback_handler=_callback,
        **options,
    )


@pytest.mark.parametrize(
    "url",
    ["http://client.example.test/oauth/client.json", "https://client.example.test/", "https://client.example.test"],
)
def test_a_client_metadata_url_must_be_https_with_a_path(url: str) -> None:
    with pytest.raises(ValueError, match="client_metadata_url"):
        provider(client_metadata_url=url)


def test_a_client_metadata_url_with_a_path_is_the_client_id_document() -> None:
    built = provider(client_metadata_url="https://client.example.test/oauth/client.json")
    assert built.context.client_metadata_url == "https://client.example.test/oauth/client.json"


def test_memory_token_storage_is_the_default() -> None:
    assert isinstance(provider().context.storage, MemoryTokenStorage)


@pytest.mark.parametrize(
    "url",
    ["http://mcp.example.test/mcp", "http://10.0.0.8:8000/mcp", "ftp://mcp.example.test/mcp", "https:///mcp", "mcp"],
)
def test_a_server_url_off_https_is_refused_unless_on_loopback(url: str) -> None:
    with pytest.raises(ValueError, match=r"server_url .* must be an https URL"):
        provider(url)


@pytest.mark.parametrize(
    "url",
    ["https://mcp.example.test/mcp", "http://127.0.0.1:8000/mcp", "http://localhost/mcp", "http://[::1]:8000/mcp"],
)
def test_https_and_loopback_http_server_urls_are_accepted(url: str) -> None:
    assert provider(url).context.server_url == url
