"""The e-mail channel of a real ``serve``, through a real SMTP server (``aiosmtpd``) on 127.0.0.1.

Each eligible reviewer gets a message of their own with Approve and Deny links. Opening a link
(``GET``, as a link scanner does) decides nothing; the confirmation page's ``POST`` decides once,
as the reviewer the link was sent to, by the console's rules. The same link again, a link used by
another signed-in reviewer (a forwarded message), an expired link, a link to a request whose
content changed, a cross-site or token-less form: refused, nothing decided. A high-risk template
also needs the reviewer signed in. ``audit verify`` holds after. SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_approval.checks.wire import Wire
from tests.notify.email_rig import ADDRESSES, email_deployment, form_csrf, links_of, mail_to, post_form, sign_in
from tests.support.receivers import SmtpReceiver
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, principals, rewrite_request_arguments, store_rows
from tests.treasury.helpers import approval_for, settled

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def _serving(
    tmp_path: Path, db_url: str, **deployment: Any
) -> AsyncIterator[tuple[SmtpReceiver, TreasuryServer, Wire, Reviewer]]:
    """An SMTP server and a serve whose ``mail`` channel sends through it; alice to call, carol's API."""
    smtp = SmtpReceiver().start()
    server = TreasuryServer(email_deployment(tmp_path, smtp, **deployment), db_url=db_url)
    try:
        await asyncio.to_thread(server.start)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            yield smtp, server, principals(http)["alice"], Reviewer(http, "carol-token")
    finally:
        server.kill()
        smtp.stop()


@asynccontextmanager
async def _browser(server: TreasuryServer) -> AsyncIterator[httpx.AsyncClient]:
    """A reviewer's browser: keeps cookies, follows nothing by itself."""
    async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as browser:
        yield browser


async def _decisions(reviewer: Reviewer, request_id: str) -> list[tuple[str, str, str | None]]:
    response = await reviewer.http.get(f"/approvals/{request_id}", headers=reviewer.headers)
    assert response.status_code == 200, response.text
    return [(d["reviewer"], d["decision"], d["comment"]) for d in response.json()["decisions"]]


