"""Delegations on the local backend (SQLite and PostgreSQL): a delegate decides within the period and
not outside it or after revocation; delegation does not chain; a delegate never approves their own
(or their delegator's) requests; each person counts once toward N-of-M; an edited delegation row
delegates nothing."""

from __future__ import annotations

import os
import secrets

import pytest
from sqlalchemy import update

from mcp_approval.backends import (
    AlreadyDecidedError,
    ApprovalStatus,
    ApprovalTemplate,
    DelegationError,
    LocalApprovalBackend,
    NotEligibleError,
)
from mcp_approval.backends.local.rules import RequestRules
from mcp_approval.backends.local.schema import approval_delegations_table
from mcp_approval.backends.local.seals import approval_granted
from mcp_approval.clock import ManualClock
from mcp_approval.keyring import BindingCipher
from mcp_approval.storage import AuditLog, Database
from tests.backends.conftest import TEMPLATES, BackendFactory, submission

pytestmark = pytest.mark.anyio

SEAL = BindingCipher({"k1": os.urandom(32)})
_G = approval_delegations_table
HOUR = 3600.0
# "single" and "pair" are decided by the role "approver" (alice, bob, carol); dave and mallory lack it.
DELEGABLE = {
    **TEMPLATES,
    "closed": ApprovalTemplate(delegation=False),
    "short": ApprovalTemplate(delegation_max_s=HOUR),
}


def key() -> str:
    return secrets.token_hex(16)


@pytest.fixture
def backend(make_backend: BackendFactory) -> LocalApprovalBackend:
    return make_backend(seal=SEAL, templates=DELEGABLE)


async def test_a_delegate_decides_within_the_period_and_the_decision_names_both(
    backend: LocalApprovalBackend, database: Database, make_backend: BackendFactory
) -> None:
    delegation = await backend.delegate("carol", "dave", "single", HOUR)
    assert delegation.state() == "active"
    request = await backend.submit(key(), submission())
    page = await backend.page_requests(viewer="dave")
    assert [record.id for record in page.records] == [request]  # the delegate sees the template's requests
    shown = await backend.get_request(request, viewer="dave")
    assert shown is not None
    assert backend.why_ineligible("dave", shown) is None
    other = make_backend(seal=SEAL, templates=DELEGABLE)  # another worker, reading as Slack does: no viewer
    read = await other.get_request(request)
    assert read is not None
    assert other.why_ineligible("dave", read) is None
    record = await backend.decide(request, "dave", "approve", "carol is away")
    assert record.status is ApprovalStatus.APPROVED
    decided = record.decisions[0]
    assert (decided.reviewer, decided.on_behalf_of) == ("dave", "carol")
    assert decided.decided_by == "dave for carol (delegated)"
    assert decided.to_json()["on_behalf_of"] == "carol"
    assert (await backend.status(request)).status is ApprovalStatus.APPROVED  # its sealed decision approves it
    assert await backend.approval_failure(request) is None
    events = await AuditLog(database).events(subject=request)
    event = next(e for e in events if e.kind == "approval.decision")
    assert event.actor == "dave"
    assert (event.data["on_behalf_of"], event.data["delegation"]) == ("carol", delegation.id)
    assert await backend.delegation_findings() == []


async def test_nothing_is_delegated_after_the_period_or_a_revocation(
    backend: LocalApprovalBackend, clock: ManualClock
) -> None:
    first = await backend.delegate("carol", "dave", "single", HOUR)
    clock.advance(round(HOUR * 1000) + 1)
    expired = await backend.submit(key(), submission())
    with pytest.raises(NotEligibleError, match="lacks the role"):
        await backend.decide(expired, "dave", "approve")
    assert (await backend.delegation(first.id)).state() == "expired"  # type: ignore[union-attr]

    second = await backend.delegate("carol", "dave", "single", HOUR)
    with pytest.raises(NotEligibleError, match="only carol"):
        await backend.revoke_delegation(second.id, "dave")
    revoked = await backend.revoke_delegation(second.id, "carol")
    assert (revoked.state(), revoked.revoked_by) == ("revoked", "carol")
    with pytest.raises(DelegationError, match="already revoked"):
        await backend.revoke_delegation(second.id, "carol")
    with pytest.raises(NotEligibleError):
        await backend.decide(expired, "dave", "approve")
    assert await backend.page_requests(viewer="dave") == await backend.page_requests(viewer="nobody")
    # The hint Slack and e-mail links read (a request read without a viewer refreshes it) says no too.
    read = await backend.get_request(expired)
    assert read is not None
    assert backend.why_ineligible("dave", read) is not None


