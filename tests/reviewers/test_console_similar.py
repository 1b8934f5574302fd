"""The console's answers to approval fatigue over real HTTP: approving a request with a similar-call
rule, deciding several pending requests at once, and the rules pages (with revocation)."""

from __future__ import annotations

import html
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from mcp_approval.backends import ApprovalTemplate
from mcp_approval.keyring import BindingCipher
from tests.reviewers.conftest import Console, serve_console, sign_in
from tests.support.polling import eventually
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

SEAL = BindingCipher({"k1": os.urandom(32)})
TEMPLATES = {
    "single": ApprovalTemplate(similar_rule_max_s=28_800, similar_rule_max_uses=50),
    "pair": ApprovalTemplate(approvals_required=2),
    "closed": ApprovalTemplate(similar_rules=False),
}
RULE_PATH = re.compile(r"^/console/rules/(sim_[A-Za-z0-9_-]+)$")


@pytest.fixture
async def sealed(tmp_path: Path) -> AsyncIterator[Console]:
    """A console whose backend seals, so that its reviewers may write similar-call rules."""
    async with serve_console(tmp_path, seal=SEAL, templates=TEMPLATES) as running:
        yield running


@pytest.fixture
async def http(sealed: Console) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=sealed.base_url, timeout=scaled(20)) as client:
        yield client


def similar_form(csrf: str, **fields: str) -> dict[str, str]:
    """The similar-call form as a browser sends it: every argument equal, 2 hours, 3 uses, unless ``fields`` say."""
    form = {"csrf": csrf, "principal": "same", "expires_in": "2", "unit": "hours", "max_uses": "3", "comment": ""}
    form.update(fields)
    return form


async def status_of(console: Console, request_id: str) -> str:
    record = await console.backend.get_request(request_id)
    assert record is not None
    return record.status.value


async def decided_by_rule(console: Console, request_id: str) -> str:
    """The status the request reaches once the rules had their turn (they decide it in a task of their own)."""
    return await eventually(lambda: status_of(console, request_id), lambda status: status == "approved")


async def left_to_people(console: Console, request_id: str) -> bool:
    """Whether no rule may decide the request (asked now, so no background turn is awaited)."""
    return (
        await console.backend.decide_by_similar_rules(request_id) is None
        and await status_of(console, request_id) == "pending"
    )


async def approve_similar(http: httpx.AsyncClient, request_id: str, form: dict[str, str]) -> httpx.Response:
    return await http.post(f"/console/requests/{request_id}/similar", data=form)


# -- the form -----------------------------------------------------------------------------------


async def test_the_form_offers_conditions_from_what_the_request_shows(sealed: Console, http: httpx.AsyncClient) -> None:
    request_id = await sealed.submit()  # amount: 50000, secret: redacted, to: "acct-1" (sorted)
    await sign_in(http, "bob")
    page = (await http.get(f"/console/requests/{request_id}")).text
    form = page[page.index('id="similar"') :]
    assert "Approve, and approve similar calls" in form
    assert 'name="principal" value="same"' in form
    assert 'name="principal" value="any"' in form
    assert 'name="a2.prefix" value="acct-1"' in form  # to: a string, pre-filled
    assert 'name="a2.low"' not in form  # a string takes no range
    assert 'name="a0.low" value="50000"' in form
    assert 'name="a0.high" value="50000"' in form
    assert 'name="a0.prefix"' not in form  # a number takes no prefix
    assert 'name="a1"' not in form  # the redacted argument offers no condition
    assert "it takes no condition" in form
    assert "s3cr3t-value" not in page
    assert "at most 8 hours" in form
    assert "at most 50 calls" in form
    assert 'max="50"' in form


@pytest.mark.parametrize("template", ["pair", "closed"])
async def test_the_form_is_not_offered_where_the_template_allows_no_rule(
    sealed: Console, http: httpx.AsyncClient, template: str
) -> None:
    request_id = await sealed.submit(template=template)
    csrf = await sign_in(http, "bob")
    page = (await http.get(f"/console/requests/{request_id}")).text
    assert 'value="approve"' in page  # the plain decision is offered
    assert 'id="similar"' not in page
    refused = await approve_similar(http, request_id, similar_form(csrf))
    assert refused.status_code == 400
    assert "allows no similar-call rule" in refused.text
    assert (await sealed.backend.get_request(request_id)).status.value == "pending"  # type: ignore[union-attr]


