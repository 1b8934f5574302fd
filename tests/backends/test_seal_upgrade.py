"""Requests stored before sealing: unverifiable until the operator's one-time step seals them.

A start seals nothing (it reports what lacks a seal); the step seals as found only what an earlier
release can have left, records it in a sealed manifest, and runs once. On SQLite and PostgreSQL;
the same through real servers and the command is in ``test_restart_seals_nothing.py`` and the
release-fixture upgrade tests.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

import pytest
from sqlalchemy import Connection, select, update

from mcp_approval.backends import (
    ApprovalStatus,
    LocalApprovalBackend,
    NotEligibleError,
    ReviewError,
    UnverifiedRequestError,
)
from mcp_approval.backends.local.schema import (
    approval_decisions_table,
    approval_requests_table,
    approval_seal_manifests_table,
)
from mcp_approval.backends.local.seals import sealed_content
from mcp_approval.clock import ManualClock
from mcp_approval.keyring import BindingCipher
from mcp_approval.storage import AuditLog, Database
from tests.backends.conftest import TEMPLATES, BackendFactory, submission

pytestmark = pytest.mark.anyio

_R, _D, _M = approval_requests_table, approval_decisions_table, approval_seal_manifests_table
SEAL = BindingCipher({"k1": os.urandom(32)})


def key() -> str:
    return secrets.token_urlsafe(32)


async def as_stored_before_sealed_rules(database: Database, handle: str) -> None:
    """The request as revision local_0004 left it: no rules, its earlier seal, unsealed decisions."""

    def rewind(conn: Connection) -> None:
        row = dict(conn.execute(select(_R).where(_R.c.request_id == handle)).mappings().one())
        old = {**row, "rules_json": None, "reviewer_role": None}
        values = {
            "rules_json": None,
            "reviewer_role": None,
            "content_seal": SEAL.seal(sealed_content(old), record=handle),
        }
        conn.execute(update(_R).where(_R.c.request_id == handle).values(**values))
        conn.execute(update(_D).where(_D.c.request_id == handle).values(seal=None))

    await database.write(rewind)


async def as_stored_before_any_seal(database: Database, handle: str) -> None:
    """The request as the first release stored it: no seal at all, no rules, unsealed decisions."""

    def rewind(conn: Connection) -> None:
        values = {"rules_json": None, "reviewer_role": None, "content_seal": None}
        conn.execute(update(_R).where(_R.c.request_id == handle).values(**values))
        conn.execute(update(_D).where(_D.c.request_id == handle).values(seal=None))

    await database.write(rewind)


async def row_of(database: Database, handle: str) -> dict[str, Any]:
    return await database.read(
        lambda conn: dict(conn.execute(select(_R).where(_R.c.request_id == handle)).mappings().one())
    )


async def unverified_events(database: Database, clock: ManualClock, handle: str) -> list[str]:
    events = await AuditLog(database, clock).events(subject=handle)
    return [str(event.data["why"]) for event in events if event.kind == "approval.unverified"]


async def started(backend: LocalApprovalBackend) -> LocalApprovalBackend:
    await backend.start()
    await backend.stop()
    return backend


async def test_a_start_seals_nothing_and_the_step_seals_a_request_of_an_earlier_release_once(
    make_backend: BackendFactory, database: Database, clock: ManualClock
) -> None:
    before = make_backend(seal=SEAL)
    handle = await before.submit(key(), submission(template="pair", requester="dave"))
    await before.decide(handle, "alice", "approve")
    await as_stored_before_sealed_rules(database, handle)
    stored = await row_of(database, handle)

    after = await started(make_backend(seal=SEAL))
    await started(make_backend(seal=SEAL))  # a second start reports it again, and records no second event
    # The start changed nothing; the request is unverifiable, and said so once in the audit trail.
    assert await row_of(database, handle) == stored
    record = await after.get_request(handle)
    assert record is not None
    assert record.integrity_failure == "the stored request carries no sealed rules"
    with pytest.raises(UnverifiedRequestError):
        await after.decide(handle, "bob", "approve")
    # One event from the starts, one from bob's refused approval.
    assert await unverified_events(database, clock, handle) == ["the stored request carries no sealed rules"] * 2

    assert await after.seal_manifest() is None
    dry = await after.seal_requests_stored_before_sealing(actor="ops", dry_run=True)
    assert [entry.request_id for entry in dry.sealed] == [handle]
    assert await row_of(database, handle) == stored  # a dry run writes nothing
    assert await after.seal_manifest() is None

    manifest = await after.seal_requests_stored_before_sealing(actor="ops")
    (entry,) = manifest.sealed
    assert (entry.request_id, entry.status, entry.template, entry.decisions) == (
        handle,
        "pending",
        "pair",
        (("alice", "approve"),),
    )
    assert '"approvals_required":2' in entry.rules
    assert manifest.left == ()
    assert await after.seal_manifest() == manifest
    assert (await after.get_request(handle)).integrity_failure is None  # type: ignore[union-attr]
    # alice's approval from before the upgrade counts: one more completes it.
    assert (await after.decide(handle, "bob", "approve")).status is ApprovalStatus.APPROVED
    assert (await after.status(handle)).status is ApprovalStatus.APPROVED
    trail = [event.kind for event in await AuditLog(database, clock).events(subject=handle)]
    assert "approval.sealed_as_found" in trail

    with pytest.raises(ReviewError, match=r"sealed once already, at .* by ops .*the step runs once"):
        await after.seal_requests_stored_before_sealing(actor="ops")


async def test_a_request_stored_before_any_seal_is_sealed_with_its_template_s_rules(
    make_backend: BackendFactory, database: Database
) -> None:
    backend = make_backend(seal=SEAL)
    handle = await backend.submit(key(), submission(template="pair", requester="dave"))
    await as_stored_before_any_seal(database, handle)
    # Its row says one approval; with no seal vouching for that, it is not cut below its template's two.
    await database.write(lambda conn: conn.execute(update(_R).values(approvals_required=1)))
    assert (await backend.get_request(handle)).integrity_failure == "the stored request carries no seal"  # type: ignore[union-attr]
    (entry,) = (await backend.seal_requests_stored_before_sealing(actor="ops")).sealed
    assert '"approvals_required":2' in entry.rules
    assert (await backend.decide(handle, "alice", "approve")).status is ApprovalStatus.PENDING
    assert (await backend.decide(handle, "bob", "approve")).status is ApprovalStatus.APPROVED


async def test_the_step_leaves_what_no_earlier_release_stored_and_names_it(
    make_backend: BackendFactory, database: Database
) -> None:
    backend = make_backend(seal=SEAL, templates=TEMPLATES)
    edited = await backend.submit(key(), submission(template="single"))
    await as_stored_before_sealed_rules(database, edited)
    await database.write(
        lambda conn: conn.execute(update(_R).where(_R.c.request_id == edited).values(approvals_required=5))
    )
    unsealed_now = await backend.submit(key(), submission(template="single"))  # stored by this release
    await database.write(
        lambda conn: conn.execute(update(_R).where(_R.c.request_id == unsealed_now).values(content_seal=None))
    )
    forged = await backend.submit(key(), submission(template="single"))
    forged_decision = {"request_id": forged, "reviewer": "mallory", "decision": "approve", "comment": None}
    await database.write(lambda conn: conn.execute(_D.insert().values(**forged_decision, decided_at=1, seal=None)))
    gone = await make_backend(seal=SEAL, templates={"gone": TEMPLATES["single"]}).submit(
        key(), submission(template="gone")
    )
    await as_stored_before_sealed_rules(database, gone)

    manifest = await backend.seal_requests_stored_before_sealing(actor="ops")
    assert manifest.sealed == ()
    assert {entry.request_id: entry.why for entry in manifest.left} == {
        edited: "its earlier seal does not match it: it was edited after it was sealed",
        unsealed_now: "it carries rules, which no earlier release stored: its missing seals were not left by one",
        forged: "it carries rules, which no earlier release stored: its missing seals were not left by one",
        gone: "its template 'gone' is not configured, so there are no rules to seal it with",
    }
    for handle, why, refusal in (
        (edited, "the stored request does not match what was submitted", UnverifiedRequestError),
        (unsealed_now, "the stored request carries no seal", UnverifiedRequestError),
        (forged, "the decision of mallory carries no seal", UnverifiedRequestError),
        (gone, "the stored request carries no sealed rules", NotEligibleError),  # nobody may decide it
    ):
        record = await backend.get_request(handle)
        assert record is not None
        assert record.integrity_failure == why
        with pytest.raises(refusal):
            await backend.decide(handle, "bob", "approve")


async def test_a_manifest_written_without_the_key_stops_the_step(
    make_backend: BackendFactory, database: Database
) -> None:
    backend = make_backend(seal=SEAL)
    handle = await backend.submit(key(), submission())
    await as_stored_before_sealed_rules(database, handle)
    planted = {"step": "seal-requests", "sealed_at": 1, "actor": "x", "manifest_json": "{}", "seal": "k1:AAAA"}
    await database.write(lambda conn: conn.execute(_M.insert().values(**planted)))
    with pytest.raises(ReviewError, match="does not authenticate under these binding keys"):
        await backend.seal_requests_stored_before_sealing(actor="ops")
    with pytest.raises(ReviewError, match="does not authenticate"):
        await backend.seal_manifest()
    assert (await backend.get_request(handle)).integrity_failure == "the stored request carries no sealed rules"  # type: ignore[union-attr]


async def test_a_backend_without_the_key_cannot_run_the_step(make_backend: BackendFactory) -> None:
    with pytest.raises(ReviewError, match="needs the server's binding keys"):
        await make_backend().seal_requests_stored_before_sealing(actor="ops")
