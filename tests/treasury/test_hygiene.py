"""Hygiene of approval tasks: cancellation notifications, logs, and task ids that are not yours.

Each runs in both modes (``local``; ``arap``, with reviewers on the arap-server).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from mcp_approval.checks.wire import PROTOCOL, envelope
from tests.support.polling import eventually
from tests.support.treasury import Reviewer, TreasuryServer, principals
from tests.treasury.conftest import Scenario
from tests.treasury.helpers import approval_for, assert_approved_executed, settled, transfers_to

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def treasury(scenario: Scenario) -> TreasuryServer:
    """The scenario's ``serve`` process (local or ARAP mode)."""
    return scenario.server


async def post(
    http: httpx.AsyncClient, message: dict[str, Any], *, token: str, name: str | None = None
) -> httpx.Response:
    """POST one JSON-RPC message to ``/mcp`` with the headers :class:`Wire` sends."""
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": PROTOCOL,
        "mcp-method": message["method"],
        "authorization": f"Bearer {token}",
    }
    if name is not None:
        headers["mcp-name"] = name
    return await http.post("/mcp", content=json.dumps(message), headers=headers)


@pytest.mark.sep_check("sep-2848-notifications-cancelled-not-used")
async def test_cancelled_notification_does_not_cancel_an_approval_task(
    treasury: TreasuryServer, http: httpx.AsyncClient, reviewers: httpx.AsyncClient
) -> None:
    """SEP-2663 / SEP-2848 §Cancellation: only ``tasks/cancel`` cancels a task."""
    call_id = "call-to-notify-cancelled"
    arguments = {"to": "acct-notified", "amount": 30_000}
    call = {
        "jsonrpc": "2.0",
        "id": call_id,
        "method": "tools/call",
        "params": {"name": "wire_transfer", "arguments": arguments, "_meta": envelope()},
    }
    answered = await post(http, call, token="alice-token", name="wire_transfer")
    assert answered.status_code == 200, answered.text
    created = answered.json()["result"]
    assert created["resultType"] == "task"
    assert created["status"] == "working"

    notification = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": call_id}}
    accepted = await post(http, notification, token="alice-token")
    assert accepted.status_code == 202, accepted.text  # taken, not refused: the check below means something

    alice = principals(http)["alice"]
    assert (await alice.get(created["taskId"])).result["status"] == "working"
    carol = Reviewer(reviewers, "carol-token")
    approval = await approval_for(carol, "wire_transfer", to="acct-notified")  # the request was not withdrawn
    assert (await carol.decide(approval["id"], "approve")).status_code == 200
    assert_approved_executed(await settled(alice, created["taskId"]))
    assert len(transfers_to(treasury, "acct-notified")) == 1


async def server_log(treasury: TreasuryServer) -> str:
    return treasury.log()


@pytest.mark.sep_check("sep-2848-sensitive-records-protected")
async def test_call_arguments_stay_out_of_the_server_log(
    treasury: TreasuryServer, http: httpx.AsyncClient, reviewers: httpx.AsyncClient
) -> None:
    """SEP-2848 §Security: durable sensitive state stays out of ordinary logs (at the default level)."""
    alice = principals(http)["alice"]
    created = (await alice.call_tool("wire_transfer", {"to": "acct-SECRET-7731", "amount": 31337})).result
    assert created["resultType"] == "task"
    carol = Reviewer(reviewers, "carol-token")
    approval = await approval_for(carol, "wire_transfer", to="acct-SECRET-7731")
    assert (await carol.decide(approval["id"], "approve", "ok for SECRET-7731")).status_code == 200
    assert_approved_executed(await settled(alice, created["taskId"]))
    assert len(transfers_to(treasury, "acct-SECRET-7731")) == 1
    # The log does record this task's outcome, so it is the log the flow wrote to.
    ran = f"task {created['taskId'][:8]}: approved call ran"
    log = await eventually(lambda: server_log(treasury), lambda text: ran in text)
    assert "SECRET-7731" not in log
    assert "31337" not in log
    assert "31,337" not in log


@pytest.mark.sep_check("sep-2848-task-access-by-origin")
async def test_foreign_and_malformed_task_ids_are_unknown_tasks(
    treasury: TreasuryServer, http: httpx.AsyncClient
) -> None:
    wires = principals(http)
    alice, bob = wires["alice"], wires["bob"]
    created = (await alice.call_tool("wire_transfer", {"to": "acct-foreign-id", "amount": 30_000})).result
    task_id = created["taskId"]
    unknown = {"code": -32602, "message": "Unknown or expired task"}
    for reply in (await bob.get(task_id), await bob.cancel(task_id)):
        assert reply.error == unknown

    oversized = "t" * 1000
    for reply in (await alice.get(oversized), await alice.cancel(oversized)):
        assert reply.error["code"] == -32602, reply.body
        assert oversized not in json.dumps(reply.body), "the error does not echo an oversized id"
    for bad in ("'; DROP TABLE tasks; --", "../" * 20, "%00", 12345, None, ["x"], {"taskId": "x"}):
        for method in ("tasks/get", "tasks/cancel"):
            # A string id goes with its Mcp-Name header; a non-string one has none to go with.
            reply = await alice.request(method, {"taskId": bad}, name=bad if isinstance(bad, str) else "")
            assert reply.error["code"] == -32602, (method, bad, reply.body)

    assert treasury.process is not None
    assert treasury.process.poll() is None  # the server is still up and still serves the owner
    assert (await alice.get(task_id)).result["status"] == "working"
    assert (await bob.cancel(task_id)).error == unknown
    assert (await alice.get(task_id)).result["status"] == "working"
