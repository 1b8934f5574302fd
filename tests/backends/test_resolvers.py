"""Automatic resolvers, alone and run by the local backend (after submit, and on restart)."""

from __future__ import annotations

import asyncio
import secrets

import pytest

from mcp_approval.backends import (
    CallableResolver,
    LocalApprovalBackend,
    ResolverRule,
    RuleResolver,
    resolvers_from_config,
)
from mcp_approval.backends.contract import ApprovalStatus
from mcp_approval.clock import ManualClock
from mcp_approval.storage import AuditLog, Database
from tests.backends import resolver_targets
from tests.backends.conftest import BackendFactory, submission
from tests.support.polling import eventually
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("value", "verdict"),
    [
        (500, "approve"),
        (499.5, "approve"),
        (0, "approve"),
        (-1, "deny"),  # a negative amount is not a small one
        (-0.01, "deny"),
        (float("nan"), "deny"),
        (float("-inf"), "deny"),
        (500.01, "deny"),
        (True, "deny"),
        ("5", "deny"),
        (None, "deny"),
    ],
)
async def test_rule_resolver_approves_numbers_from_zero_up_to_the_limit(value: object, verdict: str) -> None:
    resolver = RuleResolver("refund", "amount", 500)
    assert await resolver.decide(submission(template="refund", arguments={"amount": value})) == verdict


async def test_rule_resolver_denies_a_missing_argument() -> None:
    assert await RuleResolver("refund", "amount", 500).decide(submission(arguments={})) == "deny"


async def test_callable_resolver_loads_module_function_targets() -> None:
    resolver = CallableResolver("refund", "tests.backends.resolver_targets:by_recipient")
    assert await resolver.decide(submission(arguments={"to": "acct-1"})) == "approve"
    assert await resolver.decide(submission(arguments={"to": "acct-666"})) == "deny"
    assert await resolver.decide(submission(arguments={"to": "acct-2"})) is None
    assert await CallableResolver("refund", resolver_targets.async_deny).decide(submission()) == "deny"


@pytest.mark.parametrize(
    "target",
    [
        "no_such_module_xyz:decide",
        "tests.backends.resolver_targets:missing",
        "tests.backends.resolver_targets:NOT_CALLABLE",
        "no-colon",
    ],
)
def test_callable_resolver_names_a_target_it_cannot_load(target: str) -> None:
    with pytest.raises(ValueError, match=target):
        CallableResolver("refund", target)


async def test_callable_resolver_rejects_an_answer_that_is_not_a_verdict() -> None:
    with pytest.raises(ValueError, match="maybe"):
        await CallableResolver("refund", resolver_targets.bad_answer).decide(submission())


def test_resolvers_from_config_builds_both_kinds() -> None:
    rule, call = resolvers_from_config(
        [
            ResolverRule(template="refund", approve_if_argument="amount", at_most=500),
            ResolverRule(template="single", callable="tests.backends.resolver_targets:by_recipient"),
        ]
    )
    assert isinstance(rule, RuleResolver)
    assert (rule.template, rule.argument, rule.at_most) == ("refund", "amount", 500)
    assert isinstance(call, CallableResolver)
    assert call.template == "single"


class Wakeups:
    """A listener that records handles and lets a test await the next one."""

    def __init__(self) -> None:
        self.handles: list[str] = []
        self._event = asyncio.Event()

    async def __call__(self, handle: str) -> None:
        self.handles.append(handle)
        self._event.set()

    async def wait_for(self, handle: str) -> None:
        async with asyncio.timeout(scaled(10)):
            while handle not in self.handles:
                self._event.clear()
                await self._event.wait()


async def started(backend: LocalApprovalBackend) -> Wakeups:
    wakeups = Wakeups()
    await backend.start(wakeups)
    return wakeups


