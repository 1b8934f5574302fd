"""Steps shared by the treasury tests."""

from __future__ import annotations

import json
from typing import Any

import httpx

from mcp_approval.checks.wire import Wire
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer

DISPOSITION = "io.modelcontextprotocol/tool-approval-disposition"
AUTHORIZATION = "io.modelcontextprotocol/authorization"
IMMEDIATE = "io.modelcontextprotocol/model-immediate-response"


async def approval_for(reviewer: Reviewer, tool: str, *, ended_too: bool = False, **arguments: Any) -> dict[str, Any]:
    """The pending approval request of the call with these arguments (waits for it to appear).

    The wait is long (60 s) because the call may come from a client process still starting on a
    loaded machine; it only runs out when something is wrong. ``ended_too`` also finds it once it
    ended (a request with a deadline of seconds may lapse before a loaded machine lists it).
    """
    listings = ("pending", "decided") if ended_too else ("pending",)

    async def find() -> list[dict[str, Any]]:
        return [
            item
            for status in listings
            for item in await reviewer.listed(status)
            if item["tool"] == tool and all(item["arguments"].get(k) == v for k, v in arguments.items())
        ]

    (found,) = await eventually(find, lambda items: len(items) == 1, timeout_s=scaled(60))
    return found


async def settled(wire: Wire, task_id: str, *, timeout_s: float | None = None) -> dict[str, Any]:
    """``tasks/get`` once the task is terminal (waiting up to ``timeout_s``; by default ``scaled(20)``)."""

    async def get() -> dict[str, Any]:
        return (await wire.get(task_id)).result

    return await eventually(
        get,
        lambda task: task["status"] in ("completed", "failed", "cancelled"),
        timeout_s=scaled(20) if timeout_s is None else timeout_s,
    )


def transfers_to(server: TreasuryServer, account: str) -> list[dict[str, Any]]:
    """The ledger entries of transfers to ``account``."""
    return [entry for entry in server.ledger() if entry.get("to") == account]


def text_of(result: dict[str, Any]) -> str:
    return " ".join(item.get("text", "") for item in result.get("content", []))


def assert_denied_not_executed(task: dict[str, Any]) -> None:
    """Disposition, body and envelope agree on a terminal denial (invariant 10)."""
    assert task["status"] == "completed", task
    result = task["result"]
    assert result["isError"] is True, result
    assert result["_meta"][DISPOSITION] == "denied-not-executed", result
    assert result["_meta"][AUTHORIZATION]["remediation"] == "unavailable"
    assert "did not run" in text_of(result)
    assert AUTHORIZATION not in task.get("_meta", {}), "a terminal task does not repeat the pending envelope"


def assert_approved_executed(task: dict[str, Any]) -> None:
    """Disposition and body agree on an executed approval; no denial envelope."""
    assert task["status"] == "completed", task
    result = task["result"]
    assert result["isError"] is False, result
    assert result["_meta"][DISPOSITION] == "approved-executed", result
    assert AUTHORIZATION not in result["_meta"]
    assert "ran once" in text_of(result)


def wire_text(document: Any) -> str:
    """Everything a client saw, as one string (for artifact leak checks)."""
    return json.dumps(document, sort_keys=True)


async def listed_ids(http: httpx.AsyncClient, token: str, status: str) -> set[str]:
    """The ids of the approval requests ``token``'s principal is shown in the ``status`` listing."""
    response = await http.get("/approvals", params={"status": status}, headers={"authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    return {item["id"] for item in response.json()["approvals"]}


async def shown(http: httpx.AsyncClient, token: str, approval_id: str) -> httpx.Response:
    """``GET /approvals/{id}`` as ``token``'s principal."""
    return await http.get(f"/approvals/{approval_id}", headers={"authorization": f"Bearer {token}"})


async def console_page(http: httpx.AsyncClient, token: str, path: str) -> httpx.Response:
    """A console page as ``token``'s principal, signed in afresh."""
    http.cookies.clear()
    signed_in = await http.post("/console/login", data={"token": token})
    assert signed_in.status_code == 303, signed_in.text
    return await http.get(path)
