"""Console sign-in with OpenID Connect against a real provider (node-oidc-provider under Node),
driven in Chromium, on a real ``mcp-approval serve``.

A reviewer opening a decision page is sent to the provider, signs in there, comes back to the
same page signed in with the id and roles of its ID token, and decides; one without the reviewer
role cannot; a callback whose state is not the browser's, a sign-in whose PKCE verifier is not
the one its challenge was made from, and a replayed callback are refused. The ID token checks
(audience, issuer, nonce, expiry, signature) are exercised on tokens signed with the provider's
own key that differ from a good one in one claim.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import time
import tomllib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from mcp_approval.reviewers.oidc import OidcClient, OidcError, PendingSignIn
from mcp_approval.reviewers.oidc_options import OidcOptions
from mcp_approval.reviewers.oidc_routes import PENDING_COOKIE
from tests.support.oidc_provider import OidcProvider, rsa_jwk, running_provider
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals, to_toml
from tests.treasury.helpers import approval_for

pytestmark = pytest.mark.anyio

CLIENT_ID = "mcp-approval-console"
#: Accounts at the provider and the roles their ID tokens carry (none of them is in [[principals]]).
ACCOUNTS = {"olivia": ["approver"], "pat": ["treasurer"]}


@dataclass
class Setup:
    server: TreasuryServer
    provider: OidcProvider


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """The treasury deployment with ``[console.oidc]`` naming a provider that knows its callback."""
    directory = deployment_dir(tmp_path_factory.mktemp("oidc-treasury"))
    server = TreasuryServer(directory)
    secret = secrets.token_urlsafe(24)
    client = {
        "client_id": CLIENT_ID,
        "client_secret": secret,
        "redirect_uris": [f"{server.base_url}/console/oidc/callback"],
        "grant_types": ["authorization_code"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_basic",
    }
    with running_provider([client], ACCOUNTS) as provider:
        (directory / "console-client-secret").write_text(secret)
        (directory / "console-client-secret").chmod(0o600)
        config = tomllib.loads((directory / "config.toml").read_text())
        config["console"] = {
            "oidc": {
                "issuer": provider.issuer,
                "client_id": CLIENT_ID,
                "client_secret_file": "console-client-secret",
                "redirect_url": f"{server.base_url}/console/oidc/callback",
                "scopes": ["openid", "profile", "roles"],
                "roles_claim": "roles",
                "label": "Sign in with Acme ID",
            }
        }
        (directory / "config.toml").write_text(to_toml(config))
        server.start()
        try:
            yield Setup(server, provider)
        finally:
            server.kill()


@pytest.fixture
async def browser(chromium: Path) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        args = ["--disable-dev-shm-usage", "--disable-gpu"] + (["--no-sandbox"] if os.geteuid() == 0 else [])
        launched = await playwright.chromium.launch(executable_path=str(chromium), args=args)
        try:
            yield launched
        finally:
            await launched.close()


async def pending_request(setup: Setup, account: str) -> str:
    """alice asks for a transfer to ``account``; the approval request's id."""
    async with httpx.AsyncClient(base_url=setup.server.base_url, timeout=scaled(20)) as http:
        await principals(http)["alice"].call_tool("wire_transfer", {"to": account, "amount": 40_000})
        return str((await approval_for(Reviewer(http, "carol-token"), "wire_transfer", to=account))["id"])


async def at_the_provider(page: Page, login: str) -> None:
    """Sign in on the provider's own pages (any password) and consent."""
    await page.fill("input[name=login]", login)
    await page.fill("input[name=password]", "any-password")
    await page.click("button[type=submit]")
    await page.click("button[type=submit]")  # the consent page's Continue


async def test_a_reviewer_signs_in_at_the_provider_and_decides_on_the_page_they_opened(
    setup: Setup, browser: Browser
) -> None:
    request_id = await pending_request(setup, "acct-oidc-1")
    page = await browser.new_page()
    detail = f"{setup.server.base_url}/console/requests/{request_id}"
    await page.goto(detail)
    await expect(page.locator("#oidc-sign-in")).to_have_text("Sign in with Acme ID")
    await page.click("#oidc-sign-in")
    assert page.url.startswith(setup.provider.issuer)
    await at_the_provider(page, "olivia")
    await expect(page).to_have_url(detail)  # back on the page they opened
    await expect(page.locator("header")).to_contain_text("Signed in as olivia")
    await page.fill("#comment", "Signed in with the identity provider.")
    await page.click("button[value=approve]")
    await expect(page.locator(".flash.ok")).to_contain_text("Approved")
    await expect(page.locator(".decisions")).to_contain_text("olivia")
    # The sign-in's state and verifier left the browser with their one use.
    cookies = {c["name"] for c in await page.context.cookies()}
    assert PENDING_COOKIE not in cookies


async def test_a_user_without_the_reviewer_role_cannot_decide(setup: Setup, browser: Browser) -> None:
    request_id = await pending_request(setup, "acct-oidc-2")
    page = await browser.new_page()
    # A sign-in link whose way back names another site: it comes back to the console instead.
    await page.goto(f"{setup.server.base_url}/console/oidc/start?next=//evil.example/console")
    await at_the_provider(page, "pat")
    await expect(page).to_have_url(f"{setup.server.base_url}/console")
    await expect(page.locator("header")).to_contain_text("Signed in as pat")
    await expect(page.locator("main")).not_to_contain_text("acct-oidc-2")  # not theirs to decide
    csrf = await page.locator("input[name=csrf]").first.get_attribute("value")
    assert csrf
    refused = await page.request.post(
        f"{setup.server.base_url}/console/requests/{request_id}/decide",
        form={"csrf": csrf, "decision": "approve"},
    )
    assert refused.status == 403, await refused.text()
    async with httpx.AsyncClient(base_url=setup.server.base_url, timeout=scaled(20)) as http:
        still = (await http.get(f"/approvals/{request_id}", headers={"authorization": "Bearer carol-token"})).json()
    assert (still["status"], still["decisions"]) == ("pending", [])


