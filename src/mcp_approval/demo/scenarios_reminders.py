"""Scenario 20: nobody forgotten. A request nobody answers is reminded, then escalated, and the
escalation role decides it."""

from __future__ import annotations

import asyncio
import time

from mcp_approval.demo.clients import disposition_of
from mcp_approval.demo.context import Demo, ScenarioFailed, ScenarioState, is_task
from mcp_approval.demo.scenarios import tasks_client
from mcp_approval.demo.webhooks import ReceivedMessage, WebhookInbox
from mcp_approval.protocol import DISPOSITION_APPROVED_EXECUTED

__all__ = ["reminded_then_escalated"]

#: The demo template's steps (config.toml, [templates.reminded]).
REMIND_S, ESCALATE_S = 2.0, 4.0
#: How long past its due time a step may take to arrive.
ARRIVAL_S = 20.0


async def reminded_then_escalated(demo: Demo, state: ScenarioState) -> str:
    """20. erin (admin) asks to delete a ``reminded-`` account and nobody answers: the approvers are
    reminded after 2 s, the ``treasurer`` role is told after 4 s, and alice (a treasurer) may then
    decide it; the request shows who was told when, on which channel."""
    inbox = demo.inbox
    if inbox is None:
        raise ScenarioFailed("the demo's webhook receiver is not running")
    account = f"reminded-{demo.run_id}-20"
    state.watch(account=account)
    tasks = tasks_client()
    async with demo.client("erin", extensions=[tasks]) as erin, demo.reviewers("carol", "alice") as (carol, alice):
        created = await demo.call(erin, "erin", "delete_account", {"account": account})
        demo.expect(is_task(created), "a working task")
        record = await carol.find("delete_account", account=account)
        demo.expect(record["template"] == "reminded", "the template that reminds and escalates")
        demo.narrator.note("nobody answers; alice (treasurer) may not decide yet")
        await demo.decide(alice, record, "approve", expect=403)
        await _arrival(demo, inbox, record["id"], "approval.requested", 0)
        reminder = await _arrival(demo, inbox, record["id"], "approval.reminder", REMIND_S)
        escalation = await _arrival(demo, inbox, record["id"], "approval.escalated", ESCALATE_S)
        demo.expect(reminder.data.get("told") == "approver", "the reminder tells the approvers")
        demo.expect(escalation.data.get("told") == "treasurer", "the escalation tells the treasurers")
        await demo.decide(alice, record, "approve")
        result = await demo.wait(tasks, erin, "erin", created.task_id)
        state.disposition = disposition_of(result)
        shown = await alice.request(record["id"])
    told = [(t["step"], t["role"], t["channel"]) for t in shown.get("told", [])]
    for entry in shown.get("told", []):
        demo.narrator.note(f"told: {entry['step']} to {entry['role']} on {entry['channel']} at {entry['at']}")
    demo.expect(
        told == [("remind", "approver", "demo-hook"), ("escalate", "treasurer", "demo-hook")],
        "the request shows who was told, when, on which channel",
    )
    demo.expect(state.disposition == DISPOSITION_APPROVED_EXECUTED, "approved by the escalation role, then ran")
    demo.expect(demo.executions(account=account) == 1, "exactly one ledger entry")
    return "reminded after 2 s, escalated to treasurer after 4 s; alice (treasurer) approved; approved-executed"


async def _arrival(demo: Demo, inbox: WebhookInbox, request_id: str, kind: str, after_s: float) -> ReceivedMessage:
    """Wait (bounded) for the ``kind`` notification about ``request_id``, and narrate it."""
    deadline = time.monotonic() + after_s + ARRIVAL_S
    while True:
        found = [m for m in inbox.messages(request_id) if m.type == kind]
        if found:
            message = found[0]
            told = f" to {message.data.get('told')}" if message.data.get("told") else ""
            demo.narrator.note(f"webhook received {kind}{told}, signature verified")
            return message
        if time.monotonic() > deadline:
            raise ScenarioFailed(f"no {kind} notification arrived within {after_s + ARRIVAL_S:.0f} s")
        await asyncio.sleep(0.05)
