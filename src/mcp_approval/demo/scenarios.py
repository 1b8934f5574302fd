"""Scenarios 1-7 and 9: the treasury deployment's approval paths, driven by a real MCP client.

Each scenario returns a one-line detail and raises :class:`ScenarioFailed` at the first
expectation that does not hold; the runner counts its executions from the ledger either way.
"""

from __future__ import annotations

import time

from mcp_approval.client import CreateTaskResult, TasksClient
from mcp_approval.demo.clients import disposition_of, envelope_of, text_of
from mcp_approval.demo.context import Demo, ScenarioFailed, ScenarioState, is_task
from mcp_approval.protocol import DISPOSITION_APPROVED_EXECUTED, DISPOSITION_DENIED_NOT_EXECUTED

__all__ = [
    "LARGE",
    "TASK_WAIT_S",
    "approved_transfer",
    "automatic_refund",
    "cancel_pending",
    "denied_transfer",
    "expiry",
    "four_eyes",
    "open_request",
    "small_transfer",
    "tasks_client",
]

LARGE = 50_000
#: How long a scenario waits for a task to end once it was decided.
TASK_WAIT_S = 20.0


def tasks_client() -> TasksClient:
    """A tasks-declaring client extension that polls briskly."""
    return TasksClient(task_wait_s=TASK_WAIT_S, default_poll_interval_s=0.1, max_poll_interval_s=0.5)


async def small_transfer(demo: Demo, state: ScenarioState) -> str:
    """1. Below the threshold the policy permits: the tool runs at once, no task."""
    account = demo.account(1)
    state.watch(to=account)
    async with demo.client("alice", extensions=[tasks_client()]) as alice:
        result = await demo.call(alice, "alice", "wire_transfer", {"to": account, "amount": 100})
    demo.expect(not isinstance(result, CreateTaskResult), "answered inline, no task")
    demo.expect(not getattr(result, "is_error", True), "the transfer succeeded")
    demo.expect(demo.executions(to=account) == 1, "one ledger entry")
    return "permitted: ran inline, no task"


async def approved_transfer(demo: Demo, state: ScenarioState) -> str:
    """2. A large transfer becomes a task; carol approves; it runs exactly once."""
    account = demo.account(2)
    state.watch(to=account)
    tasks = tasks_client()
    async with demo.client("alice", extensions=[tasks]) as alice, demo.reviewers("carol", "dave") as (carol, dave):
        created = await demo.call(alice, "alice", "wire_transfer", {"to": account, "amount": LARGE})
        demo.expect(is_task(created), "a working task, the tool not run")
        demo.expect(envelope_of(created) == "available", "envelope available with a task hint")
        demo.expect(demo.executions(to=account) == 0, "no ledger entry while pending")
        record = await carol.find("wire_transfer", to=account)
        await demo.decide(carol, record, "approve")
        result = await demo.wait(tasks, alice, "alice", created.task_id)
        state.disposition = disposition_of(result)
        demo.expect(state.disposition == DISPOSITION_APPROVED_EXECUTED, "disposition approved-executed")
        await demo.decide(dave, record, "approve", expect=409)  # a decided request stays decided
    demo.expect(demo.executions(to=account) == 1, "exactly one ledger entry")
    return "carol approved; ran once"


async def denied_transfer(demo: Demo, state: ScenarioState) -> str:
    """3. A reviewer denies: the task completes as a denial and the tool never runs."""
    account = demo.account(3)
    state.watch(to=account)
    tasks = tasks_client()
    async with demo.client("alice", extensions=[tasks]) as alice, demo.reviewers("carol") as (carol,):
        created = await demo.call(alice, "alice", "wire_transfer", {"to": account, "amount": LARGE})
        demo.expect(is_task(created), "a working task")
        record = await carol.find("wire_transfer", to=account)
        await demo.decide(carol, record, "deny")
        result = await demo.wait(tasks, alice, "alice", created.task_id)
        state.disposition = disposition_of(result)
        demo.expect(state.disposition == DISPOSITION_DENIED_NOT_EXECUTED, "disposition denied-not-executed")
        demo.expect(bool(result.is_error) and "did not run" in text_of(result), "the body says the tool did not run")
        demo.expect(envelope_of(result) == "unavailable", "envelope unavailable")
        # What the console's request page shows carol afterwards: the call did not run, and why.
        await demo.outcome(carol, record, DISPOSITION_DENIED_NOT_EXECUTED)
    demo.expect(demo.executions(to=account) == 0, "no ledger entry")
    return "carol denied; never ran"


