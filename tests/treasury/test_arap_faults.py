"""Fault injection in ARAP mode: real ``serve`` + real ``arap-server`` subprocesses, a real proxy between.

The fault proxy (tests/support/fault_proxy.py) fronts the arap-server, which publishes the
proxy's URL as its identifier, so discovery, evaluation, submission, status and cancel all cross
it. Every test checks the same three promises: no task is lost (it reaches the outcome its
approval deserves), nothing runs without an approval the PDP verified, and ``failed`` (the
retryable outcome) only ever happens before a claim.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_approval.checks.wire import Wire
from tests.support.arap import (
    ARS_CLIENT_TOKEN,
    ArapDeployment,
    arap_deployment,
    ars_store,
    ars_view,
    handle_of,
    serve_store,
    stored_handle_id,
)
from tests.support.fault_proxy import Fault, FaultProxy
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, principals, store_rows
from tests.treasury.helpers import (
    approval_for,
    assert_approved_executed,
    assert_denied_not_executed,
    settled,
    text_of,
    transfers_to,
)

pytestmark = pytest.mark.anyio
EVALUATION = "/access/v1/evaluation"
REQUESTS = "/access/v1/requests"

Factory = Callable[..., ArapDeployment]


@pytest.fixture
def deployments(tmp_path: Path) -> Iterator[Factory]:
    """Started ARAP deployments (with the fault proxy) that are killed after the test."""
    made: list[ArapDeployment] = []

    def make(**kwargs: Any) -> ArapDeployment:
        deployment = arap_deployment(tmp_path, proxy=True, name=f"arap-{len(made)}", **kwargs).start()
        made.append(deployment)
        return deployment

    yield make
    for deployment in made:
        deployment.kill()


@asynccontextmanager
async def clients(deployment: ArapDeployment) -> AsyncIterator[tuple[Wire, Reviewer, httpx.AsyncClient]]:
    """(alice on serve, carol on the arap-server's reviewer API, the reviewer HTTP client)."""
    async with (
        httpx.AsyncClient(base_url=deployment.serve.base_url, timeout=scaled(20)) as http,
        httpx.AsyncClient(base_url=deployment.ars.base_url, timeout=scaled(20)) as reviewers,
    ):
        yield principals(http)["alice"], Reviewer(reviewers, "carol-token"), reviewers


def proxy_of(deployment: ArapDeployment) -> FaultProxy:
    assert deployment.proxy is not None
    return deployment.proxy


async def transfer(alice: Wire, account: str) -> dict[str, Any]:
    reply = await alice.call_tool("wire_transfer", {"to": account, "amount": 40_000})
    assert reply.status == 200
    return reply.body


async def test_status_faults_delay_but_never_lose_or_fake_an_approval(deployments: Factory) -> None:
    deployment = deployments(overrides={"arap": {"timeout_s": 3.0}})
    proxy = proxy_of(deployment)
    async with clients(deployment) as (alice, carol, _):
        created = (await transfer(alice, "acct-f1"))["result"]
        approval = await approval_for(carol, "wire_transfer", to="acct-f1")
        for fault in (
            Fault("status", code=503),
            Fault("garbage"),
            Fault("hang", delay_s=4.0),  # over the 3 s timeout: no answer
            Fault("reset"),
            Fault("status", code=500),
            Fault("slow", delay_s=1.0),  # under it: an answer, late
        ):
            proxy.inject(Fault(fault.kind, path=REQUESTS + "/", method="GET", code=fault.code, delay_s=fault.delay_s))
        assert (await carol.decide(approval["id"], "approve")).status_code == 200
        task = await settled(alice, created["taskId"], timeout_s=scaled(60))
    assert_approved_executed(task)
    assert len(transfers_to(deployment.serve, "acct-f1")) == 1
    assert {"status", "garbage", "slow", "hang", "reset"} <= {s.fault for s in proxy.requests("GET", REQUESTS)}


async def test_an_unreadable_submission_answer_is_retried_under_the_same_key(deployments: Factory) -> None:
    deployment = deployments()
    proxy = proxy_of(deployment)
    proxy.inject(Fault("garbage", path=REQUESTS, method="POST"))
    async with clients(deployment) as (alice, carol, _):
        created = (await transfer(alice, "acct-f2"))["result"]
        assert created["status"] == "working"
        posts = proxy.requests("POST", REQUESTS)
        assert posts[0].fault == "garbage"
        assert posts[-1].fault is None
        assert len({s.headers["Idempotency-Key"] for s in posts}) == 1
        pending = [a for a in await carol.pending() if a["arguments"].get("to") == "acct-f2"]
        assert len(pending) == 1  # one request at the ARS, not two


async def test_a_submission_that_cannot_be_confirmed_fails_closed_and_is_withdrawn(deployments: Factory) -> None:
    deployment = deployments()
    proxy = proxy_of(deployment)
    proxy.inject(Fault("drop", path=REQUESTS, method="POST", count=3))  # opened at the ARS, never confirmed
    async with clients(deployment) as (alice, carol, _):
        answer = await transfer(alice, "acct-f3")
        assert answer["error"]["code"] == -32603
        assert "did not run" in answer["error"]["message"]
        # Reconciliation finds the request again (same key, same body) and withdraws it.
        await eventually(carol.pending, lambda items: not [a for a in items if a["arguments"].get("to") == "acct-f3"])
    cancels = [s for s in proxy.requests("POST", REQUESTS) if s.path.endswith("/cancel")]
    assert cancels, "the orphaned request was withdrawn through links.cancel"
    assert transfers_to(deployment.serve, "acct-f3") == []


@pytest.mark.parametrize("fault", [Fault("hang", delay_s=3.0), Fault("status", code=502), Fault("garbage")])
async def test_a_pdp_that_fails_at_the_gate_is_a_final_denial(deployments: Factory, fault: Fault) -> None:
    deployment = deployments(overrides={"policy": {"pdp_timeout_s": 1.0}})
    proxy = proxy_of(deployment)
    async with clients(deployment) as (alice, _, _):
        await alice.call_tool("ledger")  # discovery done; the next evaluation is the faulted one
        proxy.inject(Fault(fault.kind, path=EVALUATION, method="POST", code=fault.code, delay_s=fault.delay_s))
        result = (await transfer(alice, "acct-f4"))["result"]
    assert result["isError"] is True
    assert result.get("resultType") != "task"
    assert result["_meta"]["io.modelcontextprotocol/authorization"]["remediation"] == "unavailable"
    assert transfers_to(deployment.serve, "acct-f4") == []
    assert proxy.requests("POST", REQUESTS) == []  # nothing submitted on a failed decision


async def test_a_pdp_outage_during_re_evaluation_is_retried_not_a_denial(deployments: Factory) -> None:
    deployment = deployments()
    proxy = proxy_of(deployment)
    async with clients(deployment) as (alice, carol, _):
        created = (await transfer(alice, "acct-f5"))["result"]
        approval = await approval_for(carol, "wire_transfer", to="acct-f5")
        proxy.inject(Fault("status", path=EVALUATION, method="POST", code=503, count=3))
        assert (await carol.decide(approval["id"], "approve")).status_code == 200
        task = await settled(alice, created["taskId"], timeout_s=scaled(60))
    assert_approved_executed(task)
    assert len(transfers_to(deployment.serve, "acct-f5")) == 1
    assert [s.fault for s in proxy.requests("POST", EVALUATION)][-4:] == ["status", "status", "status", None]


async def test_the_ars_killed_and_restarted_mid_flow_loses_nothing(deployments: Factory) -> None:
    deployment = deployments()
    async with clients(deployment) as (alice, carol, _):
        created = (await transfer(alice, "acct-f6"))["result"]
        await approval_for(carol, "wire_transfer", to="acct-f6")
        deployment.ars.kill()  # status polls now fail: connection refused
        assert (await alice.get(created["taskId"])).result["status"] == "working"
        await eventually(lambda: _count_refused(deployment), lambda n: n >= 1, timeout_s=scaled(20))
        deployment.ars.start()  # same port, same database
        approval = await approval_for(carol, "wire_transfer", to="acct-f6")
        assert (await carol.decide(approval["id"], "approve")).status_code == 200
        task = await settled(alice, created["taskId"], timeout_s=scaled(60))
    assert_approved_executed(task)
    assert len(transfers_to(deployment.serve, "acct-f6")) == 1


async def _count_refused(deployment: ArapDeployment) -> int:
    return len([s for s in proxy_of(deployment).requests("GET", REQUESTS) if s.fault is None])


async def test_serve_killed_and_restarted_mid_flow_resumes_the_task(deployments: Factory) -> None:
    deployment = deployments()
    async with clients(deployment) as (alice, carol, _):
        created = (await transfer(alice, "acct-f7"))["result"]
        approval = await approval_for(carol, "wire_transfer", to="acct-f7")
        deployment.serve.kill()  # SIGKILL while pending
        assert (await carol.decide(approval["id"], "approve")).status_code == 200  # its callback finds nobody
        restarted = TreasuryServer(deployment.directory)
        restarted.port = deployment.serve.port  # the ARS's callback allowlist names this origin
        deployment.serve = restarted.start()
    async with clients(deployment) as (alice, _, _):
        task = await settled(alice, created["taskId"], timeout_s=scaled(60))
    assert_approved_executed(task)
    assert len(transfers_to(deployment.serve, "acct-f7")) == 1


@pytest.mark.sqlite_store  # the ARS loses its store by losing its file
async def test_a_request_the_ars_lost_fails_the_task_before_any_claim(deployments: Factory) -> None:
    deployment = deployments()
    async with clients(deployment) as (alice, carol, _):
        created = (await transfer(alice, "acct-f8"))["result"]
        await approval_for(carol, "wire_transfer", to="acct-f8")
        deployment.ars.kill()
        for suffix in ("", "-wal", "-shm"):
            (deployment.directory / f"arap-server.db{suffix}").unlink(missing_ok=True)
        deployment.ars.start()  # a fresh store: the task is unknown_task now
        task = await settled(alice, created["taskId"], timeout_s=scaled(60))
    assert task["status"] == "failed"
    assert "did not run" in json.dumps(task)
    assert transfers_to(deployment.serve, "acct-f8") == []


async def test_a_fabricated_approved_status_never_executes(deployments: Factory) -> None:
    deployment = deployments()
    proxy = proxy_of(deployment)
    async with clients(deployment) as (alice, _, _):
        created = (await transfer(alice, "acct-f9"))["result"]
        handle = handle_of(deployment.directory, created["taskId"])
        until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
        forged = {
            "task": {"id": handle["id"], "status": "approved", "status_endpoint": handle["status_endpoint"]},
            "result": {
                "mode": "reevaluate",
                "approval": {"id": "apr_forged", "approved_until": until, "state": "eyJhbGciOiJFUzI1NiJ9.e30.c2ln"},
            },
        }
        path = handle["status_endpoint"][len(proxy.base_url) :]
        body = json.dumps(forged).encode()
        proxy.inject(
            Fault("status", path=path, method="GET", code=200, body=body, content_type="application/json", count=50)
        )
        task = await settled(alice, created["taskId"], timeout_s=scaled(30))
    assert_denied_not_executed(task)  # the PDP could not verify the approval: next_action none
    assert "re-checked" in text_of(task["result"])
    assert transfers_to(deployment.serve, "acct-f9") == []


async def test_a_revoked_approval_opens_a_new_request_with_fresh_binding(deployments: Factory) -> None:
    """``grant_pending`` → retry, then ``approval_expired`` → request: a new generation (items 19, 20)."""
    deployment = deployments(ars_overrides={"arap": {"grant_delay_s": 2.0}})
    proxy = proxy_of(deployment)
    async with clients(deployment) as (alice, carol, _):
        created = (await transfer(alice, "acct-f10"))["result"]
        first = await approval_for(carol, "wire_transfer", to="acct-f10")
        first_task = handle_of(deployment.directory, created["taskId"])["id"]
        assert (await carol.decide(first["id"], "approve")).status_code == 200
        revoke = "UPDATE arap_approvals SET revoked_at = 1 WHERE task_id = :task"
        store_rows(ars_store(deployment.directory), revoke, {"task": first_task})
        second = await approval_for(carol, "wire_transfer", to="acct-f10")  # the next generation's request
        assert second["id"] != first["id"]
        assert (await alice.get(created["taskId"])).result["status"] == "working"

        # The ARS lists the request as soon as it is submitted; the PEP stores its handle just after.
        async def stored_handle() -> str | None:
            return stored_handle_id(deployment.directory, created["taskId"])

        await eventually(stored_handle, lambda handle: handle not in (None, first_task))
        assert (await carol.decide(second["id"], "approve")).status_code == 200
        task = await settled(alice, created["taskId"], timeout_s=scaled(60))
    assert_approved_executed(task)
    assert len(transfers_to(deployment.serve, "acct-f10")) == 1
    submissions = [json.loads(s.body) for s in proxy.requests("POST", REQUESTS) if not s.path.endswith("/cancel")]
    tokens = [body["denial"]["binding_token"] for body in submissions]
    assert len(tokens) == 2
    assert tokens[0] != tokens[1]  # the second request echoes the fresh denial's token


async def test_a_refused_submission_is_a_final_denial_with_nothing_left_behind(deployments: Factory) -> None:
    deployment = deployments()
    proxy = proxy_of(deployment)
    refused = b'{"type":"urn:openid:authzen:access-request:error:not_requestable","status":400}'
    proxy.inject(Fault("status", path=REQUESTS, method="POST", code=400, body=refused))
    async with clients(deployment) as (alice, carol, _):
        result = (await transfer(alice, "acct-f11"))["result"]
        assert result["isError"] is True
        assert result.get("resultType") != "task"
        assert result["_meta"]["io.modelcontextprotocol/authorization"]["remediation"] == "unavailable"
        assert "did not run" in text_of(result)
        assert len(proxy.requests("POST", REQUESTS)) == 1  # a refusal is not retried
        store = serve_store(deployment.directory)
        states = [row[0] for row in store_rows(store, "SELECT state FROM approval_intents")]
        kind = {"kind": "approval.intent_abandoned"}
        ((abandoned_events,),) = store_rows(store, "SELECT count(*) FROM audit_events WHERE kind = :kind", kind)
        # Settled at once; the retention sweep may already have purged the settled row (it has no task).
        assert states in ([], ["abandoned"])
        assert abandoned_events == 1
        assert not [a for a in await carol.pending() if a["arguments"].get("to") == "acct-f11"]


async def test_a_denial_asking_for_schema_inputs_is_not_submitted(deployments: Factory) -> None:
    """Checklist item 10: this PEP fills no ``request_schema_url`` form, so it submits nothing."""
    deployment = deployments()
    proxy = proxy_of(deployment)
    expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 600))
    denial = {
        "decision": False,
        "context": {
            "reason": "approval_required",
            "evaluation_id": "eval_schema",
            "access_request": {
                "expires_at": expires,
                "template": "treasury",
                "binding_token": "eyJhbGciOiJFUzI1NiJ9.e30.c2ln",
                "request_schema_url": proxy.base_url + "/schemas/treasury.json",
            },
        },
    }
    async with clients(deployment) as (alice, _, _):
        await alice.call_tool("ledger")  # discovery first
        body = json.dumps(denial).encode()
        proxy.inject(
            Fault("status", path=EVALUATION, method="POST", code=200, body=body, content_type="application/json")
        )
        result = (await transfer(alice, "acct-f12"))["result"]
    assert result["isError"] is True
    assert result.get("resultType") != "task"
    assert "did not run" in text_of(result)
    assert proxy.requests(path=REQUESTS) == []  # nothing submitted
    assert proxy.requests(path="/schemas") == []  # and no partial form fetched or guessed
    assert transfers_to(deployment.serve, "acct-f12") == []


