"""Properties of similar-call rules (Hypothesis), checked against a model written apart from the code:
a call is decided by a rule only if it is inside the scope, before expiry, within the use count and
by an allowed principal; concurrent matching calls on several workers never exceed the use count
(SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import itertools
import os
import secrets
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_approval.backends import ApprovalStatus, LocalApprovalBackend, SimilarRuleSpec
from mcp_approval.backends.local.similar import ArgumentCondition, SimilarCallScope
from mcp_approval.clock import ManualClock
from mcp_approval.keyring import BindingCipher
from mcp_approval.storage import AuditLog, Database, open_database
from tests.backends.conftest import TEMPLATES, BackendFactory, roles_of
from tests.backends.conftest import submission as base_submission

pytestmark = pytest.mark.anyio

SEAL = BindingCipher({"k1": os.urandom(32)})
ACCOUNTS = ["acct-1", "acct-12", "acct-2", "bank-9", ""]
PRINCIPALS = ["alice", "carol", "bob"]  # alice requests, bob writes the rules
_tools = itertools.count()


@dataclass(frozen=True)
class Case:
    """One rule and one later call, drawn at random."""

    source: dict[str, Any]
    conditions: dict[str, Any]
    same_principal: bool
    max_uses: int
    uses_before: int
    call: dict[str, Any]
    requester: str
    past_expiry: bool


@st.composite
def cases(draw: st.DrawFn) -> Case:
    amount = draw(st.integers(0, 1000))
    account = draw(st.sampled_from([a for a in ACCOUNTS if a]))
    source = {"amount": amount, "to": account, "urgent": draw(st.booleans())}
    conditions: dict[str, Any] = {}
    amount_kind = draw(st.sampled_from(["none", "equal", "range", "one_of"]))
    if amount_kind == "equal":
        conditions["amount"] = {"equal": amount}
    elif amount_kind == "range":
        conditions["amount"] = {"range": [draw(st.integers(0, amount)), draw(st.integers(amount, 1000))]}
    elif amount_kind == "one_of":
        conditions["amount"] = {"one_of": sorted({amount, *draw(st.lists(st.integers(0, 1000), max_size=3))})}
    to_kind = draw(st.sampled_from(["none", "prefix", "one_of"]))
    if to_kind == "prefix":
        conditions["to"] = {"prefix": account[: draw(st.integers(1, len(account)))]}
    elif to_kind == "one_of":
        conditions["to"] = {"one_of": sorted({account, *draw(st.lists(st.sampled_from(ACCOUNTS), max_size=2))})}
    call_amount = draw(
        st.one_of(st.integers(0, 1000), st.just(amount), st.floats(0, 1000, allow_nan=False), st.just(str(amount)))
    )
    call = {"amount": call_amount, "to": draw(st.sampled_from(ACCOUNTS)), "urgent": draw(st.booleans())}
    if draw(st.booleans()):
        call["memo"] = "extra"
    max_uses = draw(st.integers(1, 3))
    return Case(
        source=source,
        conditions=conditions,
        same_principal=draw(st.booleans()),
        max_uses=max_uses,
        uses_before=draw(st.integers(0, max_uses)),
        call=call if draw(st.booleans()) else dict(source),
        requester=draw(st.sampled_from(PRINCIPALS)),
        past_expiry=draw(st.booleans()),
    )


def _admits(condition: dict[str, Any] | None, source: Any, value: Any) -> bool:
    """The model of one condition (kept apart from ``ArgumentCondition``)."""
    if condition is None or "equal" in condition:
        expected = source if condition is None else condition["equal"]
        return type(value) is type(expected) and value == expected
    if "range" in condition:
        low, high = condition["range"]
        return type(value) in (int, float) and low <= value <= high
    if "one_of" in condition:
        return any(type(value) is type(item) and value == item for item in condition["one_of"])
    return isinstance(value, str) and value.startswith(condition["prefix"])


def inside(case: Case) -> bool:
    """Whether the model says the case's call is inside its rule's scope and allowed principal."""
    if set(case.call) != set(case.source):
        return False
    if case.requester == "bob" or (case.same_principal and case.requester != "alice"):
        return False
    return all(_admits(case.conditions.get(name), case.source[name], case.call[name]) for name in case.source)


def should_decide(case: Case) -> bool:
    """The model: inside the scope, before expiry, within the use count, an allowed principal."""
    return inside(case) and not case.past_expiry and case.uses_before < case.max_uses


@settings(max_examples=400, deadline=None)
@given(case=cases())
def test_scope_matching_agrees_with_the_model(case: Case) -> None:
    scope = SimilarCallScope.chosen(
        tool="pay",
        template="single",
        requester="alice",
        arguments=case.source,
        same_principal=case.same_principal,
        conditions=case.conditions,
    )
    outside = scope.why_outside(tool="pay", template="single", requester=case.requester, arguments=case.call)
    # The author is excluded by the backend (self-approval), not by the scope.
    expected = inside(case) if case.requester != "bob" else inside(Case(**{**case.__dict__, "requester": "carol"}))
    if case.requester == "bob" and case.same_principal:
        expected = False
    assert (outside is None) == expected, (outside, case)
    assert SimilarCallScope.from_text(scope.to_text()) == scope


@settings(max_examples=200, deadline=None)
@given(number=st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True)), low=st.integers(-5, 5))
def test_a_range_never_admits_what_is_not_a_finite_number_within_it(number: float, low: int) -> None:
    condition = ArgumentCondition("range", low=low, high=low + 3)
    assert condition.admits(number) == (number == number and low <= number <= low + 3 and abs(number) != float("inf"))
    assert not condition.admits(True)
    assert not condition.admits(str(low))


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(case=cases())
async def test_a_call_is_decided_by_a_rule_exactly_when_the_model_says(
    make_backend: BackendFactory, database: Database, clock: ManualClock, case: Case
) -> None:
    backend = make_backend(seal=SEAL, redact=())
    tool = f"pay-{next(_tools)}"  # earlier examples' rules never reach this one's calls

    async def quietly(arguments: dict[str, Any], requester: str = "alice") -> str:
        sub = base_submission(tool=tool, arguments=arguments, requester=requester)
        handle: str = await database.write(lambda conn: backend.submit_in(conn, secrets.token_hex(16), sub))
        return handle

    first = await backend.submit(secrets.token_hex(16), base_submission(tool=tool, arguments=case.source))
    spec = SimilarRuleSpec(60, case.max_uses, case.same_principal, case.conditions)
    _, rule = await backend.approve_similar(first, "bob", spec)
    for _ in range(case.uses_before):
        assert await backend.decide_by_similar_rules(await quietly(case.source)) == rule.id
    later = await quietly(case.call, case.requester)
    if case.past_expiry:
        clock.advance(60_000)
    decided = await backend.decide_by_similar_rules(later)
    assert (decided == rule.id) == should_decide(case), case
    status = (await backend.status(later)).status
    assert status is (ApprovalStatus.APPROVED if should_decide(case) else ApprovalStatus.PENDING)
    current = await backend.similar_rule(rule.id)
    assert current is not None
    assert current.uses <= current.max_uses


@pytest.mark.parametrize("workers", [3])
async def test_concurrent_matching_calls_on_several_workers_never_exceed_the_use_count(
    db_url: str, database: Database, workers: int
) -> None:
    """Several workers (each its own connections to the store), many concurrent matching calls."""
    clock = ManualClock()
    opened = [open_database(db_url) for _ in range(workers)]
    try:
        backends = [
            LocalApprovalBackend(
                db, templates=TEMPLATES, roles=roles_of, clock=clock, seal=SEAL, audit=AuditLog(db, clock)
            )
            for db in opened
        ]
        first = await backends[0].submit(secrets.token_hex(16), base_submission())
        _, rule = await backends[0].approve_similar(first, "bob", SimilarRuleSpec(600, 4))
        # Each worker submits (its own task decides) and also asks the rules itself, all at once; a
        # few operations at a time per worker, as its connection pool would (the server is shared).
        gates = [asyncio.Semaphore(4) for _ in backends]

        async def submit(i: int) -> str:
            async with gates[i % workers]:
                return await backends[i % workers].submit(secrets.token_hex(16), base_submission())

        async def ask(i: int, handle: str) -> None:
            async with gates[i]:
                await backends[i].decide_by_similar_rules(handle)

        submitted = await asyncio.gather(*(submit(i) for i in range(12)))
        await asyncio.gather(*(ask(i, handle) for handle in submitted for i in range(workers)))
        for backend in backends:  # every request was put to the rules above: end the submissions' own tasks
            await backend.stop()
        states = await backends[0].status_many(submitted)
        approved = [handle for handle in submitted if states[handle].status is ApprovalStatus.APPROVED]
        assert len(approved) == 4
        current = await backends[0].similar_rule(rule.id)
        assert current is not None
        assert current.uses == 4
        found = await AuditLog(database).verify()
        assert found.ok, found.broken
        assert sorted(item.request for item in found.rule_decisions) == sorted(approved)
        assert {item.rule for item in found.rule_decisions} == {rule.id}
    finally:
        for backend in backends:
            await backend.stop()
        for db in opened:
            await db.close()
