"""Scenario 21: reviewers sign in to the console with the organization's identity provider.

The packaged deployment's ``[console.oidc]`` names the demo's own issuer
(:class:`~mcp_approval.demo.oidc_issuer.DemoIssuer`, a stand-in: the demo runs offline). A browser
is played by an HTTP client following the redirects as a browser does, keeping cookies: the
request page sends it to the sign-in, the issuer, the console's callback, and back to the page.
"""

from __future__ import annotations

import httpx2

from mcp_approval.demo.clients import disposition_of
from mcp_approval.demo.context import Demo, ScenarioFailed, ScenarioState, is_task
from mcp_approval.demo.scenarios import LARGE, tasks_client
from mcp_approval.protocol import DISPOSITION_APPROVED_EXECUTED

__all__ = ["signed_in_with_the_identity_provider"]

#: The issuer's accounts: olivia may decide transfers, pat may not.
ISSUER_ROLES = {"olivia": ["approver"], "pat": ["treasurer"]}


async def signed_in_with_the_identity_provider(demo: Demo, state: ScenarioState) -> str:
    """21. olivia opens the request's page, signs in at the issuer and approves; pat, signed in the
    same way without the reviewer role, cannot decide."""
    issuer = demo.issuer
    if issuer is None:
        raise ScenarioFailed("the demo's identity provider is not running")
    account = demo.account(21)
    state.watch(to=account)
    tasks = tasks_client()
    async with demo.client("alice", extensions=[tasks]) as alice, demo.reviewers("carol") as (carol,):
        created = await demo.call(alice, "alice", "wire_transfer", {"to": account, "amount": LARGE})
        demo.expect(is_task(created), "a working task")
        record = await carol.find("wire_transfer", to=account)
        page = f"/console/requests/{record['id']}"

        async with _browser(demo) as pat:
            issuer.user = "pat"
            shown = await _signed_in(demo, pat, page, "pat")
            demo.expect(shown.status_code == 404, "pat, without the approver role, is not shown the request")
            csrf = _csrf((await pat.get("/console")).text)  # the form token of pat's session
            refused = await pat.post(f"{page}/decide", data={"csrf": csrf, "decision": "approve"})
            demo.narrator.got(f"pat's approval: HTTP {refused.status_code}")
            demo.expect(refused.status_code == 403, "pat may not decide it")

        async with _browser(demo) as olivia:
            issuer.user = "olivia"
            shown = await _signed_in(demo, olivia, page, "olivia")
            demo.expect(shown.status_code == 200, "olivia is shown the request")
            demo.expect("Signed in as <strong>olivia</strong>" in shown.text, "olivia is signed in")
            decided = await olivia.post(f"{page}/decide", data={"csrf": _csrf(shown.text), "decision": "approve"})
            demo.narrator.got(f"olivia's approval: HTTP {decided.status_code}, back on the request's page")
            demo.expect(decided.url.path == page and "Approved." in decided.text, "olivia's approval is recorded")
        result = await demo.wait(tasks, alice, "alice", created.task_id)
        state.disposition = disposition_of(result)
    demo.expect(state.disposition == DISPOSITION_APPROVED_EXECUTED, "disposition approved-executed")
    return "olivia signed in at the issuer and approved; pat could not"


def _browser(demo: Demo) -> httpx2.AsyncClient:
    # A browser: cookies kept, redirects followed (the console's own pages and the issuer's).
    return httpx2.AsyncClient(base_url=demo.treasury.base_url, timeout=10.0, follow_redirects=True)


async def _signed_in(demo: Demo, browser: httpx2.AsyncClient, page: str, who: str) -> httpx2.Response:
    """Open ``page``, follow it to the sign-in, the issuer and back; the page as then shown."""
    demo.narrator.call(who, f"opens {page}")
    login = await browser.get(page)
    demo.expect(login.url.path == "/console/login" and "oidc/start" in login.text, "the sign-in page")
    demo.narrator.call(who, "clicks 'Sign in with the demo issuer' (authorization code + PKCE)")
    signed_in = await browser.get(_link(login.text))
    hops = " -> ".join(f"{r.status_code} {r.url.host}:{r.url.port}{r.url.path}" for r in signed_in.history)
    demo.narrator.got(f"{hops} -> {signed_in.status_code} {signed_in.url.path}")
    demo.expect(signed_in.status_code == 200 and f"signed in as <strong>{who}</strong>" in signed_in.text, "signed in")
    return await browser.get(page)  # where the signed-in page's refresh leads


def _link(html: str) -> str:
    start = html.index('href="', html.index('id="oidc-sign-in"')) + len('href="')
    return html[start : html.index('"', start)].replace("&amp;", "&")


def _csrf(html: str) -> str:
    marker = 'name="csrf" value="'
    start = html.index(marker) + len(marker)
    return html[start : html.index('"', start)]
