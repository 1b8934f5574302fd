"""The reviewer console over real HTTP: sign-in, sessions, CSRF, escaping and decisions."""

from __future__ import annotations

import html
import re
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from mcp_approval.reviewers.console import COOKIE, console_routes
from mcp_approval.reviewers.views import human_duration
from tests.reviewers.conftest import CSRF, Console, sign_in
from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer, deployment_dir

pytestmark = pytest.mark.anyio

PAYLOADS = ['<script>alert("x")</script>', '"><img src=x onerror=alert(1)>', "</textarea><svg onload=alert(2)>"]


def decide_form(csrf: str | None, decision: str = "approve", comment: str = "") -> dict[str, str]:
    form = {"decision": decision, "comment": comment}
    if csrf is not None:
        form["csrf"] = csrf
    return form


async def audit_kinds(console: Console, request_id: str) -> list[str]:
    return [event.kind for event in await console.audit.events(subject=request_id)]


# -- signing in ---------------------------------------------------------------------------------


async def test_a_reviewer_token_opens_a_session_with_a_hardened_opaque_cookie(
    console: Console, http: httpx.AsyncClient
) -> None:
    response = await http.post("/console/login", data={"token": "bob-token-0123"})
    assert response.status_code == 303
    assert response.headers["location"] == "/console"
    cookie = response.headers["set-cookie"]
    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert {"httponly", "path", "samesite"} <= attributes
    assert "samesite=strict" in cookie.lower()
    assert "path=/console" in cookie.lower()
    assert "secure" not in attributes  # plain http on 127.0.0.1
    value = http.cookies[COOKIE]
    assert "bob" not in value
    assert "token" not in value
    assert len(value) >= 40
    page = await http.get("/console")
    assert page.status_code == 200
    assert "Signed in as <strong>bob</strong>" in page.text


async def test_the_cookie_is_secure_over_https(console: Console) -> None:
    async def authenticate(token: str) -> str | None:
        return console.tokens.get(token)

    app = Starlette(routes=console_routes(console.backend, authenticate, console.audit, clock=console.clock))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://review.example") as client:
        response = await client.post("/console/login", data={"token": "bob-token-0123"})
    assert response.status_code == 303
    assert "secure" in {part.strip().lower() for part in response.headers["set-cookie"].split(";")}


@pytest.mark.parametrize("token", ["", "bob-token-012", "nobody-token-0123"])
async def test_an_unknown_token_is_refused_without_a_session(http: httpx.AsyncClient, token: str) -> None:
    response = await http.post("/console/login", data={"token": token})
    assert response.status_code == 401
    assert "That token was not accepted." in response.text
    assert "set-cookie" not in response.headers
    assert (await http.get("/console")).headers["location"] == "/console/login"


@pytest.mark.parametrize("path", ["/console", "/console/decided", "/console/requests/apr_x"])
async def test_pages_without_a_live_session_lead_to_sign_in(http: httpx.AsyncClient, path: str) -> None:
    assert (await http.get(path)).headers["location"] == "/console/login"
    http.cookies.set(COOKIE, "forged-session-value-000000000000000000000000", path="/console")
    response = await http.get(path)
    assert response.status_code == 303
    assert response.headers["location"] == "/console/login"


async def test_a_session_ends_when_its_token_is_revoked_or_it_sits_idle(
    console: Console, http: httpx.AsyncClient
) -> None:
    await sign_in(http, "bob")
    del console.tokens["bob-token-0123"]
    assert (await http.get("/console")).headers["location"] == "/console/login"
    await sign_in(http, "carol")
    console.clock.advance(59 * 60 * 1000)
    assert (await http.get("/console")).status_code == 200  # use within the hour keeps it alive
    console.clock.advance(60 * 60 * 1000)
    assert (await http.get("/console")).headers["location"] == "/console/login"


async def test_sign_out_ends_the_session_for_good(console: Console, http: httpx.AsyncClient) -> None:
    csrf = await sign_in(http, "bob")
    stolen = http.cookies[COOKIE]
    refused = await http.post("/console/logout", data={"csrf": "not-this-one"})
    assert refused.status_code == 403  # no CSRF token: the session survives
    assert (await http.get("/console")).status_code == 200
    response = await http.post("/console/logout", data={"csrf": csrf})
    assert response.status_code == 303
    assert response.headers["location"] == "/console/login?signed_out"
    assert "You are signed out." in (await http.get("/console/login?signed_out")).text
    http.cookies.set(COOKIE, stolen, path="/console")
    assert (await http.get("/console")).headers["location"] == "/console/login"


