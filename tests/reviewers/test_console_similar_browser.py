"""The console's similar-call form, batch decisions and rules pages in headless Chromium.

A reviewer opens "Approve, and approve similar calls…" on a request, widens the amount to a range,
sets an expiry and a use count, and lands on the rule's page; ticks two pending requests and
approves them at once; then revokes the rule from its page. The pages allow no script, so this is
plain HTML forms in a real browser (Debian's ``chromium`` through Playwright's ``executable_path``).
Screenshots: ``console-similar.png`` (the form), ``console-rule.png`` (a rule's page).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import async_playwright, expect

from mcp_approval.backends import ApprovalTemplate
from mcp_approval.keyring import BindingCipher
from tests.reviewers.conftest import Console, serve_console
from tests.reviewers.test_console_browser import VIEWPORT, png_size

pytestmark = pytest.mark.anyio

SEAL = BindingCipher({"k1": os.urandom(32)})
TEMPLATES = {"single": ApprovalTemplate(similar_rule_max_s=28_800, similar_rule_max_uses=50)}


@pytest.fixture
async def sealed(tmp_path: Path) -> AsyncIterator[Console]:
    async with serve_console(tmp_path, seal=SEAL, templates=TEMPLATES) as running:
        yield running


async def test_a_reviewer_writes_a_rule_decides_two_at_once_and_revokes_the_rule_in_the_browser(
    chromium: Path, artifacts: Path, sealed: Console
) -> None:
    first = await sealed.submit(arguments={"to": "acct-1", "amount": 1_200, "secret": "s"})
    others = [await sealed.submit(arguments={"to": "acct-2", "amount": n, "secret": "s"}) for n in (7, 8)]
    async with async_playwright() as playwright:
        args = ["--disable-dev-shm-usage", "--disable-gpu"] + (["--no-sandbox"] if os.geteuid() == 0 else [])
        browser = await playwright.chromium.launch(executable_path=str(chromium), args=args)
        try:
            page = await browser.new_page(viewport=VIEWPORT)
            await page.goto(f"{sealed.base_url}/console/login")
            await page.fill("#token", "bob-token-0123")
            await page.click("button[type=submit]")
            await expect(page.locator("header")).to_contain_text("Signed in as bob")

            await page.goto(f"{sealed.base_url}/console/requests/{first}")
            await page.click("#similar summary")
            similar = page.locator("#similar form")
            await similar.locator("input[name=a0][value=range]").check()  # amount (arguments are sorted)
            await similar.locator("input[name='a0.low']").fill("0")
            await similar.locator("input[name='a0.high']").fill("5000")
            await similar.locator("input[name=expires_in]").fill("2")
            await similar.locator("select[name=unit]").select_option("hours")
            await similar.locator("input[name=max_uses]").fill("3")
            await page.screenshot(path=str(artifacts / "console-similar.png"), full_page=True)
            await page.click("#approve-similar")
            await expect(page.locator(".flash.ok")).to_contain_text("decides up to 3 similar calls")
            await expect(page.locator("#rule-scope")).to_contain_text("amount in [0, 5000]")
            await expect(page.locator("#rule-state")).to_have_text("active")
            rule_url = page.url
            await page.screenshot(path=str(artifacts / "console-rule.png"), full_page=True)

            await page.goto(f"{sealed.base_url}/console")
            for request_id in others:
                await page.locator(f"input[type=checkbox][value='{request_id}']").check()
            await page.click("#batch button[value=approve]")
            await expect(page.locator("h1")).to_contain_text("Approved 2 of 2")
            await expect(page.locator("#batch-results")).to_contain_text(others[0])

            await page.goto(rule_url)
            await page.click("#revoke")
            await expect(page.locator("#rule-state")).to_have_text("revoked")
            await expect(page.locator(".flash.ok")).to_contain_text("is revoked")
        finally:
            await browser.close()
    for request_id in [first, *others]:
        record = await sealed.backend.get_request(request_id)
        assert record is not None
        assert record.status.value == "approved"
    assert png_size(artifacts / "console-similar.png")[0] == VIEWPORT["width"]
