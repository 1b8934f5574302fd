"""SEP-2848 §Collecting submission input: before the task, through an MRTR ``input_required`` round."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_approval.checks.wire import envelope
from tests.approval.inprocess import Harness, inprocess_treasury
from tests.treasury.helpers import AUTHORIZATION, approval_for, assert_approved_executed, settled, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.sep_check("sep-2848-submission-input-channel")]

NEEDS_JUSTIFICATION = {
    "templates": {
        "treasury": {
            "approvals_required": 1,
            "reviewer_role": "approver",
            "approval_valid_s": 3600.0,
            "inputs": ["justification"],
        }
    }
}


async def first_round(harness: Harness, account: str) -> dict[str, Any]:
    reply = await harness.alice.call_tool("wire_transfer", {"to": account, "amount": 30_000})
    result = reply.result
    assert result["resultType"] == "input_required"
    return result


async def retry(harness: Harness, account: str, state: str, answer: dict[str, Any], amount: float = 30_000) -> Any:
    params = {
        "name": "wire_transfer",
        "arguments": {"to": account, "amount": amount},
        "inputResponses": {"approval_inputs": answer},
        "requestState": state,
    }
    return await harness.alice.request("tools/call", params)


@pytest.mark.sep_check("sep-2848-submission-input-channel")
@pytest.mark.sep_check("sep-2663-mrtr-before-task")
async def test_inputs_are_asked_before_submission_and_reach_the_approvers(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, NEEDS_JUSTIFICATION) as harness:
        asked = await first_round(harness, "acct-inputs")
        form = asked["inputRequests"]["approval_inputs"]
        assert form["method"] == "elicitation/create"
        assert form["params"]["requestedSchema"]["required"] == ["justification"]
        assert await harness.reviewer("carol").pending() == []  # nothing submitted yet
        answer = {"action": "accept", "content": {"justification": "Invoice INV-7 for the new plant"}}
        created = (await retry(harness, "acct-inputs", asked["requestState"], answer)).result
        assert created["resultType"] == "task"
        assert created["status"] == "working"
        approval = await approval_for(harness.reviewer("carol"), "wire_transfer", to="acct-inputs")
        stored = await harness.deployment.backend.get_request(approval["id"])
        assert stored is not None
        assert "Invoice INV-7" in str(stored.to_json())
        assert (await harness.reviewer("carol").decide(approval["id"], "approve")).status_code == 200
        assert_approved_executed(await settled(harness.alice, created["taskId"]))


@pytest.mark.sep_check("sep-2848-mrtr-retry-matches-binding", "sep-2848-no-steering")
async def test_a_retry_for_other_arguments_is_rejected(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, NEEDS_JUSTIFICATION) as harness:
        asked = await first_round(harness, "acct-steer")
        answer = {"action": "accept", "content": {"justification": "ok"}}
        steered = await retry(harness, "acct-steer", asked["requestState"], answer, amount=90_000)
        assert steered.error["code"] == -32602
        other_account = await retry(harness, "acct-elsewhere", asked["requestState"], answer)
        assert other_account.error["code"] == -32602
        assert await harness.reviewer("carol").pending() == []
        assert harness.ledger() == []


async def test_declining_submits_nothing(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, NEEDS_JUSTIFICATION) as harness:
        asked = await first_round(harness, "acct-decline")
        declined = (await retry(harness, "acct-decline", asked["requestState"], {"action": "decline"})).result
        assert declined["isError"] is True
        assert declined["_meta"][AUTHORIZATION]["remediation"] == "undisclosed"
        assert "did not run" in text_of(declined)
        assert await harness.reviewer("carol").pending() == []


async def test_a_client_that_cannot_be_asked_gets_guidance(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, NEEDS_JUSTIFICATION) as harness:
        reply = await harness.alice.call_tool(
            "wire_transfer", {"to": "acct-noform", "amount": 30_000}, meta=envelope(elicitation=False)
        )
        result = reply.result
        assert result["isError"] is True
        assert result["_meta"][AUTHORIZATION]["remediation"] == "undisclosed"
        assert "justification" in text_of(result)
        assert await harness.reviewer("carol").pending() == []


IN_TASK = {"templates": {"treasury": {**NEEDS_JUSTIFICATION["templates"]["treasury"], "collect_inputs": "during"}}}


async def test_inputs_can_be_asked_inside_the_task_through_tasks_update(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, IN_TASK) as harness:
        created = (await harness.alice.call_tool("wire_transfer", {"to": "acct-in-task", "amount": 30_000})).result
        assert created["resultType"] == "task"
        task = (await harness.alice.get(created["taskId"])).result
        assert task["status"] == "input_required"
        (key,) = task["inputRequests"]
        assert task["inputRequests"][key]["params"]["requestedSchema"]["required"] == ["justification"]
        assert await harness.reviewer("carol").pending() == []  # nothing submitted before the inputs
        answer = {"action": "accept", "content": {"justification": "Quarterly supplier payment"}}
        assert "error" not in (await harness.alice.update(created["taskId"], {key: answer})).body
        approval = await approval_for(harness.reviewer("carol"), "wire_transfer", to="acct-in-task")
        assert approval["inputs"] == {"justification": "Quarterly supplier payment"}
        assert (await harness.alice.get(created["taskId"])).result["status"] == "working"
        assert (await harness.reviewer("carol").decide(approval["id"], "approve")).status_code == 200
        assert_approved_executed(await settled(harness.alice, created["taskId"]))
        assert [entry["to"] for entry in harness.ledger()] == ["acct-in-task"]


async def test_declining_inside_the_task_ends_it_as_a_denial(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, IN_TASK) as harness:
        created = (await harness.alice.call_tool("wire_transfer", {"to": "acct-in-no", "amount": 30_000})).result
        (key,) = (await harness.alice.get(created["taskId"])).result["inputRequests"]
        await harness.alice.update(created["taskId"], {key: {"action": "decline"}})
        task = await settled(harness.alice, created["taskId"])
        assert task["result"]["_meta"]["io.modelcontextprotocol/tool-approval-disposition"] == "denied-not-executed"
        assert "inputs the approvers need were not given" in text_of(task["result"])
        assert await harness.reviewer("carol").pending() == []


async def test_tasks_waiting_for_inputs_count_against_the_limits_and_dedup(tmp_path: Path) -> None:
    overrides = {**IN_TASK, "approval": {"max_pending_per_principal": 1}}
    async with inprocess_treasury(tmp_path, overrides) as harness:
        first = (await harness.alice.call_tool("wire_transfer", {"to": "acct-w1", "amount": 30_000})).result
        again = (await harness.alice.call_tool("wire_transfer", {"to": "acct-w1", "amount": 30_000})).result
        second = (await harness.alice.call_tool("wire_transfer", {"to": "acct-w2", "amount": 30_000})).result
        assert again["taskId"] == first["taskId"]  # the same call waiting for its inputs
        assert second["isError"] is True
        assert second["_meta"][AUTHORIZATION]["remediation"] == "unavailable"