async def test_a_delegated_role_cannot_be_handed_on(backend: LocalApprovalBackend) -> None:
    await backend.delegate("carol", "dave", "single", HOUR)
    with pytest.raises(NotEligibleError, match="in their own right"):
        await backend.delegate("dave", "mallory", "single", HOUR)
    # A delegate who holds the role in their own right may delegate it; what they were delegated does not pass on.
    await backend.delegate("bob", "alice", "single", HOUR)
    await backend.delegate("alice", "mallory", "single", HOUR)
    request = await backend.submit(key(), submission(requester="erin"))
    record = await backend.decide(request, "mallory", "approve")
    assert record.decisions[0].on_behalf_of == "alice"  # never "bob": alice's delegation is her own role


async def test_a_delegate_never_approves_their_own_or_their_delegators_request(backend: LocalApprovalBackend) -> None:
    await backend.delegate("carol", "dave", "single", HOUR)
    await backend.delegate("carol", "dave", "self", HOUR)
    own = await backend.submit(key(), submission(requester="dave"))
    with pytest.raises(NotEligibleError):
        await backend.decide(own, "dave", "approve")
    # Even where the template allows self-approval: delegated authority is never for one's own calls.
    own_allowed = await backend.submit(key(), submission(requester="dave", template="self"))
    with pytest.raises(NotEligibleError):
        await backend.decide(own_allowed, "dave", "approve")
    delegators = await backend.submit(key(), submission(requester="carol"))
    with pytest.raises(NotEligibleError, match="delegate or delegator made"):
        await backend.decide(delegators, "dave", "approve")


async def test_each_person_counts_once_toward_n_of_m(backend: LocalApprovalBackend, clock: ManualClock) -> None:
    await backend.delegate("carol", "dave", "pair", HOUR)
    clock.advance(1)
    await backend.delegate("bob", "dave", "pair", HOUR)
    # The delegator decided: the delegate cannot decide again for them.
    first = await backend.submit(key(), submission(template="pair"))
    await backend.decide(first, "carol", "approve")
    with pytest.raises(AlreadyDecidedError, match="carol already decided"):
        await backend.decide(first, "dave", "approve")
    # The delegate decided for two delegators: it counts once (for the older delegation's delegator).
    second = await backend.submit(key(), submission(template="pair"))
    record = await backend.decide(second, "dave", "approve")
    assert record.status is ApprovalStatus.PENDING
    assert record.decisions[0].on_behalf_of == "carol"
    with pytest.raises(AlreadyDecidedError):
        await backend.decide(second, "dave", "approve")
    with pytest.raises(AlreadyDecidedError, match="carol already decided"):
        await backend.decide(second, "carol", "approve")
    record = await backend.decide(second, "bob", "approve")
    assert record.status is ApprovalStatus.APPROVED
    assert (await backend.status(second)).status is ApprovalStatus.APPROVED


async def test_the_template_limits_delegation(backend: LocalApprovalBackend, make_backend: BackendFactory) -> None:
    with pytest.raises(DelegationError, match="forbids delegation"):
        await backend.delegate("carol", "dave", "closed", HOUR)
    with pytest.raises(DelegationError, match="at most 3600 seconds"):
        await backend.delegate("carol", "dave", "short", HOUR + 1)
    with pytest.raises(DelegationError, match=r"at most 1\.2096e"):
        await backend.delegate("carol", "dave", "single", 15 * 86400)
    with pytest.raises(DelegationError, match="not configured"):
        await backend.delegate("carol", "dave", "nope", HOUR)
    with pytest.raises(DelegationError, match="other than the delegator"):
        await backend.delegate("carol", "carol", "single", HOUR)
    with pytest.raises(DelegationError, match="positive number"):
        await backend.delegate("carol", "dave", "single", 0)
    with pytest.raises(DelegationError, match="binding keys"):
        await make_backend(templates=DELEGABLE).delegate("carol", "dave", "single", HOUR)