async def test_the_form_is_not_offered_without_a_binding_key(console: Console) -> None:
    request_id = await console.submit()
    async with httpx.AsyncClient(base_url=console.base_url, timeout=scaled(20)) as http:
        await sign_in(http, "bob")
        page = (await http.get(f"/console/requests/{request_id}")).text
    assert 'value="approve"' in page
    assert 'id="similar"' not in page


async def test_approving_with_a_rule_decides_the_next_call_and_the_rule_page_shows_it(
    sealed: Console, http: httpx.AsyncClient
) -> None:
    first = await sealed.submit()
    csrf = await sign_in(http, "bob")
    form = similar_form(csrf, a0="range", **{"a0.low": "0", "a0.high": "60000"}, a2="prefix", **{"a2.prefix": "acct-"})
    answer = await approve_similar(http, first, {**form, "comment": "March invoices"})
    assert answer.status_code == 303, answer.text
    match = RULE_PATH.match(answer.headers["location"])
    assert match is not None
    rule_id = match.group(1)
    approved = await sealed.backend.get_request(first)
    assert approved is not None
    assert approved.status.value == "approved"
    assert [(d.reviewer, d.comment) for d in approved.decisions] == [("bob", "March invoices")]
    later = await sealed.submit(arguments={"to": "acct-9", "amount": 59_000, "secret": "s3cr3t-value"})
    await decided_by_rule(sealed, later)
    outside = await sealed.submit(arguments={"to": "acct-9", "amount": 60_001, "secret": "s3cr3t-value"})
    assert await left_to_people(sealed, outside)
    other_secret = await sealed.submit(arguments={"to": "acct-9", "amount": 1, "secret": "another"})
    assert await left_to_people(sealed, other_secret)  # a redacted argument stays equal
    page = await http.get(answer.headers["location"])
    assert page.status_code == 200
    text = html.unescape(page.text)
    assert "decides up to 3 similar calls" in text  # the flash
    assert "amount in [0, 60000]" in text
    assert 'to starts with "acct-"' in text
    assert "secret = [redacted]" in text
    assert rule_id in page.text
    assert re.search(r'id="rule-author">bob<', page.text)
    assert re.search(r'id="rule-uses">1 of 3<', page.text)
    assert later in page.text
    assert first in page.text
    assert outside not in page.text
    assert other_secret not in page.text


async def test_any_requester_widens_the_rule_to_other_principals(sealed: Console, http: httpx.AsyncClient) -> None:
    first = await sealed.submit()
    csrf = await sign_in(http, "bob")
    assert (await approve_similar(http, first, similar_form(csrf, principal="any"))).status_code == 303
    later = await sealed.submit(requester="carol")
    await decided_by_rule(sealed, later)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"expires_in": ""}, "An expiry is required"),
        ({"expires_in": "9", "unit": "hours"}, "lasts at most 8 hours"),
        ({"expires_in": "1", "unit": "weeks"}, "unit"),
        ({"expires_in": "nan"}, "finite number"),
        ({"max_uses": ""}, "number of uses is required"),
        ({"max_uses": "51"}, "at most 50 calls"),
        ({"principal": "everyone"}, "same requester, or any"),
        ({"a0": "range", "a0.low": "0", "a0.high": "100"}, "does not admit the request's own value"),
        ({"a0": "range", "a0.low": "0", "a0.high": ""}, "lowest and its highest"),
        ({"a0": "prefix", "a0.prefix": "5"}, "not a string"),
        ({"a2": "range", "a2.low": "0", "a2.high": "1"}, "not a number"),
        ({"a2": "prefix", "a2.prefix": ""}, "prefix cannot be empty"),
        ({"a2": "one_of", "a2.one_of": "acct-2\nacct-3"}, "does not admit the request's own value"),
        ({"a0": "one_of", "a0.one_of": "50000\nfifty"}, "must be a number, not 'fifty'"),
        ({"a1": "one_of", "a1.one_of": "anything"}, "redacted"),
        ({"a2": "wider"}, "choose equal, one of"),
    ],
)
async def test_a_form_that_asks_for_a_bad_rule_records_nothing_and_says_why(
    sealed: Console, http: httpx.AsyncClient, fields: dict[str, str], error: str
) -> None:
    request_id = await sealed.submit()
    csrf = await sign_in(http, "bob")
    answer = await approve_similar(http, request_id, similar_form(csrf, **fields))
    assert answer.status_code == 400, answer.text
    assert error in html.unescape(answer.text)
    assert "Nothing was recorded" in html.unescape(answer.text)
    assert 'id="similar" open' in answer.text  # the form stays open, as it was filled
    assert (await sealed.backend.get_request(request_id)).status.value == "pending"  # type: ignore[union-attr]
    assert await sealed.backend.similar_rules() == []


