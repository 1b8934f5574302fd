"""An e-mail channel's message and its confirmation page in headless Chromium, against a real ``serve``.

The message's HTML, rendered in Chromium with every network request recorded and refused, holds
only the request's own links (the reviewer's Approve and Deny links and the request's console
page): arguments carrying tags, links and images show as text, and nothing is fetched. Then the
reviewer opens the Approve link in Chromium and clicks the page's button: the request is approved
and its call runs. Screenshots go to ``$MCP_APPROVAL_ARTIFACTS`` (``email-message.png``,
``email-confirm.png``, ``email-recorded.png``). SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Route, async_playwright, expect

from tests.notify.email_rig import ADDRESSES, email_deployment, html_of, links_of, mail_to
from tests.support.receivers import SmtpReceiver
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, principals
from tests.treasury.helpers import approval_for, settled

pytestmark = pytest.mark.anyio

#: Argument names and values that would be links, images and markup if they were not escaped.
HOSTILE = {
    "to": "acct-html",
    "amount": 30_000,
    "memo": '<a href="https://evil.example/a">Approve</a><img src="https://evil.example/p.png">',
    '<a href="https://evil.example/k">key</a>': "https://evil.example/plain",
}
#: What every URL-bearing attribute of the rendered message is read from.
_URLS_JS = """() => [...document.querySelectorAll('*')].flatMap(e => [...e.attributes]
    .filter(a => ['href', 'src', 'srcset', 'action', 'formaction', 'background', 'poster', 'data', 'xlink:href']
        .includes(a.name.toLowerCase()))
    .map(a => a.value))"""


async def test_the_message_holds_only_its_own_links_and_its_page_decides_in_chromium(
    tmp_path: Path, db_url: str, chromium: Path, artifacts: Path
) -> None:
    smtp = SmtpReceiver().start()
    server = TreasuryServer(email_deployment(tmp_path, smtp), db_url=db_url)
    try:
        await asyncio.to_thread(server.start)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            alice, carol = principals(http)["alice"], Reviewer(http, "carol-token")
            task = (await alice.call_tool("wire_transfer", HOSTILE)).result["taskId"]
            request_id = (await approval_for(carol, "wire_transfer", to="acct-html"))["id"]
            message = await mail_to(smtp, ADDRESSES["carol"], request_id)
            links = links_of(message)
            console_page = f"{server.base_url}/console/requests/{request_id}"

            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
                try:
                    context = await browser.new_context(viewport={"width": 900, "height": 900})
                    page = await context.new_page()
                    fetched: list[str] = []

                    async def refuse(route: Route) -> None:
                        fetched.append(route.request.url)
                        await route.abort()

                    await page.route("**/*", refuse)
                    await page.set_content(html_of(message), wait_until="load")
                    await page.screenshot(path=str(artifacts / "email-message.png"), full_page=True)
                    urls = await page.evaluate(_URLS_JS)
                    text = await page.inner_text("body")
                    await page.unroute("**/*")

                    assert sorted(urls) == sorted([links.approve, links.deny, console_page])
                    assert fetched == [], "the message fetched nothing (no image, no style sheet)"
                    assert '<a href=\\"https://evil.example/a\\">Approve</a>' in text
                    assert '<a href="https://evil.example/k">key</a>' in text

                    # The reviewer follows the Approve link: a page, then the button decides.
                    confirm = await context.new_page()
                    await confirm.goto(links.approve)
                    await expect(confirm.locator("h1")).to_have_text("Approve this request?")
                    await confirm.screenshot(path=str(artifacts / "email-confirm.png"), full_page=True)
                    assert (await carol.pending())[0]["decisions"] == []
                    await confirm.get_by_role("button", name="Approve as carol").click()
                    await expect(confirm.locator("#link-result")).to_contain_text("Recorded: approved.")
                    await confirm.screenshot(path=str(artifacts / "email-recorded.png"), full_page=True)
                    # Back and submitted again: the link is used up.
                    await confirm.goto(links.approve)
                    await expect(confirm.locator("#link-result")).to_contain_text("already")
                finally:
                    await browser.close()
            assert (await settled(alice, task))["status"] == "completed"
        assert len(server.ledger()) == 1
    finally:
        server.kill()
        smtp.stop()
    _audit_verifies(server, db_url)


def _audit_verifies(server: TreasuryServer, db_url: str) -> None:
    command = [sys.executable, "-m", "mcp_approval", "audit", "verify"]
    command += ["--config", str(server.directory / "config.toml"), "--db", db_url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=scaled(120), check=False)
    assert done.returncode == 0, done.stdout + done.stderr
