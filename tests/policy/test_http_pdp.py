"""HttpPDP against a small in-process AuthZEN server (backed by CedarPDP), and its fail-closed cases."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from mcp_approval.hosts import unused_loopback_port
from mcp_approval.policy import (
    CedarPDP,
    Decision,
    EvaluationRequest,
    EvaluationsRequest,
    EvaluationsSemantic,
    HttpPDP,
    PolicyDecisionPoint,
    evaluate_batch,
)
from mcp_approval.policy.http import batch_body
from tests.policy.conftest import TODO_ENTITIES, TODO_POLICY, interop_decisions
from tests.support.polling import eventually
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

PDP_ID = "https://pdp.test"
RICK = "CiRmZDA2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs"
JERRY = "CiRmZDQ2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs"


def todo_request(subject: str, action: str, owner: str = "rick@the-citadel.com") -> EvaluationRequest:
    return EvaluationRequest.model_validate(
        {
            "subject": {"type": "user", "id": subject},
            "action": {"name": action},
            "resource": {"type": "todo", "id": "t1", "properties": {"ownerID": owner}},
        }
    )


@dataclass
class AuthzenServer:
    """A minimal AuthZEN 1.0 PDP over HTTP, with switchable misbehaviour.

    ``mode``: ``ok``, ``slow``, ``http500``, ``http400``, ``garbage``, ``not-a-decision``,
    ``wrong-request-id``, ``short-batch``.
    """

    pdp: PolicyDecisionPoint
    identifier: str = PDP_ID
    mode: str = "ok"
    batch_endpoint: bool = True
    metadata_identifier: str | None = None
    seen: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)
    released: anyio.Event | None = None  # ends the sleep of slow requests

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/.well-known/authzen-configuration", self.metadata),
                Route("/.well-known/authzen-configuration/{tenant}", self.metadata),
                Route("/access/v1/evaluation", self.evaluation, methods=["POST"]),
                Route("/access/v1/evaluations", self.evaluations, methods=["POST"]),
                Route("/{tenant}/access/v1/evaluation", self.evaluation, methods=["POST"]),
            ]
        )

    async def metadata(self, request: Request) -> Response:
        self.seen.append((request.url.path, dict(request.headers), None))
        base = self.identifier
        document = {
            "policy_decision_point": self.metadata_identifier or base,
            "access_evaluation_endpoint": f"{base}/access/v1/evaluation",
            "capabilities": [],
        }
        if self.batch_endpoint:
            document["access_evaluations_endpoint"] = f"{base}/access/v1/evaluations"
        return JSONResponse(document)

    async def evaluation(self, request: Request) -> Response:
        body = await request.json()
        self.seen.append((request.url.path, dict(request.headers), body))
        misbehaviour = await self._misbehave(request)
        if misbehaviour is not None:
            return misbehaviour
        decision = await self.pdp.evaluate(EvaluationRequest.model_validate(body))
        return self._answer(request, decision.to_wire())

    async def evaluations(self, request: Request) -> Response:
        body = await request.json()
        self.seen.append((request.url.path, dict(request.headers), body))
        misbehaviour = await self._misbehave(request)
        if misbehaviour is not None:
            return misbehaviour
        batch = EvaluationsRequest.model_validate(body)
        decisions = [d.to_wire() for d in await evaluate_batch(self.pdp, batch)]
        if self.mode == "short-batch":
            decisions = decisions[:-1]
        return self._answer(request, {"evaluations": decisions} if batch.evaluations else decisions[0])

    async def _misbehave(self, request: Request) -> Response | None:
        if self.mode == "slow":
            self.released = self.released or anyio.Event()
            with anyio.move_on_after(30):
                await self.released.wait()
        if self.mode == "http500":
            return PlainTextResponse("internal error", status_code=500)
        if self.mode == "http400":
            return PlainTextResponse("missing subject", status_code=400)
        if self.mode == "garbage":
            return self._answer(request, None, raw=b"<html>not json")
        if self.mode == "not-a-decision":
            return self._answer(request, {"decision": "yes"})
        return None

    def _answer(self, request: Request, document: Any, raw: bytes | None = None) -> Response:
        request_id = request.headers.get("x-request-id", "")
        if self.mode == "wrong-request-id":
            request_id = "someone-else"
        content = raw if raw is not None else json.dumps(document).encode()
        return Response(content, media_type="application/json", headers={"X-Request-ID": request_id})


@pytest.fixture
def todo_cedar() -> CedarPDP:
    return CedarPDP.from_files(TODO_POLICY, TODO_ENTITIES)


@pytest.fixture
def server(todo_cedar: CedarPDP) -> AuthzenServer:
    return AuthzenServer(todo_cedar)


@pytest.fixture
async def http_client(server: AuthzenServer) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=server.app())) as client:
        yield client


def remote(client: httpx2.AsyncClient, **options: Any) -> HttpPDP:
    return HttpPDP(PDP_ID, client=client, **options)


async def test_todo_interop_over_http(http_client: httpx2.AsyncClient, server: AuthzenServer):
    cases = interop_decisions()
    pdp = remote(http_client)
    passed = 0
    for case in cases["evaluation"]:
        decision = await pdp.evaluate(EvaluationRequest.model_validate(case["request"]))
        passed += decision.to_wire() == {"decision": case["expected"]}
    for case in cases["evaluations"]:
        requests = [r for r in EvaluationsRequest.model_validate(case["request"]).resolve()]
        decisions = await pdp.evaluate_many([r for r in requests if isinstance(r, EvaluationRequest)])
        passed += [d.to_wire() for d in decisions] == case["expected"]
    assert passed == 43
    discovery = [path for path, _, _ in server.seen if "well-known" in path]
    assert discovery == ["/.well-known/authzen-configuration"]  # discovered once


async def test_request_id_is_sent_and_checked(http_client: httpx2.AsyncClient, server: AuthzenServer):
    pdp = remote(http_client)
    decision = await pdp.evaluate(todo_request(RICK, "can_read_todos"), request_id="req-123")
    assert decision.decision is True
    path, headers, _ = server.seen[-1]
    assert (path, headers["x-request-id"]) == ("/access/v1/evaluation", "req-123")
    await pdp.evaluate(todo_request(RICK, "can_read_todos"))
    assert server.seen[-1][1]["x-request-id"] not in {"", "req-123"}  # a fresh id per request

    server.mode = "wrong-request-id"
    decision = await pdp.evaluate(todo_request(RICK, "can_read_todos"))
    assert decision.decision is False
    assert decision.reason == "pdp_invalid_response"


async def test_batch_hoists_shared_members(http_client: httpx2.AsyncClient, server: AuthzenServer):
    pdp = remote(http_client)
    requests = [todo_request(JERRY, "can_read_todos"), todo_request(JERRY, "can_delete_todo")]
    decisions = await pdp.evaluate_many(requests, request_id="batch-1")
    assert [d.decision for d in decisions] == [True, False]
    path, headers, body = server.seen[-1]
    assert path == "/access/v1/evaluations"
    assert headers["x-request-id"] == "batch-1"
    assert body["subject"] == {"type": "user", "id": JERRY}
    assert body["resource"]["id"] == "t1"
    assert body["evaluations"] == [{"action": {"name": "can_read_todos"}}, {"action": {"name": "can_delete_todo"}}]
    assert "options" not in body


async def test_batch_semantics_travel_and_short_answers_are_accepted(
    http_client: httpx2.AsyncClient, server: AuthzenServer
):
    pdp = remote(http_client)
    requests = [todo_request(JERRY, "can_read_todos"), todo_request(JERRY, "can_delete_todo")] * 2
    decisions = await pdp.evaluate_many(requests, EvaluationsSemantic.DENY_ON_FIRST_DENY)
    assert [d.decision for d in decisions] == [True, False]
    assert server.seen[-1][2]["options"] == {"evaluations_semantic": "deny_on_first_deny"}


def test_batch_body_keeps_differing_members_per_item():
    a = todo_request(RICK, "can_read_todos")
    b = todo_request(JERRY, "can_read_todos").with_context({"x": 1})
    body = batch_body([a, b], EvaluationsSemantic.PERMIT_ON_FIRST_PERMIT)
    assert set(body) == {"action", "resource", "evaluations", "options"}
    assert body["evaluations"][0] == {"subject": {"type": "user", "id": RICK}}
    assert body["evaluations"][1] == {"subject": {"type": "user", "id": JERRY}, "context": {"x": 1}}


async def test_without_a_batch_endpoint_a_batch_runs_as_singles(http_client: httpx2.AsyncClient, server: AuthzenServer):
    server.batch_endpoint = False
    decisions = await remote(http_client).evaluate_many(
        [todo_request(RICK, "can_delete_todo"), todo_request(JERRY, "can_delete_todo")]
    )
    assert [d.decision for d in decisions] == [True, False]
    assert [path for path, _, _ in server.seen[1:]] == ["/access/v1/evaluation"] * 2


async def test_tenant_path_discovery(server: AuthzenServer):
    server.identifier = "https://pdp.test/tenant-a"
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=server.app())) as client:
        pdp = HttpPDP("https://pdp.test/tenant-a/", client=client)
        assert pdp.well_known_url == "https://pdp.test/.well-known/authzen-configuration/tenant-a"
        assert (await pdp.evaluate(todo_request(RICK, "can_read_todos"))).decision is True
    assert server.seen[0][0] == "/.well-known/authzen-configuration/tenant-a"
    assert server.seen[1][0] == "/tenant-a/access/v1/evaluation"


async def test_metadata_for_another_pdp_is_discarded_then_retried(
    http_client: httpx2.AsyncClient, server: AuthzenServer
):
    server.metadata_identifier = "https://evil.test"
    pdp = remote(http_client)
    decision = await pdp.evaluate(todo_request(RICK, "can_read_todos"))
    assert decision.decision is False
    assert decision.reason == "pdp_invalid_response"
    assert decision.requestable_denial is None
    server.metadata_identifier = None
    assert (await pdp.evaluate(todo_request(RICK, "can_read_todos"))).decision is True


async def test_metadata_endpoints_must_be_https(http_client: httpx2.AsyncClient, server: AuthzenServer):
    server.identifier = "http://pdp.test"
    server.metadata_identifier = PDP_ID
    decision = await remote(http_client).evaluate(todo_request(RICK, "can_read_todos"))
    assert decision.decision is False
    assert decision.reason == "pdp_invalid_response"
    with pytest.raises(ValueError, match="https"):
        HttpPDP("http://pdp.example.com")
    HttpPDP("http://127.0.0.1:9", discovery=False)  # loopback may be plain http
    HttpPDP("http://pdp.example.com", allow_insecure_http=True)


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("http500", "pdp_unavailable"),
        ("http400", "pdp_error"),
        ("garbage", "pdp_invalid_response"),
        ("not-a-decision", "pdp_invalid_response"),
    ],
)
async def test_fails_closed_on_bad_answers(
    http_client: httpx2.AsyncClient, server: AuthzenServer, mode: str, reason: str
):
    pdp = remote(http_client)
    assert (await pdp.evaluate(todo_request(RICK, "can_read_todos"))).decision is True
    server.mode = mode
    decision = await pdp.evaluate(todo_request(RICK, "can_read_todos"))
    assert decision.decision is False
    assert decision.reason == reason
    assert decision.requestable_denial is None
    batch = await pdp.evaluate_many([todo_request(RICK, "can_read_todos")] * 3)
    assert [(d.decision, d.reason) for d in batch] == [(False, reason)] * 3


async def test_fails_closed_on_timeout(http_client: httpx2.AsyncClient, server: AuthzenServer):
    pdp = remote(http_client, timeout_s=0.2)
    assert (await pdp.evaluate(todo_request(RICK, "can_read_todos"))).decision is True
    server.mode = "slow"
    started = time.monotonic()
    decision = await pdp.evaluate(todo_request(RICK, "can_read_todos"))
    assert time.monotonic() - started < 5
    assert (decision.decision, decision.reason) == (False, "pdp_unavailable")
    batch = await pdp.evaluate_many([todo_request(RICK, "can_read_todos")] * 2, EvaluationsSemantic.DENY_ON_FIRST_DENY)
    assert [(d.decision, d.reason) for d in batch] == [(False, "pdp_unavailable")]


async def test_a_batch_answer_of_the_wrong_length_fails_closed(http_client: httpx2.AsyncClient, server: AuthzenServer):
    server.mode = "short-batch"
    decisions = await remote(http_client).evaluate_many([todo_request(RICK, "can_read_todos")] * 2)
    assert [(d.decision, d.reason) for d in decisions] == [(False, "pdp_invalid_response")] * 2


async def test_a_requestable_denial_crosses_http_intact():
    policy = """
    @requestable("manager_approval")
    forbid (principal, action, resource == tool::"deploy") unless { context has approval };
    permit (principal, action, resource);
    """
    server = AuthzenServer(CedarPDP(policy))
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=server.app())) as client:
        request = EvaluationRequest.model_validate(
            {
                "subject": {"type": "user", "id": "a"},
                "action": {"name": "tools/call"},
                "resource": {"type": "tool", "id": "deploy"},
            }
        )
        decision = await remote(client).evaluate(request)
    denial = decision.requestable_denial
    assert denial is not None
    assert denial.access_request.template == "manager_approval"


def _started(uvicorn_server: uvicorn.Server) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return uvicorn_server.started

    return probe


async def test_fails_closed_when_nothing_listens():
    async with HttpPDP(f"http://127.0.0.1:{unused_loopback_port()}", timeout_s=2) as pdp:
        decision = await pdp.evaluate(todo_request(RICK, "can_read_todos"))
        batch = await pdp.evaluate_many([todo_request(RICK, "can_read_todos")] * 2)
    assert (decision.decision, decision.reason) == (False, "pdp_unavailable")
    assert "ConnectError" in str((decision.context or {}).get("detail"))
    assert [d.decision for d in batch] == [False, False]


@pytest.fixture
async def real_server(server: AuthzenServer) -> AsyncIterator[str]:
    """The AuthZEN server on a real socket (uvicorn on 127.0.0.1)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.identifier = url
    config = uvicorn.Config(server.app(), lifespan="off", log_level="warning")
    uvicorn_server = uvicorn.Server(config)
    task = asyncio.create_task(uvicorn_server.serve(sockets=[sock]))
    try:
        await eventually(_started(uvicorn_server), bool, timeout_s=scaled(10))
        yield url
    finally:
        if server.released is not None:
            server.released.set()
        uvicorn_server.should_exit = True
        await task
        sock.close()


async def test_real_socket_round_trip_and_read_timeout(real_server: str, server: AuthzenServer):
    async with HttpPDP(real_server, timeout_s=0.3) as pdp:
        allowed = await pdp.evaluate(todo_request(RICK, "can_update_todo", owner="jerry@the-smiths.com"))
        denied = await pdp.evaluate(todo_request(JERRY, "can_update_todo", owner="jerry@the-smiths.com"))
        assert (allowed.to_wire(), denied.to_wire()) == ({"decision": True}, {"decision": False})
        server.mode = "slow"
        timed_out = await pdp.evaluate(todo_request(RICK, "can_read_todos"))
    assert (timed_out.decision, timed_out.reason) == (False, "pdp_unavailable")


def test_fail_closed_decision_shape():
    assert Decision.deny("pdp_unavailable", detail="x").to_wire() == {
        "decision": False,
        "context": {"reason": "pdp_unavailable", "detail": "x"},
    }
