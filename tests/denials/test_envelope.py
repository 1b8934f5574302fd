"""The envelope model and the builders for each placement, checked against the SEP's own examples."""

from __future__ import annotations

import mcp_types as types
import pytest
from pydantic import ValidationError

from mcp_approval.denials import (
    AuthorizationDenialEnvelope,
    AuthorizationReferences,
    AuthorizationRemediation,
    EnvelopeAfterExecutionError,
    Remediation,
    RemediationHint,
    TaskHint,
    UrlHint,
    canonical_details,
    challenge_result,
    credential_remediation,
    denial_envelope,
    final_denial,
    operation_executing,
    operation_started,
    ordinary_failure,
    remediation_for,
    task_created,
    task_status,
    url_interaction,
)
from mcp_approval.tasks.models import TaskRecord, create_task_result, detailed_task
from mcp_approval.tasks.states import TaskStatus

AUTHORIZATION = "io.modelcontextprotocol/authorization"
PAYMENT = {
    "type": "payment_initiation",
    "actions": ["initiate", "status", "cancel"],
    "instructedAmount": {"currency": "EUR", "amount": "123.50"},
    "creditorName": "Merchant A",
    "creditorAccount": {"iban": "DE02100100109307118603"},
    "remittanceInformationUnstructured": "Ref Number Merchant",
}
KEY = b"k" * 32


def dump(result: types.Result) -> dict:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def record(status: TaskStatus) -> TaskRecord:
    return TaskRecord(
        task_id="task_3f91b2",
        principal_digest=None,
        tool_name="files.list_folder",
        status=status,
        created_at=1_780_000_000_000,
        updated_at=1_780_000_000_000,
        ttl_ms=604_800_000,
        poll_interval_ms=5000,
    )


# -- the model ---------------------------------------------------------------------------------------


@pytest.mark.sep_check("sep-2643-envelope-reason-required", "sep-2643-envelope-remediation-required")
def test_reason_and_remediation_are_required_and_remediation_is_one_of_three():
    with pytest.raises(ValidationError):
        AuthorizationDenialEnvelope.model_validate({"reason": "insufficient_authorization"})
    with pytest.raises(ValidationError):
        AuthorizationDenialEnvelope.model_validate({"reason": "", "remediation": "available"})
    with pytest.raises(ValidationError):
        AuthorizationDenialEnvelope.model_validate({"reason": "insufficient_authorization", "remediation": "maybe"})
    assert {value.value for value in Remediation} == {"available", "unavailable", "undisclosed"}
    envelope = denial_envelope(Remediation.UNAVAILABLE)
    assert envelope.document() == {"reason": "insufficient_authorization", "remediation": "unavailable"}


@pytest.mark.sep_check("sep-2643-no-hints-unless-available")
@pytest.mark.parametrize("remediation", [Remediation.UNAVAILABLE, Remediation.UNDISCLOSED])
def test_hints_are_refused_unless_available(remediation):
    with pytest.raises(ValidationError, match="must not be present"):
        AuthorizationDenialEnvelope(remediation=remediation, remediation_hints=(UrlHint(),))
    with pytest.raises(ValidationError, match="must not be present"):
        AuthorizationDenialEnvelope.model_validate({"remediation": remediation.value, "remediationHints": []})
    with pytest.raises(ValidationError):
        denial_envelope(remediation, hints=[TaskHint()])


@pytest.mark.sep_check("sep-2643-hint-type-required")
def test_every_hint_has_a_type_and_unknown_types_keep_their_members():
    with pytest.raises(ValidationError):
        AuthorizationDenialEnvelope.model_validate({"remediation": "available", "remediationHints": [{}]})
    with pytest.raises(ValidationError):
        AuthorizationDenialEnvelope.model_validate({"remediation": "available", "remediationHints": [{"type": ""}]})
    envelope = AuthorizationDenialEnvelope.model_validate(
        {"remediation": "available", "remediationHints": [{"type": "ciba", "binding_message": "ok?"}, {"type": "url"}]}
    )
    assert isinstance(envelope.remediation_hints[1], UrlHint)
    assert type(envelope.remediation_hints[0]) is RemediationHint
    assert envelope.document()["remediationHints"] == [{"type": "ciba", "binding_message": "ok?"}, {"type": "url"}]