# -- pages --------------------------------------------------------------------------------------


async def test_the_pending_list_shows_each_request_with_age_deadline_and_progress(
    console: Console, http: httpx.AsyncClient
) -> None:
    request_id = await console.submit()
    console.clock.advance(5 * 60 * 1000)
    await sign_in(http, "bob")
    page = await http.get("/console")
    assert page.status_code == 200
    row = _row(page.text, request_id)
    for expected in (
        "Large wire transfer",
        "wire_transfer",
        "alice",
        "single",
        "5 min ago",
        "in 23 h 55 min",
        "0 of 1 approval",
    ):
        assert expected in row, expected
    assert "&#34;acct-1&#34;" in row
    assert "50000" in row
    assert "s3cr3t-value" not in page.text  # [approval] redact_arguments applies
    assert "[redacted]" in row


async def test_the_detail_page_shows_arguments_redacted_and_the_audit_trail(
    console: Console, http: httpx.AsyncClient
) -> None:
    request_id = await console.submit(inputs={"justification": "Invoice 4471"})
    await sign_in(http, "bob")
    page = await http.get(f"/console/requests/{request_id}")
    assert page.status_code == 200
    text = page.text
    assert "s3cr3t-value" not in text
    assert re.search(r'<td class="mono redacted">\[redacted\]</td>', text)
    assert "Invoice 4471" in text
    assert 'value="approve"' in text
    assert 'value="deny"' in text
    assert "approval.submitted" in text
    assert "by <strong>alice</strong>" in text


async def test_an_approval_is_recorded_and_shown_in_history_with_its_audit_trail(
    console: Console, http: httpx.AsyncClient
) -> None:
    request_id = await console.submit()
    csrf = await sign_in(http, "bob")
    response = await http.post(f"/console/requests/{request_id}/decide", data=decide_form(csrf, comment="invoice ok"))
    assert response.status_code == 303
    page = await http.get(response.headers["location"])
    assert "Approved. The call is checked against policy once more and then runs." in page.text
    assert "invoice ok" in page.text
    assert await audit_kinds(console, request_id) == ["approval.submitted", "approval.decision", "approval.approved"]
    for kind in ("approval.decision", "approval.approved"):
        assert kind in page.text
    record = await console.backend.get_request(request_id)
    assert record is not None
    assert record.status.value == "approved"
    assert request_id not in (await http.get("/console")).text
    decided = (await http.get("/console/decided")).text
    assert _row(decided, request_id).count("bob (approve)") == 1


async def test_two_of_two_approvals_show_progress_and_need_two_reviewers(
    console: Console, http: httpx.AsyncClient
) -> None:
    request_id = await console.submit(template="pair", title="Quarter close")
    csrf = await sign_in(http, "bob")
    first = await http.post(f"/console/requests/{request_id}/decide", data=decide_form(csrf))
    page = await http.get(first.headers["location"])
    assert "recorded (1 of 2 approvals); waiting for others" in page.text
    assert "You already decided this request" in page.text
    assert 'value="approve"' not in page.text
    assert "1 of 2 approvals" in _row((await http.get("/console")).text, request_id)
    again = await http.post(f"/console/requests/{request_id}/decide", data=decide_form(csrf))
    assert again.status_code == 409  # the same reviewer twice counts once
    csrf = await sign_in(http, "carol")
    second = await http.post(f"/console/requests/{request_id}/decide", data=decide_form(csrf))
    assert second.status_code == 303
    assert "2 of 2 approvals" in (await http.get(second.headers["location"])).text
    record = await console.backend.get_request(request_id)
    assert record is not None
    assert record.status.value == "approved"


async def test_a_request_decided_meanwhile_answers_409_and_records_nothing(
    console: Console, http: httpx.AsyncClient
) -> None:
    request_id = await console.submit()
    csrf = await sign_in(http, "carol")
    assert 'value="approve"' in (await http.get(f"/console/requests/{request_id}")).text
    await console.backend.decide(request_id, "bob", "deny", "no invoice")
    response = await http.post(f"/console/requests/{request_id}/decide", data=decide_form(csrf))
    assert response.status_code == 409
    assert "Nothing was recorded" in response.text
    assert "already denied" in response.text
    record = await console.backend.get_request(request_id)
    assert record is not None
    assert [d.reviewer for d in record.decisions] == ["bob"]