@pytest.mark.parametrize(
    "edit",
    [{"ends_at": 2**50}, {"delegate": "mallory"}, {"template": "pair"}, {"delegator": "bob"}],
)
async def test_an_edited_delegation_row_delegates_nothing_and_is_named(
    backend: LocalApprovalBackend, database: Database, edit: dict[str, object]
) -> None:
    delegation = await backend.delegate("carol", "dave", "single", HOUR)
    await database.write(
        lambda conn: conn.execute(update(_G).where(_G.c.delegation_id == delegation.id).values(**edit))
    )
    request = await backend.submit(key(), submission(template=edit.get("template", "single")))
    for who in ("dave", "mallory"):
        with pytest.raises(NotEligibleError):
            await backend.decide(request, who, "approve")
    shown = await backend.delegation(delegation.id)
    assert shown is not None
    assert shown.state() == "integrity failure"
    findings = await backend.delegation_findings()
    assert findings == [
        f"delegation {delegation.id} ({shown.delegator} to {shown.delegate}): {shown.integrity_failure}"
    ]


async def test_a_cleared_revocation_does_not_bring_a_delegation_back(
    backend: LocalApprovalBackend, database: Database
) -> None:
    delegation = await backend.delegate("carol", "dave", "single", HOUR)
    await backend.revoke_delegation(delegation.id, "carol")
    clear = update(_G).where(_G.c.delegation_id == delegation.id).values(revoked_at=None, revoked_by=None)
    await database.write(lambda conn: conn.execute(clear))
    request = await backend.submit(key(), submission())
    with pytest.raises(NotEligibleError):
        await backend.decide(request, "dave", "approve")


async def test_a_delegated_decision_after_a_revocation_is_named(
    backend: LocalApprovalBackend, database: Database
) -> None:
    delegation = await backend.delegate("carol", "dave", "single", HOUR)
    request = await backend.submit(key(), submission())
    await backend.decide(request, "dave", "approve")
    await backend.revoke_delegation(delegation.id, "carol")
    # Someone writing the database moves the revocation before the decision.
    move = update(_G).where(_G.c.delegation_id == delegation.id).values(revoked_at=0)
    await database.write(lambda conn: conn.execute(move))
    findings = await backend.delegation_findings()
    assert findings == [
        f"the decision of request {request} by dave for carol (delegated): "
        f"it was made after delegation {delegation.id} was revoked"
    ]


async def test_listing_shows_a_reviewers_own_delegations(backend: LocalApprovalBackend) -> None:
    mine = await backend.delegate("carol", "dave", "single", HOUR)
    others = await backend.delegate("bob", "alice", "pair", HOUR)
    assert [d.id for d in await backend.delegations(viewer="carol")] == [mine.id]
    assert [d.id for d in await backend.delegations(viewer="dave")] == [mine.id]
    assert {d.id for d in await backend.delegations()} == {mine.id, others.id}
    assert await backend.delegation(mine.id, viewer="alice") is None
    assert (await backend.delegation(mine.id, viewer="dave")) is not None
    assert mine.to_json()["delegator"] == "carol"


def test_sealed_decisions_count_each_person_once() -> None:
    pair = RequestRules.of(TEMPLATES["pair"])

    def approve(reviewer: str, at: int, behalf: str | None = None) -> dict[str, object]:
        return {"reviewer": reviewer, "decision": "approve", "decided_at": at, "on_behalf_of": behalf}

    # The delegator, then the delegate for them: one person, whatever the rows say.
    assert approval_granted(pair, "alice", [approve("carol", 1), approve("dave", 2, "carol")]) is None
    assert approval_granted(pair, "alice", [approve("dave", 1, "carol"), approve("carol", 2)]) is None
    # A delegated approval never counts on its delegator's or delegate's own request.
    assert approval_granted(pair, "carol", [approve("dave", 1, "carol"), approve("bob", 2)]) is None
    granted = approval_granted(pair, "alice", [approve("dave", 1, "carol"), approve("bob", 2)])
    assert granted is not None
    assert granted.approved_at == 2
