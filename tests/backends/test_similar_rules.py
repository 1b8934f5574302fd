"""Similar-call rules on the local backend (SQLite and PostgreSQL): written while approving, each
later matching call decided as its own request, and nothing decided outside scope, after expiry,
over the use count, after revocation, or by a rule whose row was edited."""

from __future__ import annotations

import os
import secrets
from typing import Any

import pytest
from sqlalchemy import update

from mcp_approval.backends import (
    ApprovalStatus,
    ApprovalTemplate,
    NotEligibleError,
    SimilarRuleError,
    SimilarRuleSpec,
)
from mcp_approval.backends.local.schema import similar_call_rules_table
from mcp_approval.clock import ManualClock
from mcp_approval.keyring import BindingCipher
from mcp_approval.storage import AuditLog, Database
from tests.backends.conftest import TEMPLATES, BackendFactory, submission
from tests.support.polling import eventually

pytestmark = pytest.mark.anyio

SEAL = BindingCipher({"k1": os.urandom(32)})
_S = similar_call_rules_table
RANGE = SimilarRuleSpec(expires_in_s=3600, max_uses=2, conditions={"amount": {"range": [0, 500]}})


def key() -> str:
    return secrets.token_hex(16)


async def submit_quietly(database: Database, backend: Any, **fields: Any) -> str:
    """Submit inside a transaction of the test's own, so no automatic decision runs until asked."""
    sub = submission(**fields)
    handle: str = await database.write(lambda conn: backend.submit_in(conn, key(), sub))
    return handle


async def approved_first(backend: Any, spec: SimilarRuleSpec = RANGE) -> str:
    """A request of alice's, approved by bob with a rule ``spec`` asks for; the rule's id."""
    first = await backend.submit(key(), submission())
    record, rule = await backend.approve_similar(first, "bob", spec, "and the next few like it")
    assert record.status is ApprovalStatus.APPROVED
    return str(rule.id)


async def test_a_matching_call_is_its_own_request_decided_by_the_rule(
    make_backend: BackendFactory, database: Database
) -> None:
    backend = make_backend(seal=SEAL)
    rule_id = await approved_first(backend)
    later = await backend.submit(key(), submission(arguments={"amount": 250, "to": "acct-1", "secret": "s3cr3t"}))
    assert await backend.decide_by_similar_rules(later) in (rule_id, None)  # the submission's own task may win
    record = await backend.get_request(later)
    assert record is not None
    assert record.status is ApprovalStatus.APPROVED
    assert [d.reviewer for d in record.decisions] == [f"similar-rule:{rule_id}"]
    assert "of bob" in (record.decisions[0].comment or "")
    state = await backend.status(later)
    assert state.status is ApprovalStatus.APPROVED  # its sealed decision approves it under its sealed rules
    events = await AuditLog(database).events(subject=later)
    decision = next(e for e in events if e.kind == "approval.decision")
    assert decision.actor == f"similar-rule:{rule_id}"
    assert decision.data["similar_rule"] == rule_id
    assert decision.data["rule_author"] == "bob"
    rule = await backend.similar_rule(rule_id)
    assert rule is not None
    assert rule.uses == 1


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"arguments": {"amount": 501, "to": "acct-1", "secret": "s3cr3t"}}, "above the range"),
        ({"arguments": {"amount": 5, "to": "acct-2", "secret": "s3cr3t"}}, "an argument kept equal"),
        ({"arguments": {"amount": 5, "to": "acct-1", "secret": "other"}}, "a redacted argument, kept equal"),
        ({"arguments": {"amount": 5, "to": "acct-1", "secret": "s3cr3t", "memo": "x"}}, "an extra argument"),
        ({"arguments": {"amount": "5", "to": "acct-1", "secret": "s3cr3t"}}, "a string is not a number"),
        ({"requester": "carol"}, "another principal"),
        ({"requester": "bob"}, "the rule's own author"),
        ({"tool": "refund"}, "another tool"),
        ({"template": "refund"}, "another template"),
    ],
)
async def test_a_call_outside_the_scope_goes_to_people(
    make_backend: BackendFactory, database: Database, fields: dict[str, Any], why: str
) -> None:
    backend = make_backend(seal=SEAL)
    await approved_first(backend)
    later = await submit_quietly(database, backend, **fields)
    assert await backend.decide_by_similar_rules(later) is None, why
    assert (await backend.status(later)).status is ApprovalStatus.PENDING, why


