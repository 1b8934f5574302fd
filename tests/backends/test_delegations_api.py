"""The reviewer API's delegations over real HTTP (SQLite and PostgreSQL): writing one, the delegate
deciding with the record naming both, listing, revoking, and every refusal a specific problem."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette

from mcp_approval.backends import LocalApprovalBackend
from mcp_approval.keyring import BindingCipher
from mcp_approval.reviewers.api import reviewer_routes
from mcp_approval.reviewers.openapi_paths import reviewer_paths
from tests.backends.conftest import BackendFactory, submission
from tests.backends.test_reviewer_api import assert_problem
from tests.support.polling import eventually
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

SEAL = BindingCipher({"k1": os.urandom(32)})


async def authenticate(token: str) -> str | None:
    name, _, rest = token.partition("-")
    return name if rest == "token" else None


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {name}-token"}


@pytest.fixture
async def served(make_backend: BackendFactory) -> AsyncIterator[tuple[httpx.AsyncClient, LocalApprovalBackend]]:
    backend = make_backend(seal=SEAL)
    app = Starlette(routes=reviewer_routes(backend, authenticate))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve())
    await eventually(lambda: _started(server, serving), bool, timeout_s=scaled(10))
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=scaled(20)) as http:
            yield http, backend
    finally:
        server.should_exit = True
        await serving


async def _started(server: uvicorn.Server, serving: asyncio.Task[None]) -> bool:
    if serving.done():
        serving.result()
    return server.started


async def test_delegate_decide_list_and_revoke_over_http(
    served: tuple[httpx.AsyncClient, LocalApprovalBackend],
) -> None:
    http, backend = served
    request = await backend.submit(secrets.token_hex(16), submission())
    assert (await http.get(f"/approvals/{request}", headers=bearer("dave"))).status_code == 404
    made = await http.post(
        "/delegations", json={"delegate": "dave", "template": "single", "duration_s": 3600}, headers=bearer("carol")
    )
    assert made.status_code == 201, made.text
    delegation = made.json()
    assert (delegation["delegator"], delegation["delegate"], delegation["state"]) == ("carol", "dave", "active")
    listed = (await http.get("/approvals", headers=bearer("dave"))).json()["approvals"]
    assert [item["id"] for item in listed] == [request]
    decided = await http.post(f"/approvals/{request}/decide", json={"decision": "approve"}, headers=bearer("dave"))
    assert decided.status_code == 200, decided.text
    assert decided.json()["status"] == "approved"
    (decision,) = decided.json()["decisions"]
    assert (decision["reviewer"], decision["on_behalf_of"]) == ("dave", "carol")
    shown = (await http.get(f"/approvals/{request}", headers=bearer("carol"))).json()
    assert shown["decisions"][0]["on_behalf_of"] == "carol"
    for who in ("carol", "dave"):
        mine = (await http.get("/delegations", headers=bearer(who))).json()["delegations"]
        assert [item["id"] for item in mine] == [delegation["id"]]
    assert (await http.get("/delegations", headers=bearer("bob"))).json()["delegations"] == []
    revoke = f"/delegations/{delegation['id']}/revoke"
    assert_problem(await http.post(revoke, headers=bearer("dave")), 403, "only carol")
    revoked = await http.post(revoke, headers=bearer("carol"))
    assert revoked.status_code == 200, revoked.text
    assert (revoked.json()["state"], revoked.json()["revoked_by"]) == ("revoked", "carol")
    assert_problem(await http.post(revoke, headers=bearer("carol")), 409, "already revoked")
    assert_problem(await http.post("/delegations/dlg_none/revoke", headers=bearer("carol")), 404, "no delegation")
    active = (await http.get("/delegations?state=active", headers=bearer("carol"))).json()["delegations"]
    assert active == []
    later = await backend.submit(secrets.token_hex(16), submission())
    refused = await http.post(f"/approvals/{later}/decide", json={"decision": "approve"}, headers=bearer("dave"))
    assert_problem(refused, 403)


@pytest.mark.parametrize(
    ("body", "who", "status", "detail"),
    [
        ({"delegate": "dave", "template": "single"}, "carol", 400, "'duration_s' is required"),
        ({"delegate": "dave", "template": "single", "duration_s": True}, "carol", 400, "'duration_s'"),
        ({"delegate": "", "template": "single", "duration_s": 60}, "carol", 400, "field 'delegate'"),
        ({"delegate": "dave", "template": 3, "duration_s": 60}, "carol", 400, "field 'template'"),
        ({"delegate": "dave", "template": "single", "duration_s": 60, "x": 1}, "carol", 400, "unknown field 'x'"),
        ({"delegate": "dave", "template": "single", "duration_s": 10**7}, "carol", 400, "delegation_max_s"),
        ({"delegate": "dave", "template": "nope", "duration_s": 60}, "carol", 400, "not configured"),
        ({"delegate": "mallory", "template": "single", "duration_s": 60}, "dave", 403, "in their own right"),
        ({"delegate": "carol", "template": "single", "duration_s": 60}, "carol", 400, "other than the delegator"),
    ],
)
async def test_a_refused_delegation_is_a_specific_problem(
    served: tuple[httpx.AsyncClient, LocalApprovalBackend], body: dict[str, Any], who: str, status: int, detail: str
) -> None:
    http, _ = served
    assert_problem(await http.post("/delegations", json=body, headers=bearer(who)), status, detail)


async def test_delegations_need_a_token_and_json(served: tuple[httpx.AsyncClient, LocalApprovalBackend]) -> None:
    http, _ = served
    assert_problem(await http.get("/delegations"), 401)
    assert_problem(await http.post("/delegations", content=b"x", headers=bearer("carol")), 415)


def test_the_openapi_document_describes_the_delegation_paths() -> None:
    paths = reviewer_paths()
    assert set(paths["/delegations"]) == {"get", "post"}
    assert "201" in paths["/delegations"]["post"]["responses"]
    assert "409" in paths["/delegations/{delegation_id}/revoke"]["post"]["responses"]
