"""The local approval backend against real SQLite and PostgreSQL databases."""

from __future__ import annotations

import asyncio
import secrets

import pytest
from sqlalchemy import update

from mcp_approval.backends import (
    AlreadyDecidedError,
    LocalApprovalBackend,
    NotEligibleError,
    RequestExpiredError,
    RuleResolver,
)
from mcp_approval.backends.contract import (
    ApprovalStatus,
    IdempotencyConflictError,
    SubmissionRejectedError,
    UnknownRequestError,
)
from mcp_approval.backends.local.schema import approval_requests_table
from mcp_approval.clock import ManualClock, iso8601
from mcp_approval.storage import AuditLog, Database
from tests.backends.conftest import TEMPLATES, BackendFactory, submission

pytestmark = pytest.mark.anyio


def new_key() -> str:
    return secrets.token_urlsafe(32)


@pytest.mark.sep_check("sep-2848-backend-idempotent-key")
async def test_resubmitting_an_equivalent_body_returns_the_same_handle(backend: LocalApprovalBackend) -> None:
    key = new_key()
    first = await backend.submit(key, submission())
    # Built separately, equal in content: equivalence is by canonical body, not identity.
    again = await backend.submit(key, submission(arguments={"to": "acct-1", "secret": "s3cr3t", "amount": 100}))
    assert again == first
    assert first.startswith("apr_")
    assert len(first) == 4 + 43  # 256 random bits, url-safe base64
    assert await backend.find(key) == first
    assert await backend.find(new_key()) is None
    assert (await backend.list_requests("pending"))[0].id == first
    assert len(await backend.list_requests("pending")) == 1


@pytest.mark.sep_check("sep-2848-backend-idempotent-key")
async def test_reusing_a_key_with_another_body_is_a_conflict(backend: LocalApprovalBackend) -> None:
    key = new_key()
    await backend.submit(key, submission())
    with pytest.raises(IdempotencyConflictError):
        await backend.submit(key, submission(arguments={"amount": 101, "to": "acct-1", "secret": "s3cr3t"}))


@pytest.mark.sep_check("sep-2848-backend-idempotent-key")
async def test_concurrent_submits_under_one_key_open_one_request(make_backend: BackendFactory) -> None:
    # Separate backends share nothing in memory: only the database can make them agree.
    backends = [make_backend() for _ in range(8)]
    key = new_key()
    handles = await asyncio.gather(*(b.submit(key, submission()) for b in backends))
    assert len(set(handles)) == 1
    assert len(await backends[0].list_requests("pending")) == 1


async def test_status_of_an_unknown_handle_raises(backend: LocalApprovalBackend) -> None:
    with pytest.raises(UnknownRequestError):
        await backend.status("nope")
    with pytest.raises(UnknownRequestError):
        await backend.decide("nope", "bob", "approve", None)
    assert await backend.get_request("nope") is None


async def test_pending_request_expires_at_its_deadline(backend: LocalApprovalBackend, clock: ManualClock) -> None:
    deadline = clock.now_ms() + 60_000
    handle = await backend.submit(new_key(), submission(deadline_ms=deadline))
    state = await backend.status(handle)
    assert state.status is ApprovalStatus.PENDING
    assert state.deadline_ms == deadline
    clock.advance(60_000)
    assert (await backend.status(handle)).status is ApprovalStatus.EXPIRED
    record = await backend.get_request(handle)
    assert record is not None
    assert record.status is ApprovalStatus.EXPIRED
    with pytest.raises(AlreadyDecidedError):
        await backend.decide(handle, "bob", "approve", None)


async def test_a_decision_past_the_deadline_expires_the_request(
    make_backend: BackendFactory, clock: ManualClock
) -> None:
    woken: list[str] = []

    async def listener(handle: str) -> None:
        woken.append(handle)

    backend = make_backend()
    await backend.start(listener)
    handle = await backend.submit(new_key(), submission(deadline_ms=clock.now_ms() + 1000))
    clock.advance(1000)
    with pytest.raises(RequestExpiredError):
        await backend.decide(handle, "bob", "approve", None)
    # The expiry committed even though the decision was refused.
    assert (await backend.status(handle)).status is ApprovalStatus.EXPIRED
    assert woken == [handle]
    assert (await backend.get_request(handle)).decisions == ()  # type: ignore[union-attr]