async def test_any_principal_reaches_other_requesters_but_never_the_author(
    make_backend: BackendFactory, database: Database
) -> None:
    backend = make_backend(seal=SEAL)
    rule_id = await approved_first(backend, SimilarRuleSpec(expires_in_s=60, max_uses=5, same_principal=False))
    by_carol = await submit_quietly(database, backend, requester="carol")
    assert await backend.decide_by_similar_rules(by_carol) == rule_id
    by_bob = await submit_quietly(database, backend, requester="bob")
    assert await backend.decide_by_similar_rules(by_bob) is None


async def test_use_count_and_expiry_end_a_rule(
    make_backend: BackendFactory, database: Database, clock: ManualClock
) -> None:
    backend = make_backend(seal=SEAL)
    rule_id = await approved_first(backend)
    decided = [await backend.decide_by_similar_rules(await submit_quietly(database, backend)) for _ in range(3)]
    assert decided == [rule_id, rule_id, None]  # max_uses = 2
    second = await approved_first(backend, SimilarRuleSpec(expires_in_s=60, max_uses=10))
    clock.advance(60_000)
    late = await submit_quietly(database, backend)
    assert await backend.decide_by_similar_rules(late) is None
    rule = await backend.similar_rule(second)
    assert rule is not None
    assert rule.state(clock.now_ms()) == "expired"


async def test_a_rule_revoked_while_calls_are_pending_decides_none_of_them(
    make_backend: BackendFactory, database: Database
) -> None:
    backend = make_backend(seal=SEAL)
    rule_id = await approved_first(backend, SimilarRuleSpec(expires_in_s=600, max_uses=10))
    pending = [await submit_quietly(database, backend) for _ in range(3)]
    with pytest.raises(SimilarRuleError, match="no similar-call rule"):  # one it may not see is none
        await backend.revoke_similar_rule(rule_id, "mallory")
    revoked = await backend.revoke_similar_rule(rule_id, "carol")  # a reviewer of the template may
    assert revoked.revoked_by == "carol"
    for handle in pending:
        assert await backend.decide_by_similar_rules(handle) is None
        assert (await backend.status(handle)).status is ApprovalStatus.PENDING


async def test_a_revocation_on_record_holds_even_if_the_column_is_cleared(
    make_backend: BackendFactory, database: Database
) -> None:
    backend = make_backend(seal=SEAL)
    rule_id = await approved_first(backend, SimilarRuleSpec(expires_in_s=600, max_uses=10))
    await backend.revoke_similar_rule(rule_id, "bob")
    await database.write(
        lambda conn: conn.execute(update(_S).where(_S.c.rule_id == rule_id).values(revoked_at=None, revoked_by=None))
    )
    later = await submit_quietly(database, backend)
    assert await backend.decide_by_similar_rules(later) is None


@pytest.mark.parametrize(
    "edit",
    [
        {"scope_json": '{"arguments":{},"principal":null,"template":"single","tool":"transfer"}'},
        {"max_uses": 1000},
        {"expires_at": 99_999_999_999_999},
        {"author": "carol"},
        {"seal": "k1:AAAA"},
    ],
)
async def test_a_rule_row_edited_in_the_database_is_an_integrity_failure_and_decides_nothing(
    make_backend: BackendFactory, database: Database, edit: dict[str, Any]
) -> None:
    backend = make_backend(seal=SEAL)
    rule_id = await approved_first(backend, SimilarRuleSpec(expires_in_s=600, max_uses=10))
    await database.write(lambda conn: conn.execute(update(_S).where(_S.c.rule_id == rule_id).values(**edit)))
    later = await submit_quietly(database, backend)
    assert await backend.decide_by_similar_rules(later) is None
    assert (await backend.status(later)).status is ApprovalStatus.PENDING
    rule = await backend.similar_rule(rule_id)
    assert rule is not None
    assert rule.integrity_failure is not None
    assert rule.scope is None
    events = await AuditLog(database).events(subject=rule_id)
    assert any(e.kind == "approval.similar_rule_unverified" for e in events)


async def test_a_reset_use_count_is_caught_by_the_rules_sealed_decisions(
    make_backend: BackendFactory, database: Database
) -> None:
    backend = make_backend(seal=SEAL)
    rule_id = await approved_first(backend, SimilarRuleSpec(expires_in_s=600, max_uses=1))
    assert await backend.decide_by_similar_rules(await submit_quietly(database, backend)) == rule_id
    await database.write(lambda conn: conn.execute(update(_S).where(_S.c.rule_id == rule_id).values(uses=0)))
    assert await backend.decide_by_similar_rules(await submit_quietly(database, backend)) is None


