"""The client's envelope reader: every result that can carry one, and everything a hostile server may send."""

from __future__ import annotations

import copy

import mcp_types as types
import pytest

from mcp_approval.client.denials import ResultKind, denial_of, read_denial
from mcp_approval.denials import (
    Remediation,
    credential_remediation,
    final_denial,
    remediation_for,
    task_created,
    task_status,
    url_interaction,
)
from mcp_approval.denials.models import MAX_AUTHORIZATION_DETAILS, MAX_DETAILS_DEPTH
from mcp_approval.tasks.models import TaskRecord, create_task_result, detailed_task
from mcp_approval.tasks.states import TaskStatus

AUTHORIZATION = "io.modelcontextprotocol/authorization"
CONTEXT_KEY = "io.modelcontextprotocol/authorization-context-id"
DETAILS = [{"type": "payment_initiation", "instructedAmount": {"currency": "EUR", "amount": "123.50"}}]


def call_result(envelope: object, *, is_error: bool = True) -> dict:
    return {
        "resultType": "complete",
        "isError": is_error,
        "content": [{"type": "text", "text": "denied"}],
        "_meta": {AUTHORIZATION: envelope},
    }


def available(*hints: dict, **extra: object) -> dict:
    body: dict = {"reason": "insufficient_authorization", "remediation": "available", **extra}
    if hints:
        body["remediationHints"] = list(hints)
    return body


def record(status: TaskStatus, **fields) -> TaskRecord:
    return TaskRecord(
        task_id="task_3f91b2",
        principal_digest=None,
        tool_name="t",
        status=status,
        created_at=1_780_000_000_000,
        updated_at=1_780_000_000_000,
        ttl_ms=604_800_000,
        poll_interval_ms=5000,
        **fields,
    )


# -- each carrier --------------------------------------------------------------------------------


@pytest.mark.sep_check("sep-2643-client-unavailable-is-final")
def test_unavailable_forbids_unchanged_retry_and_reauthorization():
    denial = denial_of(final_denial("no", remediation=Remediation.UNAVAILABLE, context_id="authzctx_2b7e9c"))
    assert denial is not None
    assert denial.result_kind is ResultKind.CALL_TOOL
    assert denial.retry_unchanged_forbidden
    assert denial.reauthorization_forbidden
    assert not denial.remedy_may_exist


@pytest.mark.sep_check("sep-2643-client-undisclosed-not-final")
def test_undisclosed_forbids_unchanged_retry_but_never_means_no_remedy():
    denial = denial_of(final_denial("ask", remediation=Remediation.UNDISCLOSED))
    assert denial is not None
    assert denial.retry_unchanged_forbidden
    assert denial.remedy_may_exist
    assert not denial.reauthorization_forbidden


def test_available_allows_pursuing_the_remedy():
    denial = denial_of(credential_remediation("more", remediation_for(DETAILS, single_use=True)))
    assert denial is not None
    assert not denial.retry_unchanged_forbidden
    assert denial.authorization_remediation is not None
    assert denial.authorization_remediation.authorization_details == DETAILS
    assert denial.authorization_remediation.authorization_reference is None


@pytest.mark.sep_check("sep-2643-client-echo-on-retry", "sep-2643-client-echo-verbatim-under-key")
@pytest.mark.parametrize("context_id", ["authzctx_7c5d1d79", "a" * 256, "~!#$%&'()*+,-./:;<=>?@[]^_`{|}"])
def test_the_retry_meta_echoes_the_context_id_verbatim_under_its_key(context_id):
    denial = denial_of(final_denial("no", remediation=Remediation.UNDISCLOSED, context_id=context_id))
    assert denial is not None
    assert denial.retry_meta() == {CONTEXT_KEY: context_id}
    assert denial_of(final_denial("no", remediation=Remediation.UNDISCLOSED)).retry_meta() == {}


def test_input_required_result_with_url_hint():
    result = url_interaction(url="https://mcp.example.com/approve", message="m", context_id="c1")
    reading = read_denial(result)
    assert reading.problem is None
    assert reading.denial.result_kind is ResultKind.INPUT_REQUIRED
    assert reading.denial.hints[0].type == "url"
    assert reading.denial.url_requests == {"authorization": "https://mcp.example.com/approve"}


def test_create_task_result_and_each_tasks_get_while_non_terminal():
    created = task_created(create_task_result(record(TaskStatus.WORKING)), context_id="authzctx_9e4c02b1")
    denial = denial_of(created)
    assert denial.result_kind is ResultKind.CREATE_TASK
    assert denial.task_id == "task_3f91b2"
    assert [hint.type for hint in denial.hints] == ["task"]
    envelope_document = created["_meta"][AUTHORIZATION]
    for status in (TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED):
        polled = {**detailed_task(record(status)), "resultType": "complete"}
        polled["_meta"] = {AUTHORIZATION: envelope_document}
        again = denial_of(polled, method="tasks/get")
        assert again.result_kind is ResultKind.TASK_STATUS
        assert again.context_id == "authzctx_9e4c02b1"


