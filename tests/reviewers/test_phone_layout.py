"""The console on a phone: the pending list, a request and deciding it, at 390x844 in Chromium.

Nothing is wider than the screen (``document.documentElement.scrollWidth <= 390``) and the
Approve and Deny buttons lie inside the viewport's width, big enough to tap, and work. The
screenshots (``phone-list.png``, ``phone-request.png``, ``phone-decided.png``) go to
``$MCP_APPROVAL_ARTIFACTS`` (else a temporary directory); ``docs/img/`` holds copies that
``docs/reviewers.md`` shows.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page, ViewportSize, async_playwright, expect

from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import approval_for

pytestmark = pytest.mark.anyio

PHONE: ViewportSize = {"width": 390, "height": 844}
#: One unbroken argument far wider than the screen: it must wrap, not widen the page.
LONG_ACCOUNT = "acct-" + "9" * 120


@pytest.fixture(scope="module")
def treasury(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    server = TreasuryServer(deployment_dir(tmp_path_factory.mktemp("phone-treasury"))).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
async def http(treasury: TreasuryServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=treasury.base_url, timeout=scaled(20)) as client:
        yield client


async def fits(page: Page) -> None:
    """The page scrolls only vertically."""
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{page.url} is {width} px wide"


async def within_reach(page: Page, selector: str) -> None:
    """The button is inside the screen's width and at least 40 px tall (a thumb's target)."""
    box = await page.locator(selector).bounding_box()
    assert box is not None, selector
    assert box["x"] >= 0, (selector, box)
    assert box["x"] + box["width"] <= PHONE["width"], (selector, box)
    assert box["height"] >= 40, (selector, box)


async def test_the_list_a_request_and_deciding_it_fit_a_phone(
    chromium: Path, treasury: TreasuryServer, http: httpx.AsyncClient, artifacts: Path
) -> None:
    alice = principals(http)["alice"]
    await alice.call_tool("wire_transfer", {"to": LONG_ACCOUNT, "amount": 48_500})
    await alice.call_tool("wire_transfer", {"to": "acct-phone-2", "amount": 31_250})
    await approval_for(Reviewer(http, "carol-token"), "wire_transfer", to="acct-phone-2")

    async with async_playwright() as playwright:
        args = ["--disable-dev-shm-usage", "--disable-gpu"] + (["--no-sandbox"] if os.geteuid() == 0 else [])
        browser = await playwright.chromium.launch(executable_path=str(chromium), args=args)
        try:
            context = await browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
            page = await context.new_page()
            await page.goto(f"{treasury.base_url}/console")
            await fits(page)
            await page.fill("#token", "carol-token")
            await page.click("button[type=submit]")
            await expect(page.locator("header")).to_contain_text("Signed in as carol")

            row = page.locator("tr", has_text="acct-phone-2")
            await expect(row).to_contain_text("0 of 1 approval")
            await fits(page)
            await page.screenshot(path=str(artifacts / "phone-list.png"), full_page=True)

            await page.locator("tr", has_text=LONG_ACCOUNT[:40]).locator("a.title").click()
            await expect(page.locator("h1")).to_contain_text("Large wire transfer")
            await fits(page)
            for button in ("button[value=approve]", "button[value=deny]"):
                await page.locator(button).scroll_into_view_if_needed()
                await within_reach(page, button)
            await page.fill("#comment", "Checked on my phone.")
            await page.screenshot(path=str(artifacts / "phone-request.png"), full_page=True)
            await page.locator("button[value=approve]").tap()
            await expect(page.locator(".flash.ok")).to_contain_text("Approved")
            await fits(page)
            await page.screenshot(path=str(artifacts / "phone-decided.png"), full_page=True)

            await page.goto(f"{treasury.base_url}/console/decided")
            await expect(page.locator("tr", has_text=LONG_ACCOUNT[:40])).to_contain_text("approved")
            await fits(page)
        finally:
            await browser.close()
