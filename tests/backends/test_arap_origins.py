"""Which URLs the ARAP backend sends credentials to (checklist item 4)."""

from __future__ import annotations

import pytest

from mcp_approval.backends.arap_origins import OriginPolicy, UntrustedURLError, origin_of

ANCHOR = "https://pdp.example.com/access/v1/requests"


def test_same_origin_as_the_metadata_endpoint_is_trusted() -> None:
    policy = OriginPolicy()
    assert policy.trusted("https://pdp.example.com/access/v1/requests/arq_1", anchor=ANCHOR)
    assert policy.trusted("https://PDP.example.com:443/other", anchor=ANCHOR)


@pytest.mark.parametrize(
    "url",
    [
        "https://pdp.example.com.evil.test/access/v1/requests",
        "https://pdp.example.com:8443/access/v1/requests",
        "http://pdp.example.com/access/v1/requests",
        "https://evil.test/access/v1/requests",
        "ftp://pdp.example.com/x",
        "/access/v1/requests",
        "https://user@evil.test@pdp.example.com:99999/",
    ],
)
def test_other_origins_are_refused(url: str) -> None:
    policy = OriginPolicy()
    assert not policy.trusted(url, anchor=ANCHOR)
    with pytest.raises(UntrustedURLError):
        policy.check(url, anchor=ANCHOR)


def test_the_allowlist_adds_origins() -> None:
    policy = OriginPolicy(["https://ars.example.net"])
    assert policy.trusted("https://ars.example.net/access/v1/requests", anchor=ANCHOR)
    assert not policy.trusted("https://ars.example.net:444/x", anchor=ANCHOR)
    assert policy.trusted("https://ars.example.net/x", anchor=None)


def test_plain_http_needs_loopback_and_the_dev_switch(caplog: pytest.LogCaptureFixture) -> None:
    loopback = "http://127.0.0.1:8123/access/v1/requests"
    assert not OriginPolicy().trusted(loopback, anchor=loopback)
    with caplog.at_level("WARNING"):
        dev = OriginPolicy(insecure_loopback=True)
    assert "dev mode" in caplog.text
    assert dev.trusted(loopback, anchor=loopback)
    assert dev.trusted("http://localhost:8123/x", anchor="http://localhost:8123/")
    assert not dev.trusted("http://10.0.0.5:8123/x", anchor="http://10.0.0.5:8123/")
    with pytest.raises(UntrustedURLError):
        OriginPolicy(["http://ars.example.net"], insecure_loopback=True)
    with pytest.raises(ValueError, match="not an http"):
        OriginPolicy(["not a url"])


def test_origin_of() -> None:
    assert origin_of("https://a.example/x?y") == ("https", "a.example", 443)
    assert origin_of("http://127.0.0.1:99/") == ("http", "127.0.0.1", 99)
    assert origin_of("mailto:x@y") is None
