"""Scenario 22: a request whose template needs a passkey for every decision.

The demo's ``vault`` template has ``step_up = "passkey"``; closing a ``vault-`` account asks for
it. There is no browser in the demo, so carol's passkey is a software authenticator
(:class:`~mcp_approval.demo.soft_authenticator.SoftAuthenticator`) answering exactly what the
console's script would hand a phone or security key: she registers it through the console's
ceremony endpoints (signed in with her session and its CSRF token), her plain approval through
the reviewer API is refused, and she approves with an assertion whose challenge binds the
request's sealed digest and the decision. Replaying that assertion is refused. The browser
ceremony itself, in Chromium with its virtual authenticator, is tested in
``tests/reviewers/test_passkeys_browser.py``.
"""

from __future__ import annotations

import re
from typing import Any

import httpx2

from mcp_approval.demo.clients import disposition_of
from mcp_approval.demo.context import TOKENS, Demo, ScenarioState, is_task
from mcp_approval.demo.scenarios import tasks_client
from mcp_approval.demo.soft_authenticator import SoftAuthenticator
from mcp_approval.protocol import DISPOSITION_APPROVED_EXECUTED

__all__ = ["passkey_step_up"]

_CSRF = re.compile(r'<meta name="csrf" content="([^"]+)">')


async def passkey_step_up(demo: Demo, state: ScenarioState) -> str:
    """22. erin closes a vault account; carol registers a passkey, is refused without it, approves with
    it; the same assertion replayed is refused; approved-executed, one ledger entry."""
    base = demo.treasury.base_url
    account = f"vault-{demo.run_id}"
    state.watch(op="delete_account", account=account)
    authenticator = SoftAuthenticator(origin=base)
    tasks = tasks_client()
    async with demo.client("erin", extensions=[tasks]) as erin, demo.reviewers("carol") as (carol,):
        created = await demo.call(erin, "erin", "delete_account", {"account": account})
        demo.expect(is_task(created), "a working task")
        record = await carol.find("delete_account", account=account)
        await demo.decide(carol, record, "approve", expect=403)  # no passkey: refused, nothing recorded

        async with httpx2.AsyncClient(base_url=base, timeout=10.0) as console:
            demo.narrator.call("carol", "signs in to the console, registers a passkey (POST /console/passkeys)")
            await console.post("/console/login", data={"token": TOKENS["carol"]})
            page = await console.get("/console/passkeys")
            found = _CSRF.search(page.text)
            demo.expect(found is not None, "the Passkeys page carries the session's CSRF token")
            assert found is not None
            headers = {"X-CSRF-Token": found.group(1), "Origin": base}
            options = (await console.post("/console/passkeys/options", json={}, headers=headers)).json()
            registered = await console.post(
                "/console/passkeys", json={"credential": authenticator.create(options)}, headers=headers
            )
            demo.narrator.got(f"HTTP {registered.status_code}")
            demo.expect(registered.status_code == 201, "the passkey is registered")

        auth = {"Authorization": f"Bearer {TOKENS['carol']}"}
        path = f"/approvals/{record['id']}/passkey"
        async with httpx2.AsyncClient(base_url=base, timeout=10.0, headers=auth) as api:
            demo.narrator.call("carol", f"POST {path[:19]}…/passkey/options {{'decision': 'approve'}}")
            challenge = (await api.post(f"{path}/options", json={"decision": "approve"})).json()
            assertion = authenticator.get(challenge)
            demo.narrator.note(f"the authenticator signs challenge {challenge['challenge'][:12]}… (user verified)")
            decided = await _decide(demo, api, f"{path}/decide", assertion)
            demo.expect(decided.status_code == 200, "approved with the passkey")
            replayed = await _decide(demo, api, f"{path}/decide", assertion)
            demo.expect(replayed.status_code == 403, "the same assertion replayed is refused")
        result = await demo.wait(tasks, erin, "erin", created.task_id)
        state.disposition = disposition_of(result)
    demo.expect(state.disposition == DISPOSITION_APPROVED_EXECUTED, "disposition approved-executed")
    demo.expect(demo.executions(op="delete_account", account=account) == 1, "one ledger entry")
    return "refused without a passkey; approved with one; the replay refused"


async def _decide(demo: Demo, api: httpx2.AsyncClient, url: str, assertion: dict[str, Any]) -> httpx2.Response:
    demo.narrator.call("carol", "POST …/passkey/decide {'decision': 'approve', 'credential': <assertion>}")
    response = await api.post(url, json={"decision": "approve", "credential": assertion})
    shown = response.json().get("status") if response.status_code == 200 else response.json().get("detail")
    demo.narrator.got(f"HTTP {response.status_code} {shown}")
    return response