async def test_a_reviewer_without_the_role_gets_403_and_nothing_is_recorded(
    console: Console, http: httpx.AsyncClient
) -> None:
    request_id = await console.submit()
    csrf = await sign_in(http, "mallory")
    response = await http.post(f"/console/requests/{request_id}/decide", data=decide_form(csrf))
    assert response.status_code == 403
    assert "You may not decide this request" in response.text
    assert "lacks the role" in response.text
    assert await audit_kinds(console, request_id) == ["approval.submitted"]


async def test_the_requester_sees_no_decision_buttons_and_a_forged_post_is_refused(
    console: Console, http: httpx.AsyncClient
) -> None:
    request_id = await console.submit(requester="alice")
    csrf = await sign_in(http, "alice")
    page = await http.get(f"/console/requests/{request_id}")
    assert page.status_code == 200
    assert 'value="approve"' not in page.text
    assert 'value="deny"' not in page.text
    assert f"{request_id}/decide" not in page.text
    assert "You made this request, so another reviewer has to decide it." in page.text
    forged = await http.post(f"/console/requests/{request_id}/decide", data=decide_form(csrf))
    assert forged.status_code == 403
    assert "forbids self-approval" in forged.text
    assert await audit_kinds(console, request_id) == ["approval.submitted"]
    record = await console.backend.get_request(request_id)
    assert record is not None
    assert record.status.value == "pending"
    assert record.decisions == ()


# -- CSRF and cross-site posts --------------------------------------------------------------------


@pytest.mark.parametrize("csrf", [None, "", "wrong-token", "other-session"])
async def test_a_decision_without_this_sessions_csrf_token_is_refused(
    console: Console, http: httpx.AsyncClient, csrf: str | None
) -> None:
    request_id = await console.submit()
    if csrf == "other-session":
        async with httpx.AsyncClient(base_url=console.base_url, timeout=scaled(20)) as other:
            csrf = await sign_in(other, "carol")
    await sign_in(http, "bob")
    response = await http.post(f"/console/requests/{request_id}/decide", data=decide_form(csrf))
    assert response.status_code == 403
    assert "security token is missing or wrong; nothing was decided" in response.text
    assert await audit_kinds(console, request_id) == ["approval.submitted"]
    record = await console.backend.get_request(request_id)
    assert record is not None
    assert record.decisions == ()