async def test_retry_stops_when_the_approval_expires(deployments: Factory) -> None:
    """Checklist items 18, 19: ``grant_pending`` is retried, but never past ``approved_until``.

    The approval lasts 5 s and the PDP asks for a retry after 1 s: the PEP's first re-evaluation may
    come late on a loaded machine (with a 2 s approval it once left no room for a second), and a
    second one must still fit before the expiry.
    """
    deployment = deployments(
        ars_overrides={
            "arap": {"grant_delay_s": 30.0},
            "templates": {"treasury": {"approvals_required": 1, "reviewer_role": "approver", "approval_valid_s": 5.0}},
        }
    )
    proxy = proxy_of(deployment)
    async with clients(deployment) as (alice, carol, _):
        created = (await transfer(alice, "acct-f13"))["result"]
        approval = await approval_for(carol, "wire_transfer", to="acct-f13")
        assert (await carol.decide(approval["id"], "approve")).status_code == 200
        task = await settled(alice, created["taskId"], timeout_s=scaled(30))
    assert_denied_not_executed(task)
    assert "expired before the call could run" in text_of(task["result"])
    evaluations = [json.loads(s.body) for s in proxy.requests("POST", EVALUATION)]
    with_approval = [body for body in evaluations if "approval" in (body.get("context") or {})]
    assert len(with_approval) >= 2  # re-evaluated, told to retry, re-evaluated again
    issued = ars_view(deployment.directory, created["taskId"])["result"]["approval"]
    for body in with_approval:  # item 17: the approval object exactly as the ARS issued it
        assert body["context"]["approval"] == issued
        assert "evaluation_id" not in body["context"]
    assert transfers_to(deployment.serve, "acct-f13") == []


