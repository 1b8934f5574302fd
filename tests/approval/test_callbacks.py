"""Backend callbacks are authenticated wake-ups; the backend's status decides (SEP-2848 §Security).

The server polls the backend only every 30 s here and does not follow the local backend's change
feed, and decisions are recorded through a second backend instance (as another process would), so
only a callback can make the server look now.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from mcp_approval.backends.callbacks import CALLBACK_PATH, SIGNATURE_HEADER, sign_callback
from mcp_approval.server.local_backend import local_backend_from_config
from tests.approval.inprocess import Harness, inprocess_treasury
from tests.support.polling import eventually
from tests.treasury.helpers import approval_for, assert_approved_executed, settled

pytestmark = pytest.mark.anyio

SECRET = "callback-secret-for-tests"
SLOW_POLL = {"approval": {"poll_interval_s": 30.0, "callback_secret": SECRET, "follow_changes": False}}


async def post_callback(
    harness: Harness, handle: str, *, secret: str = SECRET, at: int | None = None
) -> httpx.Response:
    body = json.dumps({"handle": handle}).encode()
    signature = sign_callback(secret, body, at if at is not None else int(time.time()))
    return await harness.http.post(CALLBACK_PATH, content=body, headers={SIGNATURE_HEADER: signature})


async def pending_transfer(harness: Harness, account: str) -> tuple[str, str]:
    """(task id, backend handle) of a fresh pending transfer, after the workflow driver's first look."""
    created = (await harness.alice.call_tool("wire_transfer", {"to": account, "amount": 30_000})).result
    store = harness.deployment.approval.store

    async def first_check_done() -> int:
        workflow = await store.get(created["taskId"])
        assert workflow is not None
        return workflow.next_check_at - workflow.created_at

    await eventually(first_check_done, lambda delay: delay > 10_000)  # next look only in ~30 s
    workflow = await store.get(created["taskId"])
    assert workflow is not None
    assert workflow.handle is not None
    return created["taskId"], workflow.handle


async def decide_elsewhere(harness: Harness, account: str, decision: str) -> None:
    """Decide as carol through a backend instance that does not notify this server."""
    deployment = harness.deployment
    other = local_backend_from_config(deployment.config, deployment.approval.store.database, with_resolvers=False)
    approval = await approval_for(harness.reviewer("carol"), "wire_transfer", to=account)
    await other.decide(approval["id"], "carol", decision)


@pytest.mark.sep_check("sep-2848-callback-authenticated-then-fetch")
async def test_a_signed_callback_wakes_the_workflow_driver_which_then_reads_the_status(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, SLOW_POLL) as harness:
        task_id, handle = await pending_transfer(harness, "acct-cb")
        assert (await post_callback(harness, handle)).status_code == 202  # nothing decided yet: a no-op
        assert (await harness.alice.get(task_id)).result["status"] == "working"
        await decide_elsewhere(harness, "acct-cb", "approve")
        assert (await post_callback(harness, handle)).status_code == 202
        assert_approved_executed(await settled(harness.alice, task_id, timeout_s=10))
        assert [entry["to"] for entry in harness.ledger()] == ["acct-cb"]


@pytest.mark.sep_check("sep-2848-forged-callback-no-execution")
async def test_forged_stale_and_malformed_callbacks_are_refused(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, SLOW_POLL) as harness:
        task_id, handle = await pending_transfer(harness, "acct-forged")
        await decide_elsewhere(harness, "acct-forged", "approve")
        forged = await post_callback(harness, handle, secret="not-the-secret")
        stale = await post_callback(harness, handle, at=int(time.time()) - 3600)  # a replay from an hour ago
        unsigned = await harness.http.post(CALLBACK_PATH, json={"handle": handle})
        for refused in (forged, stale, unsigned):
            assert refused.status_code == 401
            assert refused.headers["content-type"].startswith("application/problem+json")
        assert (await harness.deployment.approval.store.get(task_id)).phase.value == "pending"  # type: ignore[union-attr]
        assert (await harness.alice.get(task_id)).result["status"] == "working"
        assert harness.ledger() == []
        body = b'["not", "an", "object"]'
        signature = sign_callback(SECRET, body, int(time.time()))
        malformed = await harness.http.post(CALLBACK_PATH, content=body, headers={SIGNATURE_HEADER: signature})
        assert malformed.status_code == 400


@pytest.mark.sep_check("sep-2848-callback-authenticated-then-fetch")
async def test_a_callback_for_a_denied_request_never_executes(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, SLOW_POLL) as harness:
        task_id, handle = await pending_transfer(harness, "acct-cb-deny")
        await decide_elsewhere(harness, "acct-cb-deny", "deny")
        for _ in range(3):  # duplicated callbacks change nothing
            assert (await post_callback(harness, handle)).status_code == 202
        task = await settled(harness.alice, task_id, timeout_s=10)
        assert task["result"]["_meta"]["io.modelcontextprotocol/tool-approval-disposition"] == "denied-not-executed"
        assert harness.ledger() == []
