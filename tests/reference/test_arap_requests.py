"""The reference ARAP Access Request Service over HTTP: submission, idempotency, status, cancel.

The server runs in this process (uvicorn in a thread) on a ManualClock; requests are real HTTP.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest

from mcp_approval.clock import ManualClock, SystemClock
from mcp_approval.reference.signing import KeySet, SigningKey
from tests.reference.arap_support import (
    ERROR,
    OTHER_CLIENT_TOKEN,
    PROBLEM_JSON,
    Harness,
    arap_dir,
    running_arap,
    submission,
    tool_call,
    transfer,
)
from tests.support.timing import scaled

CLOCK = ManualClock(start_ms=SystemClock().now_ms())


@pytest.fixture(scope="module")
def h(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    with running_arap(arap_dir(tmp_path_factory.mktemp("ars")), clock=CLOCK) as harness:
        yield harness


def denied(h: Harness, request: dict[str, Any]) -> dict[str, Any]:
    """The submission body for a fresh requestable denial of ``request``."""
    return submission(request, h.evaluate(request))


def assert_problem(response: Any, status: int, code: str | None) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
    problem = response.json()
    assert problem["status"] == status
    assert problem["type"] == (ERROR + code if code else "about:blank")


# -- submission ---------------------------------------------------------------------------------


def test_submission_answers_202_with_a_task_handle(h: Harness):
    response = h.submit(denied(h, transfer(70_000)), key="happy")
    assert response.status_code == 202, response.text
    task = response.json()["task"]
    assert task["id"].startswith("arq_")
    assert len(task["id"]) > 30
    assert task["status"] == "pending"
    assert task["status_endpoint"] == f"{h.base_url}/access/v1/requests/{task['id']}"
    assert response.headers["location"] == task["status_endpoint"]
    assert task["links"]["cancel"] == task["status_endpoint"] + "/cancel"
    assert response.headers["retry-after"] == "1"
    assert "result" not in response.json()
    assert "expires_at" in task


def test_an_automatic_resolver_answers_201_with_the_result(h: Harness):
    response = h.submit(denied(h, tool_call("refund", {"amount": 120, "order": "o-1"})), key="refund-small")
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["task"]["status"] == "approved"
    assert "links" not in body["task"]
    approval = body["result"]["approval"]
    assert body["result"]["mode"] == "reevaluate"
    assert approval["id"].startswith("apr_")
    assert {"approved_at", "approved_until", "state"} <= set(approval)
    request = tool_call("refund", {"amount": 120, "order": "o-1"})
    request["context"]["approval"] = approval
    assert h.evaluate(request)["decision"] is True


def test_an_automatic_denial_is_terminal_at_once(h: Harness):
    response = h.submit(denied(h, tool_call("refund", {"amount": 9_000, "order": "o-2"})), key="refund-big")
    assert response.status_code == 201, response.text
    assert response.json()["task"]["status"] == "denied"
    assert "result" not in response.json()


@pytest.mark.parametrize("token", [None, "wrong-token-wrong-token", "carol-token"])
def test_submission_needs_a_client_bearer_token(h: Harness, token: str | None):
    response = h.submit(denied(h, transfer(70_001)), key=f"auth-{token}", token=token)
    assert_problem(response, 401, None)
    assert response.headers["www-authenticate"] == "Bearer"


def test_a_submission_without_a_denial_is_not_requestable(h: Harness):
    for body in (transfer(70_002), {**transfer(70_002), "denial": {"reason": "approval_required"}}):
        assert_problem(h.submit(body, key=None), 400, "not_requestable")


@pytest.mark.parametrize(
    "body",
    [[], {"subject": "alice"}, {**transfer(), "resource": {"type": "tool"}}, {**transfer(), "context": [1]}],
)
def test_an_ill_formed_submission_is_400(h: Harness, body: Any):
    assert_problem(h.submit(body, key=None), 400, None)


@pytest.mark.parametrize(
    "case",
    [
        "arguments-changed",
        "subject-changed",
        "other-key",
        "unknown-kid",
        "wrong-aud",
        "not-a-jws",
        "echoed-expiry-changed",
        "echoed-template-changed",
        "no-binding",
        "unknown-evaluation",
    ],
)
def test_a_denial_binding_that_does_not_hold_is_refused(h: Harness, case: str):
    body = denied(h, transfer(70_003))
    claims = jwt.decode(body["denial"]["binding_token"], options={"verify_signature": False})
    assert h.server is not None
    if case == "arguments-changed":
        body["context"]["arguments"]["amount"] = 70_004
    elif case == "subject-changed":
        body["subject"]["id"] = "bob"
    elif case == "other-key":
        impostor = SigningKey(kid="treasury-dev-1", private_key=SigningKey.generate().private_key)
        body["denial"]["binding_token"] = KeySet(impostor).sign(claims)
    elif case == "unknown-kid":
        body["denial"]["binding_token"] = KeySet(SigningKey.generate("not-ours")).sign(claims)
    elif case == "wrong-aud":
        body["denial"]["binding_token"] = h.server.keys.sign({**claims, "aud": "https://other-ars.example"})
    elif case == "not-a-jws":
        body["denial"]["binding_token"] = "opaque-reference"
    elif case == "echoed-expiry-changed":
        body["denial"]["expires_at"] = "2099-01-01T00:00:00.000Z"
    elif case == "echoed-template-changed":
        body["denial"]["template"] = "refund"
    elif case == "no-binding":
        del body["denial"]["binding_token"], body["denial"]["evaluation_id"]
    else:
        del body["denial"]["binding_token"]
        body["denial"]["evaluation_id"] = "eval-never-issued"
    assert_problem(h.submit(body, key=f"binding-{case}"), 400, "invalid_denial_binding")


def test_a_replayed_binding_token_is_refused(h: Harness):
    body = denied(h, transfer(70_005))
    assert h.submit(body, key="replay-1").status_code == 202
    replay = h.submit(body, key="replay-2")
    assert_problem(replay, 400, "invalid_denial_binding")
    assert "replay" in replay.json()["detail"]
    assert_problem(h.submit(body, key=None), 400, "invalid_denial_binding")


def test_an_expired_denial_is_refused(tmp_path: Any):
    clock = ManualClock(start_ms=SystemClock().now_ms())
    with running_arap(arap_dir(tmp_path), clock=clock) as h:
        token_expired = denied(h, transfer(70_006))
        clock.advance(300_000 + 31_000)  # past the token's 5 minutes and the 30 s skew
        assert_problem(h.submit(token_expired, key="late"), 410, "expired_denial")
        # The shared-state path enforces the recorded deadline (P1D here), not an echoed one.
        by_reference = denied(h, transfer(70_007))
        del by_reference["denial"]["binding_token"]
        by_reference["denial"]["expires_at"] = "2099-01-01T00:00:00.000Z"
        clock.advance(86_400_000 + 31_000)
        assert_problem(h.submit(by_reference, key="late-ref"), 410, "expired_denial")


def test_the_shared_state_binding_by_evaluation_id_alone(h: Harness):
    body = denied(h, transfer(70_008))
    del body["denial"]["binding_token"]
    response = h.submit(body, key="by-reference")
    assert response.status_code == 202, response.text
    changed = copy.deepcopy(body)
    changed["context"]["arguments"]["to"] = "mallory"
    assert_problem(h.submit(changed, key="by-reference-2"), 400, "invalid_denial_binding")


# -- idempotency --------------------------------------------------------------------------------


def test_the_same_key_and_body_return_the_same_task(h: Harness):
    body = denied(h, transfer(70_010))
    first = h.submit(body, key="idem-same")
    again = h.submit(body, key="idem-same")
    assert first.status_code == again.status_code == 202
    assert first.json()["task"]["id"] == again.json()["task"]["id"]
    reordered = dict(reversed(list(copy.deepcopy(body).items())))  # equivalent under RFC 8785
    assert h.submit(reordered, key="idem-same").json()["task"]["id"] == first.json()["task"]["id"]


def test_a_retry_that_looked_for_its_key_before_the_first_submission_stored_it_gets_the_same_task(h: Harness):
    """A retry (same key, same body) whose key lookup ran while the first submission was still being
    stored then finds the binding token used: it is the same submission, answered with its task."""
    assert h.server is not None
    store = h.server.service.store
    body = denied(h, transfer(70_015))
    first = h.submit(body, key="idem-race")
    assert first.status_code == 202, first.text
    looked_up = store.task_by_key
    stale = {"idem-race"}

    async def before_the_first_was_stored(caller: str, key: str) -> Any:
        if key in stale:  # the retry's first look, made before the first submission's row existed
            stale.discard(key)
            return None
        return await looked_up(caller, key)

    store.task_by_key = before_the_first_was_stored  # type: ignore[method-assign]
    try:
        again = h.submit(body, key="idem-race")
    finally:
        del store.task_by_key
    assert again.status_code == 202, again.text
    assert again.json()["task"]["id"] == first.json()["task"]["id"]


def test_the_same_key_with_another_body_is_a_duplicate_request(h: Harness):
    body = denied(h, transfer(70_011))
    assert h.submit(body, key="idem-conflict").status_code == 202
    other = denied(h, transfer(70_012))
    assert_problem(h.submit(other, key="idem-conflict"), 409, "duplicate_request")


def test_idempotency_keys_are_scoped_to_the_caller(h: Harness):
    mine = h.submit(denied(h, transfer(70_013)), key="shared-key")
    theirs = h.submit(denied(h, transfer(70_014)), key="shared-key", token=OTHER_CLIENT_TOKEN)
    assert mine.status_code == theirs.status_code == 202
    assert mine.json()["task"]["id"] != theirs.json()["task"]["id"]


# -- status and cancel --------------------------------------------------------------------------


def test_status_is_pending_with_retry_after_then_approved_with_a_result(h: Harness):
    response = h.submit(denied(h, transfer(70_020)), key="status")
    url = response.headers["location"]
    pending = h.status(url)
    assert (pending.status_code, pending.headers["retry-after"]) == (200, "1")
    assert pending.json()["task"]["status"] == "pending"
    assert "result" not in pending.json()
    for request_id in h.pending_ids():
        h.decide(request_id, "carol")
    done = h.status(url)
    assert done.status_code == 200
    assert "retry-after" not in done.headers
    assert done.json()["task"]["status"] == "approved"
    assert done.json()["result"]["approval"] == h.status(url).json()["result"]["approval"]  # issued once


def test_a_denied_task_has_no_result(h: Harness):
    response = h.submit(denied(h, transfer(70_021)), key="denied")
    for request_id in h.pending_ids():
        h.decide(request_id, "carol", "deny")
    body = h.status(response.headers["location"]).json()
    assert body["task"]["status"] == "denied"
    assert "result" not in body


@pytest.mark.parametrize("method", ["POST", "DELETE"])
def test_cancel_then_cancel_again_is_409(h: Harness, method: str):
    response = h.submit(denied(h, transfer(70_030)), key=f"cancel-{method}")
    cancel = response.json()["task"]["links"]["cancel"]
    headers = {"Authorization": "Bearer treasury-mcp-client-token-dev"}
    done = h.http.request(method, cancel, headers=headers, json={"reason": "user_abandoned"})
    assert done.status_code == 200, done.text
    assert done.json()["task"]["status"] == "cancelled"
    assert h.status(response.headers["location"]).json()["task"]["status"] == "cancelled"
    assert_problem(h.http.request(method, cancel, headers=headers), 409, "invalid_task_state")


def test_cancel_of_an_approved_task_is_409_and_other_methods_405(h: Harness):
    response = h.submit(denied(h, transfer(70_031)), key="cancel-approved")
    cancel = response.json()["task"]["links"]["cancel"]
    for request_id in h.pending_ids():
        h.decide(request_id, "carol")
    headers = {"Authorization": "Bearer treasury-mcp-client-token-dev"}
    assert_problem(h.http.post(cancel, headers=headers), 409, "invalid_task_state")
    assert h.http.get(cancel, headers=headers).status_code == 405


def test_unknown_and_foreign_tasks_are_404(h: Harness):
    response = h.submit(denied(h, transfer(70_032)), key="foreign")
    url = response.headers["location"]
    assert_problem(h.status(url, token=OTHER_CLIENT_TOKEN), 404, "unknown_task")
    assert_problem(h.status(f"{h.base_url}/access/v1/requests/arq_nope"), 404, "unknown_task")
    cancel = h.http.post(url + "/cancel", headers={"Authorization": f"Bearer {OTHER_CLIENT_TOKEN}"})
    assert_problem(cancel, 404, "unknown_task")
    assert_problem(h.http.get(url), 401, None)


def test_a_task_expires_then_its_handle_is_410(tmp_path: Any):
    clock = ManualClock(start_ms=SystemClock().now_ms())
    overrides = {"arap": {"task_lifetime_s": 60.0, "retention_s": 60.0}}
    with running_arap(arap_dir(tmp_path, overrides), clock=clock) as h:
        url = h.submit(denied(h, transfer(70_040)), key="expiring").headers["location"]
        clock.advance(61_000)
        assert h.status(url).json()["task"]["status"] == "expired"
        clock.advance(60_000)
        assert_problem(h.status(url), 410, "task_expired")


# -- caller authorization and rate limit ----------------------------------------------------------


def test_a_client_is_limited_to_its_resource_types(tmp_path: Any):
    clients = [{"id": "treasury-mcp", "token": "treasury-mcp-client-token-dev", "resource_types": ["document"]}]
    with running_arap(arap_dir(tmp_path, {"arap": {"clients": clients}}), clock=ManualClock()) as h:
        response = h.submit(denied(h, transfer(71_000)), key="wrong-type")
        assert_problem(response, 403, None)


def test_submissions_are_rate_limited_per_client(tmp_path: Any):
    clock = ManualClock(start_ms=SystemClock().now_ms())
    with running_arap(arap_dir(tmp_path, {"arap": {"submissions_per_minute": 2}}), clock=clock) as h:
        first = denied(h, transfer(71_001))
        assert h.submit(first, key="rate-1").status_code == 202
        assert h.submit(denied(h, transfer(71_002)), key="rate-2").status_code == 202
        limited = h.submit(denied(h, transfer(71_003)), key="rate-3")
        assert_problem(limited, 429, None)
        assert 1 <= int(limited.headers["retry-after"]) <= 60
        # An idempotent retry of an accepted submission is not a new submission.
        assert h.submit(first, key="rate-1").status_code == 202
        assert h.submit(denied(h, transfer(71_004)), key="rate-4", token=OTHER_CLIENT_TOKEN).status_code == 202
        clock.advance(60_001)
        assert h.submit(denied(h, transfer(71_003)), key="rate-3").status_code == 202


def test_the_approval_is_issued_when_the_decision_commits(h: Harness):
    import sqlite3

    task = h.submit(denied(h, transfer(71_100)), key="issued-at-decision").json()["task"]
    for request_id in h.pending_ids():
        assert h.decide(request_id, "carol").status_code == 200
    assert h.server is not None
    database = h.server.config.store_url().removeprefix("sqlite:///")
    with sqlite3.connect(database) as conn:  # before any status read
        rows = conn.execute("SELECT approval_id FROM arap_approvals WHERE task_id = ?", (task["id"],)).fetchall()
    assert len(rows) == 1
    assert h.status(task["status_endpoint"]).json()["result"]["approval"]["id"] == rows[0][0]


def test_a_refused_submission_is_audited(h: Harness):
    import sqlite3

    body = denied(h, transfer(71_200))
    body["context"]["arguments"]["amount"] = 1
    assert_problem(h.submit(body, key="audited-refusal"), 400, "invalid_denial_binding")
    assert h.server is not None
    with sqlite3.connect(h.server.config.store_url().removeprefix("sqlite:///")) as conn:
        rows = conn.execute(
            "SELECT actor, data_json FROM audit_events WHERE kind = 'arap.submission_refused' ORDER BY event_id DESC"
        ).fetchall()
    actor, data = rows[0]
    assert actor == "treasury-mcp"
    assert '"code":"invalid_denial_binding"' in data


def test_an_idempotency_key_is_freed_by_the_sweep_after_its_window(tmp_path: Any):
    """Within ``retention_s`` a key names its task; after it the sweep releases the key for a new request."""
    clock = ManualClock(start_ms=SystemClock().now_ms())
    overrides = {"arap": {"task_lifetime_s": 60.0, "retention_s": 60.0, "sweep_interval_s": 0.05}}
    with running_arap(arap_dir(tmp_path, overrides), clock=clock) as h:
        first = h.submit(denied(h, transfer(70_050)), key="window")
        assert first.status_code == 202, first.text
        other = denied(h, transfer(70_051))
        clock.advance(61_000)  # the task expired, its key is still held
        assert h.server is not None
        swept_before = h.server.service.sweeps
        deadline = time.monotonic() + scaled(10)
        while h.server.service.sweeps < swept_before + 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # polling for two completed sweeps, bounded by the deadline
        assert h.server.service.sweeps >= swept_before + 2
        assert_problem(h.submit(other, key="window"), 409, "duplicate_request")
        clock.advance(60_000)  # past retain_until: the sweep frees the key
        deadline = time.monotonic() + scaled(10)
        again = h.submit(other, key="window")
        while again.status_code != 202 and time.monotonic() < deadline:
            time.sleep(0.02)  # polling for the sweep's effect, bounded by the deadline
            again = h.submit(other, key="window")
        assert again.status_code == 202, again.text
        assert again.headers["location"] != first.headers["location"]
        assert_problem(h.status(first.headers["location"]), 410, "task_expired")  # the old handle still answers