def test_a_completed_tasks_denial_is_read_from_its_result():
    final = final_denial("The access request was not approved.", remediation=Remediation.UNAVAILABLE)
    stored = {**final.model_dump(mode="json", by_alias=True, exclude_none=True), "resultType": "complete"}
    done = detailed_task(record(TaskStatus.COMPLETED, result=stored))
    reading = read_denial(done, method="tasks/get")
    assert reading.denial.remediation is Remediation.UNAVAILABLE
    assert reading.denial.result_kind is ResultKind.CALL_TOOL
    stale = {**done, "_meta": {AUTHORIZATION: available({"type": "task"})}}
    reading = read_denial(stale, method="tasks/get")
    assert reading.denial.remediation is Remediation.UNAVAILABLE
    assert any("completed task" in note for note in reading.notes)


def test_models_and_dicts_read_alike():
    model = final_denial("no", remediation=Remediation.UNAVAILABLE, context_id="x1")
    as_dict = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert read_denial(model) == read_denial(as_dict)


def test_results_without_an_envelope_read_as_nothing():
    reading = read_denial(types.CallToolResult(content=[], is_error=True))
    assert reading.denial is None
    assert reading.problem is None
    assert not reading.envelope_present


# -- hints ---------------------------------------------------------------------------------------


@pytest.mark.sep_check("sep-2643-client-ignore-unknown-hints")
def test_unknown_hint_types_are_ignored_with_a_note():
    reading = read_denial(
        call_result(
            available(
                {"type": "ciba", "binding_message": "approve on your phone"},
                {"type": "authorization_remediation", "authorization_details": DETAILS},
                {"type": ""},
                "not-an-object",
            )
        )
    )
    assert [hint.type for hint in reading.denial.hints] == ["authorization_remediation"]
    assert any("unrecognised type 'ciba'" in note for note in reading.notes)
    assert sum("no string type" in note for note in reading.notes) == 2


def test_hints_that_do_not_belong_on_the_result_are_ignored():
    reading = read_denial(call_result(available({"type": "url"}, {"type": "task"})))
    assert reading.denial.hints == ()
    assert len(reading.notes) == 2
    input_required = url_interaction(url="https://a.example/x", message="m").model_dump(by_alias=True, mode="json")
    del input_required["inputRequests"]
    input_required["requestState"] = "s"
    reading = read_denial(input_required)
    assert reading.denial.hints == ()  # a url hint with no url elicitation to point at
    assert any("no url-mode elicitation" in note for note in reading.notes)


@pytest.mark.sep_check("sep-2643-no-hints-unless-available", "sep-2643-hint-type-required")
def test_hints_on_unavailable_or_undisclosed_are_ignored():
    for remediation in ("unavailable", "undisclosed"):
        envelope = {"reason": "insufficient_authorization", "remediation": remediation, "remediationHints": []}
        reading = read_denial(call_result(envelope))
        assert reading.denial.remediation == remediation
        assert reading.denial.hints == ()
        assert any("must not appear" in note for note in reading.notes)


@pytest.mark.sep_check("sep-2643-client-reference-opaque")
@pytest.mark.parametrize("reference", ["ar_abc", "urn:x:y", "not base64 !", '{"looks": "like json"}'])
def test_authorization_reference_is_kept_verbatim_and_never_interpreted(reference):
    hint = {"type": "authorization_remediation", "authorization_details": DETAILS, "authorization_reference": reference}
    denial = denial_of(call_result(available(hint)))
    assert denial.authorization_remediation.authorization_reference == reference


@pytest.mark.sep_check("sep-2643-client-hint-origin-assurance")
def test_hints_are_actionable_only_with_origin_assurance():
    denial = denial_of(call_result(available({"type": "authorization_remediation", "authorization_details": DETAILS})))
    assert denial.actionable_hints(origin_assured=False) == ()
    assert [hint.type for hint in denial.actionable_hints(origin_assured=True)] == ["authorization_remediation"]
    url_denial = denial_of(url_interaction(url="https://mcp.example.com/approve", message="m"))
    assert url_denial.actionable_hints(origin_assured=False) == ()
    assert url_denial.actionable_url_requests(origin_assured=False) == {}
    assert url_denial.actionable_url_requests(origin_assured=True) == {
        "authorization": "https://mcp.example.com/approve"
    }


# -- hostile input ---------------------------------------------------------------------------------


