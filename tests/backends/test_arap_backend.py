"""``ArapBackend`` + ``HttpPDP`` against a real ``mcp-approval arap-server`` subprocess.

A recording :class:`~tests.support.fault_proxy.FaultProxy` fronts the arap-server (which
publishes the proxy's URL as its identifier), so each test sees exactly what the PEP sent and
can inject 5xx, timeouts, garbage and crafted answers. Checklist items are named per test
(conformance/arap-checklist.md).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest

from mcp_approval.backends.arap import ArapBackend, ArapSettings
from mcp_approval.backends.arap_wire import encode_handle
from mcp_approval.backends.contract import (
    ApprovalBackendError,
    ApprovalStatus,
    ApprovalSubmission,
    DeniedEvaluation,
    IdempotencyConflictError,
    SubmissionRejectedError,
    UnknownRequestError,
)
from mcp_approval.policy import Decision, EvaluationRequest, NextAction, ToolCallMapper
from mcp_approval.policy.http import HttpPDP
from tests.support.arap import ARS_CLIENT_TOKEN, ArapDeployment, arap_deployment
from tests.support.fault_proxy import Fault, FaultProxy
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import Reviewer

pytestmark = pytest.mark.anyio
REQUESTS = "/access/v1/requests"


@pytest.fixture(scope="module")
def ars(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArapDeployment]:
    """The arap-server behind a recording proxy (no ``serve``: the backend is driven directly)."""
    deployment = arap_deployment(tmp_path_factory.mktemp("arap-backend"), proxy=True)
    deployment.ars.start()
    try:
        yield deployment
    finally:
        deployment.ars.kill()
        assert deployment.proxy is not None
        deployment.proxy.stop()


@pytest.fixture
def proxy(ars: ArapDeployment) -> Iterator[FaultProxy]:
    assert ars.proxy is not None
    ars.proxy.clear()
    yield ars.proxy
    ars.proxy.clear()


@pytest.fixture
async def pdp(ars: ArapDeployment) -> AsyncIterator[HttpPDP]:
    async with HttpPDP(ars.ars_url, timeout_s=scaled(3.0)) as client:
        yield client


@pytest.fixture
async def backend(pdp: HttpPDP) -> AsyncIterator[ArapBackend]:
    woken: list[str] = []

    async def endpoint() -> str | None:
        return (await pdp.metadata()).access_request_endpoint

    async def listener(handle: str) -> None:
        woken.append(handle)

    settings = ArapSettings(
        token=ARS_CLIENT_TOKEN, dev_insecure_loopback=True, poll_initial_s=0.05, timeout_s=scaled(1.0)
    )
    arap = ArapBackend(settings, access_request_endpoint=endpoint)
    await arap.start(listener)
    arap.woken = woken  # type: ignore[attr-defined]
    try:
        yield arap
    finally:
        await arap.stop()


@pytest.fixture
async def reviewers(ars: ArapDeployment) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=ars.ars.base_url, timeout=scaled(20)) as client:
        yield client


async def denied(pdp: HttpPDP, tool: str, **arguments: Any) -> tuple[EvaluationRequest, Decision]:
    request = ToolCallMapper().map_call(principal="alice", tool=tool, arguments=arguments)
    decision = await pdp.evaluate(request)
    assert decision.decision is False
    return request, decision


def submission_of(request: EvaluationRequest, decision: Decision) -> ApprovalSubmission:
    evaluation = DeniedEvaluation.from_decision(request.to_wire(), decision.context)
    assert evaluation is not None
    return ApprovalSubmission(
        tool=request.resource.id, arguments={}, requester=request.subject.id, evaluation=evaluation
    )


def key(label: str) -> str:
    return f"{label}-{'k' * 43}"


async def test_submission_sends_the_key_the_bearer_and_the_exact_denial(  # items 3, 5, 6, 7, 8
    backend: ArapBackend, pdp: HttpPDP, proxy: FaultProxy
) -> None:
    request, decision = await denied(pdp, "wire_transfer", to="acct-b1", amount=40_000)
    raw_context = decision.context or {}
    handle = await backend.submit(key("b1"), submission_of(request, decision))
    (sent,) = proxy.requests("POST", REQUESTS)
    assert sent.headers["Idempotency-Key"] == key("b1")
    assert sent.headers["Authorization"] == f"Bearer {ARS_CLIENT_TOKEN}"
    body = json.loads(sent.body)
    hint = raw_context["access_request"]
    assert body["denial"] == {
        "expires_at": hint["expires_at"],
        "template": hint["template"],
        "binding_token": hint["binding_token"],
        "evaluation_id": raw_context["evaluation_id"],
        "evaluated_at": raw_context["evaluated_at"],
        "reason": raw_context["reason"],
    }
    assert f'"binding_token": "{hint["binding_token"]}"'.encode() in sent.body.replace(b'":"', b'": "')
    assert body["subject"] == {"type": "user", "id": "alice"}
    assert body["resource"] == {"type": "tool", "id": "wire_transfer"}
    assert body["context"] == request.context
    assert json.loads(handle)["status_endpoint"].startswith(proxy.base_url + REQUESTS + "/")


async def test_a_retried_submission_reuses_its_key_and_finds_the_same_task(  # idempotency
    backend: ArapBackend, pdp: HttpPDP, proxy: FaultProxy, reviewers: httpx.AsyncClient
) -> None:
    request, decision = await denied(pdp, "wire_transfer", to="acct-b2", amount=40_000)
    submission = submission_of(request, decision)
    proxy.inject(Fault("status", path=REQUESTS, method="POST", code=503))  # refused before the ARS saw it
    proxy.inject(Fault("drop", path=REQUESTS, method="POST"))  # the ARS opened it, the answer was lost
    handle = await backend.submit(key("b2"), submission)
    attempts = proxy.requests("POST", REQUESTS)
    assert [seen.fault for seen in attempts] == ["status", "drop", None]
    assert {seen.headers["Idempotency-Key"] for seen in attempts} == {key("b2")}
    assert await backend.submit(key("b2"), submission) == handle  # the same task again
    pending = await Reviewer(reviewers, "carol-token").pending()
    assert len([item for item in pending if item["arguments"].get("to") == "acct-b2"]) == 1
    other = replace(submission, inputs={"justification": "different body"})
    with pytest.raises(IdempotencyConflictError):
        await backend.submit(key("b2"), other)


async def test_a_changed_binding_token_is_refused_by_the_ars(backend: ArapBackend, pdp: HttpPDP) -> None:  # item 7
    request, decision = await denied(pdp, "wire_transfer", to="acct-b3", amount=40_000)
    submission = submission_of(request, decision)
    assert submission.evaluation is not None
    token = submission.evaluation.denial["binding_token"]
    flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    tampered = replace(
        submission,
        evaluation=replace(submission.evaluation, denial={**submission.evaluation.denial, "binding_token": flipped}),
    )
    with pytest.raises(SubmissionRejectedError):
        await backend.submit(key("b3"), tampered)


async def test_synchronous_completion_needs_no_poll(  # item 13
    backend: ArapBackend, pdp: HttpPDP, proxy: FaultProxy
) -> None:
    request, decision = await denied(pdp, "refund", order="ord-b4", amount=100)
    handle = await backend.submit(key("b4"), submission_of(request, decision))
    assert backend.woken == [handle]  # type: ignore[attr-defined]
    state = await backend.status(handle)
    assert state.status is ApprovalStatus.APPROVED
    assert state.approval is not None
    assert proxy.requests("GET", REQUESTS) == []  # answered from the 201, no status poll


async def test_pending_polls_honour_retry_after_and_back_off(backend: ArapBackend, pdp: HttpPDP) -> None:  # item 14
    request, decision = await denied(pdp, "wire_transfer", to="acct-b5", amount=40_000)
    handle = await backend.submit(key("b5"), submission_of(request, decision))
    delays = []
    for _ in range(8):
        state = await backend.status(handle)
        assert state.status is ApprovalStatus.PENDING
        assert state.deadline_ms is not None  # task.expires_at bounds the polling
        assert state.retry_after_s is not None
        delays.append(state.retry_after_s)
    assert min(delays) >= 1.0  # the ARS's Retry-After: 1
    assert delays[-1] > 3.0  # 0.05 s doubling per poll has outgrown it
    assert max(delays) <= 60.0


async def test_approval_goes_to_the_pdp_unchanged_and_only_it_permits(  # items 12, 16, 17, 18, 20
    backend: ArapBackend, pdp: HttpPDP, reviewers: httpx.AsyncClient
) -> None:
    request, decision = await denied(pdp, "wire_transfer", to="acct-b6", amount=40_000)
    handle = await backend.submit(key("b6"), submission_of(request, decision))
    carol = Reviewer(reviewers, "carol-token")
    (item,) = [a for a in await carol.pending() if a["arguments"].get("to") == "acct-b6"]
    assert (await carol.decide(item["id"], "approve")).status_code == 200
    state = await eventually(lambda: backend.status(handle), lambda s: s.status is not ApprovalStatus.PENDING)
    assert state.status is ApprovalStatus.APPROVED
    approval = dict(state.approval or {})
    permit = await pdp.evaluate(request.with_context({**(request.context or {}), "approval": approval}))
    assert permit.decision is True
    assert permit.context is not None
    assert permit.context["approval"]["approved_until"] == approval["approved_until"]
    for forged in (
        {**approval, "state": approval["state"][:-3] + "abc"},
        {**approval, "id": "apr_someone_else"},
        {**approval, "approved_until": "2099-01-01T00:00:00.000Z"},
    ):
        deny = await pdp.evaluate(request.with_context({**(request.context or {}), "approval": forged}))
        assert deny.decision is False
        assert deny.next_action() is NextAction.NONE
    other = ToolCallMapper().map_call(
        principal="alice", tool="wire_transfer", arguments={"to": "acct-b6", "amount": 41_000}
    )
    moved = await pdp.evaluate(other.with_context({**(other.context or {}), "approval": approval}))
    assert moved.decision is False  # an approval never covers another call (item 20)
    assert moved.next_action() is NextAction.REQUEST
    assert moved.requestable_denial is not None


async def test_cancel_goes_through_links_cancel(  # cancel
    backend: ArapBackend, pdp: HttpPDP, proxy: FaultProxy, reviewers: httpx.AsyncClient
) -> None:
    request, decision = await denied(pdp, "wire_transfer", to="acct-b7", amount=40_000)
    fresh = ArapBackend(backend.settings, access_request_endpoint=backend._endpoint_source)  # a restarted PEP
    await fresh.start()
    try:
        handle = await backend.submit(key("b7"), submission_of(request, decision))
        await fresh.cancel(handle)  # learns links.cancel from the status endpoint, then uses it
        assert (await backend.status(handle)).status is ApprovalStatus.CANCELLED
        await backend.cancel(handle)  # its link from the submission; terminal: 409 invalid_task_state is fine
        await fresh.cancel(handle)  # a terminal task offers no cancel link: nothing to do
    finally:
        await fresh.stop()
    cancels = proxy.requests("POST", REQUESTS)
    assert [seen.path.endswith("/cancel") for seen in cancels] == [False, True, True]
    carol = Reviewer(reviewers, "carol-token")
    assert not [a for a in await carol.pending() if a["arguments"].get("to") == "acct-b7"]


async def test_unknown_and_expired_tasks(backend: ArapBackend, proxy: FaultProxy) -> None:
    unknown = encode_handle("arq_nope", proxy.base_url + REQUESTS + "/arq_nope")
    with pytest.raises(UnknownRequestError):
        await backend.status(unknown)
    expired = b'{"type":"urn:openid:authzen:access-request:error:task_expired","status":410}'
    proxy.inject(Fault("status", path=REQUESTS + "/arq_gone", code=410, body=expired))
    gone = encode_handle("arq_gone", proxy.base_url + REQUESTS + "/arq_gone")
    assert (await backend.status(gone)).status is ApprovalStatus.EXPIRED


@pytest.mark.parametrize(
    "fault",
    [
        Fault("status", code=500),
        Fault("status", code=503),
        Fault("garbage"),
        Fault("hang", delay_s=scaled(1.5)),  # past the backend's timeout (scaled(1.0))
        Fault("reset"),
        Fault("status", code=404, body=b"<html>not found</html>", content_type="text/html"),
        Fault("status", code=401, body=b'{"type":"about:blank"}'),
    ],
    ids=["500", "503", "garbage", "timeout", "reset", "404-html", "401"],
)
async def test_status_faults_are_transient_never_approval(  # fail closed
    backend: ArapBackend, pdp: HttpPDP, proxy: FaultProxy, fault: Fault
) -> None:
    request, decision = await denied(pdp, "refund", order=f"ord-b8-{fault.kind}-{fault.code}", amount=100)
    handle = await backend.submit(key(f"b8{fault.kind}{fault.code}"), submission_of(request, decision))
    assert (await backend.status(handle)).status is ApprovalStatus.APPROVED  # the 201, consumed
    proxy.inject(replace(fault, path=REQUESTS + "/", method="GET"))
    with pytest.raises(ApprovalBackendError) as raised:
        await backend.status(handle)
    assert not isinstance(raised.value, UnknownRequestError)
    assert (await backend.status(handle)).status is ApprovalStatus.APPROVED  # the next poll reads it


async def test_crafted_status_answers_are_not_approval(  # items 11, 12, 15
    backend: ArapBackend, pdp: HttpPDP, proxy: FaultProxy
) -> None:
    request, decision = await denied(pdp, "refund", order="ord-b9", amount=100)
    handle = await backend.submit(key("b9"), submission_of(request, decision))
    await backend.status(handle)
    task_id, endpoint = json.loads(handle)["id"], json.loads(handle)["status_endpoint"]
    async with httpx.AsyncClient(timeout=scaled(20)) as client:
        real = (await client.get(endpoint, headers={"authorization": f"Bearer {ARS_CLIENT_TOKEN}"})).json()
    path = endpoint[len(proxy.base_url) :]

    def answer(document: dict[str, Any]) -> None:
        proxy.inject(
            Fault(
                "status",
                path=path,
                method="GET",
                code=200,
                body=json.dumps(document).encode(),
                content_type="application/json",
            )
        )

    answer({**real, "task": {**real["task"], "status": "granted"}})
    assert (await backend.status(handle)).status is ApprovalStatus.PENDING
    answer({**real, "result": {**real["result"], "mode": "urn:example:direct-grant"}})
    assert (await backend.status(handle)).status is ApprovalStatus.FAILED
    answer({"task": {**real["task"], "id": "arq_other"}, "result": real["result"]})
    with pytest.raises(ApprovalBackendError):
        await backend.status(handle)  # an answer about another task is not about this one
    assert task_id != "arq_other"


async def test_an_untrusted_endpoint_never_sees_a_credential(  # items 4, 5
    backend: ArapBackend, pdp: HttpPDP, proxy: FaultProxy
) -> None:
    stranger = FaultProxy("http://127.0.0.1:9").start()  # a live listener on another origin
    try:
        request, decision = await denied(pdp, "wire_transfer", to="acct-b10", amount=40_000)
        context = dict(decision.context or {})
        context["access_request"] = {**context["access_request"], "endpoint": stranger.base_url + REQUESTS}
        evaluation = DeniedEvaluation.from_decision(request.to_wire(), context)
        assert evaluation is not None
        assert evaluation.endpoint == stranger.base_url + REQUESTS
        submission = ApprovalSubmission(tool="wire_transfer", arguments={}, requester="alice", evaluation=evaluation)
        handle = await backend.submit(key("b10"), submission)  # to the metadata's endpoint instead
        assert json.loads(handle)["status_endpoint"].startswith(proxy.base_url)
        assert stranger.seen == []
        assert [seen.path for seen in proxy.requests("POST", REQUESTS)] == [REQUESTS]
    finally:
        stranger.stop()
