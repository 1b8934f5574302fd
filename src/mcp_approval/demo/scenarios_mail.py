"""Scenario 19: a reviewer decides from the e-mail the deployment's e-mail channel sent them.

The demo's SMTP server (:class:`~mcp_approval.demo.mail_inbox.MailInbox`) receives carol's
message; a link scanner opens its Approve link (nothing is decided), carol opens it and confirms
on the page (the request is approved), and the same link a second time is refused.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable

import httpx2

from mcp_approval.demo.clients import disposition_of
from mcp_approval.demo.context import Demo, ScenarioFailed, ScenarioState, is_task
from mcp_approval.demo.mail_inbox import link_in
from mcp_approval.demo.scenarios import LARGE, tasks_client
from mcp_approval.protocol import DISPOSITION_APPROVED_EXECUTED

__all__ = ["CAROLS_ADDRESS", "decided_from_email"]

#: carol's address in the packaged e-mail channel's ``reviewers``.
CAROLS_ADDRESS = "carol@example.com"
#: How long the message may take to arrive.
_ARRIVAL_S = 20.0


async def decided_from_email(demo: Demo, state: ScenarioState) -> str:
    """19. A large transfer's e-mail reaches carol; a link scanner opens her Approve link and decides
    nothing; carol confirms on the page and the transfer runs; the link then works no more."""
    mail = demo.mail
    if mail is None:
        raise ScenarioFailed("the demo's SMTP server is not running")
    account = demo.account(19)
    state.watch(to=account)
    tasks = tasks_client()
    async with demo.client("alice", extensions=[tasks]) as alice, demo.reviewers("carol") as (carol,):
        created = await demo.call(alice, "alice", "wire_transfer", {"to": account, "amount": LARGE})
        demo.expect(is_task(created), "a working task")
        record = await carol.find("wire_transfer", to=account)
        text = await _arrival(lambda: mail.text_to(CAROLS_ADDRESS, record["id"]))
        approve = link_in(text, "Approve")
        demo.expect(bool(approve), "carol's message carries her Approve link")
        demo.narrator.note(f"e-mail to {CAROLS_ADDRESS}: Approve → {approve.split('/console/')[0]}/console/email/…")
        async with httpx2.AsyncClient(timeout=10.0) as scanner:
            demo.narrator.call("a link scanner", "GET the Approve link")
            scanned = await scanner.get(approve)
        after_scan = await carol.find("wire_transfer", to=account)
        demo.expect(scanned.status_code == 200 and not after_scan["decisions"], "opening the link decided nothing")
        async with httpx2.AsyncClient(timeout=10.0) as browser:
            demo.narrator.call("carol", "opens the link and clicks Approve on the page (POST)")
            page = await browser.get(approve)
            found = re.search(r'name="csrf" value="([^"]+)"', page.text)
            demo.expect(found is not None, "the page carries its form")
            assert found is not None
            form = {"csrf": found.group(1), "decision": "approve"}
            done = await browser.post(approve, data=form)
            recorded = "Recorded: approved." in done.text
            demo.narrator.got(f"HTTP {done.status_code}: {'Recorded: approved.' if recorded else done.text[-200:]}")
            demo.expect(done.status_code == 200 and recorded, "carol's approval is recorded")
            again = await browser.post(approve, data=form)
            demo.narrator.got(f"the same link again: HTTP {again.status_code}")
            demo.expect(again.status_code == 410, "the link works once")
        result = await demo.wait(tasks, alice, "alice", created.task_id)
        state.disposition = disposition_of(result)
    demo.expect(state.disposition == DISPOSITION_APPROVED_EXECUTED, "disposition approved-executed")
    demo.expect(demo.executions(to=account) == 1, "one ledger entry")
    return "carol approved from her e-mail (a GET showed the page, the POST decided); the same link again: 410"


async def _arrival(look: Callable[[], str]) -> str:
    deadline = time.monotonic() + _ARRIVAL_S
    while not (found := look()):
        if time.monotonic() > deadline:
            raise ScenarioFailed(f"carol's e-mail did not arrive within {_ARRIVAL_S:.0f} s")
        await asyncio.sleep(0.05)
    return found
