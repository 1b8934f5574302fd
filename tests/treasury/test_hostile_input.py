"""Malformed input to a real ``serve`` process gets a specific error, never a 500 or a traceback.

Non-finite numbers, integers beyond ±(2^53 - 1), lone surrogates and arguments the tool's input
schema rejects in a call's arguments (nothing opened, the value in no log), deeply nested JSON on
the decide endpoint, and NUL characters in approval ids and comments (which PostgreSQL cannot store).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_approval.protocol import INVALID_PARAMS
from tests.reviewers.conftest import CSRF
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import approval_for

pytestmark = pytest.mark.anyio

#: Nested more deeply than any parser default handles by recursion.
DEEP = "[" * 5000 + "]" * 5000
COMMENT = "secret-comment-text"


def assert_problem(response: httpx.Response, status: int, detail_part: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert detail_part in response.json()["detail"]


def assert_clean_log(server: TreasuryServer, *secrets: str) -> None:
    log = server.log()
    assert "Traceback" not in log
    assert "Exception in ASGI application" not in log
    for secret in secrets:
        assert secret not in log


@pytest.mark.parametrize(
    ("arguments", "path"),
    [
        ({"order": "o-nan", "amount": float("nan")}, "amount"),
        ({"order": "o-inf", "amount": float("inf")}, "amount"),
        ({"order": "o-ninf", "amount": float("-inf")}, "amount"),
        ({"order": "o-nested", "amount": 5, "note": {"lines": [1, float("nan")]}}, "note.lines.1"),
    ],
)
async def test_a_non_finite_argument_is_invalid_params_naming_it(
    treasury: TreasuryServer, http: httpx.AsyncClient, arguments: dict[str, Any], path: str
) -> None:
    # Every refund is requestable: without the check the call would reach the binding digest.
    reply = await principals(http)["alice"].call_tool("refund", arguments)
    assert reply.status == 400  # the transport's status for a JSON-RPC invalid-params error
    assert reply.error["code"] == INVALID_PARAMS
    assert repr(path) in reply.error["message"]
    assert "finite" in reply.error["message"]
    carol = Reviewer(http, "carol-token")
    assert [item for item in await carol.pending() if item["arguments"].get("order") == arguments["order"]] == []
    assert not [entry for entry in treasury.ledger() if entry.get("order") == arguments["order"]]
    assert_clean_log(treasury)


#: 2^53 + 1: JSON peers cannot carry it exactly, and the call binding's canonical form refuses it.
UNSAFE_INTEGER = 9_007_199_254_740_993


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("refund", {"order": "o-big", "amount": UNSAFE_INTEGER}, "'amount' is an integer outside"),
        ("refund", {"order": "o-big-neg", "amount": -UNSAFE_INTEGER}, "'amount' is an integer outside"),
        ("refund", {"order": "o-sur", "amount": 5, "\udc80": None}, "lone surrogate"),
        ("refund", {"order": "o-schema", "amount": "secret-amount-text"}, "'amount' does not match the input schema"),
        ("delete_account", {"acount": "o-missing"}, "'account' is required by the input schema"),
    ],
)
async def test_arguments_that_cannot_be_carried_or_that_the_schema_rejects_are_invalid_params(
    treasury: TreasuryServer, http: httpx.AsyncClient, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    carol = Reviewer(http, "carol-token")
    pending, ledger = await carol.pending(), treasury.ledger()
    reply = await principals(http)["alice"].call_tool(tool, arguments)
    assert reply.error["code"] == INVALID_PARAMS, reply
    assert expected in reply.error["message"]
    assert await carol.pending() == pending  # nothing was opened
    assert treasury.ledger() == ledger
    assert_clean_log(treasury, str(UNSAFE_INTEGER), "secret-amount-text")


async def test_deeply_nested_json_on_decide_is_a_400(treasury: TreasuryServer, http: httpx.AsyncClient) -> None:
    await principals(http)["alice"].call_tool("wire_transfer", {"to": "acct-deep", "amount": 40_000})
    carol = Reviewer(http, "carol-token")
    approval = await approval_for(carol, "wire_transfer", to="acct-deep")
    for body in ('{"decision": "approve", "comment": ' + DEEP + "}", DEEP):
        response = await http.post(
            f"/approvals/{approval['id']}/decide",
            content=body,
            headers={**carol.headers, "content-type": "application/json"},
        )
        assert_problem(response, 400, "levels deep")
    assert (await http.get(f"/approvals/{approval['id']}", headers=carol.headers)).json()["status"] == "pending"
    assert_clean_log(treasury)


async def _nul_checks(server: TreasuryServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
        await principals(http)["alice"].call_tool("wire_transfer", {"to": "acct-nul", "amount": 40_000})
        carol = Reviewer(http, "carol-token")
        approval = await approval_for(carol, "wire_transfer", to="acct-nul")
        assert_problem(await http.get("/approvals/abc%00def", headers=carol.headers), 404, "no such")
        decide_nul = await http.post("/approvals/abc%00def/decide", json={"decision": "approve"}, headers=carol.headers)
        assert_problem(decide_nul, 404, "no such")
        refused = await carol.decide(approval["id"], "approve", f"{COMMENT}\x00")
        assert_problem(refused, 400, "NUL")
        shown = await http.get(f"/approvals/{approval['id']}", headers=carol.headers)
        assert shown.json()["status"] == "pending"
        # The console refuses the same, with a page rather than a 500.
        signed_in = await http.post("/console/login", data={"token": "carol-token"})
        assert signed_in.status_code == 303, signed_in.text
        csrf = CSRF.search((await http.get("/console")).text)
        assert csrf is not None
        assert (await http.get("/console/requests/abc%00def")).status_code == 404
        form = {"csrf": csrf.group(1), "decision": "approve"}
        assert (await http.post("/console/requests/abc%00def/decide", data=form)).status_code == 404
        page = await http.post(f"/console/requests/{approval['id']}/decide", data={**form, "comment": f"{COMMENT}\x00"})
        assert page.status_code == 400
        assert "NUL" in page.text
        shown = await http.get(f"/approvals/{approval['id']}", headers=carol.headers)
        assert shown.json()["status"] == "pending"
    assert_clean_log(server, COMMENT)


async def test_nul_characters_in_ids_and_comments_are_refused(treasury: TreasuryServer) -> None:
    await _nul_checks(treasury)


@pytest.fixture
async def postgres_treasury(tmp_path: Path, postgres_url: str) -> AsyncIterator[TreasuryServer]:
    server = TreasuryServer(deployment_dir(tmp_path), db_url=postgres_url).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.mark.postgres
async def test_nul_characters_are_refused_before_postgresql_sees_them(postgres_treasury: TreasuryServer) -> None:
    await _nul_checks(postgres_treasury)


def test_the_deep_body_really_is_deeper_than_the_parser_recursion_limit() -> None:
    with pytest.raises(RecursionError):
        json.loads(DEEP)
