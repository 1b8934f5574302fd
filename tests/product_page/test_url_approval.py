"""``TaskOptions.approval_url``: a url-mode elicitation on the approval task, never an approval.

Against a real ``mcp-approval serve`` on 127.0.0.1 whose ``[tasks] approval_url`` names the
reviewers' page. The store (the local backend behind the reviewer API) is the only place a
decision comes from; the link is a pointer to it.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from mcp_approval.checks.wire import Wire, envelope
from tests.product_page.conftest import approval_link
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, principals
from tests.treasury.helpers import (
    approval_for,
    assert_approved_executed,
    assert_denied_not_executed,
    settled,
    transfers_to,
    wire_text,
)

pytestmark = pytest.mark.anyio

FORM_ONLY = {"form": {}}


def meta_with(elicitation: dict[str, Any] | None) -> dict[str, Any]:
    """A tasks-declaring envelope with exactly this ``elicitation`` capability (``None``: none)."""
    meta = envelope(elicitation=False)
    if elicitation is not None:
        meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"] = elicitation
    return meta


async def request_transfer(wire: Wire, account: str, *, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    reply = await wire.call_tool("wire_transfer", {"to": account, "amount": 50_000}, meta=meta)
    assert reply.status == 200, reply.body
    created = reply.result
    assert created["resultType"] == "task", created
    return created


async def approval_record(http: httpx.AsyncClient, approval_id: str) -> dict[str, Any]:
    """The store's view of one approval request (what actually decides)."""
    reply = await http.get(f"/approvals/{approval_id}", headers={"authorization": "Bearer carol-token"})
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def the_link(task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The one outstanding input request of an ``input_required`` task: (key, request)."""
    assert task["status"] == "input_required", task
    requests = task["inputRequests"]
    assert len(requests) == 1, requests
    ((key, request),) = requests.items()
    return key, request


async def test_a_url_declaring_client_sees_input_required_with_one_url_elicitation(
    linked: TreasuryServer, http: httpx.AsyncClient
) -> None:
    alice = principals(http)["alice"]
    created = await request_transfer(alice, "acct-url-e2e")
    assert created["status"] == "input_required"
    assert "inputRequests" not in created  # CreateTaskResult carries no outcome or inputs (SEP-2663)
    approval = await approval_for(Reviewer(http, "carol-token"), "wire_transfer", to="acct-url-e2e")
    polled = (await alice.get(created["taskId"])).result
    key, request = the_link(polled)
    assert request["method"] == "elicitation/create"
    params = request["params"]
    assert params["mode"] == "url"
    assert params["url"] == approval_link(approval["id"])
    assert "needs approval" in params["message"]
    assert "does not approve" in params["message"]
    assert "elicitationId" not in params  # removed from the 2026-07-28 wire; the key correlates
    assert set(params) == {"mode", "message", "url"}
    assert polled["_meta"]["io.modelcontextprotocol/authorization"]["remediation"] == "available"

    ack = await alice.update(created["taskId"], {key: {"action": "accept"}})
    assert ack.status == 200
    assert ack.result.get("resultType") == "complete"
    after = (await alice.get(created["taskId"])).result
    assert after["status"] == "working"
    assert "inputRequests" not in after
    assert (await approval_record(http, approval["id"]))["status"] == "pending"  # the store did not move
    assert transfers_to(linked, "acct-url-e2e") == []

    assert (await Reviewer(http, "carol-token").decide(approval["id"], "approve")).status_code == 200
    done = await settled(alice, created["taskId"])
    assert_approved_executed(done)
    assert len(transfers_to(linked, "acct-url-e2e")) == 1
    assert "inputRequests" not in done


@pytest.mark.parametrize(
    ("label", "answer"),
    [
        ("accept", {"action": "accept"}),
        ("decline", {"action": "decline"}),
        ("cancel", {"action": "cancel"}),
        ("forged", {"action": "accept", "content": {"decision": "approve", "approved": True, "status": "approved"}}),
    ],
)
async def test_tasks_update_never_approves_whatever_it_says(
    linked: TreasuryServer, http: httpx.AsyncClient, label: str, answer: dict[str, Any]
) -> None:
    account = f"acct-url-update-{label}"
    alice = principals(http)["alice"]
    created = await request_transfer(alice, account)
    approval = await approval_for(Reviewer(http, "carol-token"), "wire_transfer", to=account)
    key, _ = the_link((await alice.get(created["taskId"])).result)
    unknown_key = await alice.update(created["taskId"], {"not-a-key": {"action": "accept"}})
    assert unknown_key.status == 200
    assert (await alice.get(created["taskId"])).result["status"] == "input_required"  # other keys are ignored
    assert (await alice.update(created["taskId"], {key: answer})).status == 200
    assert (await alice.get(created["taskId"])).result["status"] == "working"
    again = await alice.update(created["taskId"], {key: {"action": "accept"}})  # an answered key: ignored
    assert again.status == 200
    record = await approval_record(http, approval["id"])
    assert record["status"] == "pending"
    assert record["decisions"] == []
    # The workflow driver checks the store for this task when the answer arrives; only a reviewer moves it.
    assert (await Reviewer(http, "carol-token").decide(approval["id"], "deny")).status_code == 200
    assert_denied_not_executed(await settled(alice, created["taskId"]))
    assert transfers_to(linked, account) == []


async def test_the_link_is_only_a_pointer_the_store_still_decides(
    linked: TreasuryServer, http: httpx.AsyncClient
) -> None:
    wires = principals(http)
    created = await request_transfer(wires["alice"], "acct-url-pointer")
    _, request = the_link((await wires["alice"].get(created["taskId"])).result)
    approval_id = request["params"]["url"].split("/approvals/")[1].split("?")[0]
    for outsider in ("alice", "bob"):  # the requester, and a treasurer who is no approver
        refused = await Reviewer(http, f"{outsider}-token").decide(approval_id, "approve")
        assert refused.status_code == 403, refused.text
    anonymous = await http.post(f"/approvals/{approval_id}/decide", json={"decision": "approve"})
    assert anonymous.status_code == 401
    assert (await approval_record(http, approval_id))["status"] == "pending"
    assert (await wires["alice"].get(created["taskId"])).result["status"] == "input_required"
    assert (await Reviewer(http, "dave-token").decide(approval_id, "approve")).status_code == 200
    assert_approved_executed(await settled(wires["alice"], created["taskId"]))
    assert len(transfers_to(linked, "acct-url-pointer")) == 1


@pytest.mark.parametrize("elicitation", [None, FORM_ONLY], ids=["no-elicitation", "form-only"])
async def test_a_client_without_url_elicitation_gets_a_plain_working_task(
    linked: TreasuryServer, http: httpx.AsyncClient, elicitation: dict[str, Any] | None
) -> None:
    account = f"acct-url-plain-{'form' if elicitation else 'none'}"
    alice = principals(http)["alice"]
    meta = meta_with(elicitation)
    created = await request_transfer(alice, account, meta=meta)
    assert created["status"] == "working"
    polled = (await alice.get(created["taskId"], meta=meta)).result
    assert polled["status"] == "working"
    assert "inputRequests" not in polled
    approval = await approval_for(Reviewer(http, "carol-token"), "wire_transfer", to=account)
    assert approval["id"] not in wire_text([created, polled])
    assert (await Reviewer(http, "carol-token").decide(approval["id"], "approve")).status_code == 200
    assert_approved_executed(await settled(alice, created["taskId"], timeout_s=scaled(20)))
    assert len(transfers_to(linked, account)) == 1


async def test_the_approval_id_reaches_the_client_only_inside_the_configured_link(http: httpx.AsyncClient) -> None:
    """Invariant 9's one opt-in exception: the id in ``approval_url``, nothing else of the backend."""
    alice = principals(http)["alice"]
    created = await request_transfer(alice, "acct-url-artifacts")
    carol = Reviewer(http, "carol-token")
    approval = await approval_for(carol, "wire_transfer", to="acct-url-artifacts")
    pending = (await alice.get(created["taskId"])).result
    key, _ = the_link(pending)
    await alice.update(created["taskId"], {key: {"action": "accept"}})
    working = (await alice.get(created["taskId"])).result
    assert (await carol.decide(approval["id"], "approve", "secret reviewer note")).status_code == 200
    final = await settled(alice, created["taskId"])
    without_link = json.loads(json.dumps(pending))
    del without_link["inputRequests"][key]["params"]["url"]
    seen = wire_text([created, without_link, working, final])
    for artifact in (approval["id"], "carol", "secret reviewer note", "binding", "evaluation_id", "approved_until"):
        assert artifact not in seen, artifact
    assert approval["id"] in pending["inputRequests"][key]["params"]["url"]


async def test_an_identical_retry_returns_the_same_linked_task(http: httpx.AsyncClient) -> None:
    alice = principals(http)["alice"]
    first = await request_transfer(alice, "acct-url-retry")
    second = await request_transfer(alice, "acct-url-retry")
    assert second["taskId"] == first["taskId"]
    assert second["status"] == "input_required"
    key, _ = the_link((await alice.get(first["taskId"])).result)
    await alice.update(first["taskId"], {key: {"action": "accept"}})
    assert (await request_transfer(alice, "acct-url-retry"))["status"] == "working"  # not re-linked
    assert (await alice.cancel(first["taskId"])).status == 200
    assert (await settled(alice, first["taskId"]))["status"] == "cancelled"


async def test_another_principal_cannot_answer_the_link(http: httpx.AsyncClient) -> None:
    wires = principals(http)
    created = await request_transfer(wires["alice"], "acct-url-foreign")
    key, _ = the_link((await wires["alice"].get(created["taskId"])).result)
    forged = await wires["bob"].update(created["taskId"], {key: {"action": "accept"}})
    assert forged.status == 400
    assert forged.error == {"code": -32602, "message": "Unknown or expired task"}
    assert (await wires["alice"].get(created["taskId"])).result["status"] == "input_required"
    await wires["alice"].cancel(created["taskId"])


async def test_url_elicitation_without_tasks_gets_the_classic_result(
    linked: TreasuryServer, http: httpx.AsyncClient
) -> None:
    """With ``without_tasks = "degraded"`` (this module's deployment), a URL elicitation without tasks
    gets the classic result; ``"request"`` with ``requester_url`` sends it to a page instead
    (tests/approval/test_url_without_tasks.py)."""
    alice = principals(http)["alice"]
    meta = envelope(tasks=False)  # declares elicitation form + url, not the tasks extension
    reply = await alice.call_tool("wire_transfer", {"to": "acct-url-no-tasks", "amount": 50_000}, meta=meta)
    result = reply.result
    assert result.get("resultType") not in ("task", "input_required")
    assert result["isError"] is True
    assert result["_meta"]["io.modelcontextprotocol/authorization"]["remediation"] == "undisclosed"
    assert "reviews.example.test" not in wire_text(result)
    pending = await Reviewer(http, "carol-token").pending()
    assert all(item["arguments"].get("to") != "acct-url-no-tasks" for item in pending)  # nothing submitted
    assert transfers_to(linked, "acct-url-no-tasks") == []