def test_known_hints_reject_members_of_other_types():
    with pytest.raises(ValidationError):
        AuthorizationDenialEnvelope.model_validate(
            {"remediation": "available", "remediationHints": [{"type": "authorization_remediation"}]}
        )


# -- placements --------------------------------------------------------------------------------------


@pytest.mark.sep_check("sep-2643-server-envelope-in-meta", "sep-2643-server-url-hint")
def test_case_1_url_interaction_matches_the_example():
    result = url_interaction(
        url="https://mcp.example.com/approve-folder-access",
        message="Open this page to approve access to the requested folder.",
        request_state="eyJhcHByb3ZhbCI6ImZsZF8xMjM0NSJ9",
        input_key="folder_approval",
        context_id="authzctx_7c5d1d79",
    )
    assert dump(result) == {
        "resultType": "input_required",
        "inputRequests": {
            "folder_approval": {
                "method": "elicitation/create",
                "params": {
                    "mode": "url",
                    "url": "https://mcp.example.com/approve-folder-access",
                    "message": "Open this page to approve access to the requested folder.",
                },
            }
        },
        "requestState": "eyJhcHByb3ZhbCI6ImZsZF8xMjM0NSJ9",
        "_meta": {
            AUTHORIZATION: {
                "reason": "insufficient_authorization",
                "remediation": "available",
                "authorizationContextId": "authzctx_7c5d1d79",
                "remediationHints": [{"type": "url"}],
            }
        },
    }


@pytest.mark.parametrize("url", ["javascript:alert(1)", "/relative", "ftp://x.example/a", "https://"])
def test_case_1_refuses_urls_a_client_must_not_open(url):
    with pytest.raises(ValueError, match="absolute http"):
        url_interaction(url=url, message="m")


@pytest.mark.sep_check("sep-2643-server-task-hint")
def test_case_2_create_task_result_matches_the_example():
    created = task_created(create_task_result(record(TaskStatus.WORKING)), context_id="authzctx_9e4c02b1")
    assert created["resultType"] == "task"
    assert created["taskId"] == "task_3f91b2"
    assert created["status"] == "working"
    assert created["ttlMs"] == 604_800_000
    assert created["pollIntervalMs"] == 5000
    assert created["_meta"] == {
        AUTHORIZATION: {
            "reason": "insufficient_authorization",
            "remediation": "available",
            "authorizationContextId": "authzctx_9e4c02b1",
            "remediationHints": [{"type": "task"}],
        }
    }
    with pytest.raises(ValueError, match="CreateTaskResult"):
        task_created(detailed_task(record(TaskStatus.WORKING)))
    with pytest.raises(ValueError, match="terminal"):
        task_created(create_task_result(record(TaskStatus.COMPLETED)))


@pytest.mark.sep_check("sep-2643-server-task-envelope-repeated")
@pytest.mark.parametrize("status", list(TaskStatus))
def test_case_2_tasks_get_repeats_the_envelope_exactly_while_non_terminal(status):
    created = task_created(create_task_result(record(TaskStatus.WORKING)), context_id="authzctx_9e4c02b1")
    envelope = AuthorizationDenialEnvelope.model_validate(created["_meta"][AUTHORIZATION])
    polled = task_status({**detailed_task(record(status)), "_meta": {"other": 1}}, envelope)
    if status in (TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED):
        assert polled["_meta"] == {"other": 1, AUTHORIZATION: created["_meta"][AUTHORIZATION]}
    else:
        assert polled["_meta"] == {"other": 1}
    stale = task_status({**detailed_task(record(status)), "_meta": {AUTHORIZATION: {}}}, None)
    assert "_meta" not in stale


