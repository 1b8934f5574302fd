"""SEP-2848 over streamable HTTP against the treasury example, one real server process per module.

Every scenario runs twice: with the local backend (Cedar in process, reviewers on ``serve``) and
with ARAP (``serve`` asks the reference PDP over HTTP and submits Access Requests to the
arap-server, where reviewers decide). The assertions are the same in both modes: what an MCP
client sees does not depend on the backend.

Each test uses its own account names, so the shared ledger tells its executions apart.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from mcp_approval.checks.wire import Wire, envelope
from mcp_approval.clock import parse_iso8601
from mcp_approval.protocol import META_TOOL_APPROVAL_DEADLINE
from tests.support.arap import ARS_CLIENT_TOKEN, ars_view
from tests.support.treasury import Reviewer, TreasuryServer, principals
from tests.treasury.conftest import Scenario
from tests.treasury.helpers import (
    AUTHORIZATION,
    IMMEDIATE,
    approval_for,
    assert_approved_executed,
    assert_denied_not_executed,
    settled,
    text_of,
    transfers_to,
    wire_text,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def treasury(scenario: Scenario) -> TreasuryServer:
    """The scenario's ``serve`` process (local or ARAP mode)."""
    return scenario.server


async def request_transfer(wire: Wire, account: str, amount: float = 50_000) -> dict[str, Any]:
    reply = await wire.call_tool("wire_transfer", {"to": account, "amount": amount})
    assert reply.status == 200
    return reply.result


async def test_small_transfer_runs_at_once(treasury: TreasuryServer, http: httpx.AsyncClient) -> None:
    alice = principals(http)["alice"]
    result = await request_transfer(alice, "acct-small", 100)
    assert result["isError"] is False
    assert result.get("resultType") != "task"
    assert len(transfers_to(treasury, "acct-small")) == 1


@pytest.mark.sep_check(
    "sep-2643-server-pending-decision-not-executed",
    "sep-2643-server-task-hint",
    "sep-2643-server-task-envelope-repeated",
)
@pytest.mark.sep_check(
    "sep-2848-requestable-returns-task-without-executing",
    "sep-2848-envelope-repeated-while-pending",
    "sep-2848-no-execution-on-denial-alone",
)
async def test_requestable_denial_returns_working_task_without_executing(
    treasury: TreasuryServer, http: httpx.AsyncClient
) -> None:
    alice = principals(http)["alice"]
    created = await request_transfer(alice, "acct-pending")
    assert created["resultType"] == "task"
    assert created["status"] == "working"
    envelope_doc = created["_meta"][AUTHORIZATION]
    assert envelope_doc == {
        "reason": "insufficient_authorization",
        "remediation": "available",
        "remediationHints": [{"type": "task"}],
    }
    assert "authorizationContextId" not in envelope_doc  # SEP-2848: the task id correlates
    assert "has not run" in created["_meta"][IMMEDIATE]
    assert "treasury approval" in created["statusMessage"]
    polled = (await alice.get(created["taskId"])).result
    assert polled["status"] == "working"
    assert polled["_meta"][AUTHORIZATION] == envelope_doc  # repeated on every non-terminal tasks/get
    assert transfers_to(treasury, "acct-pending") == []


@pytest.mark.sep_check(
    "sep-2848-at-most-once",
    "sep-2848-terminal-is-final",
    "sep-2848-disposition-in-result-meta",
    "sep-2848-disposition-required",
    "sep-2848-body-disposition-envelope-agree",
)
async def test_approved_transfer_executes_exactly_once(
    treasury: TreasuryServer, http: httpx.AsyncClient, reviewers: httpx.AsyncClient
) -> None:
    wires = principals(http)
    created = await request_transfer(wires["alice"], "acct-991")
    approval = await approval_for(Reviewer(reviewers, "carol-token"), "wire_transfer", to="acct-991")
    decided = await Reviewer(reviewers, "carol-token").decide(approval["id"], "approve", "checked the invoice")
    assert decided.status_code == 200, decided.text
    task = await settled(wires["alice"], created["taskId"])
    assert_approved_executed(task)
    assert "acct-991" in text_of(task["result"])
    ledger = (await wires["alice"].call_tool("ledger")).result["structuredContent"]["result"]
    assert [entry for entry in ledger if entry.get("to") == "acct-991"] == [
        {"op": "wire_transfer", "to": "acct-991", "amount": 50000.0}
    ]
    again = await Reviewer(reviewers, "dave-token").decide(approval["id"], "approve")
    assert again.status_code == 409  # a decision is recorded once; the task stays as it is
    assert (await wires["alice"].get(created["taskId"])).result == task


