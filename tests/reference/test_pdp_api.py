"""The reference AuthZEN PDP (``mcp_approval.reference.pdp_app``) over real HTTP.

Every server here is uvicorn on a 127.0.0.1 socket in a background thread (started with
``tests.support.oauth_server.serve_app``, which waits on uvicorn's startup event, not a sleep);
the requests are real HTTP (``httpx`` for raw wire checks, the project's ``HttpPDP`` as a client).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from mcp_approval.policy import (
    CedarPDP,
    Decision,
    EvaluationRequest,
    EvaluationsSemantic,
    HttpPDP,
    PolicyDecisionPoint,
)
from mcp_approval.reference import ACCESS_REQUEST_CAPABILITY, pdp_app
from tests.policy.conftest import INTEROP_DECISIONS, TODO_ENTITIES, TODO_POLICY, TODO_SCHEMA, interop_decisions
from tests.support.oauth_server import bound_socket, origin, serve_app
from tests.support.timing import scaled

RICK = "CiRmZDA2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs"  # admin, evil_genius
MORTY = "CiRmZDE2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs"  # editor
BETH = "CiRmZDM2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs"  # viewer
EVALUATION = "/access/v1/evaluation"
EVALUATIONS = "/access/v1/evaluations"
PROBLEM_JSON = "application/problem+json"
ARS = "https://ars.example.com/access/v1/requests"

Serve = Callable[..., str]


def subject(pid: str) -> dict[str, Any]:
    return {"type": "user", "id": pid}


def action(name: str) -> dict[str, Any]:
    return {"name": name}


def todo(owner: str = "rick@the-citadel.com", todo_id: str = "t1") -> dict[str, Any]:
    return {"type": "todo", "id": todo_id, "properties": {"ownerID": owner}}


def request_body(pid: str, name: str, owner: str = "rick@the-citadel.com") -> dict[str, Any]:
    return {"subject": subject(pid), "action": action(name), "resource": todo(owner)}


class RecordingPDP:
    """A ``PolicyDecisionPoint`` that forwards to another and records what reached it."""

    def __init__(self, inner: PolicyDecisionPoint) -> None:
        self.inner = inner
        self.calls: list[tuple[str, list[EvaluationRequest], EvaluationsSemantic | None]] = []

    async def evaluate(self, request: EvaluationRequest) -> Decision:
        self.calls.append(("evaluate", [request], None))
        return await self.inner.evaluate(request)

    async def evaluate_many(
        self,
        requests: Sequence[EvaluationRequest],
        semantic: EvaluationsSemantic = EvaluationsSemantic.EXECUTE_ALL,
    ) -> list[Decision]:
        self.calls.append(("evaluate_many", list(requests), semantic))
        return await self.inner.evaluate_many(requests, semantic)


class BrokenPDP:
    """A ``PolicyDecisionPoint`` that breaks its contract by raising."""

    async def evaluate(self, request: EvaluationRequest) -> Decision:
        raise RuntimeError("policy store unreachable")

    async def evaluate_many(
        self,
        requests: Sequence[EvaluationRequest],
        semantic: EvaluationsSemantic = EvaluationsSemantic.EXECUTE_ALL,
    ) -> list[Decision]:
        raise RuntimeError("policy store unreachable")


def todo_cedar(*, schema: bool = False) -> CedarPDP:
    """The Todo PDP of examples/authzen-todo; the schema also rejects unknown actions and context members."""
    return CedarPDP.from_files(TODO_POLICY, TODO_ENTITIES, TODO_SCHEMA if schema else None)


@pytest.fixture(scope="module")
def serve() -> Iterator[Serve]:
    """Start ``pdp_app(pdp, base_url=<origin><path>, ...)`` on a fresh socket; answers its base URL."""
    with ExitStack() as stack:

        def start(pdp: PolicyDecisionPoint, path: str = "", **options: Any) -> str:
            sock = bound_socket()
            base_url = origin(sock) + path
            stack.enter_context(serve_app(pdp_app(pdp, base_url=base_url, **options), sock))
            return base_url

        yield start


@pytest.fixture(scope="module")
def recorder() -> RecordingPDP:
    return RecordingPDP(todo_cedar())


@pytest.fixture(scope="module")
def base_url(serve: Serve, recorder: RecordingPDP) -> str:
    """The Todo PDP (Cedar, examples/authzen-todo, no schema) at the host root."""
    return serve(recorder)


@pytest.fixture(scope="module")
def http(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=scaled(10)) as client:
        yield client


def post(http: httpx.Client, path: str, body: Any, **headers: str) -> httpx.Response:
    return http.post(path, json=body, headers=headers)


def decisions_of(response: httpx.Response) -> list[bool]:
    assert response.status_code == 200, response.text
    return [item["decision"] for item in response.json()["evaluations"]]


# -- metadata ----------------------------------------------------------------------------------


def test_metadata_document(http: httpx.Client, base_url: str):
    response = http.get("/.well-known/authzen-configuration")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "policy_decision_point": base_url,
        "access_evaluation_endpoint": base_url + EVALUATION,
        "access_evaluations_endpoint": base_url + EVALUATIONS,
    }


def test_tenant_path_metadata_with_an_access_request_endpoint(serve: Serve):
    url = serve(todo_cedar(), "/tenant-a", access_request_endpoint=ARS)
    root = url.removesuffix("/tenant-a")
    with httpx.Client(base_url=root, timeout=scaled(10)) as client:
        document = client.get("/.well-known/authzen-configuration/tenant-a").json()
        assert client.get("/.well-known/authzen-configuration").status_code == 404
        assert client.post(EVALUATION, json=request_body(RICK, "can_read_todos")).status_code == 404
        tenant_answer = client.post("/tenant-a" + EVALUATION, json=request_body(RICK, "can_read_todos"))
    assert document == {
        "policy_decision_point": url,
        "access_evaluation_endpoint": url + EVALUATION,
        "access_evaluations_endpoint": url + EVALUATIONS,
        "access_request_endpoint": ARS,
        "capabilities": [ACCESS_REQUEST_CAPABILITY],
    }
    assert tenant_answer.json() == {"decision": True}


@pytest.mark.parametrize("base", ["127.0.0.1:8080", "ftp://host", "http://host/?q=1", "http://host/#f", "/relative"])
def test_a_base_url_that_is_not_an_identifier_is_refused(base: str):
    with pytest.raises(ValueError, match="base_url"):
        pdp_app(todo_cedar(), base_url=base)


# -- single evaluation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (request_body(BETH, "can_read_todos"), True),
        (request_body(BETH, "can_create_todo"), False),
        (request_body(MORTY, "can_update_todo", owner="morty@the-citadel.com"), True),
        (request_body(MORTY, "can_update_todo"), False),
        (request_body(RICK, "can_delete_todo", owner="morty@the-citadel.com"), True),
    ],
)
def test_single_evaluation(http: httpx.Client, body: dict[str, Any], expected: bool):
    response = post(http, EVALUATION, body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"decision": expected}


def test_unknown_members_are_ignored(http: httpx.Client):
    body = {**request_body(BETH, "can_read_todos"), "future_member": [1]}
    body["subject"] = {**body["subject"], "extra": True}
    assert post(http, EVALUATION, body).json() == {"decision": True}


def test_the_request_reaches_the_pdp_unchanged(http: httpx.Client, recorder: RecordingPDP):
    body = {**request_body(MORTY, "can_read_todos"), "context": {"nested": {"n": None, "x": [1, 2]}}}
    post(http, EVALUATION, body)
    kind, requests, _ = recorder.calls[-1]
    assert (kind, [r.to_wire() for r in requests]) == ("evaluate", [body])


# -- batch evaluation --------------------------------------------------------------------------


def test_batch_defaults_are_merged_into_items(http: httpx.Client, recorder: RecordingPDP):
    body = {
        "subject": subject(MORTY),
        "action": action("can_update_todo"),
        "resource": todo("morty@the-citadel.com"),
        "context": {"default": True},
        "evaluations": [
            {},
            {"resource": todo("rick@the-citadel.com", "t2")},
            {"subject": subject(RICK), "context": {"item": 1}},
            {"action": action("can_delete_todo")},
        ],
    }
    response = post(http, EVALUATIONS, body)
    assert decisions_of(response) == [True, False, True, True]
    kind, requests, semantic = recorder.calls[-1]
    assert (kind, semantic) == ("evaluate_many", EvaluationsSemantic.EXECUTE_ALL)  # one call for a clean batch
    default = request_body(MORTY, "can_update_todo", owner="morty@the-citadel.com") | {"context": {"default": True}}
    assert [r.to_wire() for r in requests] == [
        default,
        default | {"resource": todo("rick@the-citadel.com", "t2")},
        default | {"subject": subject(RICK), "context": {"item": 1}},  # an item replaces a default whole
        default | {"action": action("can_delete_todo")},
    ]


READ, CREATE = action("can_read_todos"), action("can_create_todo")


@pytest.mark.parametrize(
    ("semantic", "actions", "expected"),
    [
        (None, [READ, CREATE, READ], [True, False, True]),
        ("execute_all", [READ, CREATE, READ], [True, False, True]),
        ("deny_on_first_deny", [READ, CREATE, READ], [True, False]),
        ("deny_on_first_deny", [READ, READ], [True, True]),
        ("permit_on_first_permit", [READ, CREATE, READ], [True]),
        ("permit_on_first_permit", [CREATE, READ, CREATE], [False, True]),
        ("permit_on_first_permit", [CREATE, CREATE], [False, False]),
    ],
)
def test_batch_semantics(http: httpx.Client, semantic: str | None, actions: list[Any], expected: list[bool]):
    body: dict[str, Any] = {
        "subject": subject(BETH),
        "resource": todo(),
        "evaluations": [{"action": a} for a in actions],
    }
    if semantic is not None:
        body["options"] = {"evaluations_semantic": semantic, "unknown_option": 1}
    assert decisions_of(post(http, EVALUATIONS, body)) == expected


def test_per_item_errors_keep_cardinality_and_order(http: httpx.Client):
    body = {
        "subject": subject(BETH),
        "action": action("can_read_todos"),
        "options": {"evaluations_semantic": "execute_all"},
        "evaluations": [
            {"resource": todo()},
            {},  # no resource anywhere
            {"resource": todo(), "subject": "beth"},  # ill-typed
            5,  # not an object
            {"resource": {}},  # resource without type and id
            {"resource": todo("x", "t9")},
        ],
    }
    response = post(http, EVALUATIONS, body)
    items = response.json()["evaluations"]
    assert [item["decision"] for item in items] == [True, False, False, False, False, True]
    errors = {index: items[index]["context"] for index in (1, 2, 3, 4)}
    assert all(context["reason"] == "invalid_request" for context in errors.values())
    assert errors[1]["error"] == "evaluation 1 has no resource"
    assert errors[2]["error"].startswith("evaluation 2 is ill-formed: subject")
    assert errors[3]["error"].startswith("evaluation 3 is ill-formed")
    assert errors[4]["error"].startswith("evaluation 4 is ill-formed: resource.type")
    assert "context" not in items[0]


@pytest.mark.parametrize(
    ("semantic", "expected"),
    [("deny_on_first_deny", [True, False]), ("permit_on_first_permit", [True])],
)
def test_item_errors_are_denies_for_the_semantics(http: httpx.Client, semantic: str, expected: list[bool]):
    body = {
        "subject": subject(BETH),
        "action": action("can_read_todos"),
        "options": {"evaluations_semantic": semantic},
        "evaluations": [{"resource": todo()}, {}, {"resource": todo()}],
    }
    assert decisions_of(post(http, EVALUATIONS, body)) == expected
    body["evaluations"] = [{}, {"resource": todo()}]
    first = [False] if semantic == "deny_on_first_deny" else [False, True]
    assert decisions_of(post(http, EVALUATIONS, body)) == first


@pytest.mark.parametrize("evaluations", [None, []])
def test_a_batch_without_evaluations_is_a_single_evaluation(http: httpx.Client, evaluations: list[Any] | None):
    body: dict[str, Any] = request_body(BETH, "can_read_todos")
    if evaluations is not None:
        body["evaluations"] = evaluations
    response = post(http, EVALUATIONS, body)
    assert (response.status_code, response.json()) == (200, {"decision": True})
    del body["resource"]
    response = post(http, EVALUATIONS, body)
    assert response.status_code == 400
    assert "resource" in response.json()["detail"]


# -- X-Request-ID ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "content", "content_type", "status"),
    [
        ("GET", "/.well-known/authzen-configuration", None, None, 200),
        ("POST", EVALUATION, b'{"subject":{"type":"user","id":"x"},"action":{"name":"a"},"resource":{}}', None, 400),
        ("POST", EVALUATION, b"{}", "text/plain", 400),
        ("POST", EVALUATIONS, b'{"evaluations":[{}]}', None, 200),
        ("GET", "/nowhere", None, None, 404),
        ("GET", EVALUATION, None, None, 405),
    ],
)
def test_request_id_is_echoed_on_every_response(
    http: httpx.Client, method: str, path: str, content: bytes | None, content_type: str | None, status: int
):
    headers = {"X-Request-ID": "req-7f3a b", "Content-Type": content_type or "application/json"}
    response = http.request(method, path, content=content, headers=headers)
    assert response.status_code == status
    assert response.headers["x-request-id"] == "req-7f3a b"
    without = http.request(method, path, content=content, headers={"Content-Type": headers["Content-Type"]})
    assert without.status_code == status
    assert "x-request-id" not in without.headers


def test_single_evaluation_echoes_request_id(http: httpx.Client):
    response = post(http, EVALUATION, request_body(BETH, "can_read_todos"), **{"X-Request-ID": "0123"})
    assert (response.json(), response.headers["x-request-id"]) == ({"decision": True}, "0123")


# -- 400 ---------------------------------------------------------------------------------------

VALID = request_body(BETH, "can_read_todos")
BAD_BODIES: list[tuple[str, bytes, str]] = [
    ("malformed", b'{"subject": ', "not valid JSON"),
    ("empty", b"", "empty"),
    ("array", b"[]", "JSON object"),
    ("null", b"null", "JSON object"),
    ("string", b'"hello"', "JSON object"),
    ("nan", b'{"subject": NaN}', "not valid JSON"),
    ("no-subject", httpx.Request("POST", "/", json={**VALID, "subject": None}).content, "subject"),
    ("no-action", httpx.Request("POST", "/", json={"subject": VALID["subject"], "resource": todo()}).content, "action"),
    ("no-resource", httpx.Request("POST", "/", json={k: VALID[k] for k in ("subject", "action")}).content, "resource"),
    ("subject-no-type", httpx.Request("POST", "/", json={**VALID, "subject": {"id": "x"}}).content, "subject.type"),
    ("subject-no-id", httpx.Request("POST", "/", json={**VALID, "subject": {"type": "u"}}).content, "subject.id"),
    ("action-no-name", httpx.Request("POST", "/", json={**VALID, "action": {}}).content, "action.name"),
    ("resource-no-id", httpx.Request("POST", "/", json={**VALID, "resource": {"type": "t"}}).content, "resource.id"),
    ("subject-string", httpx.Request("POST", "/", json={**VALID, "subject": "alice"}).content, "subject"),
    ("name-number", httpx.Request("POST", "/", json={**VALID, "action": {"name": 123}}).content, "action.name"),
    ("context-array", httpx.Request("POST", "/", json={**VALID, "context": []}).content, "context"),
]


@pytest.mark.parametrize("path", [EVALUATION, EVALUATIONS])
@pytest.mark.parametrize(("case", "content", "detail"), BAD_BODIES, ids=[case for case, _, _ in BAD_BODIES])
def test_ill_formed_requests_are_400(http: httpx.Client, path: str, case: str, content: bytes, detail: str):
    response = http.post(path, content=content, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.headers["content-type"] == PROBLEM_JSON
    problem = response.json()
    assert (problem["status"], problem["title"]) == (400, "Bad Request")
    assert detail in problem["detail"]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"evaluations": "all"}, "evaluations: must be an array"),
        ({"evaluations": [{}], "options": {"evaluations_semantic": "first_wins"}}, "evaluations_semantic"),
        ({"evaluations": [{}], "options": "fast"}, "options"),
        ({"subject": {"type": "user"}, "evaluations": [{}]}, "subject.id"),
        ({"context": "ctx", "evaluations": [{}]}, "context"),
    ],
)
def test_ill_formed_batch_top_level_is_400(http: httpx.Client, body: dict[str, Any], detail: str):
    response = post(http, EVALUATIONS, body)
    assert response.status_code == 400
    assert detail in response.json()["detail"]


@pytest.mark.parametrize("path", [EVALUATION, EVALUATIONS])
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "", "application/xml"])
def test_a_non_json_content_type_is_400(http: httpx.Client, path: str, content_type: str):
    content = httpx.Request("POST", "/", json=VALID).content
    response = http.post(path, content=content, headers={"Content-Type": content_type} if content_type else {})
    assert response.status_code == 400
    assert response.headers["content-type"] == PROBLEM_JSON
    assert response.json()["status"] == 400


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON", "application/x+json"])
def test_json_content_types_are_accepted(http: httpx.Client, content_type: str):
    content = httpx.Request("POST", "/", json=VALID).content
    response = http.post(EVALUATION, content=content, headers={"Content-Type": content_type})
    assert (response.status_code, response.json()) == (200, {"decision": True})


# -- a failing PDP -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_failing_pdp_fails_closed_with_500(serve: Serve):
    url = serve(BrokenPDP())
    batch = {"subject": subject(BETH), "resource": todo(), "evaluations": [{"action": READ}, {"action": CREATE}]}
    mixed = {**batch, "evaluations": [{}, {"action": READ}]}  # an item error, then a PDP call
    async with httpx.AsyncClient(base_url=url, timeout=scaled(10)) as client:
        answers = [
            await client.post(EVALUATION, json=VALID, headers={"X-Request-ID": "r1"}),
            await client.post(EVALUATIONS, json=batch, headers={"X-Request-ID": "r2"}),
            await client.post(EVALUATIONS, json=mixed, headers={"X-Request-ID": "r3"}),
            await client.post(EVALUATIONS, json=VALID, headers={"X-Request-ID": "r4"}),
        ]
    for number, response in enumerate(answers, 1):
        assert response.status_code == 500
        assert response.headers["content-type"] == PROBLEM_JSON
        assert response.headers["x-request-id"] == f"r{number}"
        assert "decision" not in response.json()
        assert "unreachable" not in response.text  # the exception text is logged, not sent
    async with HttpPDP(url) as pdp:
        decision = await pdp.evaluate(EvaluationRequest.model_validate(VALID))
    assert (decision.decision, decision.reason) == (False, "pdp_unavailable")


# -- the project's client ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_http_pdp_discovers_and_evaluates(base_url: str, recorder: RecordingPDP):
    requests = [
        EvaluationRequest.model_validate(request_body(BETH, name))
        for name in ("can_read_todos", "can_create_todo", "can_read_todos")
    ]
    async with HttpPDP(base_url) as pdp:
        metadata = await pdp.metadata()
        single = await pdp.evaluate(requests[0], request_id="client-1")
        denied = await pdp.evaluate(requests[1])
        calls_before = len(recorder.calls)
        batch = await pdp.evaluate_many(requests, request_id="client-2")
        batch_calls = recorder.calls[calls_before:]
        deny_first = await pdp.evaluate_many(requests, EvaluationsSemantic.DENY_ON_FIRST_DENY)
        permit_first = await pdp.evaluate_many(requests[1:], EvaluationsSemantic.PERMIT_ON_FIRST_PERMIT)
    assert metadata.access_evaluations_endpoint == base_url + EVALUATIONS
    assert (single.to_wire(), denied.to_wire()) == ({"decision": True}, {"decision": False})
    assert [d.decision for d in batch] == [True, False, True]
    assert [(kind, reqs) for kind, reqs, _ in batch_calls] == [("evaluate_many", requests)]  # one batch exchange
    assert [d.decision for d in deny_first] == [True, False]
    assert [d.decision for d in permit_first] == [False, True]


@pytest.mark.anyio
async def test_http_pdp_discovers_a_tenant_pdp(serve: Serve):
    url = serve(todo_cedar(), "/tenants/t-1", access_request_endpoint=ARS)
    async with HttpPDP(url) as pdp:
        metadata = await pdp.metadata()
        decisions = await pdp.evaluate_many(
            [EvaluationRequest.model_validate(request_body(RICK, name)) for name in ("can_delete_todo", "nope")]
        )
    assert (metadata.policy_decision_point, metadata.access_request_endpoint) == (url, ARS)
    assert [d.to_wire() for d in decisions] == [{"decision": True}, {"decision": False}]


@pytest.mark.anyio
async def test_a_requestable_denial_crosses_http_intact(serve: Serve):
    policy = """
    @requestable("manager_approval")
    forbid (principal, action, resource == tool::"deploy") unless { context has approval };
    permit (principal, action, resource);
    """
    url = serve(CedarPDP(policy))
    request = EvaluationRequest.model_validate(
        {"subject": subject("alice"), "action": action("tools/call"), "resource": {"type": "tool", "id": "deploy"}}
    )
    async with HttpPDP(url) as pdp:
        single = await pdp.evaluate(request)
        other_tool = request.to_wire() | {"resource": {"type": "tool", "id": "read"}}
        (in_batch, other) = await pdp.evaluate_many([request, EvaluationRequest.model_validate(other_tool)])
    for decision in (single, in_batch):
        denial = decision.requestable_denial
        assert denial is not None
        assert (denial.reason, denial.access_request.template) == ("approval_required", "manager_approval")
    assert other.decision is True


# -- the AuthZEN Todo interop set --------------------------------------------------------------


def interop_cases(kind: str) -> list[Any]:
    """The interop cases of ``kind``; without the shared data one placeholder, whose test then
    skips (or fails under ``MCP_APPROVAL_REQUIRE_SERVICES=1``) through ``interop_decisions()``."""
    if not INTEROP_DECISIONS.is_file():
        return [pytest.param(None, id="interop-data-missing")]
    return interop_decisions()[kind]


def case_id(case: dict[str, Any]) -> str:
    request = case["request"]
    return f"{request['action']['name']}-{request['subject']['id'][:8]}-{request['resource'].get('id', '')[:12]}"


@pytest.fixture(scope="module")
def interop_http(serve: Serve) -> Iterator[httpx.Client]:
    """The Todo PDP (with schema) as the WG runner calls it: ``Authorization: undefined`` when no key is set."""
    url = serve(todo_cedar(schema=True))
    with httpx.Client(base_url=url, timeout=scaled(10), headers={"Authorization": "undefined"}) as client:
        yield client


def test_the_interop_set_is_the_published_one():
    decisions = interop_decisions()
    assert (len(decisions["evaluation"]), len(decisions["evaluations"])) == (40, 3)


@pytest.mark.parametrize("case", interop_cases("evaluation"), ids=lambda c: case_id(c) if c else "missing")
def test_todo_interop_single(interop_http: httpx.Client, case: dict[str, Any] | None):
    if case is None:
        interop_decisions()
    assert case is not None
    response = interop_http.post(EVALUATION, json=case["request"])
    assert (response.status_code, response.json()) == (200, {"decision": case["expected"]})


@pytest.mark.parametrize("case", interop_cases("evaluations"), ids=lambda c: "batch" if c else "missing")
def test_todo_interop_batch(interop_http: httpx.Client, case: dict[str, Any] | None):
    if case is None:
        interop_decisions()
    assert case is not None
    response = interop_http.post(EVALUATIONS, json=case["request"])
    assert (response.status_code, response.json()) == (200, {"evaluations": case["expected"]})


def test_the_interop_check_can_fail(serve: Serve):
    """A PDP that permits everything, behind the same HTTP layer, fails the single decisions it should deny."""
    cases = interop_decisions()["evaluation"]
    with httpx.Client(base_url=serve(CedarPDP("permit (principal, action, resource);")), timeout=scaled(10)) as client:
        results = [client.post(EVALUATION, json=case["request"]).json()["decision"] for case in cases]
    wrong = sum(result != case["expected"] for result, case in zip(results, cases, strict=True))
    assert wrong == sum(1 for case in cases if not case["expected"]) > 0