async def test_listing_expires_overdue_requests(backend: LocalApprovalBackend, clock: ManualClock) -> None:
    overdue = await backend.submit(new_key(), submission(deadline_ms=clock.now_ms() + 10))
    fresh = await backend.submit(new_key(), submission(deadline_ms=clock.now_ms() + 10_000))
    clock.advance(10)
    assert [r.id for r in await backend.list_requests("pending")] == [fresh]
    assert [(r.id, r.status) for r in await backend.list_requests("decided")] == [(overdue, ApprovalStatus.EXPIRED)]


async def test_cancel_ends_a_pending_request_and_leaves_a_terminal_one(backend: LocalApprovalBackend) -> None:
    pending = await backend.submit(new_key(), submission())
    await backend.cancel(pending)
    assert (await backend.status(pending)).status is ApprovalStatus.CANCELLED
    approved = await backend.submit(new_key(), submission())
    await backend.decide(approved, "bob", "approve", None)
    await backend.cancel(approved)
    assert (await backend.status(approved)).status is ApprovalStatus.APPROVED
    with pytest.raises(AlreadyDecidedError):
        await backend.decide(pending, "bob", "approve", None)


async def test_approval_material_carries_no_reviewer_identity(
    backend: LocalApprovalBackend, clock: ManualClock
) -> None:
    handle = await backend.submit(new_key(), submission(template="pair", requester="dave"))
    clock.advance(5)
    await backend.decide(handle, "alice", "approve", "fine")
    assert (await backend.status(handle)).status is ApprovalStatus.PENDING
    clock.advance(5)
    decided_at = clock.now_ms()
    await backend.decide(handle, "bob", "approve", None)
    state = await backend.status(handle)
    assert state.status is ApprovalStatus.APPROVED
    assert state.approved_until_ms == decided_at + 600_000
    assert state.approval == {
        "id": handle,
        "approved_at": iso8601(decided_at),
        "approved_until": iso8601(decided_at + 600_000),
    }
    assert "alice" not in repr(state)
    assert "bob" not in repr(state)


async def test_n_of_m_needs_distinct_reviewers(backend: LocalApprovalBackend) -> None:
    handle = await backend.submit(new_key(), submission(template="pair", requester="dave"))
    await backend.decide(handle, "alice", "approve", None)
    with pytest.raises(AlreadyDecidedError):
        await backend.decide(handle, "alice", "approve", None)
    record = await backend.get_request(handle)
    assert record is not None
    assert record.status is ApprovalStatus.PENDING
    assert [d.reviewer for d in record.decisions] == ["alice"]
    record = await backend.decide(handle, "carol", "approve", None)
    assert record.status is ApprovalStatus.APPROVED
    assert {d.reviewer for d in record.decisions} == {"alice", "carol"}


async def test_one_deny_ends_an_n_of_m_request(backend: LocalApprovalBackend) -> None:
    handle = await backend.submit(new_key(), submission(template="pair", requester="dave"))
    await backend.decide(handle, "alice", "approve", None)
    record = await backend.decide(handle, "bob", "deny", "too much")
    assert record.status is ApprovalStatus.DENIED
    assert record.approved_until is None
    assert (await backend.status(handle)).approval is None
    with pytest.raises(AlreadyDecidedError):
        await backend.decide(handle, "carol", "approve", None)


async def test_self_approval_is_refused_unless_the_template_allows_it(backend: LocalApprovalBackend) -> None:
    handle = await backend.submit(new_key(), submission(requester="bob"))
    with pytest.raises(NotEligibleError, match="self-approval"):
        await backend.decide(handle, "bob", "approve", None)
    allowed = await backend.submit(new_key(), submission(requester="bob", template="self"))
    assert (await backend.decide(allowed, "bob", "approve", None)).status is ApprovalStatus.APPROVED


async def test_a_reviewer_without_the_role_is_refused(backend: LocalApprovalBackend) -> None:
    handle = await backend.submit(new_key(), submission(template="treasury"))
    with pytest.raises(NotEligibleError, match="treasurer"):
        await backend.decide(handle, "bob", "approve", None)
    with pytest.raises(NotEligibleError):
        await backend.decide(handle, "mallory", "deny", None)
    assert (await backend.get_request(handle)).decisions == ()  # type: ignore[union-attr]
    assert (await backend.decide(handle, "dave", "approve", None)).status is ApprovalStatus.APPROVED