@pytest.mark.parametrize(
    ("amount", "verdict", "status"), [(120, "approve", ApprovalStatus.APPROVED), (900, "deny", ApprovalStatus.DENIED)]
)
async def test_a_submit_is_resolved_automatically(
    make_backend: BackendFactory,
    database: Database,
    clock: ManualClock,
    amount: int,
    verdict: str,
    status: ApprovalStatus,
) -> None:
    backend = make_backend(resolvers=[RuleResolver("refund", "amount", 500)])
    wakeups = await started(backend)
    handle = await backend.submit(
        secrets.token_urlsafe(32), submission(template="refund", arguments={"amount": amount})
    )
    await wakeups.wait_for(handle)
    assert (await backend.status(handle)).status is status
    record = await backend.get_request(handle)
    assert record is not None
    assert [(d.reviewer, d.decision) for d in record.decisions] == [("resolver:refund", verdict)]
    kinds = [(e.kind, e.actor) for e in await AuditLog(database, clock).events(handle)]
    assert kinds == [
        ("approval.submitted", "alice"),
        ("approval.decision", "resolver:refund"),
        (f"approval.{status.value}", "resolver:refund"),
    ]
    await backend.stop()


async def test_requests_of_other_templates_are_left_to_humans(make_backend: BackendFactory) -> None:
    backend = make_backend(resolvers=[RuleResolver("refund", "amount", 500)])
    wakeups = await started(backend)
    other = await backend.submit(secrets.token_urlsafe(32), submission(template="single", arguments={"amount": 1}))
    mine = await backend.submit(secrets.token_urlsafe(32), submission(template="refund", arguments={"amount": 1}))
    await wakeups.wait_for(mine)
    assert (await backend.status(other)).status is ApprovalStatus.PENDING
    assert wakeups.handles == [mine]
    await backend.stop()


@pytest.mark.parametrize(("target", "kind"), [("by_recipient", "deferred"), ("broken", "failed")])
async def test_a_resolver_that_defers_or_fails_leaves_the_request_pending(
    make_backend: BackendFactory, database: Database, clock: ManualClock, target: str, kind: str
) -> None:
    resolver = CallableResolver("refund", getattr(resolver_targets, target))
    backend = make_backend(resolvers=[resolver])
    await backend.start()
    handle = await backend.submit(secrets.token_urlsafe(32), submission(template="refund", arguments={"to": "x"}))
    audit = AuditLog(database, clock)
    events = await eventually(lambda: audit.events(handle), lambda events: len(events) >= 2)
    assert [(e.kind, e.actor) for e in events] == [
        ("approval.submitted", "alice"),
        (f"approval.resolver_{kind}", "resolver:refund"),
    ]
    assert (await backend.status(handle)).status is ApprovalStatus.PENDING
    # Humans can still decide it.
    assert (await backend.decide(handle, "bob", "approve", None)).status is ApprovalStatus.APPROVED
    await backend.stop()


async def test_start_resumes_resolver_work_a_crash_interrupted(make_backend: BackendFactory) -> None:
    # The first process accepted the submissions but never resolved them (no resolver ran).
    crashed = make_backend()
    small = await crashed.submit(secrets.token_urlsafe(32), submission(template="refund", arguments={"amount": 10}))
    large = await crashed.submit(secrets.token_urlsafe(32), submission(template="refund", arguments={"amount": 10_000}))
    human = await crashed.submit(secrets.token_urlsafe(32), submission(template="single"))
    decided = await crashed.submit(secrets.token_urlsafe(32), submission(template="refund", arguments={"amount": 1}))
    await crashed.decide(decided, "bob", "deny", "no")

    restarted = make_backend(resolvers=[RuleResolver("refund", "amount", 500)])
    wakeups = await started(restarted)
    await wakeups.wait_for(small)
    await wakeups.wait_for(large)
    assert (await restarted.status(small)).status is ApprovalStatus.APPROVED
    assert (await restarted.status(large)).status is ApprovalStatus.DENIED
    assert (await restarted.status(human)).status is ApprovalStatus.PENDING
    record = await restarted.get_request(decided)
    assert record is not None
    assert [d.reviewer for d in record.decisions] == ["bob"]
    await restarted.stop()