async def test_a_permit_is_never_enforced_past_its_own_approval_expiry(deployments: Factory) -> None:
    """Checklist item 18: the re-evaluation's ``context.approval.approved_until`` bounds the execution."""
    deployment = deployments()
    proxy = proxy_of(deployment)
    lapsed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 5))
    permit = json.dumps({"decision": True, "context": {"approval": {"approved_until": lapsed}}}).encode()
    async with clients(deployment) as (alice, carol, _):
        created = (await transfer(alice, "acct-f14"))["result"]
        approval = await approval_for(carol, "wire_transfer", to="acct-f14")
        proxy.inject(
            Fault("status", path=EVALUATION, method="POST", code=200, body=permit, content_type="application/json")
        )
        assert (await carol.decide(approval["id"], "approve")).status_code == 200
        task = await settled(alice, created["taskId"], timeout_s=scaled(30))
    assert_denied_not_executed(task)
    assert "expired before the call could run" in text_of(task["result"])
    assert transfers_to(deployment.serve, "acct-f14") == []


async def test_ars_terminal_statuses_map_onto_task_outcomes(deployments: Factory) -> None:
    """SEP-2848 Example binding: ``cancelled`` → the cancelled task; ``failed`` → the failed task."""
    deployment = deployments()
    proxy = proxy_of(deployment)
    async with clients(deployment) as (alice, carol, _):
        withdrawn = (await transfer(alice, "acct-f15"))["result"]
        await approval_for(carol, "wire_transfer", to="acct-f15")
        cancel_link = ars_view(deployment.directory, withdrawn["taskId"])["task"]["links"]["cancel"]
        # e.g. another worker of this PEP, with its token
        async with httpx.AsyncClient(timeout=scaled(20)) as other_pep:
            headers = {"authorization": f"Bearer {ARS_CLIENT_TOKEN}"}
            assert (await other_pep.post(cancel_link, json={"reason": "test"}, headers=headers)).status_code == 200
        cancelled = await settled(alice, withdrawn["taskId"], timeout_s=scaled(30))
        assert cancelled["status"] == "cancelled"

        broken = (await transfer(alice, "acct-f16"))["result"]
        handle = handle_of(deployment.directory, broken["taskId"])
        failed = {"task": {**handle, "status": "failed"}}
        path = handle["status_endpoint"][len(proxy.base_url) :]
        body = json.dumps(failed).encode()
        proxy.inject(Fault("status", path=path, method="GET", code=200, body=body, content_type="application/json"))
        ended = await settled(alice, broken["taskId"], timeout_s=scaled(30))
        assert ended["status"] == "failed"
    assert transfers_to(deployment.serve, "acct-f15") == []
    assert transfers_to(deployment.serve, "acct-f16") == []