@pytest.mark.parametrize(
    "headers",
    [{"origin": "https://evil.example"}, {"origin": "null"}, {"sec-fetch-site": "cross-site"}],
)
async def test_a_cross_site_post_is_refused_even_with_the_token(
    console: Console, http: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    request_id = await console.submit()
    csrf = await sign_in(http, "bob")
    response = await http.post(f"/console/requests/{request_id}/decide", data=decide_form(csrf), headers=headers)
    assert response.status_code == 403
    assert await audit_kinds(console, request_id) == ["approval.submitted"]
    same = await http.post(
        f"/console/requests/{request_id}/decide",
        data=decide_form(csrf),
        headers={"origin": console.base_url, "sec-fetch-site": "same-origin"},
    )
    assert same.status_code == 303


async def test_bad_form_bodies_get_specific_errors(console: Console, http: httpx.AsyncClient) -> None:
    request_id = await console.submit()
    csrf = await sign_in(http, "bob")
    url = f"/console/requests/{request_id}/decide"
    assert (await http.post(url, json={"csrf": csrf, "decision": "approve"})).status_code == 415
    assert (
        await http.post(url, data={"csrf": csrf, "decision": "approve", "comment": "x" * 20_000})
    ).status_code == 413
    twice = await http.post(url, content=f"csrf={csrf}&decision=approve&decision=deny", headers={"content-type": _FORM})
    assert twice.status_code == 400
    assert (await http.post(url, data={"csrf": csrf, "decision": "maybe"})).status_code == 400
    long = await http.post(url, data={"csrf": csrf, "decision": "approve", "comment": "y" * 2001})
    assert long.status_code == 400
    assert "at most 2000 characters" in long.text
    assert (await http.post("/console/requests/apr_nope/decide", data=decide_form(csrf))).status_code == 404
    assert await audit_kinds(console, request_id) == ["approval.submitted"]


# -- escaping -----------------------------------------------------------------------------------


async def test_every_untrusted_string_is_escaped(console: Console, http: httpx.AsyncClient) -> None:
    hostile = " | ".join(PAYLOADS)
    request_id = await console.submit(
        arguments={"to": hostile, "amount": 50_000, PAYLOADS[1]: "key", "nested": {"x": PAYLOADS[0]}},
        requester=PAYLOADS[1],
        template=PAYLOADS[2],
        title=PAYLOADS[0],
        description=PAYLOADS[1],
        reason=PAYLOADS[2],
        inputs={"justification": PAYLOADS[0]},
    )
    await sign_in(http, "bob")
    pages = [(await http.get(path)).text for path in ("/console", f"/console/requests/{request_id}")]
    await console.backend.decide(request_id, "bob", "deny", PAYLOADS[1] + PAYLOADS[0])
    pages += [(await http.get(path)).text for path in ("/console/decided", f"/console/requests/{request_id}")]
    for page in pages:
        for payload in PAYLOADS:
            assert payload not in page
        assert "<script>" not in page
        assert "<img" not in page
        assert "<svg" not in page
        assert "onerror=alert(1)>" not in page
    detail = pages[-1]
    for payload in PAYLOADS:
        assert payload in html.unescape(detail)  # shown to the reviewer, as text
    assert "&lt;script&gt;" in pages[0]
    assert "&#34;&gt;&lt;img" in pages[0]


async def test_invisible_and_bidi_characters_are_made_visible(console: Console, http: httpx.AsyncClient) -> None:
    request_id = await console.submit(arguments={"to": "acct-\u202e1234\u200b", "amount": 1})
    await sign_in(http, "bob")
    page = (await http.get(f"/console/requests/{request_id}")).text
    assert "\u202e" not in page
    assert "\u200b" not in page
    assert "acct-\\u202e1234\\u200b" in page


async def test_pages_carry_a_script_free_content_security_policy(console: Console, http: httpx.AsyncClient) -> None:
    await sign_in(http, "bob")
    for path in ("/console", "/console/login", "/console/decided"):
        response = await http.get(path)
        policy = response.headers["content-security-policy"]
        assert "default-src 'none'" in policy
        assert "script-src" not in policy
        assert "unsafe-inline" not in policy
        assert "frame-ancestors 'none'" in policy
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["cache-control"] == "no-store"
        assert "<script" not in response.text
        assert " style=" not in response.text
    css = await http.get("/console/static/console.css")
    assert css.status_code == 200
    assert css.headers["content-type"].startswith("text/css")


def test_durations_read_in_human_units() -> None:
    samples = (-5, 0, 45_000, 180_000, 7_500_000, 36_000_000, 86_340_000, 86_400_000, 273_600_000)
    assert [human_duration(ms) for ms in samples] == [
        "0 s",
        "0 s",
        "45 s",
        "3 min",
        "2 h 5 min",
        "10 h",
        "23 h 59 min",
        "1 d",
        "3 d 4 h",
    ]


_FORM = "application/x-www-form-urlencoded"


def _row(page: str, request_id: str) -> str:
    """The table row that links to ``request_id``."""
    for row in re.findall(r"<tr>.*?</tr>", page, flags=re.S):
        if f"/console/requests/{request_id}" in row:
            return str(row)
    raise AssertionError(f"no row for {request_id} in the page")


def test_csrf_pattern_matches_the_hidden_field() -> None:
    assert CSRF.search('<input type="hidden" name="csrf" value="abc">') is not None


async def test_the_serve_app_mounts_the_console(tmp_path: Path) -> None:
    server = TreasuryServer(deployment_dir(tmp_path)).start()
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            assert (await http.get("/console")).headers["location"] == "/console/login"
            assert (await http.post("/console/login", data={"token": "carol-token"})).status_code == 303
            page = await http.get("/console")
            assert page.status_code == 200
            assert "Nothing is waiting for a decision." in page.text
            assert "content-security-policy" in page.headers
            api = await http.get("/approvals", headers={"authorization": "Bearer carol-token"})
            assert api.json()["approvals"] == []  # the reviewer API is still there
    finally:
        server.kill()