async def test_a_template_that_is_not_configured_is_refused(backend: LocalApprovalBackend) -> None:
    with pytest.raises(SubmissionRejectedError, match="'nowhere' is not configured"):
        await backend.submit(new_key(), submission(template="nowhere"))
    assert await backend.list_requests() == []


async def test_no_template_needs_one_approver_role(backend: LocalApprovalBackend) -> None:
    handle = await backend.submit(new_key(), submission(template=None))
    assert (await backend.get_request(handle)).approvals_required == 1  # type: ignore[union-attr]
    with pytest.raises(NotEligibleError):
        await backend.decide(handle, "dave", "approve", None)
    with pytest.raises(NotEligibleError):
        await backend.decide(handle, "alice", "approve", None)  # the requester
    assert (await backend.decide(handle, "bob", "approve", None)).status is ApprovalStatus.APPROVED


async def test_a_request_is_decided_by_the_rules_it_was_submitted_under(make_backend: BackendFactory) -> None:
    """Rules stored with the request, not the configuration of the moment (issue 22, deliver 2)."""
    before = make_backend()
    handle = await before.submit(new_key(), submission(template="pair", requester="dave"))
    # "pair" left the configuration and the default rules now need a role nobody holds.
    after = make_backend(templates={name: t for name, t in TEMPLATES.items() if name != "pair"})
    first = await after.decide(handle, "alice", "approve", None)
    assert first.status is ApprovalStatus.PENDING  # "pair" needs two approvers, as when it was submitted
    with pytest.raises(NotEligibleError, match="dave made this request"):
        await after.decide(handle, "dave", "approve", None)
    assert (await after.decide(handle, "bob", "approve", None)).status is ApprovalStatus.APPROVED


async def test_a_request_stored_before_rules_whose_template_left_cannot_be_decided(
    make_backend: BackendFactory, database: Database
) -> None:
    before = make_backend()
    handle = await before.submit(new_key(), submission(template="pair", requester="dave"))
    forget_rules = update(approval_requests_table).where(approval_requests_table.c.request_id == handle)
    await database.write(lambda conn: conn.execute(forget_rules.values(rules_json=None, reviewer_role=None)))
    after = make_backend(templates={name: t for name, t in TEMPLATES.items() if name != "pair"})
    for reviewer in ("alice", "bob", "carol"):
        with pytest.raises(NotEligibleError, match="'pair' is not configured"):
            await after.decide(handle, reviewer, "approve", None)
    assert (await after.status(handle)).status is ApprovalStatus.PENDING


async def test_a_resolver_for_a_template_that_is_not_configured_is_refused(make_backend: BackendFactory) -> None:
    with pytest.raises(ValueError, match="not configured: refund"):
        make_backend(templates={"single": TEMPLATES["single"]}, resolvers=[RuleResolver("refund", "amount", 1)])


