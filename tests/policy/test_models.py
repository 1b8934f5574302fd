"""AuthZEN 1.0 and ARAP models: wire forms, batch defaults, requestable-denial accessors."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from mcp_approval.policy import (
    BatchItemError,
    Decision,
    EvaluationRequest,
    EvaluationsRequest,
    EvaluationsSemantic,
    NextAction,
)

ALICE = {"type": "user", "id": "alice"}
READ = {"name": "read"}
R1 = {"type": "record", "id": "record-1", "properties": {"status": "active"}}
R2 = {"type": "record", "id": "record-2", "properties": {"status": "archived"}}


def test_request_round_trip_omits_absent_members_and_keeps_nulls():
    wire = {"subject": ALICE, "action": READ, "resource": {"type": "t", "id": "r", "properties": {"a": None}}}
    request = EvaluationRequest.model_validate({**wire, "unknown": 1})
    assert request.to_wire() == wire
    with_context = request.with_context({"x": None})
    assert with_context.to_wire()["context"] == {"x": None}


@pytest.mark.parametrize(
    "body",
    [
        {"subject": {"type": "user"}, "action": READ, "resource": R1},
        {"subject": {"type": "user", "id": 7}, "action": READ, "resource": R1},
        {"subject": ALICE, "action": {}, "resource": R1},
        {"subject": ALICE, "action": READ},
    ],
)
def test_incomplete_requests_are_rejected(body: dict[str, Any]):
    with pytest.raises(ValidationError):
        EvaluationRequest.model_validate(body)


def test_decision_must_be_a_boolean():
    assert Decision.model_validate({"decision": True, "extra": 1}).to_wire() == {"decision": True}
    with pytest.raises(ValidationError):
        Decision.model_validate({"decision": "true"})
    with pytest.raises(ValidationError):
        Decision.model_validate({"decision": 1})


def test_batch_defaults_are_replaced_whole():
    body = EvaluationsRequest.model_validate(
        {
            "subject": ALICE,
            "action": {"name": "write"},
            "resource": R1,
            "context": {"time": "t0"},
            "evaluations": [{}, {"resource": R2}, {"resource": {"type": "record", "id": "record-3"}, "context": {}}],
        }
    )
    first, second, third = body.resolve()
    assert isinstance(first, EvaluationRequest)
    assert first.resource.id == "record-1"
    assert first.context == {"time": "t0"}
    assert isinstance(second, EvaluationRequest)
    assert second.resource.properties == {"status": "archived"}
    assert isinstance(third, EvaluationRequest)
    assert third.resource.properties is None
    assert third.context == {}
    assert body.semantic is EvaluationsSemantic.EXECUTE_ALL


def test_batch_items_missing_a_member_are_errors_not_failures():
    body = EvaluationsRequest.model_validate(
        {
            "subject": ALICE,
            "action": READ,
            "resource": {},  # the Todo interop sends an empty default
            "options": {"evaluations_semantic": "deny_on_first_deny", "other": 1},
            "evaluations": [{"resource": R1}, {}],
        }
    )
    ok, missing = body.resolve()
    assert isinstance(ok, EvaluationRequest)
    assert isinstance(missing, BatchItemError)
    assert missing.index == 1
    assert "resource" in missing.message
    assert body.semantic is EvaluationsSemantic.DENY_ON_FIRST_DENY


def test_batch_without_evaluations_is_a_single_evaluation():
    (only,) = EvaluationsRequest.model_validate({"subject": ALICE, "action": READ, "resource": R1}).resolve()
    assert isinstance(only, EvaluationRequest)


REQUESTABLE = {
    "decision": False,
    "context": {
        "evaluation_id": "eval_1",
        "reason": "approval_required",
        "access_request": {"template": "manager", "expires_at": "2026-04-30T20:25:00Z", "x-ext": {"k": 1}},
    },
}


def test_requestable_denial_accessor():
    decision = Decision.model_validate(REQUESTABLE)
    denial = decision.requestable_denial
    assert denial is not None
    assert (denial.evaluation_id, denial.reason) == ("eval_1", "approval_required")
    assert denial.access_request.template == "manager"
    assert denial.access_request.model_dump()["x-ext"] == {"k": 1}  # extension members survive
    assert decision.next_action() is NextAction.REQUEST


@pytest.mark.parametrize(
    "decision",
    [
        {"decision": True, "context": REQUESTABLE["context"]},
        {"decision": False},
        {"decision": False, "context": {"access_request": {"template": "no expiry"}}},
        {"decision": False, "context": {"access_request": "yes"}},
    ],
)
def test_not_requestable(decision: dict[str, Any]):
    assert Decision.model_validate(decision).requestable_denial is None


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ({"reason": "approval_expired"}, NextAction.NONE),  # request without access_request is none
        ({**REQUESTABLE["context"], "reason": "approval_expired"}, NextAction.REQUEST),
        ({**REQUESTABLE["context"], "reason": "policy_denied"}, NextAction.NONE),
        ({**REQUESTABLE["context"], "next_action": "none"}, NextAction.NONE),
        ({"reason": "grant_pending", "retry_after": 5}, NextAction.RETRY),
        ({"reason": "policy_denied", "next_action": "retry"}, NextAction.RETRY),
        ({"reason": "something_else", "next_action": "bogus"}, NextAction.NONE),
    ],
)
def test_next_action_resolution_order(context: dict[str, Any], expected: NextAction):
    assert Decision(decision=False, context=context).next_action() is expected


def test_retry_after_and_constructors():
    assert Decision.deny("grant_pending", retry_after=5).retry_after == 5
    assert Decision.deny("grant_pending", retry_after=True).retry_after is None
    assert Decision.deny().to_wire() == {"decision": False}
    assert Decision.permit({"a": 1}).to_wire() == {"decision": True, "context": {"a": 1}}


def test_approval_accessor():
    request = EvaluationRequest.model_validate(
        {"subject": ALICE, "action": READ, "resource": R1, "context": {"approval": {"id": "a", "approved_until": "t"}}}
    )
    assert request.approval is not None
    assert request.approval.id == "a"
    assert request.with_context({"approval": {"id": ""}}).approval is None