@pytest.mark.sep_check(
    "sep-2848-disposition-in-result-meta",
    "sep-2848-disposition-required",
    "sep-2848-body-states-outcome",
    "sep-2848-body-disposition-envelope-agree",
)
async def test_denied_transfer_completes_as_denial_and_never_runs(
    treasury: TreasuryServer, http: httpx.AsyncClient, reviewers: httpx.AsyncClient
) -> None:
    alice = principals(http)["alice"]
    created = await request_transfer(alice, "acct-deny")
    approval = await approval_for(Reviewer(reviewers, "carol-token"), "wire_transfer", to="acct-deny")
    assert (await Reviewer(reviewers, "carol-token").decide(approval["id"], "deny", "no invoice")).status_code == 200
    task = await settled(alice, created["taskId"])
    assert_denied_not_executed(task)
    assert "denied" in text_of(task["result"])
    assert transfers_to(treasury, "acct-deny") == []


async def test_a_pending_task_names_its_deadline_in_status_message_and_meta(
    treasury: TreasuryServer, http: httpx.AsyncClient
) -> None:
    """A tasks client sizes its wait by the request's deadline (giving up earlier withdraws the request)."""
    alice = principals(http)["alice"]
    before = int(time.time() * 1000)
    created = await request_transfer(alice, "acct-deadline")
    polled = (await alice.get(created["taskId"])).result
    for task in (created, polled):
        deadline = task["_meta"][META_TOOL_APPROVAL_DEADLINE]
        deadline_ms = parse_iso8601(deadline)
        assert deadline_ms is not None
        assert deadline_ms > before  # the request's own deadline, still ahead
        assert f"If no one decides by {deadline}, it expires and the call never runs." in task["statusMessage"]
    assert transfers_to(treasury, "acct-deadline") == []


@pytest.mark.sep_check("sep-2848-cancel-withdraws-backend-request", "sep-2848-never-executed-and-cancelled")
async def test_cancel_while_pending_fences_the_task(
    treasury: TreasuryServer, http: httpx.AsyncClient, reviewers: httpx.AsyncClient
) -> None:
    alice = principals(http)["alice"]
    created = await request_transfer(alice, "acct-cancel")
    carol = Reviewer(reviewers, "carol-token")
    approval = await approval_for(carol, "wire_transfer", to="acct-cancel")
    assert "taskId" not in (await alice.cancel(created["taskId"])).result  # an empty acknowledgement
    task = (await alice.get(created["taskId"])).result
    assert task["status"] == "cancelled"
    late = await carol.decide(approval["id"], "approve")
    assert late.status_code == 409  # the backend request was withdrawn with the task
    assert (await alice.get(created["taskId"])).result["status"] == "cancelled"
    assert transfers_to(treasury, "acct-cancel") == []


async def test_four_eyes_needs_two_distinct_approvers(
    treasury: TreasuryServer, http: httpx.AsyncClient, reviewers: httpx.AsyncClient
) -> None:
    wires = principals(http)
    created = (await wires["bob"].call_tool("close_quarter", {"quarter": "2026-Q3"})).result
    assert created["status"] == "working"
    carol, dave = Reviewer(reviewers, "carol-token"), Reviewer(reviewers, "dave-token")
    approval = await approval_for(carol, "close_quarter", quarter="2026-Q3")
    assert (await carol.decide(approval["id"], "approve")).status_code == 200
    assert (await carol.decide(approval["id"], "approve")).status_code == 409  # same reviewer twice
    assert (await wires["bob"].get(created["taskId"])).result["status"] == "working"
    assert not [e for e in treasury.ledger() if e.get("quarter") == "2026-Q3"]
    assert (await dave.decide(approval["id"], "approve")).status_code == 200
    assert_approved_executed(await settled(wires["bob"], created["taskId"]))
    assert len([e for e in treasury.ledger() if e.get("quarter") == "2026-Q3"]) == 1