def nested(depth: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(depth):
        value = {"n": value}
    return value


@pytest.mark.parametrize(
    ("details", "why"),
    [
        pytest.param([], "non-empty array", id="empty"),
        pytest.param({"type": "x"}, "non-empty array", id="not-an-array"),
        pytest.param(["x"], "not an object", id="not-objects"),
        pytest.param([{"amount": 1}], "type must be", id="no-type"),
        pytest.param([{"type": 7}], "type must be", id="numeric-type"),
        pytest.param([{"type": "t" * 300}], "type must be", id="long-type"),
        pytest.param([{"type": "x", "v": float("nan")}], "non-finite", id="nan"),
        pytest.param([{"type": "x", **nested(MAX_DETAILS_DEPTH + 1)}], "deeper", id="too-deep"),
        pytest.param([{"type": "x"}] * (MAX_AUTHORIZATION_DETAILS + 1), "the limit is", id="too-many"),
        pytest.param([{"type": "x", "blob": "y" * 20_000}], "bytes", id="too-large"),
    ],
)
def test_hostile_authorization_details_drop_the_hint_with_a_reason(details, why):
    hint = {"type": "authorization_remediation", "authorization_details": details}
    reading = read_denial(call_result(available(hint)))
    assert reading.denial is not None  # the classification stands
    assert reading.denial.hints == ()
    assert any(why in note for note in reading.notes), reading.notes


def test_a_reference_that_is_not_a_short_string_is_dropped():
    for reference in (42, "r" * 600, "line\nbreak", ""):
        hint = {
            "type": "authorization_remediation",
            "authorization_details": DETAILS,
            "authorization_reference": reference,
        }
        denial = denial_of(call_result(available(hint)))
        assert denial.authorization_remediation.authorization_reference is None


@pytest.mark.parametrize("context_id", [42, None, ["a"], {"a": 1}, "", "x" * 257, "tab\tinside", "naïve", "emoji-🙂"])
def test_unusable_context_ids_are_ignored_not_fatal_and_never_echoed(context_id):
    reading = read_denial(
        call_result(
            {"reason": "insufficient_authorization", "remediation": "unavailable", "authorizationContextId": context_id}
        )
    )
    assert reading.problem is None
    assert reading.denial.context_id is None
    assert reading.denial.retry_meta() == {}
    assert any("unusable authorizationContextId" in note for note in reading.notes)


@pytest.mark.parametrize(
    ("envelope", "why"),
    [
        pytest.param("available", "not an object", id="string-envelope"),
        pytest.param({"remediation": "available"}, "no string reason", id="no-reason"),
        pytest.param({"reason": 3, "remediation": "available"}, "no string reason", id="numeric-reason"),
        pytest.param({"reason": "insufficient_authorization"}, "not one SEP-2643 defines", id="no-remediation"),
        pytest.param({"reason": "insufficient_authorization", "remediation": "maybe"}, "not one", id="bad-remediation"),
        pytest.param(available(pad="p" * 70_000), "the limit is", id="oversized"),
    ],
)
def test_ill_formed_envelopes_are_reported_not_raised(envelope, why):
    reading = read_denial(call_result(envelope))
    assert reading.denial is None
    assert why in reading.problem
    assert reading.envelope_present


def test_deeply_nested_envelopes_are_reported():
    deep: object = "x"
    for _ in range(5000):
        deep = [deep]
    reading = read_denial(call_result(available(extra=deep)))
    assert reading.denial is None
    assert "not serialisable" in reading.problem


@pytest.mark.parametrize(
    ("result", "method", "why"),
    [
        pytest.param(call_result(available(), is_error=False), "tools/call", "without isError", id="success"),
        pytest.param({"tools": [], "_meta": {AUTHORIZATION: available()}}, "tools/list", "cannot carry", id="list"),
        pytest.param(
            {"messages": [], "_meta": {AUTHORIZATION: available()}}, "prompts/get", "cannot carry", id="prompt"
        ),
        pytest.param(call_result(available()), "tasks/get", "cannot carry", id="call-result-for-tasks-get"),
        pytest.param(
            {"resultType": "task", "taskId": "t", "status": "working", "_meta": {AUTHORIZATION: available()}},
            "tasks/get",
            "cannot carry",
            id="create-task-for-tasks-get",
        ),
        pytest.param(
            {
                "resultType": "task",
                "taskId": "t",
                "status": "working",
                "_meta": {AUTHORIZATION: {"reason": "insufficient_authorization", "remediation": "unavailable"}},
            },
            "tools/call",
            "only carries available",
            id="unavailable-task",
        ),
        pytest.param(
            {"resultType": "task", "taskId": "t", "status": "completed", "_meta": {AUTHORIZATION: available()}},
            "tools/call",
            "already terminal",
            id="terminal-create-task",
        ),
        pytest.param(
            {
                "resultType": "input_required",
                "requestState": "s",
                "_meta": {AUTHORIZATION: {"reason": "insufficient_authorization", "remediation": "undisclosed"}},
            },
            "tools/call",
            "only carries available",
            id="undisclosed-input-required",
        ),
    ],
)
def test_envelopes_on_the_wrong_result_are_rejected_with_a_reason(result, method, why):
    reading = read_denial(result, method=method)
    assert reading.denial is None
    assert why in reading.problem


def test_reading_never_mutates_the_result():
    result = call_result(available({"type": "authorization_remediation", "authorization_details": DETAILS}))
    before = copy.deepcopy(result)
    read_denial(result)
    assert result == before


def test_non_object_results_are_reported():
    assert read_denial(["not", "a", "result"]).problem == "the result is not a JSON object"  # type: ignore[arg-type]


def test_task_status_builder_output_reads_back():
    created = task_created(create_task_result(record(TaskStatus.WORKING)))
    envelope = denial_of(created)
    assert envelope is not None
    polled = task_status({**detailed_task(record(TaskStatus.WORKING)), "resultType": "complete"}, None)
    assert read_denial(polled, method="tasks/get").denial is None