async def test_the_similar_form_needs_the_session_csrf_token_and_the_same_origin(
    sealed: Console, http: httpx.AsyncClient
) -> None:
    request_id = await sealed.submit()
    csrf = await sign_in(http, "bob")
    assert (await approve_similar(http, request_id, similar_form("forged"))).status_code == 403
    cross = await http.post(
        f"/console/requests/{request_id}/similar", data=similar_form(csrf), headers={"Origin": "https://evil.example"}
    )
    assert cross.status_code == 403
    assert "Cross-site" in cross.text
    assert (await sealed.backend.get_request(request_id)).status.value == "pending"  # type: ignore[union-attr]
    assert await sealed.backend.similar_rules() == []


async def test_who_may_not_decide_the_request_writes_no_rule(sealed: Console, http: httpx.AsyncClient) -> None:
    request_id = await sealed.submit()  # alice's own request
    csrf = await sign_in(http, "alice")
    page = (await http.get(f"/console/requests/{request_id}")).text
    assert 'id="similar"' not in page
    answer = await approve_similar(http, request_id, similar_form(csrf))
    assert answer.status_code == 403
    assert await sealed.backend.similar_rules() == []


# -- several at once ----------------------------------------------------------------------------


async def test_approve_selected_decides_each_on_its_own_and_lists_what_was_not(
    sealed: Console, http: httpx.AsyncClient
) -> None:
    ours = [await sealed.submit(template="closed"), await sealed.submit(template="closed")]
    own = await sealed.submit(template="closed", requester="bob")
    csrf = await sign_in(http, "bob")
    page = (await http.get("/console")).text
    assert f'value="{ours[0]}"' in page
    assert f'value="{ours[1]}"' in page
    assert f'value="{own}"' not in page  # bob's own request offers no checkbox
    form = {"csrf": csrf, "decision": "approve", "comment": "", "id.0": ours[0], "id.1": own, "id.2": ours[1]}
    answer = await http.post("/console/decide", data=form)
    assert answer.status_code == 200, answer.text
    assert "Approved 2 of 3" in answer.text
    rows = re.findall(r'<tr class="(ok|refused)">(.*?)</tr>', answer.text, re.S)
    assert [
        (kind, request_id in row) for (kind, row), request_id in zip(rows, [ours[0], own, ours[1]], strict=True)
    ] == [
        ("ok", True),
        ("refused", True),
        ("ok", True),
    ]
    assert "bob made this request and template 'closed' forbids self-approval" in html.unescape(rows[1][1])
    for request_id in ours:
        assert (await sealed.backend.get_request(request_id)).status.value == "approved"  # type: ignore[union-attr]
    assert (await sealed.backend.get_request(own)).status.value == "pending"  # type: ignore[union-attr]


async def test_deny_selected_needs_a_comment(sealed: Console, http: httpx.AsyncClient) -> None:
    ids = [await sealed.submit(), await sealed.submit()]
    csrf = await sign_in(http, "bob")
    form = {"csrf": csrf, "decision": "deny", "comment": " ", "id.0": ids[0], "id.1": ids[1]}
    refused = await http.post("/console/decide", data=form)
    assert refused.status_code == 400
    assert "needs a comment" in refused.text
    assert [await status_of(sealed, i) for i in ids] == ["pending", "pending"]
    denied = await http.post("/console/decide", data={**form, "comment": "wrong supplier"})
    assert denied.status_code == 200
    assert "Denied 2 of 2" in denied.text
    for request_id in ids:
        record = await sealed.backend.get_request(request_id)
        assert record is not None
        assert record.status.value == "denied"
        assert [d.comment for d in record.decisions] == ["wrong supplier"]


