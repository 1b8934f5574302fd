"""Passkey step-up in headless Chromium with its virtual authenticator, against the reviewer
surface served over real HTTP on a real store (SQLite and PostgreSQL).

Chromium's DevTools ``WebAuthn`` domain gives the page a platform authenticator with user
verification, so the console's own script runs the real ceremonies: carol registers a passkey,
then approves a request of a ``step_up = "passkey"`` template with an assertion. Deciding without
an assertion, with an assertion made for another request or for the other decision, and with a
challenge already used are all refused with nothing recorded. The page is served at
``http://localhost:<port>``: browsers refuse passkeys for an IP address.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from playwright.async_api import Page, async_playwright, expect
from starlette.applications import Starlette

from mcp_approval.backends import ApprovalStatus, ApprovalTemplate, LocalApprovalBackend
from mcp_approval.backends.contract import ApprovalSubmission
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.clock import SystemClock
from mcp_approval.keyring import BindingCipher
from mcp_approval.reviewers import PasskeyStepUp, reviewer_surface
from mcp_approval.reviewers.passkey_store import PASSKEY_MIGRATIONS
from mcp_approval.storage import AUDIT_MIGRATIONS, AuditLog, Database, migrate, open_database
from mcp_approval.web.throttle import FailedLoginThrottle
from tests.support.oauth_server import bound_socket, serve_app
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

TOKENS = {"carol-token": "carol", "dave-token": "dave"}
ROLES = {"carol": frozenset({"approver"}), "dave": frozenset({"approver"})}
TEMPLATES = {"vault": ApprovalTemplate(step_up="passkey")}
KEYS = {"k1": os.urandom(32)}


def backend_on(database: Database) -> LocalApprovalBackend:
    """A local backend sealing under the shared keys (the server's and the test's see the same requests)."""
    return LocalApprovalBackend(
        database,
        templates=TEMPLATES,
        roles=lambda who: ROLES.get(who, frozenset()),
        audit=AuditLog(database),
        seal=BindingCipher(dict(KEYS)),
    )


async def authenticate(token: str) -> str | None:
    return TOKENS.get(token)


@dataclass
class Surface:
    """The served reviewer surface (``base``: its localhost origin) and the test's own view of the store."""

    base: str
    backend: LocalApprovalBackend
    audit: AuditLog

    async def submit(self, amount: int) -> str:
        body = ApprovalSubmission(tool="open_vault", arguments={"amount": amount}, requester="alice", template="vault")
        return await self.backend.submit(secrets.token_urlsafe(16), body)

    async def status(self, handle: str) -> ApprovalStatus:
        record = await self.backend.get_request(handle)
        assert record is not None
        assert record.integrity_failure is None
        return record.status


def reviewer_app(db_url: str, origin: str) -> Starlette:
    """The reviewer API and console with passkeys, on a database of the server's own (its event loop)."""
    database = open_database(db_url)
    clock = SystemClock()
    return Starlette(
        routes=reviewer_surface(
            backend_on(database),
            authenticate,
            AuditLog(database, clock),
            database=database,
            clock=clock,
            throttle=FailedLoginThrottle(clock),
            passkeys=PasskeyStepUp(database, origin=origin, clock=clock, audit=AuditLog(database, clock)),
        )
    )


@pytest.fixture
async def surface(db_url: str) -> AsyncIterator[Surface]:
    database = open_database(db_url)
    await migrate(database, AUDIT_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS, PASSKEY_MIGRATIONS)
    sock = bound_socket()
    base = f"http://localhost:{sock.getsockname()[1]}"
    try:
        with serve_app(reviewer_app(db_url, base), sock):
            yield Surface(base, backend_on(database), AuditLog(database))
    finally:
        await database.close()


@pytest.fixture
def browser_page(chromium: Path) -> str:
    return str(chromium)


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    """Where screenshots are kept: ``$MCP_APPROVAL_ARTIFACTS``, else a temporary directory."""
    configured = os.environ.get("MCP_APPROVAL_ARTIFACTS")
    directory = Path(configured) if configured else tmp_path
    directory.mkdir(parents=True, exist_ok=True)
    return directory


async def with_authenticator(page: Page) -> None:
    """Give the page Chromium's virtual platform authenticator (user verification always passes)."""
    cdp = await page.context.new_cdp_session(page)
    await cdp.send("WebAuthn.enable")
    options = {
        "protocol": "ctap2",
        "transport": "internal",
        "hasResidentKey": True,
        "hasUserVerification": True,
        "isUserVerified": True,
        "automaticPresenceSimulation": True,
    }
    await cdp.send("WebAuthn.addVirtualAuthenticator", {"options": options})


async def sign_in_and_register(page: Page, base: str) -> None:
    await page.goto(f"{base}/console/login")
    await page.fill("#token", "carol-token")
    await page.click("button[type=submit]")
    await expect(page).to_have_url(f"{base}/console")
    await page.goto(f"{base}/console/passkeys")
    await expect(page.locator("#no-passkeys")).to_be_visible()
    await page.click("#register-passkey")
    await expect(page.locator("#passkey-list li")).to_have_count(1, timeout=scaled(10) * 1000)
    await expect(page.locator(".flash.ok")).to_have_text("Your passkey is registered.")


