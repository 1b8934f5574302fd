"""A treasury deployment holding one request of each outcome: executed, denied, outcome unknown.

Three ``serve`` processes in turn on one directory: the first executes an approved transfer and
denies another (the treasury template shares deny comments); the second is armed to die right
after claiming a third approved transfer; the third, running afterwards, finds that claim
unconfirmed and settles it ``outcome-unknown``.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path

import httpx

from mcp_approval.crashpoints import CRASH_ENV
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, call_until_crash, deployment_dir, principals
from tests.treasury.helpers import approval_for, settled

DENY_COMMENT = "Vendor not on the approved list; resubmit after onboarding."
#: The treasury template as the example has it, sharing deny comments with the requester.
TEMPLATES = {
    "treasury": {"approvals_required": 1, "reviewer_role": "approver", "share_deny_comment": True},
    "refund": {"approvals_required": 1, "reviewer_role": "approver"},
    "close_quarter": {"approvals_required": 2, "reviewer_role": "approver"},
}


@dataclass
class Outcomes:
    """The running server and the approval request id and task of each outcome."""

    server: TreasuryServer
    requests: dict[str, str]
    tasks: dict[str, dict[str, object]]


async def three_outcomes(tmp_path: Path) -> Outcomes:
    """Drive the three servers; the last one is left running (the caller kills it)."""
    directory = deployment_dir(tmp_path, {"templates": TEMPLATES})
    requests: dict[str, str] = {}
    tasks: dict[str, dict[str, object]] = {}
    first = await asyncio.to_thread(TreasuryServer(directory).start)
    try:
        async with httpx.AsyncClient(base_url=first.base_url, timeout=scaled(20)) as http:
            alice, carol = principals(http)["alice"], Reviewer(http, "carol-token")
            for account, decision, comment in (("acct-1001", "approve", None), ("acct-2002", "deny", DENY_COMMENT)):
                task_id = (await alice.call_tool("wire_transfer", {"to": account, "amount": 30_000})).result["taskId"]
                approval = await approval_for(carol, "wire_transfer", to=account)
                assert (await carol.decide(approval["id"], decision, comment)).status_code == 200
                tasks[decision] = await settled(alice, task_id)
                requests[decision] = approval["id"]
    finally:
        first.kill()
    crashing = await asyncio.to_thread(TreasuryServer(directory, env={CRASH_ENV: "after_claim"}).start)
    try:
        async with httpx.AsyncClient(base_url=crashing.base_url, timeout=scaled(20)) as http:
            reply = await call_until_crash(crashing, principals(http)["alice"], "wire_transfer", _UNKNOWN)
            assert reply is not None
            unknown_task = reply.result["taskId"]
            approval = await approval_for(Reviewer(http, "carol-token"), "wire_transfer", to=_UNKNOWN["to"])
            requests["unknown"] = approval["id"]
            with contextlib.suppress(httpx.TransportError):  # the claim kills the server, perhaps before it answers
                await Reviewer(http, "carol-token").decide(approval["id"], "approve")
        assert await asyncio.to_thread(crashing.wait_exit) == -9
    finally:
        crashing.kill()
    last = await asyncio.to_thread(TreasuryServer(directory).start)
    async with httpx.AsyncClient(base_url=last.base_url, timeout=scaled(20)) as http:
        tasks["unknown"] = await settled(principals(http)["alice"], unknown_task)
    return Outcomes(last, requests, tasks)


_UNKNOWN = {"to": "acct-3003", "amount": 30_000}