async def test_a_callback_with_another_state_is_refused(setup: Setup, browser: Browser) -> None:
    page = await browser.new_page()
    await page.goto(f"{setup.server.base_url}/console/login")
    await page.click("#oidc-sign-in")
    # The browser now expects another state than the one the provider will send back.
    await swap_pending(page, lambda p: replace(p, state="forged-" + p.state))
    await at_the_provider(page, "olivia")
    await expect(page.locator(".flash.error")).to_contain_text("state does not match")
    await page.goto(f"{setup.server.base_url}/console")
    await expect(page).to_have_url(f"{setup.server.base_url}/console/login?next=/console")


async def swap_pending(page: Page, change: Callable[[PendingSignIn], PendingSignIn]) -> None:
    """Replace the browser's pending sign-in cookie with ``change`` of it."""
    (cookie,) = [c for c in await page.context.cookies() if c["name"] == PENDING_COOKIE]
    pending = PendingSignIn.from_cookie(cookie["value"])
    assert pending is not None
    value = change(pending).to_cookie()
    await page.context.add_cookies(
        [{"name": PENDING_COOKIE, "value": value, "domain": cookie["domain"], "path": cookie["path"], "httpOnly": True}]
    )


async def test_a_sign_in_whose_pkce_verifier_changed_is_refused_and_a_replay_too(
    setup: Setup, browser: Browser
) -> None:
    page = await browser.new_page()
    await page.goto(f"{setup.server.base_url}/console/login")
    await page.click("#oidc-sign-in")
    verifier = secrets.token_urlsafe(64)  # not the one the challenge sent to the provider was made from
    await swap_pending(page, lambda p: replace(p, verifier=verifier))
    callbacks: list[str] = []
    page.on("request", lambda r: callbacks.append(r.url) if "/console/oidc/callback" in r.url else None)
    await at_the_provider(page, "olivia")
    await expect(page.locator(".flash.error")).to_contain_text("did not accept the sign-in (invalid_grant)")

    # The same callback again: the pending sign-in is gone, so nothing is signed in.
    await page.goto(callbacks[-1])
    await expect(page.locator(".flash.error")).to_contain_text("already been used")
    await page.goto(f"{setup.server.base_url}/console")
    await expect(page).to_have_url(f"{setup.server.base_url}/console/login?next=/console")


# -- the ID token checks, on tokens signed with the provider's key ------------------------------


def client_of(provider: OidcProvider) -> OidcClient:
    options = OidcOptions(
        issuer=provider.issuer, client_id=CLIENT_ID, redirect_url="http://127.0.0.1:1/console/oidc/callback"
    )
    return OidcClient(options, "unused")


def good_claims(provider: OidcProvider, nonce: str) -> dict[str, Any]:
    now = int(time.time())
    return {
        "iss": provider.issuer,
        "aud": CLIENT_ID,
        "sub": "olivia",
        "nonce": nonce,
        "iat": now,
        "exp": now + 300,
        "roles": ["approver"],
    }


async def test_id_tokens_differing_from_a_good_one_in_one_claim_are_refused(setup: Setup) -> None:
    provider, nonce = setup.provider, secrets.token_urlsafe(16)
    client = client_of(provider)
    good = await client.check_id_token(provider.sign(good_claims(provider, nonce)), nonce)
    assert (good.reviewer, good.roles) == ("olivia", frozenset({"approver"}))

    past = int(time.time()) - 3600
    wrong: dict[str, dict[str, Any]] = {
        "another client (aud)": {"aud": "someone-else"},
        "another issuer (iss)": {"iss": provider.issuer + "/other"},
        "has expired (exp)": {"exp": past, "iat": past - 60},
        "nonce is not this sign-in's": {"nonce": "another-" + nonce},
        "another authorized party (azp)": {"aud": [CLIENT_ID, "someone-else"], "azp": "someone-else"},
    }
    for reason, change in wrong.items():
        with pytest.raises(OidcError, match=reason.replace("(", r"\(").replace(")", r"\)")):
            await client.check_id_token(provider.sign({**good_claims(provider, nonce), **change}), nonce)
    stranger = rsa_jwk()
    with pytest.raises(OidcError, match="a key the provider does not publish"):
        await client.check_id_token(provider.sign(good_claims(provider, nonce), key=stranger), nonce)
    same_kid = {**stranger, "kid": provider.key["kid"]}
    with pytest.raises(OidcError, match="signature does not verify"):
        await client.check_id_token(provider.sign(good_claims(provider, nonce), key=same_kid), nonce)
    header = base64.urlsafe_b64encode(json.dumps({"alg": "none"}).encode()).rstrip(b"=").decode()
    body = base64.urlsafe_b64encode(json.dumps(good_claims(provider, nonce)).encode()).rstrip(b"=").decode()
    with pytest.raises(OidcError, match="algorithm 'none' is not accepted"):
        await client.check_id_token(f"{header}.{body}.", nonce)


async def test_a_discovery_document_naming_another_issuer_is_refused(setup: Setup) -> None:
    options = OidcOptions(issuer=setup.provider.issuer + "/", client_id=CLIENT_ID, redirect_url="http://127.0.0.1:1/cb")
    with pytest.raises(OidcError, match="names issuer"):
        await OidcClient(options).start("/console")