async def automatic_refund(demo: Demo, state: ScenarioState) -> str:
    """4. The refund rule resolver approves a small refund within seconds, no human involved."""
    order = f"ord-{demo.run_id}-4"
    state.watch(op="refund", order=order)
    tasks = tasks_client()
    started = time.monotonic()
    async with demo.client("alice", extensions=[tasks]) as alice, demo.reviewers("carol") as (carol,):
        created = await demo.call(alice, "alice", "refund", {"order": order, "amount": 120})
        demo.expect(isinstance(created, CreateTaskResult), "a task for the refund check")
        result = await demo.wait(tasks, alice, "alice", created.task_id)
        record = await carol.find("refund", status="decided", order=order)
    seconds = time.monotonic() - started
    deciders = ", ".join(decision["reviewer"] for decision in record["decisions"]) or "nobody"
    demo.narrator.decided(deciders, f"{record['status']} (rule: approve refunds up to $500)")
    state.disposition = disposition_of(result)
    demo.expect(deciders == "resolver:refund", "decided by the refund resolver")
    demo.expect(state.disposition == DISPOSITION_APPROVED_EXECUTED, "disposition approved-executed")
    demo.expect(seconds < 10, f"resolved in {seconds:.1f} s")
    demo.expect(demo.executions(op="refund", order=order) == 1, "one ledger entry")
    return f"resolver:refund approved in {seconds:.1f} s; ran once"


async def four_eyes(demo: Demo, state: ScenarioState) -> str:
    """5. Closing a quarter needs two distinct approvers."""
    quarter = f"Q-{demo.run_id}"
    state.watch(op="close_quarter", quarter=quarter)
    tasks = tasks_client()
    async with demo.client("bob", extensions=[tasks]) as bob, demo.reviewers("carol", "dave") as (carol, dave):
        created = await demo.call(bob, "bob", "close_quarter", {"quarter": quarter})
        demo.expect(is_task(created), "a working task")
        record = await carol.find("close_quarter", quarter=quarter)
        await demo.decide(carol, record, "approve")
        await demo.decide(carol, record, "approve", expect=409)
        task = await tasks.get(bob.session, created.task_id)
        demo.expect(task.status == "working", "one approval is not enough: still working")
        demo.expect(demo.executions(op="close_quarter", quarter=quarter) == 0, "not run yet")
        await demo.decide(dave, record, "approve")
        result = await demo.wait(tasks, bob, "bob", created.task_id)
    state.disposition = disposition_of(result)
    demo.expect(state.disposition == DISPOSITION_APPROVED_EXECUTED, "disposition approved-executed")
    demo.expect(demo.executions(op="close_quarter", quarter=quarter) == 1, "one ledger entry")
    return "carol + dave approved (carol twice refused); ran once"


async def cancel_pending(demo: Demo, state: ScenarioState) -> str:
    """6. The requester cancels while pending; a late approval is refused and nothing runs."""
    account = demo.account(6)
    state.watch(to=account)
    tasks = tasks_client()
    async with demo.client("alice", extensions=[tasks]) as alice, demo.reviewers("carol") as (carol,):
        created = await demo.call(alice, "alice", "wire_transfer", {"to": account, "amount": LARGE})
        demo.expect(is_task(created), "a working task")
        record = await carol.find("wire_transfer", to=account)
        demo.narrator.call("alice", f"tasks/cancel {created.task_id[:8]}…")
        await tasks.cancel(alice.session, created.task_id)
        task = await tasks.get(alice.session, created.task_id)
        demo.narrator.got(f"tasks/get: {task.status}")
        demo.expect(task.status == "cancelled", "the task is cancelled")
        await demo.decide(carol, record, "approve", expect=409)
        task = await tasks.get(alice.session, created.task_id)
        demo.expect(task.status == "cancelled", "still cancelled after the late approval")
    demo.expect(demo.executions(to=account) == 0, "no ledger entry")
    return "cancelled while pending; late approval refused (409); never ran"


async def expiry(demo: Demo, state: ScenarioState) -> str:
    """7. Nobody decides before the policy's 3 s deadline: the request expires as a denial."""
    account = f"expiring-{demo.run_id}-7"
    state.watch(to=account)
    tasks = tasks_client()
    async with demo.client("alice", extensions=[tasks]) as alice, demo.reviewers("carol") as (carol,):
        created = await demo.call(alice, "alice", "wire_transfer", {"to": account, "amount": LARGE})
        demo.expect(is_task(created), "a working task (deadline PT3S)")
        result = await demo.wait(tasks, alice, "alice", created.task_id)
        record = await carol.find("wire_transfer", status="decided", to=account)
    demo.narrator.decided("the deadline (no reviewer)", f"request {record['status']}")
    state.disposition = disposition_of(result)
    demo.expect(state.disposition == DISPOSITION_DENIED_NOT_EXECUTED, "disposition denied-not-executed")
    demo.expect("expire" in text_of(result).lower(), "the body says the request expired")
    demo.expect("did not run" in text_of(result), "and that the tool did not run")
    demo.expect(demo.executions(to=account) == 0, "no ledger entry")
    return f"request {record['status']} after its deadline; never ran"


async def open_request(demo: Demo) -> str:
    """Leave one pending request for a ``--keep-running`` user to decide; returns its approval id."""
    account = f"acct-{demo.run_id}-yours"
    async with demo.client("alice", extensions=[tasks_client()]) as alice, demo.reviewers("carol") as (carol,):
        created = await alice.session.call_tool("wire_transfer", {"to": account, "amount": 75_000}, allow_claimed=True)
        if not is_task(created):
            raise ScenarioFailed(f"expected a pending task, got {type(created).__name__}")
        record = await carol.find("wire_transfer", to=account)
    return str(record["id"])
