"""strands-agents with tasks (SEP-2663): what ``poll_timeout`` does to a long approval.

The treasury server of this leg lets a request wait only a short deadline. strands polls a task until
its ``poll_timeout`` and then sends ``tasks/cancel``, which withdraws the approval request: the model
sees "Task ... timed out" and a reviewer deciding later is answered 409. A ``poll_timeout`` above the
request's deadline waits long enough: an approval slower than the first client's limit completes,
and when no one decides the model is shown the expiry (the call never ran), not a timeout.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from harness import (
    Leg,
    check,
    decide,
    decide_answers,
    excerpt,
    ledger_count,
    new_account,
    pending_for,
    reviewer_request,
    transfer,
)
from leg_strands import result_text, run_tool, transport
from strands.tools.mcp import MCPClient

SHORT_POLL_TIMEOUT = timedelta(seconds=3)
SLOW_APPROVAL_S = 5.0  # longer than SHORT_POLL_TIMEOUT: the first client would have given up
MARGIN = timedelta(seconds=8)


async def opened(leg: Leg, account: str) -> dict[str, Any]:
    """The approval request for ``account`` once it is pending."""
    for _ in range(300):
        mine = await asyncio.to_thread(pending_for, leg.base_url, account)
        if mine:
            return mine[0]
        await asyncio.sleep(0.1)
    raise TimeoutError(f"no pending request for {account}")


def window(record: dict[str, Any]) -> timedelta:
    """How long a request may wait for a decision: its deadline less its creation time."""
    parse = lambda stamp: datetime.fromisoformat(stamp.replace("Z", "+00:00"))  # noqa: E731
    return parse(record["expires_at"]) - parse(record["created_at"])


async def main() -> int:
    leg = Leg("strands (tasks)")
    deadline = timedelta()

    def client(poll_timeout: timedelta) -> MCPClient:
        return MCPClient(lambda: transport(leg.mcp_url), tasks_config={"poll_timeout": poll_timeout})

    async def call_with(mcp: MCPClient, account: str, use: str) -> str:
        tool = next(tool for tool in mcp.list_tools_sync() if tool.tool_name == "wire_transfer")
        return result_text(await run_tool(tool, transfer(account), use))

    async def cancel_at_poll_timeout() -> str:
        nonlocal deadline
        account = new_account(leg.client, "cancel")
        with client(SHORT_POLL_TIMEOUT) as mcp:
            call = asyncio.create_task(call_with(mcp, account, "use-cancel"))
            record = await opened(leg, account)
            text = leg.saw("cancel", await call)
        deadline = window(record)
        check("timed out" in text, f"expected a timeout, the model saw {excerpt(text)!r}")
        stored = await asyncio.to_thread(reviewer_request, leg.base_url, "GET", f"/approvals/{record['id']}")
        check(stored["status"] != "pending", f"the request is still {stored['status']} after tasks/cancel")
        status = await decide_answers(leg.base_url, record["id"], "approve")
        check(status == 409, f"deciding the withdrawn request answered {status}, expected 409")
        check(ledger_count(leg.ledger, account) == 0, "the withdrawn call ran")
        return f"request {stored['status']}, approving it answers 409; the model saw {excerpt(text, 100)!r}"

    async def approve_after_slow_review() -> str:
        account = new_account(leg.client, "approve")
        check(deadline > timedelta(), "the request deadline is unknown (the cancel step failed)")
        with client(deadline + MARGIN) as mcp:
            call = asyncio.create_task(call_with(mcp, account, "use-approve"))
            await opened(leg, account)
            await asyncio.sleep(SLOW_APPROVAL_S)  # the reviewer takes longer than the short poll_timeout
            decided = await decide(leg.base_url, account, "approve")
            text = leg.saw("approve", await call)
        check("completed" in text, f"no transfer result in {excerpt(text)!r}")
        count = ledger_count(leg.ledger, account)
        check(count == 1, f"{count} transfers, expected 1")
        return f"poll_timeout {(deadline + MARGIN).total_seconds():.0f} s; {decided}; {excerpt(text, 100)}"

    async def expiry_when_no_one_decides() -> str:
        account = new_account(leg.client, "expire")
        with client(deadline + MARGIN) as mcp:
            text = leg.saw("expire", await call_with(mcp, account, "use-expire"))
        check("timed out" not in text, f"the client gave up before the deadline: {excerpt(text)!r}")
        check("did not run" in text, f"the model was not told the call did not run: {excerpt(text)!r}")
        check(ledger_count(leg.ledger, account) == 0, "an expired call ran")
        return excerpt(text, 120)

    if await leg.step("cancel", cancel_at_poll_timeout):
        await leg.step("approve", approve_after_slow_review)
        await leg.step("expire", expiry_when_no_one_decides)
    return leg.finish()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