async def attempt(page: Page, script: str, *args: Any) -> str:
    """Run ``script`` (given the page's passkey helpers as ``p``) and say how it ended: ``ok:<status>``
    or ``refused:<the server's reason>``."""
    body = (
        "async ([args]) => { const p = window.mcpApprovalPasskeys; try { const r = await (" + script + ")(p, ...args);"
    )
    body += " return 'ok:' + r.status; } catch (e) { return 'refused:' + e.message; } }"
    result: str = await page.evaluate(body, [list(args)])
    return result


async def launch(playwright: Any, chromium: str) -> Any:
    args = ["--disable-dev-shm-usage", "--disable-gpu"] + (["--no-sandbox"] if os.geteuid() == 0 else [])
    return await playwright.chromium.launch(executable_path=chromium, args=args)


async def test_register_then_approve_with_the_passkey(surface: Surface, browser_page: str, artifacts: Path) -> None:
    handle = await surface.submit(70_000)
    async with async_playwright() as playwright:
        browser = await launch(playwright, browser_page)
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 760})
            await with_authenticator(page)
            await sign_in_and_register(page, surface.base)
            await page.screenshot(path=str(artifacts / "console-passkeys.png"))
            await page.goto(f"{surface.base}/console/requests/{handle}")
            await expect(page.locator("#step-up")).to_be_visible()
            await expect(page.locator("form.decide")).to_have_count(0)  # no plain decision form
            await page.click("#decide-with-passkey")
            await expect(page.locator("#sealed-digest")).to_have_text(
                (await surface.backend.get_request(handle)).sealed_digest
            )  # type: ignore[union-attr]
            await page.fill("#comment", "checked with the vault team")
            await page.screenshot(path=str(artifacts / "console-passkey-decide.png"))
            await page.click("button[data-decision=approve]")
            await expect(page).to_have_url(f"{surface.base}/console/requests/{handle}", timeout=scaled(10) * 1000)
            await expect(page.locator(".flash.ok")).to_contain_text("Approved with your passkey")
        finally:
            await browser.close()
    assert await surface.status(handle) is ApprovalStatus.APPROVED
    [decision] = [e for e in await surface.audit.events(subject=handle) if e.kind == "approval.decision"]
    assert decision.actor == "carol"
    assert decision.data["step_up"]["method"] == "passkey"
    assert [e.kind for e in await surface.audit.events(subject="carol")] == ["passkey.registered"]


async def test_without_an_assertion_or_with_one_for_something_else_nothing_is_decided(
    surface: Surface, browser_page: str
) -> None:
    first, second, third = await surface.submit(1), await surface.submit(2), await surface.submit(3)
    async with async_playwright() as playwright:
        browser = await launch(playwright, browser_page)
        try:
            page = await browser.new_page()
            await with_authenticator(page)
            await sign_in_and_register(page, surface.base)
            await page.goto(f"{surface.base}/console/requests/{first}/passkey")
            url = {h: f"/console/requests/{h}/passkey" for h in (first, second, third)}

            # No assertion at all: the passkey endpoint, the reviewer API and the console's plain form refuse.
            missing = await attempt(page, "(p, u) => p.decide(u, 'approve', '', null)", url[first])
            assert missing == "refused:the passkey assertion could not be read"
            async with httpx2.AsyncClient(base_url=surface.base) as http:
                plain = await http.post(
                    f"/approvals/{first}/decide",
                    json={"decision": "approve"},
                    headers={"Authorization": "Bearer dave-token"},
                )
            assert plain.status_code == 403
            detail = plain.json()["detail"]
            assert "requires a passkey for every decision: decide it with your passkey in the console" in detail

            # An assertion made for the first request, replayed on the second.
            other_request = "async (p, a, b) => p.decide(b, 'approve', '', await p.assertion(a, 'approve'))"
            refused = await attempt(page, other_request, url[first], url[second])
            assert refused == "refused:the passkey assertion confirms another request or the other decision"

            # An assertion made to deny, replayed to approve; then the same assertion for its own
            # decision: its challenge was spent by the refused use.
            other_decision = (
                "async (p, u) => { const a = await p.assertion(u, 'deny');"
                " try { await p.decide(u, 'approve', '', a); } catch (e) { window.__denied = a; throw e; } }"
            )
            refused = await attempt(page, other_decision, url[first])
            assert refused == "refused:the passkey assertion confirms another request or the other decision"
            reused = await attempt(page, "(p, u) => p.decide(u, 'deny', '', window.__denied)", url[first])
            assert reused == "refused:the passkey challenge is unknown, expired or already used: start again"

            # A challenge used once to approve the third request, then again.
            once = (
                "async (p, u) => { window.__used = await p.assertion(u, 'approve');"
                " return p.decide(u, 'approve', '', window.__used); }"
            )
            assert await attempt(page, once, url[third]) == "ok:approved"
            again = await attempt(page, "(p, u) => p.decide(u, 'approve', '', window.__used)", url[second])
            assert again == "refused:the passkey challenge is unknown, expired or already used: start again"
        finally:
            await browser.close()
    assert await surface.status(first) is ApprovalStatus.PENDING
    assert await surface.status(second) is ApprovalStatus.PENDING
    assert await surface.status(third) is ApprovalStatus.APPROVED
    for handle in (first, second):
        assert [e for e in await surface.audit.events(subject=handle) if e.kind == "approval.decision"] == []
