"""``approval_url`` with a template that needs submission inputs (SEP-2848 §Collecting submission input).

The inputs round is an MRTR form answered in the request; the retry that carries the answers
creates the approval task, which then links the reviewers' page like any other.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.approval.inprocess import inprocess_treasury
from tests.product_page.conftest import APPROVAL_URL, approval_link
from tests.treasury.helpers import approval_for, assert_approved_executed, settled

pytestmark = pytest.mark.anyio

TEMPLATE = {"approvals_required": 1, "reviewer_role": "approver", "approval_valid_s": 3600.0}


async def test_the_task_created_by_the_inputs_retry_links_the_page(tmp_path: Path) -> None:
    overrides = {
        "tasks": {"approval_url": APPROVAL_URL},
        "templates": {"treasury": {**TEMPLATE, "inputs": ["justification"]}},
    }
    async with inprocess_treasury(tmp_path, overrides) as harness:
        arguments = {"to": "acct-url-inputs", "amount": 30_000}
        asked = (await harness.alice.call_tool("wire_transfer", arguments)).result
        assert asked["resultType"] == "input_required"
        assert asked["inputRequests"]["approval_inputs"]["params"].get("mode", "form") == "form"
        answer = {"action": "accept", "content": {"justification": "Invoice INV-9"}}
        params = {
            "name": "wire_transfer",
            "arguments": arguments,
            "inputResponses": {"approval_inputs": answer},
            "requestState": asked["requestState"],
        }
        created = (await harness.alice.request("tools/call", params)).result
        assert created["resultType"] == "task"
        assert created["status"] == "input_required"
        approval = await approval_for(harness.reviewer("carol"), "wire_transfer", to="acct-url-inputs")
        polled = (await harness.alice.get(created["taskId"])).result
        ((key, request),) = polled["inputRequests"].items()
        assert request["params"] == {
            "mode": "url",
            "message": request["params"]["message"],
            "url": approval_link(approval["id"]),
        }
        await harness.alice.update(created["taskId"], {key: {"action": "accept"}})
        assert (await harness.alice.get(created["taskId"])).result["status"] == "working"
        assert (await harness.reviewer("carol").decide(approval["id"], "approve")).status_code == 200
        assert_approved_executed(await settled(harness.alice, created["taskId"]))
    assert [entry["to"] for entry in harness.ledger()] == ["acct-url-inputs"]
