"""The AuthZEN Todo interop decisions and the certification structural checks, against a real
``mcp-approval arap-server`` subprocess (examples/todo/arap-server.toml) over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.policy.conftest import interop_decisions
from tests.reference.arap_support import ArapProcess
from tests.support.timing import scaled

TODO_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "todo" / "arap-server.toml"
BETH = "CiRmZDM2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs"  # viewer
RICK = "CiRmZDA2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs"  # admin


@pytest.fixture(scope="module")
def todo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    directory = tmp_path_factory.mktemp("todo")
    server = ArapProcess(TODO_CONFIG, directory, db_url=f"sqlite:///{directory / 'todo.db'}").start()
    try:
        # The WG runner sends `Authorization: undefined` when no API key is set.
        with httpx.Client(
            base_url=server.base_url, timeout=scaled(15), headers={"Authorization": "undefined"}
        ) as client:
            yield client
    finally:
        server.kill()


def test_the_todo_interop_decisions_pass_43_of_43(todo: httpx.Client):
    decisions = interop_decisions()
    passed = 0
    for case in decisions["evaluation"]:
        response = todo.post("/access/v1/evaluation", json=case["request"])
        passed += (response.status_code, response.json()) == (200, {"decision": case["expected"]})
    for case in decisions["evaluations"]:
        response = todo.post("/access/v1/evaluations", json=case["request"])
        passed += (response.status_code, response.json()) == (200, {"evaluations": case["expected"]})
    assert passed == len(decisions["evaluation"]) + len(decisions["evaluations"]) == 43


def todo_request(pid: str, action: str) -> dict[str, Any]:
    resource = {"type": "todo", "id": "t1", "properties": {"ownerID": "rick@the-citadel.com"}}
    return {"subject": {"type": "user", "id": pid}, "action": {"name": action}, "resource": resource}


def test_metadata_is_valid(todo: httpx.Client):
    document = todo.get("/.well-known/authzen-configuration").json()
    base = str(todo.base_url).rstrip("/")
    assert document["policy_decision_point"] == base
    assert document["access_evaluation_endpoint"] == base + "/access/v1/evaluation"
    assert document["access_evaluations_endpoint"] == base + "/access/v1/evaluations"
    assert document["access_request_endpoint"] == base + "/access/v1/requests"
    assert todo.get(document["jwks_uri"]).json()["keys"][0]["use"] == "sig"


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b'{"subject": ', "application/json"),
        (b"[]", "application/json"),
        (b'{"subject":{"type":"user"},"action":{"name":"a"},"resource":{"type":"t","id":"1"}}', "application/json"),
        (b'{"action":{"name":"a"},"resource":{"type":"t","id":"1"}}', "application/json"),
        (b"{}", "text/plain"),
    ],
)
@pytest.mark.parametrize("path", ["/access/v1/evaluation", "/access/v1/evaluations"])
def test_ill_formed_requests_are_400_and_echo_the_request_id(
    todo: httpx.Client, path: str, content: bytes, content_type: str
):
    headers = {"Content-Type": content_type, "X-Request-ID": "cert-400"}
    response = todo.post(path, content=content, headers=headers)
    assert response.status_code == 400
    assert response.headers["x-request-id"] == "cert-400"


def test_request_id_is_echoed(todo: httpx.Client):
    response = todo.post(
        "/access/v1/evaluation", json=todo_request(BETH, "can_read_todos"), headers={"X-Request-ID": "r-1"}
    )
    assert (response.json(), response.headers["x-request-id"]) == ({"decision": True}, "r-1")


@pytest.mark.parametrize(
    ("semantic", "expected"),
    [("execute_all", [True, False, True]), ("deny_on_first_deny", [True, False]), ("permit_on_first_permit", [True])],
)
def test_batch_order_and_semantics(todo: httpx.Client, semantic: str, expected: list[bool]):
    body = {
        "subject": {"type": "user", "id": BETH},
        "resource": todo_request(BETH, "x")["resource"],
        "options": {"evaluations_semantic": semantic},
        "evaluations": [{"action": {"name": n}} for n in ("can_read_todos", "can_create_todo", "can_read_todos")],
    }
    items = todo.post("/access/v1/evaluations", json=body).json()["evaluations"]
    assert [item["decision"] for item in items] == expected


def test_execute_all_item_errors_are_denies_in_place(todo: httpx.Client):
    body = {
        "subject": {"type": "user", "id": RICK},
        "action": {"name": "can_read_todos"},
        "evaluations": [{"resource": todo_request(RICK, "x")["resource"]}, {}, 7],
    }
    items = todo.post("/access/v1/evaluations", json=body).json()["evaluations"]
    assert [item["decision"] for item in items] == [True, False, False]
    assert items[1]["context"]["reason"] == items[2]["context"]["reason"] == "invalid_request"


@pytest.mark.parametrize("evaluations", [None, []])
def test_missing_or_empty_evaluations_is_a_single_evaluation(todo: httpx.Client, evaluations: Any):
    body: dict[str, Any] = todo_request(BETH, "can_read_todos")
    if evaluations is not None:
        body["evaluations"] = evaluations
    assert todo.post("/access/v1/evaluations", json=body).json() == {"decision": True}