def _audit_verifies(server: TreasuryServer, db_url: str) -> None:
    command = [sys.executable, "-m", "mcp_approval", "audit", "verify"]
    command += ["--config", str(server.directory / "config.toml"), "--db", db_url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=scaled(120), check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _link_events(db_url: str, request_id: str) -> list[tuple[str, dict[str, Any]]]:
    query = "SELECT actor, data_json FROM audit_events WHERE kind = 'approval.link_used' AND subject = :id"
    rows = store_rows(db_url, query + " ORDER BY event_id", {"id": request_id})
    return [(str(actor), json.loads(data)) for actor, data in rows]


async def test_each_reviewer_gets_own_links_a_get_decides_nothing_and_a_post_decides_once(
    tmp_path: Path, db_url: str
) -> None:
    async with _serving(tmp_path, db_url) as (smtp, server, alice, carol):
        task = (await alice.call_tool("close_quarter", {"quarter": "2026-Q2"})).result["taskId"]
        pending = await approval_for(carol, "close_quarter")
        request_id = pending["id"]
        to_carol = await mail_to(smtp, ADDRESSES["carol"], request_id)
        to_dave = await mail_to(smtp, ADDRESSES["dave"], request_id)
        carols, daves = links_of(to_carol), links_of(to_dave)
        assert len({carols.approve, carols.deny, daves.approve, daves.deny}) == 4
        assert carols.approve.startswith(server.base_url + "/console/email/")

        async with _browser(server) as browser:
            # A link scanner, and the reviewer opening the page: nothing decided, nothing used up.
            for _ in range(3):
                scanned = await browser.get(carols.approve)
                assert scanned.status_code == 200, scanned.text
                assert "Opening this page decided nothing" in scanned.text
            assert (await browser.get(carols.deny)).status_code == 200
            assert await _decisions(carol, request_id) == []

            page = await browser.get(carols.approve)
            done = await post_form(browser, carols.approve, csrf=form_csrf(page.text), decision="approve")
            assert done.status_code == 200, done.text
            assert "Recorded: your approval (1 of 2 approvals)" in done.text
            assert await _decisions(carol, request_id) == [("carol", "approve", None)]

            # The same link again, by page or by form, and its Deny twin: refused, nothing more recorded.
            again = await post_form(browser, carols.approve, csrf=form_csrf(page.text), decision="approve")
            assert again.status_code == 410, again.text
            assert (await browser.get(carols.approve)).status_code == 410
            assert (await browser.get(carols.deny)).status_code == 410
            assert await _decisions(carol, request_id) == [("carol", "approve", None)]

        async with _browser(server) as browser:
            page = await browser.get(daves.approve)
            done = await post_form(browser, daves.approve, csrf=form_csrf(page.text), decision="approve", comment="ok")
            assert "Recorded: approved." in done.text, done.text
        assert (await settled(alice, task))["status"] == "completed"
        decisions = await _decisions(carol, request_id)
        assert sorted(decisions) == [("carol", "approve", None), ("dave", "approve", "ok")]
        assert len(server.ledger()) == 1

        # alice made the request and erin holds no approver role: neither was written to.
        addressed = sorted(str(m["To"]) for m in smtp.messages)
        assert addressed == [ADDRESSES["carol"], ADDRESSES["dave"]]
        # Each link's use is in the audit trail, as its reviewer, with the channel.
        events = _link_events(db_url, request_id)
        assert [actor for actor, _ in events] == ["carol", "dave"]
        assert [(data["channel"], data["decision"]) for _, data in events] == [("mail", "approve")] * 2
        # Stored as hashes only, bound to the request's deadline at most.
        rows = store_rows(
            db_url, "SELECT token_hash, expires_at FROM email_links WHERE request_id = :id", {"id": request_id}
        )
        tokens = {carols.approve.rsplit("/", 2)[1], daves.approve.rsplit("/", 2)[1]}
        assert len(rows) == 2
        assert not {str(row[0]) for row in rows} & tokens
    _audit_verifies(server, db_url)


async def test_forwarded_altered_and_forged_links_decide_nothing(tmp_path: Path, db_url: str) -> None:
    async with _serving(tmp_path, db_url) as (smtp, server, alice, carol):
        await alice.call_tool("close_quarter", {"quarter": "2026-Q3"})
        first = (await approval_for(carol, "close_quarter", quarter="2026-Q3"))["id"]
        carols = links_of(await mail_to(smtp, ADDRESSES["carol"], first))

        # Forwarded to dave, who is signed in to the console: refused, carol's link still hers.
        async with _browser(server) as daves_browser:
            page = await daves_browser.get(carols.approve)  # before signing in: the form and its cookie
            csrf = form_csrf(page.text)
            await sign_in(daves_browser, "dave-token")
            opened = await daves_browser.get(carols.approve)
            assert opened.status_code == 403, opened.text
            assert "signed in as dave" in opened.text
            posted = await post_form(daves_browser, carols.approve, csrf=csrf, decision="approve")
            assert posted.status_code == 403, posted.text
        assert await _decisions(carol, first) == []

        async with _browser(server) as browser:
            page = await browser.get(carols.deny)
            csrf = form_csrf(page.text)
            # A form from another site, a form without the page's token, a forged token: refused.
            cross = await browser.post(
                carols.deny, data={"csrf": csrf, "decision": "deny"}, headers={"origin": "https://evil.example"}
            )
            assert cross.status_code == 403, cross.text
            browser.cookies.clear()
            tokenless = await post_form(browser, carols.deny, csrf=csrf, decision="deny")
            assert tokenless.status_code == 403, tokenless.text
            forged = carols.deny.rsplit("/", 2)[0] + "/" + "A" * 43 + "/deny"
            assert (await browser.get(forged)).status_code == 404
            assert await _decisions(carol, first) == []

        # The request's stored content changes after the message went out: its links stop working.
        await alice.call_tool("close_quarter", {"quarter": "2026-Q4"})
        second = (await approval_for(carol, "close_quarter", quarter="2026-Q4"))["id"]
        seconds = links_of(await mail_to(smtp, ADDRESSES["carol"], second))
        async with _browser(server) as browser:
            page = await browser.get(seconds.approve)
            csrf = form_csrf(page.text)
            await asyncio.to_thread(rewrite_request_arguments, db_url, second, quarter="2027-Q1")
            changed = await post_form(browser, seconds.approve, csrf=csrf, decision="approve")
            assert changed.status_code == 409, changed.text
            assert "changed after the e-mail was sent" in changed.text
            assert (await browser.get(seconds.approve)).status_code == 409
        assert await _decisions(carol, second) == []

        # carol's own first link still decides, once.
        async with _browser(server) as browser:
            page = await browser.get(carols.deny)
            done = await post_form(browser, carols.deny, csrf=form_csrf(page.text), decision="deny", comment="not now")
            assert "Recorded: denied." in done.text, done.text
        assert await _decisions(carol, first) == [("carol", "deny", "not now")]


async def test_an_expired_link_decides_nothing(tmp_path: Path, db_url: str) -> None:
    async with _serving(tmp_path, db_url, link_ttl_s=scaled(2.0)) as (smtp, server, alice, carol):
        await alice.call_tool("wire_transfer", {"to": "acct-x", "amount": 40_000})
        request_id = (await approval_for(carol, "wire_transfer", to="acct-x"))["id"]
        carols = links_of(await mail_to(smtp, ADDRESSES["carol"], request_id))
        async with _browser(server) as browser:
            page = await browser.get(carols.approve)
            assert page.status_code == 200, page.text
            csrf = form_csrf(page.text)
            await asyncio.sleep(scaled(2.0) + 0.5)  # the link's own lifetime passes (the request still waits)
            expired = await post_form(browser, carols.approve, csrf=csrf, decision="approve")
            assert expired.status_code == 410, expired.text
            assert "expired" in expired.text
            assert (await browser.get(carols.approve)).status_code == 410
        assert await _decisions(carol, request_id) == []
        listed = await carol.pending()
        assert any(item["id"] == request_id for item in listed), "the request itself still waits"
    _audit_verifies(server, db_url)


async def test_a_link_to_a_high_risk_request_needs_its_reviewer_signed_in(tmp_path: Path, db_url: str) -> None:
    templates = {"treasury": {"risk": "high"}}
    async with _serving(tmp_path, db_url, templates=templates) as (smtp, server, alice, carol):
        task = (await alice.call_tool("wire_transfer", {"to": "acct-h", "amount": 50_000})).result["taskId"]
        request_id = (await approval_for(carol, "wire_transfer", to="acct-h"))["id"]
        carols = links_of(await mail_to(smtp, ADDRESSES["carol"], request_id))
        # The link ends with the request (its deadline, a day, comes before the channel's 72 hours).
        ((link_ends,),) = store_rows(db_url, "SELECT expires_at FROM email_links WHERE reviewer = 'carol'")
        ((request_ends,),) = store_rows(
            db_url, "SELECT expires_at FROM approval_requests WHERE request_id = :id", {"id": request_id}
        )
        assert link_ends == request_ends
        async with _browser(server) as browser:
            page = await browser.get(carols.approve)
            assert "needs you signed in to the console as carol" in page.text
            alone = await post_form(browser, carols.approve, csrf=form_csrf(page.text), decision="approve")
            assert alone.status_code == 401, alone.text
            assert await _decisions(carol, request_id) == []

            await sign_in(browser, "carol-token")
            page = await browser.get(carols.approve)
            done = await post_form(browser, carols.approve, csrf=form_csrf(page.text), decision="approve")
            assert "Recorded: approved." in done.text, done.text
        assert (await settled(alice, task))["status"] == "completed"
        assert await _decisions(carol, request_id) == [("carol", "approve", None)]
    _audit_verifies(server, db_url)
