"""The reviewer HTTP API over ASGI: status codes, problem+json bodies, decisions."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette

from mcp_approval.backends import LocalApprovalBackend
from mcp_approval.clock import ManualClock
from mcp_approval.reviewers.api import reviewer_routes
from tests.backends.conftest import submission

pytestmark = pytest.mark.anyio

TOKENS = {"alice-token": "alice", "bob-token": "bob", "carol-token": "carol", "mallory-token": "mallory"}


async def authenticate(token: str) -> str | None:
    return TOKENS.get(token)


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {name}-token"}


@pytest.fixture
async def http(backend: LocalApprovalBackend) -> AsyncIterator[httpx.AsyncClient]:
    app = Starlette(routes=reviewer_routes(backend, authenticate))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://reviewer") as client:
        yield client


def assert_problem(response: httpx.Response, status: int, detail_part: str = "") -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["status"] == status
    assert set(body) >= {"type", "title", "status", "detail"}
    assert detail_part in body["detail"]


async def test_pending_requests_are_listed_and_shown(http: httpx.AsyncClient, backend: LocalApprovalBackend) -> None:
    handle = await backend.submit(secrets.token_urlsafe(32), submission())
    listed = await http.get("/approvals", headers=bearer("bob"))
    assert listed.status_code == 200
    assert [a["id"] for a in listed.json()["approvals"]] == [handle]
    assert listed.json()["approvals"][0]["arguments"]["secret"] == "[redacted]"
    decided = (await http.get("/approvals?status=decided", headers=bearer("bob"))).json()
    assert decided["approvals"] == []
    assert decided["total"] == 0
    shown = await http.get(f"/approvals/{handle}", headers=bearer("bob"))
    assert shown.status_code == 200
    assert shown.json()["status"] == "pending"
    assert shown.json()["tool"] == "transfer"


async def test_a_decision_returns_the_updated_record(http: httpx.AsyncClient, backend: LocalApprovalBackend) -> None:
    handle = await backend.submit(secrets.token_urlsafe(32), submission())
    response = await http.post(
        f"/approvals/{handle}/decide", json={"decision": "approve", "comment": "looks fine"}, headers=bearer("bob")
    )
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "approved"
    assert [(d["reviewer"], d["decision"], d["comment"]) for d in body["decisions"]] == [
        ("bob", "approve", "looks fine")
    ]
    decided = (await http.get("/approvals?status=decided", headers=bearer("bob"))).json()["approvals"]
    assert [a["id"] for a in decided] == [handle]
    # A second decision on a terminal request is a conflict.
    again = await http.post(f"/approvals/{handle}/decide", json={"decision": "deny"}, headers=bearer("carol"))
    assert_problem(again, 409, "approved")


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic YWxpY2U6eA=="}])
async def test_requests_without_a_known_token_are_unauthorized(
    http: httpx.AsyncClient, backend: LocalApprovalBackend, headers: dict[str, str]
) -> None:
    handle = await backend.submit(secrets.token_urlsafe(32), submission())
    for response in (
        await http.get("/approvals", headers=headers),
        await http.get(f"/approvals/{handle}", headers=headers),
        await http.post(f"/approvals/{handle}/decide", json={"decision": "approve"}, headers=headers),
    ):
        assert_problem(response, 401)
        assert response.headers["www-authenticate"] == "Bearer"
    assert (await backend.get_request(handle)).decisions == ()  # type: ignore[union-attr]


async def test_ineligible_reviewers_are_forbidden(http: httpx.AsyncClient, backend: LocalApprovalBackend) -> None:
    handle = await backend.submit(secrets.token_urlsafe(32), submission(requester="alice"))
    own = await http.post(f"/approvals/{handle}/decide", json={"decision": "approve"}, headers=bearer("alice"))
    assert_problem(own, 403, "self-approval")
    no_role = await http.post(f"/approvals/{handle}/decide", json={"decision": "approve"}, headers=bearer("mallory"))
    assert_problem(no_role, 403, "approver")


async def test_unknown_ids_are_not_found(http: httpx.AsyncClient) -> None:
    assert_problem(await http.get("/approvals/nope", headers=bearer("bob")), 404)
    assert_problem(await http.post("/approvals/nope/decide", json={"decision": "deny"}, headers=bearer("bob")), 404)


@pytest.mark.parametrize(
    ("content", "field"),
    [
        (b"{not json", "JSON"),
        (b"[1]", "object"),
        (b"{}", "decision"),
        (b'{"decision": "maybe"}', "decision"),
        (b'{"decision": "approve", "comment": 7}', "comment"),
        (b'{"decision": "approve", "comment": "' + b"x" * 2001 + b'"}', "comment"),
    ],
)
async def test_malformed_decisions_are_bad_requests(
    http: httpx.AsyncClient, backend: LocalApprovalBackend, content: bytes, field: str
) -> None:
    handle = await backend.submit(secrets.token_urlsafe(32), submission())
    response = await http.post(
        f"/approvals/{handle}/decide",
        content=content,
        headers={**bearer("bob"), "Content-Type": "application/json"},
    )
    assert_problem(response, 400, field)
    assert (await backend.get_request(handle)).decisions == ()  # type: ignore[union-attr]


async def test_a_comment_of_2000_characters_is_accepted(http: httpx.AsyncClient, backend: LocalApprovalBackend) -> None:
    handle = await backend.submit(secrets.token_urlsafe(32), submission())
    response = await http.post(
        f"/approvals/{handle}/decide", json={"decision": "deny", "comment": "x" * 2000}, headers=bearer("bob")
    )
    assert response.status_code == 200
    assert response.json()["status"] == "denied"


async def test_a_non_json_body_is_unsupported(http: httpx.AsyncClient, backend: LocalApprovalBackend) -> None:
    handle = await backend.submit(secrets.token_urlsafe(32), submission())
    response = await http.post(
        f"/approvals/{handle}/decide",
        content=b"decision=approve",
        headers={**bearer("bob"), "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert_problem(response, 415)


async def test_a_bad_status_filter_names_the_parameter(http: httpx.AsyncClient) -> None:
    assert_problem(await http.get("/approvals?status=all", headers=bearer("bob")), 400, "status")


async def test_a_decision_after_the_deadline_is_a_conflict(
    http: httpx.AsyncClient, backend: LocalApprovalBackend, clock: ManualClock
) -> None:
    handle = await backend.submit(secrets.token_urlsafe(32), submission(deadline_ms=clock.now_ms() + 100))
    clock.advance(100)
    response = await http.post(f"/approvals/{handle}/decide", json={"decision": "approve"}, headers=bearer("bob"))
    assert_problem(response, 409, "expired")
    assert (await http.get(f"/approvals/{handle}", headers=bearer("bob"))).json()["status"] == "expired"
