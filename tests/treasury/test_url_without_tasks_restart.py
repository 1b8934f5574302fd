"""A URL round's ``requestState`` and page link outlive the process that minted them.

``serve`` (``without_tasks = "request"`` with ``requester_url``) answers a client that declared
URL elicitation but not tasks with an ``input_required`` round, and is then SIGKILLed. A second
``serve`` on the same database and binding keys opens that round's state and page token: the
retry with the old state collects the approved call's result once, and the page shows the outcome.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from mcp_approval.approval.without_tasks.links import PAGE_INPUT_KEY
from mcp_approval.checks.wire import Wire, envelope
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir
from tests.treasury.helpers import DISPOSITION, approval_for

pytestmark = pytest.mark.anyio

URL_MODE = {"approval": {"without_tasks": "request", "requester_url": "http://127.0.0.1:9/requests/{request_token}"}}
ARGUMENTS = {"to": "acct-url-restart", "amount": 30_000}
URL_NO_TASKS = envelope(tasks=False, elicitation=True)


async def call(alice: Wire, state: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "wire_transfer", "arguments": ARGUMENTS}
    if state is not None:
        params |= {"requestState": state, "inputResponses": {PAGE_INPUT_KEY: {"action": "accept"}}}
    return (await alice.request("tools/call", params, meta=URL_NO_TASKS)).result


def entries(server: TreasuryServer) -> int:
    return sum(1 for entry in server.ledger() if entry.get("to") == ARGUMENTS["to"])


async def test_the_state_and_page_of_a_round_survive_a_restart(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path, URL_MODE)
    first_server = TreasuryServer(directory).start()
    try:
        async with httpx.AsyncClient(base_url=first_server.base_url, timeout=scaled(20)) as http:
            first = await call(Wire(http, token="alice-token"))
    finally:
        first_server.kill()
    assert first["resultType"] == "input_required"
    state, link = first["requestState"], first["inputRequests"][PAGE_INPUT_KEY]["params"]["url"]
    restarted = TreasuryServer(directory).start()
    try:
        async with httpx.AsyncClient(base_url=restarted.base_url, timeout=scaled(20)) as http:
            alice = Wire(http, token="alice-token")
            still = await call(alice, state)  # the old state opens: the request is still open
            assert still["isError"] is True  # the pending answer (the page was given before the restart)
            assert "inputRequests" not in still
            assert entries(restarted) == 0
            carol = Reviewer(http, "carol-token")
            approval = await approval_for(carol, "wire_transfer", to=ARGUMENTS["to"])
            assert (await carol.decide(approval["id"], "approve")).status_code == 200
            result = await eventually(lambda: call(alice, state), lambda r: DISPOSITION in r.get("_meta", {}))
            assert result["_meta"][DISPOSITION] == "approved-executed"
            assert entries(restarted) == 1
            page = await http.get(urlsplit(link).path)
            assert page.status_code == 200
            assert "approved-executed" in page.text
            assert "carol" not in page.text
            spent = await call(alice, state)  # the approval is spent: a new request, nothing runs
            assert spent["resultType"] == "input_required"
            assert "inputRequests" in spent
            assert entries(restarted) == 1
    finally:
        restarted.kill()