async def test_concurrent_decisions_count_exactly_once(make_backend: BackendFactory) -> None:
    woken: list[str] = []

    async def listener(handle: str) -> None:
        woken.append(handle)

    backends = [make_backend() for _ in range(3)]
    for b in backends:
        await b.start(listener)
    single = await backends[0].submit(new_key(), submission(requester="dave"))
    results = await asyncio.gather(
        backends[0].decide(single, "alice", "approve", None),
        backends[1].decide(single, "bob", "deny", None),
        backends[2].decide(single, "carol", "approve", None),
        return_exceptions=True,
    )
    winners = [r for r in results if not isinstance(r, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(r, AlreadyDecidedError) for r in results if isinstance(r, BaseException))
    record = await backends[0].get_request(single)
    assert record is not None
    assert len(record.decisions) == 1
    assert record.status.value == {"approve": "approved", "deny": "denied"}[record.decisions[0].decision]
    assert woken == [single]

    pair = await backends[0].submit(new_key(), submission(template="pair", requester="dave"))
    await asyncio.gather(
        backends[0].decide(pair, "alice", "approve", None), backends[1].decide(pair, "bob", "approve", None)
    )
    assert (await backends[2].status(pair)).status is ApprovalStatus.APPROVED
    assert woken == [single, pair]


async def test_the_same_reviewer_deciding_twice_at_once_counts_once(backend: LocalApprovalBackend) -> None:
    handle = await backend.submit(new_key(), submission(template="pair", requester="dave"))
    results = await asyncio.gather(
        *(backend.decide(handle, "alice", "approve", None) for _ in range(4)), return_exceptions=True
    )
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    record = await backend.get_request(handle)
    assert record is not None
    assert record.status is ApprovalStatus.PENDING
    assert len(record.decisions) == 1


async def test_arguments_are_redacted_for_display_but_the_body_stays_whole(backend: LocalApprovalBackend) -> None:
    key = new_key()
    body = submission(arguments={"amount": 5, "secret": "s3cr3t", "nested": {"secret": 1}})
    handle = await backend.submit(key, body)
    record = await backend.get_request(handle)
    assert record is not None
    assert record.arguments == {"amount": 5, "secret": "[redacted]", "nested": {"secret": "[redacted]"}}
    assert "s3cr3t" not in str(record.to_json())
    # The stored body still matches the full submission: a retry is not a conflict.
    assert await backend.submit(key, body) == handle


async def test_record_json_uses_iso_times(backend: LocalApprovalBackend, clock: ManualClock) -> None:
    created = clock.now_ms()
    handle = await backend.submit(new_key(), submission(deadline_ms=created + 1000))
    await backend.decide(handle, "bob", "approve", "ok")
    data = (await backend.get_request(handle)).to_json()  # type: ignore[union-attr]
    assert data["id"] == handle
    assert data["status"] == "approved"
    assert data["created_at"] == iso8601(created)
    assert data["expires_at"] == iso8601(created + 1000)
    assert data["approved_until"] == iso8601(created + 3_600_000)
    assert data["decisions"] == [
        {
            "reviewer": "bob",
            "on_behalf_of": None,
            "decision": "approve",
            "comment": "ok",
            "decided_at": iso8601(created),
        }
    ]
    assert data["arguments"]["secret"] == "[redacted]"


@pytest.mark.sep_check("sep-2848-effect-auditable")
async def test_decisions_and_transitions_are_audited(
    backend: LocalApprovalBackend, database: Database, clock: ManualClock
) -> None:
    audit = AuditLog(database, clock)
    handle = await backend.submit(new_key(), submission(template="pair", requester="dave"))
    await backend.decide(handle, "alice", "approve", None)
    with pytest.raises(NotEligibleError):
        await backend.decide(handle, "mallory", "approve", None)
    await backend.decide(handle, "bob", "approve", None)
    events = await audit.events(handle)
    assert [(e.kind, e.actor) for e in events] == [
        ("approval.submitted", "dave"),
        ("approval.decision", "alice"),
        ("approval.decision", "bob"),
        ("approval.approved", "bob"),
    ]
    digest = submission(template="pair", requester="dave").call_digest()
    assert events[1].data == {"decision": "approve", "call_digest": digest}
    assert {e.data["call_digest"] for e in events} == {digest}
    assert events[0].data["approvals_required"] == 2
    assert all(e.subject == handle and e.at == clock.now_ms() for e in events)
    other = await backend.submit(new_key(), submission())
    await backend.cancel(other)
    assert [e.kind for e in await audit.events(other)] == ["approval.submitted", "approval.cancelled"]
    assert [e.subject for e in await audit.events(limit=2)] == [other, other]


async def test_requests_survive_a_new_backend(make_backend: BackendFactory) -> None:
    first = make_backend()
    key = new_key()
    handle = await first.submit(key, submission())
    second = make_backend()
    assert await second.find(key) == handle
    await second.decide(handle, "bob", "approve", None)
    assert (await first.status(handle)).status is ApprovalStatus.APPROVED


async def test_status_many_agrees_with_status_and_expires_overdue_requests(
    backend: LocalApprovalBackend, clock: ManualClock
) -> None:
    soon = await backend.submit(new_key(), submission(deadline_ms=clock.now_ms() + 1_000, tool="a"))
    later = await backend.submit(new_key(), submission(deadline_ms=clock.now_ms() + 60_000, tool="b"))
    decided = await backend.submit(new_key(), submission(deadline_ms=clock.now_ms() + 60_000, tool="c"))
    await backend.decide(decided, "carol", "deny")
    clock.advance(1_000)
    states = await backend.status_many([soon, later, decided, "apr_unknown"])
    assert set(states) == {soon, later, decided}  # unknown handles are left out
    assert states[soon].status is ApprovalStatus.EXPIRED
    assert (await backend.status(soon)).status is ApprovalStatus.EXPIRED  # the expiry was stored
    assert states[later] == await backend.status(later)
    assert states[decided].status is ApprovalStatus.DENIED
