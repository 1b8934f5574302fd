"""Scenario 14: a notification arriving at a webhook receiver the demo started."""

from __future__ import annotations

import asyncio
import time

from mcp_approval.demo.clients import disposition_of
from mcp_approval.demo.context import Demo, ScenarioFailed, ScenarioState, is_task
from mcp_approval.demo.scenarios import LARGE, tasks_client
from mcp_approval.demo.webhooks import ReceivedMessage, WebhookInbox, pretty
from mcp_approval.protocol import DISPOSITION_APPROVED_EXECUTED

__all__ = ["NOTIFIED", "notified_transfer"]

#: What the webhook receives about an approved and executed request, in order.
NOTIFIED = ("approval.requested", "approval.decided", "approval.approved", "approval.executed")
#: How long a notification may take to arrive.
ARRIVAL_S = 20.0


async def notified_transfer(demo: Demo, state: ScenarioState) -> str:
    """14. The treasury template notifies a signed webhook: opened, decided, approved, executed; the reviewer
    API then shows carol what happened to the call, as the console does."""
    inbox = demo.inbox
    if inbox is None:
        raise ScenarioFailed("the demo's webhook receiver is not running")
    account = demo.account(14)
    state.watch(to=account)
    tasks = tasks_client()
    async with demo.client("alice", extensions=[tasks]) as alice, demo.reviewers("carol") as (carol,):
        created = await demo.call(alice, "alice", "wire_transfer", {"to": account, "amount": LARGE})
        demo.expect(is_task(created), "a working task")
        record = await carol.find("wire_transfer", to=account)
        opened = await _arrival(demo, inbox, record["id"], "approval.requested")
        demo.narrator.info(pretty(opened))
        demo.expect(opened.data["console_url"].endswith(f"/console/requests/{record['id']}"), "it links the request")
        await demo.decide(carol, record, "approve")
        result = await demo.wait(tasks, alice, "alice", created.task_id)
        state.disposition = disposition_of(result)
        executed = await _arrival(demo, inbox, record["id"], "approval.executed")
        # What the console's request page shows carol afterwards: the call ran, and when.
        outcome = await demo.outcome(carol, record, DISPOSITION_APPROVED_EXECUTED)
    types = tuple(message.type for message in inbox.messages(record["id"]))
    demo.expect(types == NOTIFIED, "requested, decided, approved, executed: each once, in order")
    demo.expect(executed.data.get("outcome") == DISPOSITION_APPROVED_EXECUTED, "the last one says it ran")
    demo.expect(outcome["task_id"] == created.task_id, "the reviewer's outcome is alice's task")
    demo.expect(demo.executions(to=account) == 1, "exactly one ledger entry")
    return f"{len(types)} signed notifications verified by the receiver; the reviewer sees {outcome['state']}"


async def _arrival(demo: Demo, inbox: WebhookInbox, request_id: str, kind: str) -> ReceivedMessage:
    """Wait (bounded) for the ``kind`` notification about ``request_id``, and narrate it."""
    deadline = time.monotonic() + ARRIVAL_S
    while True:
        found = [m for m in inbox.messages(request_id) if m.type == kind]
        if found:
            message = found[0]
            demo.narrator.note(f"webhook received {kind} ({message.data.get('progress')}), signature verified")
            return message
        if time.monotonic() > deadline:
            raise ScenarioFailed(f"no {kind} notification arrived within {ARRIVAL_S:.0f} s")
        await asyncio.sleep(0.05)