async def test_requester_and_non_approvers_cannot_decide(http: httpx.AsyncClient, reviewers: httpx.AsyncClient) -> None:
    wires = principals(http)
    await request_transfer(wires["alice"], "acct-eligibility")
    approval = await approval_for(Reviewer(reviewers, "carol-token"), "wire_transfer", to="acct-eligibility")
    for token in ("alice-token", "bob-token", "erin-token"):
        refused = await Reviewer(reviewers, token).decide(approval["id"], "approve")
        assert refused.status_code == 403, (token, refused.text)
        assert refused.headers["content-type"].startswith("application/problem+json")
    nobody = await reviewers.post(f"/approvals/{approval['id']}/decide", json={"decision": "approve"})
    assert nobody.status_code == 401


@pytest.mark.sep_check("sep-2848-no-steering")
async def test_changed_arguments_need_a_new_approval(
    treasury: TreasuryServer, http: httpx.AsyncClient, reviewers: httpx.AsyncClient
) -> None:
    alice = principals(http)["alice"]
    carol = Reviewer(reviewers, "carol-token")
    first = await request_transfer(alice, "acct-change", 40_000)
    approval = await approval_for(carol, "wire_transfer", to="acct-change", amount=40_000)
    assert (await carol.decide(approval["id"], "approve")).status_code == 200
    assert_approved_executed(await settled(alice, first["taskId"]))
    changed = await request_transfer(alice, "acct-change", 45_000)
    assert changed["resultType"] == "task"
    assert changed["taskId"] != first["taskId"]
    assert (await alice.get(changed["taskId"])).result["status"] == "working"
    assert [e["amount"] for e in transfers_to(treasury, "acct-change")] == [40000.0]


@pytest.mark.sep_check("sep-2848-dedup-returns-existing-task")
async def test_identical_retry_returns_the_same_task(treasury: TreasuryServer, http: httpx.AsyncClient) -> None:
    alice, bob = principals(http)["alice"], principals(http)["bob"]
    first = await request_transfer(alice, "acct-dedup")
    second = await request_transfer(alice, "acct-dedup")
    assert second["taskId"] == first["taskId"]
    other = await request_transfer(bob, "acct-dedup")  # another principal is another dedup scope
    assert other["taskId"] != first["taskId"]


@pytest.mark.sep_check("sep-2848-task-access-by-origin")
async def test_another_principal_cannot_see_or_touch_the_task(http: httpx.AsyncClient) -> None:
    wires = principals(http)
    created = await request_transfer(wires["alice"], "acct-private")
    for name in ("bob", "carol"):
        for reply in (await wires[name].get(created["taskId"]), await wires[name].cancel(created["taskId"])):
            assert reply.error["code"] == -32602
            assert reply.error["message"] == "Unknown or expired task"
    unknown = await wires["bob"].get("x" * 43)
    assert unknown.error == (await wires["bob"].get(created["taskId"])).error
    assert (await wires["alice"].get(created["taskId"])).result["status"] == "working"


async def test_refund_is_decided_automatically(treasury: TreasuryServer, http: httpx.AsyncClient) -> None:
    alice = principals(http)["alice"]
    small = (await alice.call_tool("refund", {"order": "ord-small", "amount": 120})).result
    large = (await alice.call_tool("refund", {"order": "ord-large", "amount": 900})).result
    assert_approved_executed(await settled(alice, small["taskId"]))
    assert_denied_not_executed(await settled(alice, large["taskId"]))
    refunds = [e["order"] for e in treasury.ledger() if e.get("op") == "refund"]
    assert refunds.count("ord-small") == 1
    assert "ord-large" not in refunds


@pytest.mark.sep_check("sep-2848-non-requestable-normal-denial")
async def test_non_requestable_denial_is_final(treasury: TreasuryServer, http: httpx.AsyncClient) -> None:
    wires = principals(http)
    denied = (await wires["alice"].call_tool("delete_account", {"account": "acct-x"})).result
    assert denied["isError"] is True
    assert denied.get("resultType") != "task"
    assert denied["_meta"][AUTHORIZATION]["remediation"] == "unavailable"
    allowed = (await wires["erin"].call_tool("delete_account", {"account": "acct-y"})).result
    assert allowed["isError"] is False
    accounts = [e.get("account") for e in treasury.ledger() if e.get("op") == "delete_account"]
    assert accounts == ["acct-y"]


