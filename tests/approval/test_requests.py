"""A new approval request, its intent and its task rows, built from their inputs alone."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_approval.approval.binding import CallBinding
from mcp_approval.approval.engine.requests import (
    new_intent,
    new_workflow,
    request_deadline,
    status_message,
    submission_for,
)
from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.approval.persistence.states import IntentState
from mcp_approval.backends import ApprovalSubmission
from mcp_approval.clock import iso8601
from mcp_approval.keyring import BindingCipher, BindingIntegrityError
from mcp_approval.policy import Decision, EvaluationRequest, ToolCallMapper
from mcp_approval.policy.mapping import ToolRule
from mcp_approval.protocol import META_AUTHORIZATION, META_TOOL_APPROVAL_DEADLINE

NOW = 1_800_000_000_000
HOUR = 3_600_000
OPTIONS = ApprovalOptions(
    default_deadline_s=7_200, max_pending_s=86_400, poll_interval_s=3, task_poll_interval_s=4, result_retention_s=600
)
BINDING = CallBinding(
    tool="wire_transfer",
    arguments={"to": "acct-1", "amount": 30_000},
    principal="alice",
    client={"name": "cli"},
    tool_fingerprint="fp-1",
)


def requestable(**hint: Any) -> Decision:
    return Decision.deny("approval_required", access_request={"expires_at": iso8601(NOW + HOUR), **hint})


def policy_request(mapper: ToolCallMapper | None = None) -> EvaluationRequest:
    """The policy request of BINDING, as the gate maps it."""
    return (mapper or ToolCallMapper()).map_call(
        principal=BINDING.principal, tool=BINDING.tool, arguments=BINDING.arguments, client=BINDING.client
    )


def test_a_submission_carries_the_call_the_policy_display_and_deadline() -> None:
    decision = requestable(template="treasury", display={"title": "Large transfer", "description": "Over 10k."})

    submission = submission_for(BINDING, decision, policy_request(), options=OPTIONS, now=NOW)

    assert (submission.tool, dict(submission.arguments), submission.requester) == (
        "wire_transfer",
        {"to": "acct-1", "amount": 30_000},
        "alice",
    )
    assert (submission.template, submission.title, submission.description) == (
        "treasury",
        "Large transfer",
        "Over 10k.",
    )
    assert submission.deadline_ms == NOW + HOUR
    assert submission.reason == "approval_required"
    assert submission.inputs is None
    evaluation = submission.evaluation
    assert evaluation is not None
    assert evaluation.subject["id"] == "alice"
    assert evaluation.resource["id"] == "wire_transfer"
    assert evaluation.context is not None
    assert evaluation.context["client"] == {"name": "cli"}
    assert evaluation.denial == {
        "expires_at": iso8601(NOW + HOUR),
        "template": "treasury",
        "reason": "approval_required",
    }


def test_display_members_that_are_not_text_are_left_out() -> None:
    decision = requestable(display={"title": 42, "description": ["x"]})
    submission = submission_for(BINDING, decision, policy_request(), options=OPTIONS, now=NOW)
    assert (submission.title, submission.description, submission.template) == (None, None, None)


def test_the_denied_evaluation_is_the_policy_request_the_pdp_decided_unchanged() -> None:
    mapper = ToolCallMapper(rules={"wire_transfer": ToolRule(resource_id_from="to", resource_type="account")})
    request = policy_request(mapper)
    submission = submission_for(BINDING, requestable(), request, options=OPTIONS, now=NOW)
    assert submission.evaluation is not None
    wire = request.to_wire()
    evaluation = submission.evaluation
    assert (evaluation.subject, evaluation.resource, evaluation.action, evaluation.context) == (
        wire["subject"],
        wire["resource"],
        wire["action"],
        wire["context"],
    )
    assert evaluation.resource["id"] == "acct-1"  # mapped by that mapper's rule, not mapped again by a default one


@pytest.mark.parametrize(
    ("expires_at", "deadline"),
    [
        (None, NOW + 7_200_000),  # absent: the default deadline
        ("not a time", NOW + 7_200_000),  # unreadable: the default deadline
        (iso8601(NOW + HOUR), NOW + HOUR),  # the policy's own
        (iso8601(NOW + 30 * 86_400_000), NOW + 86_400_000),  # cut to max_pending_s
        (iso8601(NOW - HOUR), NOW),  # already past: now
    ],
)
def test_the_request_deadline(expires_at: str | None, deadline: int) -> None:
    assert request_deadline(expires_at, options=OPTIONS, now=NOW) == deadline


def test_the_default_deadline_never_exceeds_the_longest_window() -> None:
    options = ApprovalOptions(default_deadline_s=10 * 86_400, max_pending_s=86_400)
    assert request_deadline(None, options=options, now=NOW) == NOW + 86_400_000


def test_an_intent_has_a_fresh_key_and_its_body_sealed_under_it() -> None:
    cipher = BindingCipher.ephemeral()
    submission = ApprovalSubmission(tool="wire_transfer", arguments={"to": "acct-1"}, requester="alice")

    first = new_intent("task-1", 2, BINDING, submission, owner="owner-digest", cipher=cipher, now=NOW)
    second = new_intent("task-1", 2, BINDING, submission, owner="owner-digest", cipher=cipher, now=NOW)

    assert first.key != second.key
    assert len(first.key) >= 43  # 256 bits, URL-safe base64
    assert (first.task_id, first.generation, first.principal_digest) == ("task-1", 2, "owner-digest")
    assert (first.tool_name, first.arguments_digest) == ("wire_transfer", BINDING.digest)
    assert (first.state, first.handle, first.created_at) == (IntentState.OPEN, None, NOW)
    assert ApprovalSubmission.from_json(cipher.open(first.body_sealed, record=first.key)) == submission
    with pytest.raises(BindingIntegrityError):
        cipher.open(first.body_sealed, record=second.key)


def test_new_workflow_rows_follow_the_request_and_the_options() -> None:
    cipher = BindingCipher.ephemeral()
    submission = ApprovalSubmission(
        tool="wire_transfer",
        arguments={},
        requester="alice",
        template="treasury",
        description="Over 10k.",
        deadline_ms=NOW + HOUR,
    )

    new = new_workflow(
        "task-1",
        BINDING,
        submission,
        intent_key="key-1",
        owner="owner-digest",
        handle="handle-1",
        backend="local",
        cipher=cipher,
        options=OPTIONS,
        now=NOW,
    )

    assert (new.task_id, new.intent_key, new.principal_digest, new.handle, new.backend) == (
        "task-1",
        "key-1",
        "owner-digest",
        "handle-1",
        "local",
    )
    assert (new.tool_name, new.arguments_digest, new.tool_fingerprint, new.template) == (
        "wire_transfer",
        BINDING.digest,
        "fp-1",
        "treasury",
    )
    assert new.request_deadline == NOW + HOUR
    assert new.next_check_at == NOW + 3_000
    assert new.ttl_ms == HOUR + 600_000  # until the deadline, then the result's retention
    assert new.poll_interval_ms == 4_000
    assert new.status_message == status_message("wire_transfer", submission, NOW + HOUR)
    assert iso8601(NOW + HOUR) in new.status_message  # a tasks client reads how long to wait
    assert new.meta[META_TOOL_APPROVAL_DEADLINE] == iso8601(NOW + HOUR)
    assert new.meta[META_AUTHORIZATION]["remediation"] == "available"
    assert new.binding_sealed is not None
    assert CallBinding.from_json(cipher.open(new.binding_sealed, record="task-1")) == BINDING


def test_a_workflow_without_a_request_deadline_gets_the_default() -> None:
    submission = ApprovalSubmission(tool="wire_transfer", arguments={}, requester="alice")
    new = new_workflow(
        "task-1",
        BINDING,
        submission,
        intent_key="",
        owner="owner-digest",
        handle=None,
        backend="local",
        cipher=BindingCipher.ephemeral(),
        options=OPTIONS,
        now=NOW,
    )
    assert new.request_deadline == NOW + 7_200_000
    assert new.handle is None


PENDING = (
    "Calling t needs approval. It has been submitted and will run only if approved. "
    f"If no one decides by {iso8601(NOW + HOUR)}, it expires and the call never runs."
)


@pytest.mark.parametrize(
    ("title", "description", "message"),
    [(None, None, PENDING), ("Big one", None, f"Big one. {PENDING}"), ("Big", "Over 10k.", f"Over 10k. {PENDING}")],
)
def test_the_status_message_leads_with_what_the_policy_says(
    title: str | None, description: str | None, message: str
) -> None:
    submission = ApprovalSubmission(tool="t", arguments={}, requester="alice", title=title, description=description)
    assert status_message("t", submission, NOW + HOUR) == message


def test_a_long_description_is_shortened_so_the_deadline_still_fits() -> None:
    submission = ApprovalSubmission(tool="t", arguments={}, requester="alice", description="Why. " * 200)
    message = status_message("t", submission, NOW + HOUR)
    assert message.endswith(PENDING)
    assert len(message) <= 300