async def test_a_batch_needs_a_selection_the_csrf_token_and_the_same_origin(
    sealed: Console, http: httpx.AsyncClient
) -> None:
    request_id = await sealed.submit()
    csrf = await sign_in(http, "bob")
    empty = await http.post("/console/decide", data={"csrf": csrf, "decision": "approve", "comment": ""})
    assert empty.status_code == 400
    assert "Select at least one request" in empty.text
    forged = await http.post("/console/decide", data={"csrf": "forged", "decision": "approve", "id.0": request_id})
    assert forged.status_code == 403
    cross = await http.post(
        "/console/decide",
        data={"csrf": csrf, "decision": "approve", "id.0": request_id},
        headers={"Sec-Fetch-Site": "cross-site"},
    )
    assert cross.status_code == 403
    bad = await http.post("/console/decide", data={"csrf": csrf, "decision": "maybe", "id.0": request_id})
    assert bad.status_code == 400
    assert (await sealed.backend.get_request(request_id)).status.value == "pending"  # type: ignore[union-attr]


# -- the rules pages ----------------------------------------------------------------------------


async def _rule(sealed: Console, http: httpx.AsyncClient, csrf: str, **fields: str) -> tuple[str, str]:
    first = await sealed.submit()
    answer = await approve_similar(http, first, similar_form(csrf, **fields))
    assert answer.status_code == 303, answer.text
    match = RULE_PATH.match(answer.headers["location"])
    assert match is not None
    return first, match.group(1)


async def test_the_rules_page_lists_active_rules_and_all_on_request(sealed: Console, http: httpx.AsyncClient) -> None:
    csrf = await sign_in(http, "bob")
    _, rule_id = await _rule(sealed, http, csrf, expires_in="30", unit="minutes")
    active = await http.get("/console/rules")
    assert active.status_code == 200
    assert rule_id in active.text
    assert "active" in active.text
    sealed.clock.advance(31 * 60_000)  # past its 30 minutes
    assert rule_id not in (await http.get("/console/rules")).text
    everything = await http.get("/console/rules?state=all")
    assert rule_id in everything.text
    assert "expired" in everything.text


async def test_revoke_ends_the_rule_at_once(sealed: Console, http: httpx.AsyncClient) -> None:
    bob = await sign_in(http, "bob")
    _, rule_id = await _rule(sealed, http, bob)
    async with httpx.AsyncClient(base_url=sealed.base_url, timeout=scaled(20)) as carol:
        csrf = await sign_in(carol, "carol")  # a reviewer of the template may revoke it
        page = await carol.get(f"/console/rules/{rule_id}")
        assert 'id="revoke"' in page.text
        assert (await carol.post(f"/console/rules/{rule_id}/revoke", data={"csrf": "forged"})).status_code == 403
        assert (await sealed.backend.similar_rule(rule_id)).state() == "active"  # type: ignore[union-attr]
        answer = await carol.post(f"/console/rules/{rule_id}/revoke", data={"csrf": csrf})
        assert answer.status_code == 303
        shown = await carol.get(answer.headers["location"])
        assert "is revoked" in shown.text
        assert re.search(r'id="rule-state">revoked<', shown.text)
        assert 'id="revoke"' not in shown.text
    later = await sealed.submit()
    assert await left_to_people(sealed, later)
    again = await http.post(f"/console/rules/{rule_id}/revoke", data={"csrf": bob})
    assert again.status_code == 409
    assert "already revoked by carol" in again.text


async def test_a_rule_is_shown_only_to_who_may_see_it(sealed: Console, http: httpx.AsyncClient) -> None:
    bob = await sign_in(http, "bob")
    _, rule_id = await _rule(sealed, http, bob)
    async with httpx.AsyncClient(base_url=sealed.base_url, timeout=scaled(20)) as mallory:
        csrf = await sign_in(mallory, "mallory")
        assert rule_id not in (await mallory.get("/console/rules?state=all")).text
        assert (await mallory.get(f"/console/rules/{rule_id}")).status_code == 404
        assert (await mallory.post(f"/console/rules/{rule_id}/revoke", data={"csrf": csrf})).status_code == 404
        assert (await mallory.get("/console/rules/no-such-rule")).status_code == 404
    assert (await sealed.backend.similar_rule(rule_id)).state() == "active"  # type: ignore[union-attr]


async def test_the_rules_pages_need_a_session(http: httpx.AsyncClient) -> None:
    for path in ("/console/rules", "/console/rules/sim_x"):
        assert (await http.get(path)).headers["location"] == "/console/login"