@pytest.mark.sep_check("sep-2848-no-tasks-client", "sep-2848-prefer-degraded-result")
async def test_client_without_tasks_gets_degraded_guidance(treasury: TreasuryServer, http: httpx.AsyncClient) -> None:
    alice = principals(http)["alice"]
    reply = await alice.call_tool("wire_transfer", {"to": "acct-notasks", "amount": 70_000}, meta=envelope(tasks=False))
    result = reply.result
    assert result["isError"] is True
    assert result.get("resultType") != "task"
    assert result["_meta"][AUTHORIZATION]["remediation"] == "undisclosed"  # a remedy exists: never unavailable
    assert "requires approval" in text_of(result)
    assert "tasks" in text_of(result)
    assert transfers_to(treasury, "acct-notasks") == []


@pytest.mark.sep_check(
    "sep-2848-no-backend-artifacts", "sep-2848-task-access-by-origin", "sep-2848-retrieval-no-artifacts"
)
async def test_no_backend_artifact_reaches_the_client(http: httpx.AsyncClient, reviewers: httpx.AsyncClient) -> None:
    wires = principals(http)
    created = await request_transfer(wires["alice"], "acct-artifacts")
    carol = Reviewer(reviewers, "carol-token")
    approval = await approval_for(carol, "wire_transfer", to="acct-artifacts")
    pending_view = (await wires["alice"].get(created["taskId"])).result
    assert (await carol.decide(approval["id"], "approve", "secret reviewer note")).status_code == 200
    final_view = await settled(wires["alice"], created["taskId"])
    seen = wire_text([created, pending_view, final_view])
    for artifact in (approval["id"], "carol", "secret reviewer note", "binding", "evaluation_id", "approved_until"):
        assert artifact not in seen, artifact


@pytest.mark.sep_check("sep-2848-no-backend-artifacts", "sep-2848-retrieval-no-artifacts")
async def test_no_ars_or_pdp_artifact_reaches_the_client(
    scenario: Scenario, http: httpx.AsyncClient, reviewers: httpx.AsyncClient
) -> None:
    """ARAP checklist item 21: status URL, cancel link, approval, binding material stay in the PEP."""
    if scenario.mode != "arap":
        pytest.skip("ARAP artifacts exist only in arap mode (local mode: test_no_backend_artifact_reaches_the_client)")
    wires = principals(http)
    seen: list[object] = []
    carol = Reviewer(reviewers, "carol-token")
    created = await request_transfer(wires["alice"], "acct-ars-artifacts")
    seen += [created, (await wires["alice"].get(created["taskId"])).result]
    pending = ars_view(scenario.server.directory, created["taskId"])
    approval = await approval_for(carol, "wire_transfer", to="acct-ars-artifacts")
    assert (await carol.decide(approval["id"], "approve")).status_code == 200
    seen.append(await settled(wires["alice"], created["taskId"]))
    approved = ars_view(scenario.server.directory, created["taskId"])
    cancelled = await request_transfer(wires["bob"], "acct-ars-cancel")
    seen += [cancelled, (await wires["bob"].cancel(cancelled["taskId"])).result]
    seen.append((await wires["bob"].get(cancelled["taskId"])).result)
    refund = (await wires["alice"].call_tool("refund", {"order": "ord-ars-artifacts", "amount": 10})).result
    seen += [refund, await settled(wires["alice"], refund["taskId"])]
    degraded = await wires["alice"].call_tool(
        "wire_transfer", {"to": "acct-ars-nt", "amount": 70_000}, meta=envelope(tasks=False)
    )
    seen.append(degraded.result)
    text = wire_text(seen)
    task = pending["task"]
    artifacts = [
        task["id"],
        task["status_endpoint"],
        task["links"]["cancel"],
        approved["result"]["approval"]["id"],
        approved["result"]["approval"]["state"],
        approval["id"],
        scenario.reviewer_url,
        ARS_CLIENT_TOKEN,
    ]
    for artifact in artifacts:
        assert artifact not in text, artifact
    # The task ids are random: a short marker such as "eyJ" can occur in one by chance.
    for task_id in {item["taskId"] for item in (created, cancelled, refund)}:
        text = text.replace(task_id, "<task id>")
    for marker in (
        "binding_token",
        "evaluation_id",
        "status_endpoint",
        "access_request",
        "/access/v1/",
        "arq_",
        "apr_",
        "eyJ",
        "reevaluate",
        "approved_until",
        "Idempotency",
    ):
        assert marker not in text, marker
