"""The PEP side of the ARAP wire, without a network: request building, response reading, backoff.

Checklist items (conformance/arap-checklist.md): 2, 3, 6, 7, 8, 9, 11, 12, 14, 15, 19.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from mcp_approval.backends.arap_wire import (
    MAX_POLL_DELAY_S,
    ArapProtocolError,
    callback_state,
    decode_handle,
    encode_handle,
    parse_task_response,
    poll_delay_s,
    problem_code,
    retry_after_seconds,
    submission_body,
)
from mcp_approval.backends.contract import ApprovalStatus, ApprovalSubmission, DeniedEvaluation
from mcp_approval.policy.models import Decision, NextAction

# A binding token whose bytes would change under any re-encoding (odd padding, mixed case, dots).
TOKEN = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImFyYXAtMSJ9.eyJhdWQiOiJ4In0.AbC-_dEf0123456789xYz"
REQUEST: dict[str, Any] = {
    "subject": {"type": "user", "id": "alice", "properties": {"act": {"sub": "agent-7"}}},
    "action": {"name": "tools/call"},
    "resource": {"type": "tool", "id": "wire_transfer"},
    "context": {"arguments": {"to": "acct-1", "amount": 50000.0}, "client": {"name": "cli"}},
}
DENIAL_CONTEXT: dict[str, Any] = {
    "evaluation_id": "eval_01J",
    "evaluated_at": "2026-11-29T17:00:00.123456+00:00",
    "reason": "approval_required",
    "access_request": {
        "expires_at": "2026-11-29T17:10:00Z",
        "endpoint": "https://ars.example/access/v1/requests",
        "template": "treasury",
        "display": {"title": "Large transfer"},
        "binding_token": TOKEN,
        "x-extension": {"kept": True},
    },
    "unrelated": "not echoed",
}


def evaluation_submission(context: dict[str, Any] | None = None, **fields: Any) -> ApprovalSubmission:
    evaluation = DeniedEvaluation.from_decision(REQUEST, context or DENIAL_CONTEXT)
    assert evaluation is not None
    return ApprovalSubmission(tool="wire_transfer", arguments={}, requester="alice", evaluation=evaluation, **fields)


def test_absent_access_request_is_not_requestable() -> None:  # items 2, 3
    for context in (None, {}, {"reason": "approval_required", "evaluation_id": "e"}, {"access_request": "x"}):
        assert DeniedEvaluation.from_decision(REQUEST, context) is None
    assert DeniedEvaluation.from_decision(REQUEST, {"access_request": {"template": "t"}}) is None  # no expires_at
    decision = Decision.model_validate({"decision": False, "context": {"reason": "approval_required"}})
    assert decision.requestable_denial is None
    assert decision.next_action() is NextAction.NONE


def test_a_requestable_denial_is_still_a_deny() -> None:  # item 1
    decision = Decision.model_validate({"decision": False, "context": DENIAL_CONTEXT})
    assert decision.decision is False
    assert decision.requestable_denial is not None


def test_every_denial_member_is_echoed_exactly_and_nothing_else() -> None:  # items 6, 7
    body = submission_body(evaluation_submission())
    assert body["denial"] == {
        "expires_at": "2026-11-29T17:10:00Z",
        "evaluation_id": "eval_01J",
        "evaluated_at": "2026-11-29T17:00:00.123456+00:00",
        "reason": "approval_required",
        "template": "treasury",
        "binding_token": TOKEN,
    }
    assert body["denial"]["binding_token"] is not None
    wire = json.dumps(body)
    assert TOKEN in wire  # the same bytes, not a re-encoding
    for absent in ("not echoed", "x-extension", "display"):
        assert absent not in wire


def test_absent_denial_members_stay_absent() -> None:  # item 6
    context = {"access_request": {"expires_at": "2026-11-29T17:10:00Z"}, "evaluation_id": "eval_2"}
    body = submission_body(evaluation_submission(context))
    assert body["denial"] == {"expires_at": "2026-11-29T17:10:00Z", "evaluation_id": "eval_2"}


def test_subject_resource_action_and_context_go_unchanged() -> None:  # items 8, 9
    body = submission_body(evaluation_submission(inputs={"justification": "invoice 7", "arguments": "clobber?"}))
    assert body["subject"] == REQUEST["subject"]  # the actor (properties.act) is kept
    assert body["resource"] == REQUEST["resource"]
    assert body["action"] == REQUEST["action"]
    assert body["context"]["arguments"] == REQUEST["context"]["arguments"]  # an input never overrides it
    assert body["context"]["justification"] == "invoice 7"
    assert "approval" not in body["context"]


def test_submission_survives_its_sealed_json_form() -> None:
    submission = evaluation_submission()
    again = ApprovalSubmission.from_json(json.loads(json.dumps(submission.to_json())))
    assert again == submission
    assert again.digest() == submission.digest()
    plain = ApprovalSubmission(tool="t", arguments={}, requester="r")
    assert "evaluation" not in plain.to_json()  # a local-backend body is what it always was
    assert ApprovalSubmission.from_json(plain.to_json()) == plain


def test_a_submission_without_a_denial_cannot_be_built() -> None:
    with pytest.raises(ArapProtocolError):
        submission_body(ApprovalSubmission(tool="t", arguments={}, requester="r"))


def test_callback_and_client_are_added_when_configured() -> None:
    body = submission_body(
        evaluation_submission(), client_name="treasury", callback={"endpoint": "https://mcp/cb", "state": "s"}
    )
    assert body["client"] == {"name": "treasury"}
    assert body["callback"] == {"endpoint": "https://mcp/cb", "state": "s"}


def task(status: Any, **extra: Any) -> dict[str, Any]:
    return {
        "task": {
            "id": "arq_1",
            "status": status,
            "status_endpoint": "https://ars.example/access/v1/requests/arq_1",
            "expires_at": "2026-11-30T17:00:00Z",
            "links": {"cancel": "https://ars.example/access/v1/requests/arq_1/cancel"},
        },
        **extra,
    }


APPROVAL = {
    "id": "apr_9",
    "approved_at": "2026-11-29T17:05:00Z",
    "approved_until": "2026-11-29T18:05:00Z",
    "state": "eyJ.state.sig",
    "x-extra": [1, 2],
}


def test_approved_with_a_reevaluate_result_carries_the_approval_unchanged() -> None:  # items 12, 17
    read = parse_task_response(task("approved", result={"mode": "reevaluate", "approval": APPROVAL}))
    assert read.state.status is ApprovalStatus.APPROVED
    assert read.state.approval == APPROVAL
    assert read.state.approved_until_ms == 1_795_975_500_000
    assert read.cancel == "https://ars.example/access/v1/requests/arq_1/cancel"


@pytest.mark.parametrize(
    "result",
    [
        None,
        {"mode": "grant"},
        {"mode": "urn:example:direct", "approval": APPROVAL},
        {"mode": "reevaluate"},
        {"mode": "reevaluate", "approval": {"approved_until": APPROVAL["approved_until"]}},
        {"mode": "reevaluate", "approval": {"id": "apr_1"}},
        {"mode": "reevaluate", "approval": {"id": "apr_1", "approved_until": "tomorrow"}},
    ],
)
def test_approved_without_an_enforceable_result_is_not_approval(result: Any) -> None:  # items 12, 15
    document = task("approved", **({"result": result} if result is not None else {}))
    state = parse_task_response(document).state
    assert state.status is ApprovalStatus.FAILED
    assert state.approval is None


@pytest.mark.parametrize("status", ["granted", "partial", "in_review", 7, None])
def test_an_unknown_status_is_never_approval(status: Any) -> None:  # item 15
    document = task(status, result={"mode": "reevaluate", "approval": APPROVAL})
    state = parse_task_response(document, retry_after_s=3).state
    assert state.status is ApprovalStatus.PENDING
    assert state.approval is None
    assert state.details["unrecognized_status"] == str(status)
    assert state.deadline_ms is not None  # polling still stops at task.expires_at


def test_a_pending_result_is_ignored_and_links_are_not_interpreted() -> None:  # items 11, 12
    document = task("pending", result={"mode": "reevaluate", "approval": APPROVAL})
    document["task"]["display"] = {"title": "approved!"}
    document["task"]["id"] = "arq_approved"
    state = parse_task_response(document).state
    assert state.status is ApprovalStatus.PENDING
    assert state.approval is None


@pytest.mark.parametrize("status", ["denied", "expired", "cancelled", "failed"])
def test_terminal_statuses_map_one_to_one(status: str) -> None:
    assert parse_task_response(task(status)).state.status is ApprovalStatus(status)


@pytest.mark.parametrize(
    "document",
    [None, [], {"task": "x"}, {"task": {"status": "pending"}}, {"task": {"id": "a", "status": "pending"}}],
)
def test_malformed_task_responses_are_protocol_errors(document: Any) -> None:
    with pytest.raises(ArapProtocolError):
        parse_task_response(document)


def test_problem_codes() -> None:
    assert problem_code({"type": "urn:openid:authzen:access-request:error:expired_denial"}) == "expired_denial"
    assert problem_code({"type": "about:blank"}) is None
    assert problem_code("garbage") is None


def test_retry_after_header() -> None:
    assert retry_after_seconds("5") == 5
    assert retry_after_seconds(" 0 ") == 0
    assert retry_after_seconds("Wed, 21 Oct 2026 07:28:00 GMT") is None
    assert retry_after_seconds("-3") is None
    assert retry_after_seconds(None) is None


def test_handles_round_trip_and_rebuild_from_a_callback() -> None:  # item 11 (opaque, only stored)
    handle = encode_handle("arq_1", "https://ars/access/v1/requests/arq_1")
    assert decode_handle(handle) == ("arq_1", "https://ars/access/v1/requests/arq_1")
    assert encode_handle("arq_1", "https://ars/access/v1/requests/arq_1") == handle  # canonical
    for bad in ("", "x", "[]", '{"id": 1}'):
        with pytest.raises(ArapProtocolError):
            decode_handle(bad)


def test_backoff_is_exponential_jittered_capped_and_yields_to_retry_after() -> None:  # item 14
    rng = random.Random(7)
    delays = [poll_delay_s(n, base_s=2.0, rng=rng) for n in range(12)]
    for attempt, delay in enumerate(delays):
        ceiling = min(MAX_POLL_DELAY_S, 2.0 * 2**attempt)
        assert ceiling / 2 <= delay <= ceiling
    assert max(delays) <= 60.0
    assert delays[6] > delays[0]
    assert len({round(d, 6) for d in delays[6:]}) > 1  # jitter even at the cap
    assert poll_delay_s(0, base_s=2.0, retry_after_s=90, rng=rng) == 90  # Retry-After always wins
    assert poll_delay_s(3, base_s=2.0, cap_s=600, rng=rng) <= 60.0  # never a cap above 60 s
    assert poll_delay_s(40, base_s=1.0, rng=rng) <= 60.0


def test_callback_state_is_bound_to_the_key_and_secret() -> None:  # item 22
    state = callback_state("s" * 32, "key-1")
    assert state == callback_state("s" * 32, "key-1")
    assert state != callback_state("s" * 32, "key-2")
    assert state != callback_state("t" * 32, "key-1")
    assert "key-1" not in state


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ({"reason": "grant_pending"}, NextAction.RETRY),
        ({"reason": "approval_expired", "access_request": {"expires_at": "2026-11-29T17:10:00Z"}}, NextAction.REQUEST),
        ({"reason": "approval_expired"}, NextAction.NONE),  # request without access_request is none
        ({"next_action": "request"}, NextAction.NONE),
        ({"next_action": "retry", "reason": "policy_denied"}, NextAction.RETRY),  # next_action wins
        ({"reason": "out_of_scope", "access_request": {"expires_at": "x"}}, NextAction.REQUEST),
        ({"reason": "policy_denied", "access_request": {"expires_at": "x"}}, NextAction.NONE),
        ({"reason": "approval_unverifiable"}, NextAction.NONE),
        ({"reason": "something_new", "access_request": {"expires_at": "x"}}, NextAction.REQUEST),
        ({"reason": "something_new"}, NextAction.NONE),
        ({"next_action": "bogus", "reason": "grant_pending"}, NextAction.RETRY),
    ],
)
def test_next_action_resolution_order(context: dict[str, Any], expected: NextAction) -> None:  # item 19
    assert Decision.model_validate({"decision": False, "context": context}).next_action() is expected
