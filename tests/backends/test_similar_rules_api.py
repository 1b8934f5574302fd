"""The reviewer API's similar-call rules and batch decisions: approving "this, and calls like it",
listing and revoking rules, and deciding several requests with one answer per request."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from mcp_approval.backends import LocalApprovalBackend
from mcp_approval.keyring import BindingCipher
from mcp_approval.reviewers.api import reviewer_routes
from mcp_approval.storage import Database
from tests.backends.conftest import BackendFactory, submission
from tests.backends.test_reviewer_api import assert_problem, authenticate, bearer

pytestmark = pytest.mark.anyio

SEAL = BindingCipher({"k1": os.urandom(32)})
SIMILAR = {"expires_in_s": 600, "max_uses": 3, "principal": "same", "arguments": {"amount": {"range": [0, 500]}}}


@pytest.fixture
async def sealed(make_backend: BackendFactory) -> AsyncIterator[LocalApprovalBackend]:
    backend = make_backend(seal=SEAL)
    await backend.start()
    yield backend
    await backend.stop()


@pytest.fixture
async def http(sealed: LocalApprovalBackend) -> AsyncIterator[httpx.AsyncClient]:
    app = Starlette(routes=reviewer_routes(sealed, authenticate))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://reviewer") as client:
        yield client


async def quietly(database: Database, backend: LocalApprovalBackend, **fields: Any) -> str:
    sub = submission(**fields)
    handle: str = await database.write(lambda conn: backend.submit_in(conn, secrets.token_hex(16), sub))
    return handle


async def test_approve_similar_writes_a_rule_that_decides_the_next_call(
    http: httpx.AsyncClient, sealed: LocalApprovalBackend, database: Database
) -> None:
    first = await sealed.submit(secrets.token_hex(16), submission())
    body = {"decision": "approve", "comment": "invoices to acct-1", "similar": SIMILAR}
    answer = await http.post(f"/approvals/{first}/decide", json=body, headers=bearer("bob"))
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "approved"
    rule = answer.json()["similar_rule"]
    assert (rule["state"], rule["author"], rule["uses"], rule["max_uses"]) == ("active", "bob", 0, 3)
    later = await quietly(database, sealed, arguments={"amount": 480, "to": "acct-1", "secret": "s3cr3t"})
    assert await sealed.decide_by_similar_rules(later) == rule["id"]
    listed = (await http.get("/similar-rules", headers=bearer("carol"))).json()["rules"]
    assert [(r["id"], r["uses"]) for r in listed] == [(rule["id"], 1)]
    assert (await http.get("/similar-rules", headers=bearer("mallory"))).json()["rules"] == []
    assert_problem(await http.get(f"/similar-rules/{rule['id']}", headers=bearer("mallory")), 404)
    revoked = await http.post(f"/similar-rules/{rule['id']}/revoke", headers=bearer("carol"))
    assert revoked.status_code == 200, revoked.text
    assert (revoked.json()["state"], revoked.json()["revoked_by"]) == ("revoked", "carol")
    assert_problem(await http.post(f"/similar-rules/{rule['id']}/revoke", headers=bearer("bob")), 409, "already")
    after = await quietly(database, sealed)
    assert await sealed.decide_by_similar_rules(after) is None
    active = (await http.get("/similar-rules?state=active", headers=bearer("carol"))).json()["rules"]
    assert active == []


@pytest.mark.parametrize(
    ("similar", "status", "detail"),
    [
        ({"max_uses": 3}, 400, "expires_in_s"),
        ({"expires_in_s": 60}, 400, "max_uses"),
        ({**SIMILAR, "principal": "everyone"}, 400, "'same' or 'any'"),
        ({**SIMILAR, "expires_in_s": 10**9}, 400, "lasts at most"),
        ({**SIMILAR, "arguments": {"amount": {"range": [200, 300]}}}, 400, "own value"),
        ({**SIMILAR, "widen": True}, 400, "unknown member"),
        ("yes", 400, "must be an object"),
    ],
)
async def test_a_bad_rule_is_a_clear_400_and_approves_nothing(
    http: httpx.AsyncClient, sealed: LocalApprovalBackend, similar: object, status: int, detail: str
) -> None:
    first = await sealed.submit(secrets.token_hex(16), submission())
    answer = await http.post(
        f"/approvals/{first}/decide", json={"decision": "approve", "similar": similar}, headers=bearer("bob")
    )
    assert_problem(answer, status, detail)
    assert (await http.get(f"/approvals/{first}", headers=bearer("bob"))).json()["status"] == "pending"


async def test_a_denial_cannot_carry_a_rule(http: httpx.AsyncClient, sealed: LocalApprovalBackend) -> None:
    first = await sealed.submit(secrets.token_hex(16), submission())
    answer = await http.post(
        f"/approvals/{first}/decide", json={"decision": "deny", "similar": SIMILAR}, headers=bearer("bob")
    )
    assert_problem(answer, 400, "approval only")


async def test_a_batch_decides_each_request_on_its_own_and_says_why_any_failed(
    http: httpx.AsyncClient, sealed: LocalApprovalBackend
) -> None:
    mine = await sealed.submit(secrets.token_hex(16), submission(requester="bob"))
    open_one = await sealed.submit(secrets.token_hex(16), submission())
    other = await sealed.submit(secrets.token_hex(16), submission(arguments={"amount": 7}))
    done = await sealed.submit(secrets.token_hex(16), submission(arguments={"amount": 8}))
    await sealed.decide(done, "carol", "deny")
    ids = [open_one, mine, "apr_nope", done, other]
    answer = await http.post(
        "/approvals/decide", json={"ids": ids, "decision": "approve", "comment": "batch"}, headers=bearer("bob")
    )
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert answer.json()["decided"] == 2
    assert [(r["id"], r["ok"], r["code"]) for r in results] == [
        (open_one, True, 200),
        (mine, False, 403),
        ("apr_nope", False, 404),
        (done, False, 409),
        (other, True, 200),
    ]
    assert "forbids self-approval" in results[1]["error"]
    assert "denied" in results[3]["error"]
    for handle in (open_one, other):
        record = await sealed.get_request(handle)
        assert record is not None
        assert [(d.reviewer, d.comment) for d in record.decisions] == [("bob", "batch")]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"decision": "approve"}, "'ids'"),
        ({"ids": [], "decision": "approve"}, "'ids'"),
        ({"ids": ["a"] * 101, "decision": "approve"}, "'ids'"),
        ({"ids": [1], "decision": "approve"}, "'ids'"),
        ({"ids": ["a"], "decision": "maybe"}, "'decision'"),
        ({"ids": ["a"], "decision": "approve", "similar": SIMILAR}, "not a batch"),
    ],
)
async def test_a_bad_batch_is_refused_whole(http: httpx.AsyncClient, body: dict[str, Any], detail: str) -> None:
    assert_problem(await http.post("/approvals/decide", json=body, headers=bearer("bob")), 400, detail)
