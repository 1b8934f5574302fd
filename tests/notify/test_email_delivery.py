"""How the e-mail channel of a real ``serve`` delivers, through real SMTP servers on 127.0.0.1.

A message the SMTP server refuses is sent again (with a new link) while the reviewers already
written to get nothing more; two submissions of one link at once decide once; ``starttls`` checks
the server's certificate and never falls back to clear text. SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.notify.email_rig import ADDRESSES, SmtpServer, email_deployment, form_csrf, links_of, mail_to, post_form
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, principals, store_rows
from tests.treasury.helpers import approval_for

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def _serving(
    tmp_path: Path, smtp: SmtpServer, db_url: str | None = None, env: dict[str, str] | None = None, **channel: Any
) -> AsyncIterator[tuple[TreasuryServer, httpx.AsyncClient]]:
    server = TreasuryServer(email_deployment(tmp_path, smtp, **channel), db_url=db_url, env=env)
    try:
        await asyncio.to_thread(server.start)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            yield server, http
    finally:
        server.kill()
        smtp.stop()


async def delivered_everything(db_url: str) -> None:
    """Wait until the e-mail channel's delivery cursor has walked the whole audit chain."""
    statement = (
        "SELECT c.last_seq, h.seq FROM audit_delivery_cursors c, audit_chain_head h WHERE c.consumer LIKE 'notify:%'"
    )

    def positions() -> list[tuple[int, int]]:
        return [(int(cursor), int(head)) for cursor, head in store_rows(db_url, statement)]

    await eventually(
        lambda: asyncio.to_thread(positions),
        lambda found: bool(found) and all(cursor >= head for cursor, head in found),
        timeout_s=scaled(30),
    )


async def test_a_refused_message_is_sent_again_with_a_new_link_and_nobody_is_written_to_twice(
    tmp_path: Path, db_url: str
) -> None:
    smtp = SmtpServer(refuse_first_to=frozenset({ADDRESSES["carol"]})).start()
    async with _serving(tmp_path, smtp, db_url) as (server, http):
        await principals(http)["alice"].call_tool("close_quarter", {"quarter": "2026-Q1"})
        carol = Reviewer(http, "carol-token")
        request_id = (await approval_for(carol, "close_quarter"))["id"]
        to_carol = await mail_to(smtp, ADDRESSES["carol"], request_id)
        await mail_to(smtp, ADDRESSES["dave"], request_id)
        assert smtp.refused == [ADDRESSES["carol"]]
        # Later events (a decision) write to nobody; the retry wrote to carol only.
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as browser:
            link = links_of(to_carol).approve
            page = await browser.get(link)
            done = await post_form(browser, link, csrf=form_csrf(page.text), decision="approve")
            assert "Recorded: your approval (1 of 2 approvals)" in done.text, done.text

            # The same link submitted twice at once (two tabs, a double click): decided once.
            daves = links_of(await mail_to(smtp, ADDRESSES["dave"], request_id)).deny
            csrf = form_csrf((await browser.get(daves)).text)
            answers = await asyncio.gather(
                post_form(browser, daves, csrf=csrf, decision="deny"),
                post_form(browser, daves, csrf=csrf, decision="deny"),
            )
            statuses = sorted(answer.status_code for answer in answers)
            assert statuses == [200, 410], [a.text[-300:] for a in answers]
        record = (await http.get(f"/approvals/{request_id}", headers=carol.headers)).json()
        assert sorted((d["reviewer"], d["decision"]) for d in record["decisions"]) == [
            ("carol", "approve"),
            ("dave", "deny"),
        ]
        await delivered_everything(db_url)  # the decisions and the denial, as far as the channel cares
        addressed = sorted(str(m["To"]) for m in smtp.messages)
        assert addressed == [ADDRESSES["carol"], ADDRESSES["dave"]]
        rows = store_rows(
            db_url, "SELECT reviewer, used_at FROM email_links WHERE request_id = :id", {"id": request_id}
        )
        assert sorted(str(reviewer) for reviewer, used in rows if used is not None) == ["carol", "dave"]


async def test_starttls_checks_the_certificate_and_never_falls_back_to_clear_text(tmp_path: Path) -> None:
    ca_file = tmp_path / "smtp-ca.pem"
    trusted = SmtpServer(ca_file=ca_file).start()
    async with _serving(tmp_path / "trusted", trusted, env={"SSL_CERT_FILE": str(ca_file)}, security="starttls") as (
        _server,
        http,
    ):
        await principals(http)["alice"].call_tool("wire_transfer", {"to": "acct-tls", "amount": 40_000})
        request_id = (await approval_for(Reviewer(http, "carol-token"), "wire_transfer", to="acct-tls"))["id"]
        assert links_of(await mail_to(trusted, ADDRESSES["carol"], request_id)).approve

    plain = SmtpServer().start()  # offers no STARTTLS
    async with _serving(tmp_path / "plain", plain, security="starttls") as (server, http):
        await principals(http)["alice"].call_tool("wire_transfer", {"to": "acct-clear", "amount": 40_000})
        await approval_for(Reviewer(http, "carol-token"), "wire_transfer", to="acct-clear")

        async def log() -> str:
            return server.log()

        await eventually(log, lambda text: "SMTP server did not take the message" in text, timeout_s=scaled(20))
        assert plain.messages == [], "nothing was sent in clear text"
