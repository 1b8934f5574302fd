"""The reviewer console end to end in headless Chromium against a real ``mcp-approval serve``.

A treasurer asks for large transfers over MCP with a client that knows only the tasks
extension; a reviewer signs in to ``/console``, sees the pending transfer, approves it with a
comment, and the client's task completes ``approved-executed``; request pages show whether each
decided call ran. Screenshots of the console go to ``$MCP_APPROVAL_ARTIFACTS`` (``console.png``:
the pending list, ``console-detail.png``: a request, ``console-outcome-<disposition>.png``: an
executed, a denied and an outcome-unknown request). Debian's ``chromium`` is driven through
Playwright's ``executable_path``: no browser is ever downloaded.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.async_api import Dialog, Page, ViewportSize, async_playwright, expect

from mcp_approval.client import TaskPendingError, TasksClient
from tests.support.outcomes import DENY_COMMENT, three_outcomes
from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer, deployment_dir
from tests.treasury.helpers import DISPOSITION

pytestmark = pytest.mark.anyio

#: A laptop screen.
VIEWPORT: ViewportSize = {"width": 1440, "height": 900}
HOSTILE = '"><img src=x onerror="document.title=\'pwned\';alert(1)"><script>window.__xss=1;alert(2)</script>'


@pytest.fixture(scope="module")
def treasury(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    server = TreasuryServer(deployment_dir(tmp_path_factory.mktemp("console-treasury"))).start()
    try:
        yield server
    finally:
        server.kill()


@asynccontextmanager
async def treasurer(server: TreasuryServer, tasks: TasksClient) -> AsyncIterator[Client]:
    """An SDK client as alice over streamable HTTP, declaring only the tasks extension."""
    headers = {"Authorization": "Bearer alice-token"}
    async with httpx2.AsyncClient(base_url=server.base_url, headers=headers, timeout=scaled(20)) as http:
        transport = streamable_http_client(f"{server.base_url}/mcp", http_client=http)
        async with Client(transport, extensions=[tasks]) as client:
            yield client


async def pending_call(client: Client, tasks: TasksClient, tool: str, arguments: dict[str, object]) -> str:
    """Make an approval-gated call; its task id once the short wait gives up."""
    tasks.task_wait_s = 0.2
    with pytest.raises(TaskPendingError) as pending:
        await client.call_tool(tool, arguments)
    return pending.value.task_id


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


async def sign_in(page: Page, base_url: str, name: str) -> None:
    """Sign in through the login form, arriving there the way a reviewer would."""
    await page.goto(f"{base_url}/console")
    await expect(page).to_have_url(f"{base_url}/console/login")
    await page.fill("#token", f"{name}-token")
    await page.click("button[type=submit]")
    await expect(page.locator("header")).to_contain_text(f"Signed in as {name}")


async def approve(page: Page, account: str, comment: str, artifacts: Path) -> None:
    """Open the pending transfer to ``account`` from the list and approve it with ``comment``."""
    row = page.locator("tr", has_text=account)
    await expect(row).to_contain_text("Large wire transfer")
    await expect(row).to_contain_text("alice")
    await expect(row).to_contain_text("0 of 1 approval")
    await expect(page.locator("tr", has_text="2026-Q3")).to_contain_text("0 of 2 approvals")
    await page.screenshot(path=str(artifacts / "console.png"), full_page=True)
    await row.locator("a.title").click()
    await expect(page.locator("h1")).to_contain_text("Large wire transfer")
    await page.fill("#comment", comment)
    await page.screenshot(path=str(artifacts / "console-detail.png"), full_page=True)
    await page.click("button[value=approve]")
    await expect(page.locator(".flash.ok")).to_contain_text("Approved")
    await expect(page.locator(".decisions")).to_contain_text(comment)
    await expect(page.locator(".audit")).to_contain_text("approval.approved")


async def assert_hostile_request_is_inert(page: Page, base_url: str, dialogs: list[str]) -> None:
    """The pending list and the request page show :data:`HOSTILE` as text; nothing of it runs."""
    await page.goto(f"{base_url}/console")
    row = page.locator("tr", has_text="window.__xss")
    await expect(row).to_contain_text(json.dumps(HOSTILE))  # arguments read as JSON
    await row.locator("a.title").click()
    await expect(page.locator(".args-table")).to_contain_text(json.dumps(HOSTILE))
    assert await page.evaluate("typeof window.__xss") == "undefined"
    assert "pwned" not in await page.title()
    assert await page.locator("main img, main script").count() == 0
    assert dialogs == []


async def test_a_reviewer_approves_a_transfer_in_the_browser_and_the_task_completes(
    chromium: Path, treasury: TreasuryServer, artifacts: Path
) -> None:
    tasks = TasksClient(default_poll_interval_s=0.05)
    async with treasurer(treasury, tasks) as client, async_playwright() as playwright:
        task_id = await pending_call(client, tasks, "wire_transfer", {"to": "acct-7731", "amount": 48_500})
        await pending_call(client, tasks, "wire_transfer", {"to": "acct-2209", "amount": 31_250})
        await pending_call(client, tasks, "close_quarter", {"quarter": "2026-Q3"})
        assert [e for e in treasury.ledger() if e.get("op") == "wire_transfer"] == []

        args = ["--disable-dev-shm-usage", "--disable-gpu"] + (["--no-sandbox"] if os.geteuid() == 0 else [])
        browser = await playwright.chromium.launch(executable_path=str(chromium), args=args)
        try:
            page = await browser.new_page(viewport=VIEWPORT)
            dialogs: list[str] = []

            async def dismiss(dialog: Dialog) -> None:
                dialogs.append(dialog.message)
                await dialog.dismiss()

            page.on("dialog", dismiss)
            await sign_in(page, treasury.base_url, "carol")
            await approve(page, "acct-7731", "Matches invoice INV-4471; vendor verified by phone.", artifacts)

            tasks.task_wait_s = 20
            result = await tasks.resume(client.session, task_id)
            assert result.is_error is False
            assert result.meta is not None
            assert result.meta[DISPOSITION] == "approved-executed"
            assert "acct-7731" in " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
            assert [e for e in treasury.ledger() if e.get("to") == "acct-7731"] == [
                {"op": "wire_transfer", "to": "acct-7731", "amount": 48500.0}
            ]

            await pending_call(client, tasks, "wire_transfer", {"to": HOSTILE, "amount": 99_000})
            await assert_hostile_request_is_inert(page, treasury.base_url, dialogs)
        finally:
            await browser.close()

    for name in ("console.png", "console-detail.png"):
        width, height = png_size(artifacts / name)
        assert (width, height >= 400) == (VIEWPORT["width"], True), (name, width, height)


async def test_the_console_shows_whether_each_decided_call_ran(chromium: Path, artifacts: Path, tmp_path: Path) -> None:
    """An executed, a denied and an outcome-unknown request, each on its page, with the call's own
    audit events in the trail (screenshots ``console-outcome-*.png``)."""
    found = await three_outcomes(tmp_path)
    claimed, finished = "approval.execution_claimed", "approval.execution_finished"
    denial = f"Not executed. The approval request was denied. Comment: {DENY_COMMENT}"
    expected = {
        "approve": ("approved-executed", "Executed: the call ran once", (claimed, finished)),
        "deny": ("denied-not-executed", denial, ("approval.fenced",)),
        "unknown": ("outcome-unknown", "Outcome unknown: the call may have run", (claimed, finished)),
    }
    try:
        async with async_playwright() as playwright:
            args = ["--disable-dev-shm-usage", "--disable-gpu"] + (["--no-sandbox"] if os.geteuid() == 0 else [])
            browser = await playwright.chromium.launch(executable_path=str(chromium), args=args)
            try:
                page = await browser.new_page(viewport=VIEWPORT)
                await sign_in(page, found.server.base_url, "carol")
                for key, (state, text, steps) in expected.items():
                    await page.goto(f"{found.server.base_url}/console/requests/{found.requests[key]}")
                    outcome = page.locator("#outcome")
                    await expect(outcome.locator(".badge")).to_have_text(state)
                    await expect(outcome).to_contain_text(text)
                    for step in steps:
                        await expect(page.locator(".audit")).to_contain_text(step)
                    await page.screenshot(path=str(artifacts / f"console-outcome-{state}.png"), full_page=True)
            finally:
                await browser.close()
    finally:
        found.server.kill()
    for state, _, _ in expected.values():
        assert png_size(artifacts / f"console-outcome-{state}.png")[0] == VIEWPORT["width"]
