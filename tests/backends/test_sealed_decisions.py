"""The local backend's seals over rules and decisions: what it derives, rotation, edited rules, keyless reviewers.

The attacks on a running deployment are in ``tests/approval/test_sealed_authority.py``, rows
stored before sealing in ``test_seal_upgrade.py``; these check the backend's side on its own, on
SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import secrets

import pytest
from sqlalchemy import update

from mcp_approval.backends import ApprovalStatus, RequestIntegrityError, ReviewError, UnverifiedRequestError
from mcp_approval.backends.local.schema import approval_decisions_table, approval_requests_table
from mcp_approval.clock import ManualClock
from mcp_approval.keyring import BindingCipher
from mcp_approval.storage import Database
from tests.backends.conftest import BackendFactory, submission

pytestmark = pytest.mark.anyio

_R, _D = approval_requests_table, approval_decisions_table


def cipher(*names: str) -> BindingCipher:
    """A cipher of fixed keys (the first seals), so two ciphers can share keys as rotated servers do."""
    return BindingCipher({name: KEYS[name] for name in names})


KEYS = {"k1": os.urandom(32), "k2": os.urandom(32)}


def key() -> str:
    return secrets.token_urlsafe(32)


async def test_an_approval_lasts_as_its_sealed_rules_say_whatever_the_row_says(
    make_backend: BackendFactory, database: Database, clock: ManualClock
) -> None:
    backend = make_backend(seal=cipher("k1"))
    handle = await backend.submit(key(), submission(template="pair", requester="dave"))
    await backend.decide(handle, "alice", "approve")
    clock.advance(5_000)
    record = await backend.decide(handle, "bob", "approve")
    # "pair" approvals last 600 s from the decision that completed them.
    assert record.approved_until == clock.now_ms() + 600_000
    extended = update(_R).where(_R.c.request_id == handle).values(approved_until=clock.now_ms() + 10**9)
    await database.write(lambda conn: conn.execute(extended))
    state = await backend.status(handle)
    assert state.status is ApprovalStatus.APPROVED
    assert state.approved_until_ms == clock.now_ms() + 600_000


async def test_rotated_keys_open_what_the_old_key_sealed_and_the_new_key_seals(make_backend: BackendFactory) -> None:
    before = make_backend(seal=cipher("k1"))
    handle = await before.submit(key(), submission(template="pair", requester="dave"))
    await before.decide(handle, "alice", "approve")
    rotated = make_backend(seal=cipher("k2", "k1"))
    assert (await rotated.get_request(handle)) is not None
    assert (await rotated.get_request(handle)).integrity_failure is None  # type: ignore[union-attr]
    assert (await rotated.decide(handle, "bob", "approve")).status is ApprovalStatus.APPROVED
    assert (await rotated.status(handle)).status is ApprovalStatus.APPROVED
    sealed = await rotated.sealed_request(handle)
    assert sealed is not None
    assert sealed.requester == "dave"
    # A server that dropped the old key no longer trusts what only it sealed.
    dropped = make_backend(seal=cipher("k2"))
    assert (await dropped.status(handle)).status is ApprovalStatus.FAILED
    with pytest.raises(RequestIntegrityError):
        await dropped.sealed_request(handle)


async def test_edited_rules_are_flagged_and_approve_nothing(make_backend: BackendFactory, database: Database) -> None:
    backend = make_backend(seal=cipher("k1"))
    handle = await backend.submit(key(), submission(template="pair", requester="dave"))
    relaxed = update(_R).where(_R.c.request_id == handle)
    rules = '{"allow_self_approval":true,"approval_valid_ms":600000,"approvals_required":1,'
    rules += '"reviewer_role":"approver","share_deny_comment":false}'
    await database.write(lambda conn: conn.execute(relaxed.values(rules_json=rules)))
    record = await backend.get_request(handle)
    assert record is not None
    assert record.integrity_failure == "the stored request does not match what was submitted"
    with pytest.raises(UnverifiedRequestError):
        await backend.decide(handle, "alice", "approve")


async def test_a_keyless_reviewer_surface_refuses_to_decide_a_sealed_request(make_backend: BackendFactory) -> None:
    sealed = make_backend(seal=cipher("k1"))
    handle = await sealed.submit(key(), submission())
    keyless = make_backend()
    with pytest.raises(ReviewError, match="sealed under the server's binding key, which was not given here"):
        await keyless.decide(handle, "bob", "approve")
    assert (await sealed.status(handle)).status is ApprovalStatus.PENDING
