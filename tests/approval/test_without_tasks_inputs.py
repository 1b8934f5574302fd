"""Templates with submission inputs, for clients without tasks (``without_tasks = "request"``).

On 2026-07-28 the inputs are asked first, in an MRTR form round, exactly as before a task; the
retry carrying them opens the request (answered in text, or with ``requester_url`` by the URL
round); a further identical call joins that request instead of asking again. On 2025-11-25 there is
no MRTR round, so such a call keeps the degraded answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_approval.approval.without_tasks.links import PAGE_INPUT_KEY
from mcp_approval.checks.wire import LegacySession, Reply, envelope
from tests.approval.inprocess import Harness, inprocess_treasury
from tests.approval.test_without_tasks import assert_pending, ended, reference_of, transfers
from tests.treasury.helpers import AUTHORIZATION, DISPOSITION, approval_for

pytestmark = pytest.mark.anyio

TEMPLATE = {"approvals_required": 1, "reviewer_role": "approver", "approval_valid_s": 3600.0}
INPUTS = {"templates": {"treasury": {**TEMPLATE, "inputs": ["justification"]}}}
REQUEST = {"without_tasks": "request"}
PAGE = "http://127.0.0.1:8000/requests/{request_token}"
NO_TASKS = envelope(tasks=False, elicitation=True)
JUSTIFIED = {"action": "accept", "content": {"justification": "Invoice INV-9 for the plant"}}


async def call(harness: Harness, to: str, **extra: Any) -> Reply:
    params = {"name": "wire_transfer", "arguments": {"to": to, "amount": 30_000}, **extra}
    return await harness.alice.request("tools/call", params, meta=NO_TASKS)


async def submitted_inputs(harness: Harness, to: str) -> str:
    approval = await approval_for(harness.reviewer("carol"), "wire_transfer", to=to)
    stored = await harness.deployment.backend.get_request(approval["id"])
    assert stored is not None
    return str(stored.to_json())


@pytest.mark.sep_check("sep-2848-submission-input-channel", "sep-2848-client-maturity-ordinary-tools")
async def test_inputs_are_asked_first_then_the_request_opens_and_the_retry_collects_once(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, {"approval": REQUEST, **INPUTS}) as harness:
        asked = (await call(harness, "acct-in")).result
        assert asked["resultType"] == "input_required"
        assert asked["inputRequests"]["approval_inputs"]["params"]["requestedSchema"]["required"] == ["justification"]
        assert await harness.reviewer("carol").pending() == []  # nothing submitted before the inputs
        opened = (
            await call(
                harness, "acct-in", inputResponses={"approval_inputs": JUSTIFIED}, requestState=asked["requestState"]
            )
        ).result
        assert_pending(opened)
        assert "Invoice INV-9" in await submitted_inputs(harness, "acct-in")
        joined = (await call(harness, "acct-in")).result  # no second form, no second request
        assert_pending(joined)
        assert reference_of(joined) == reference_of(opened)
        assert len(await harness.reviewer("carol").pending()) == 1
        approval = await approval_for(harness.reviewer("carol"), "wire_transfer", to="acct-in")
        assert (await harness.reviewer("carol").decide(approval["id"], "approve")).status_code == 200
        await ended(harness, reference_of(opened))
        result = (await call(harness, "acct-in")).result
        assert result["_meta"][DISPOSITION] == "approved-executed"
        assert len(transfers(harness, "acct-in")) == 1


async def test_with_requester_url_the_inputs_round_is_followed_by_the_url_round(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, {"approval": {**REQUEST, "requester_url": PAGE}, **INPUTS}) as harness:
        asked = (await call(harness, "acct-in-url")).result
        assert "approval_inputs" in asked["inputRequests"]
        linked = (
            await call(
                harness,
                "acct-in-url",
                inputResponses={"approval_inputs": JUSTIFIED},
                requestState=asked["requestState"],
            )
        ).result
        assert linked["inputRequests"][PAGE_INPUT_KEY]["params"]["mode"] == "url"
        assert linked["_meta"][AUTHORIZATION]["remediation"] == "available"
        still = (
            await call(
                harness,
                "acct-in-url",
                inputResponses={PAGE_INPUT_KEY: {"action": "accept"}},
                requestState=linked["requestState"],
            )
        ).result
        assert "inputRequests" not in still  # after the page: the pending answer, the round loop ends
        assert still["isError"] is True
        assert still["_meta"][AUTHORIZATION]["remediation"] == "undisclosed"
        assert len(await harness.reviewer("carol").pending()) == 1


async def test_declining_the_inputs_submits_nothing(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, {"approval": REQUEST, **INPUTS}) as harness:
        asked = (await call(harness, "acct-in-no")).result
        declined = (
            await call(
                harness,
                "acct-in-no",
                inputResponses={"approval_inputs": {"action": "decline"}},
                requestState=asked["requestState"],
            )
        ).result
        assert declined["isError"] is True
        assert "nothing was submitted" in declined["content"][0]["text"]
        assert await harness.reviewer("carol").pending() == []


async def test_a_2025_11_25_client_keeps_the_degraded_answer(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, {"approval": REQUEST, **INPUTS}) as harness:
        legacy = await LegacySession.open(harness.http, "alice-token", capabilities={"elicitation": {}})
        answer = (await legacy.call("wire_transfer", {"to": "acct-in-legacy", "amount": 30_000}))["result"]
        assert answer["isError"] is True
        assert answer["_meta"][AUTHORIZATION]["remediation"] == "undisclosed"
        assert await harness.reviewer("carol").pending() == []