@pytest.mark.parametrize(
    ("template", "spec", "message"),
    [
        ("closed", RANGE, "forbids similar-call rules"),
        ("pair", RANGE, "needs several approvals"),
        ("single", SimilarRuleSpec(expires_in_s=7201, max_uses=1), "lasts at most 7200 s"),
        ("single", SimilarRuleSpec(expires_in_s=60, max_uses=11), "decides at most 10 calls"),
        ("single", SimilarRuleSpec(60, 1, conditions={"amount": {"range": [200, 500]}}), "own value"),
        ("single", SimilarRuleSpec(60, 1, conditions={"to": {"prefix": "bank-"}}), "own value"),
        ("single", SimilarRuleSpec(60, 1, conditions={"memo": {"equal": 1}}), "no argument 'memo'"),
        ("single", SimilarRuleSpec(60, 1, conditions={"secret": {"prefix": "s"}}), "redacted"),
        ("single", SimilarRuleSpec(60, 1, conditions={"amount": {"between": [1, 2]}}), "unknown condition"),
    ],
)
async def test_a_refused_rule_writes_nothing_and_approves_nothing(
    make_backend: BackendFactory, template: str, spec: SimilarRuleSpec, message: str
) -> None:
    templates = {
        **TEMPLATES,
        "single": ApprovalTemplate(similar_rule_max_s=7200, similar_rule_max_uses=10),
        "closed": ApprovalTemplate(similar_rules=False),
    }
    backend = make_backend(seal=SEAL, templates=templates)
    first = await backend.submit(key(), submission(template=template))
    with pytest.raises(SimilarRuleError, match=message):
        await backend.approve_similar(first, "bob", spec)
    record = await backend.get_request(first)
    assert record is not None
    assert record.status is ApprovalStatus.PENDING
    assert record.decisions == ()
    assert await backend.similar_rules() == []


async def test_an_ineligible_reviewer_writes_no_rule(make_backend: BackendFactory) -> None:
    backend = make_backend(seal=SEAL)
    first = await backend.submit(key(), submission())
    with pytest.raises(NotEligibleError):
        await backend.approve_similar(first, "mallory", RANGE)
    with pytest.raises(NotEligibleError):
        await backend.approve_similar(first, "alice", RANGE)  # her own request
    assert await backend.similar_rules() == []


async def test_a_template_that_forbids_rules_later_stops_existing_ones(
    make_backend: BackendFactory, database: Database
) -> None:
    backend = make_backend(seal=SEAL)
    await approved_first(backend)
    closed = make_backend(seal=SEAL, templates={**TEMPLATES, "single": ApprovalTemplate(similar_rules=False)})
    later = await submit_quietly(database, closed)
    assert await closed.decide_by_similar_rules(later) is None


async def test_listing_shows_rules_to_their_reviewers_only(make_backend: BackendFactory, database: Database) -> None:
    backend = make_backend(seal=SEAL)
    rule_id = await approved_first(backend)
    assert [rule.id for rule in await backend.similar_rules(viewer="carol")] == [rule_id]
    assert await backend.similar_rules(viewer="dave") == []  # a treasurer, not an approver
    assert await backend.similar_rule(rule_id, viewer="mallory") is None
    shown = (await backend.similar_rules())[0].to_json()
    assert shown["author"] == "bob"
    assert shown["scope"] == 'transfer by alice where amount in [0, 500], secret = [redacted], to = "acct-1"'
    created = [e for e in await AuditLog(database).events(subject=rule_id) if e.kind == "approval.similar_rule_created"]
    assert created[0].data["scope"] == shown["scope"]  # a redacted value reaches neither the page nor the log


async def test_a_request_left_pending_is_decided_by_the_rules_at_the_next_start(
    make_backend: BackendFactory, database: Database
) -> None:
    backend = make_backend(seal=SEAL)
    rule_id = await approved_first(backend)
    left = await submit_quietly(database, backend)  # committed; its worker stopped before deciding it
    restarted = make_backend(seal=SEAL)
    await restarted.start()
    try:
        state = await eventually(lambda: restarted.status(left), lambda s: s.status is ApprovalStatus.APPROVED)
        assert state.status is ApprovalStatus.APPROVED
        record = await restarted.get_request(left)
        assert record is not None
        assert [d.reviewer for d in record.decisions] == [f"similar-rule:{rule_id}"]
    finally:
        await restarted.stop()


async def test_a_start_without_live_rules_puts_nothing_to_them(
    make_backend: BackendFactory, database: Database
) -> None:
    backend = make_backend(seal=SEAL)
    rule_id = await approved_first(backend)
    await backend.revoke_similar_rule(rule_id, "bob")
    left = await submit_quietly(database, backend)
    restarted = make_backend(seal=SEAL)
    await restarted.start()
    await restarted.stop()
    assert (await restarted.status(left)).status is ApprovalStatus.PENDING