@pytest.mark.sep_check("sep-2643-server-credential-remediation", "sep-2643-server-no-reference-single-use")
def test_case_3_credential_remediation_matches_the_stdio_example():
    remediation = remediation_for([PAYMENT], single_use=True, references=AuthorizationReferences(KEY))
    result = credential_remediation(
        "Current authorization is insufficient for this payment.", remediation, context_id="authzctx_c17a3f5e"
    )
    assert dump(result) == {
        "resultType": "complete",
        "isError": True,
        "content": [{"type": "text", "text": "Current authorization is insufficient for this payment."}],
        "_meta": {
            AUTHORIZATION: {
                "reason": "insufficient_authorization",
                "remediation": "available",
                "authorizationContextId": "authzctx_c17a3f5e",
                "remediationHints": [{"type": "authorization_remediation", "authorization_details": [PAYMENT]}],
            }
        },
    }


@pytest.mark.sep_check("sep-2643-server-reference-stable")
def test_reusable_credentials_get_a_stable_opaque_reference():
    references = AuthorizationReferences(KEY)
    reordered = {key: PAYMENT[key] for key in reversed(list(PAYMENT))}
    other = {"type": "account_information", "actions": ["read"]}
    first = remediation_for([PAYMENT, other], single_use=False, references=references)
    second = remediation_for([other, reordered], single_use=False, references=references)
    changed = remediation_for(
        [{**PAYMENT, "creditorName": "Merchant B"}, other], single_use=False, references=references
    )
    assert first.authorization_reference == second.authorization_reference
    assert first.authorization_reference != changed.authorization_reference
    assert first.authorization_reference.startswith("ar_")
    assert "Merchant" not in first.authorization_reference
    another_key = remediation_for([PAYMENT, other], single_use=False, references=AuthorizationReferences(b"z" * 32))
    assert another_key.authorization_reference != first.authorization_reference
    assert canonical_details([PAYMENT, other]) == canonical_details([other, reordered])
    with pytest.raises(ValueError, match="at least 32"):
        AuthorizationReferences(b"short")


def test_credential_remediation_rejects_hostile_details_before_sending():
    with pytest.raises(ValidationError, match="type must be"):
        AuthorizationRemediation(authorization_details=[{"no": "type"}])
    with pytest.raises(ValidationError, match="non-empty array"):
        remediation_for([], single_use=True)


@pytest.mark.sep_check("sep-2643-server-undisclosed-not-unavailable")
@pytest.mark.parametrize("remediation", [Remediation.UNAVAILABLE, Remediation.UNDISCLOSED])
def test_case_4_final_denials_carry_no_hints(remediation):
    result = final_denial(
        "You do not have access to this workspace.", remediation=remediation, context_id="authzctx_2b7e9c"
    )
    assert dump(result)["_meta"] == {
        AUTHORIZATION: {
            "reason": "insufficient_authorization",
            "remediation": remediation.value,
            "authorizationContextId": "authzctx_2b7e9c",
        }
    }
    assert result.is_error
    with pytest.raises(ValueError, match="unavailable or undisclosed"):
        final_denial("x", remediation=Remediation.AVAILABLE)  # type: ignore[arg-type]


def test_case_5_optional_result_is_available_with_or_without_the_hint():
    bare = dump(challenge_result("step up"))["_meta"][AUTHORIZATION]
    assert bare == {"reason": "insufficient_authorization", "remediation": "available"}
    hinted = dump(challenge_result("step up", remediation=remediation_for([PAYMENT], single_use=True)))
    assert hinted["_meta"][AUTHORIZATION]["remediationHints"][0]["type"] == "authorization_remediation"


# -- never after execution ---------------------------------------------------------------------------


@pytest.mark.sep_check("sep-2643-server-no-envelope-after-execution", "sep-2643-server-ordinary-failure-after-start")
def test_no_builder_produces_an_envelope_once_the_operation_started():
    builders = [
        lambda: url_interaction(url="https://a.example/x", message="m"),
        lambda: task_created(create_task_result(record(TaskStatus.WORKING))),
        lambda: credential_remediation("m", remediation_for([PAYMENT], single_use=True)),
        lambda: final_denial("m", remediation=Remediation.UNAVAILABLE),
        lambda: challenge_result("m"),
    ]
    assert not operation_started()
    with operation_executing():
        assert operation_started()
        for build in builders:
            with pytest.raises(EnvelopeAfterExecutionError):
                build()
        failure = ordinary_failure("failed midway")
    assert not operation_started()
    assert failure.is_error
    assert failure.meta is None
    for build in builders:
        build()  # fine again outside
