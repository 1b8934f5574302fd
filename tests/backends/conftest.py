"""Fixtures for the approval backend tests: a migrated database and a local backend on it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import pytest

from mcp_approval.backends import ApprovalTemplate, AutoResolver, LocalApprovalBackend
from mcp_approval.backends.contract import ApprovalSubmission
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.clock import ManualClock
from mcp_approval.storage import AUDIT_MIGRATIONS, AuditLog, Database, migrate, open_database

ROLES = {
    "alice": frozenset({"approver"}),
    "bob": frozenset({"approver"}),
    "carol": frozenset({"approver", "treasurer"}),
    "dave": frozenset({"treasurer"}),
    "mallory": frozenset(),
}
TEMPLATES = {
    "single": ApprovalTemplate(),
    "pair": ApprovalTemplate(approvals_required=2, approval_valid_s=600),
    "treasury": ApprovalTemplate(reviewer_role="treasurer"),
    "self": ApprovalTemplate(allow_self_approval=True),
    "refund": ApprovalTemplate(),
}


def roles_of(principal: str) -> frozenset[str]:
    return ROLES.get(principal, frozenset())


def submission(**fields: Any) -> ApprovalSubmission:
    base: dict[str, Any] = {
        "tool": "transfer",
        "arguments": {"amount": 100, "to": "acct-1", "secret": "s3cr3t"},
        "requester": "alice",
        "template": "single",
        "title": "Transfer 100",
    }
    base.update(fields)
    return ApprovalSubmission(**base)


@pytest.fixture
async def database(db_url: str) -> AsyncIterator[Database]:
    db = open_database(db_url)
    await migrate(db, AUDIT_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS)
    yield db
    await db.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


BackendFactory = Callable[..., LocalApprovalBackend]


@pytest.fixture
def make_backend(database: Database, clock: ManualClock) -> BackendFactory:
    """Backends on the shared database and clock; keyword arguments override the constructor's."""

    def make(
        *,
        resolvers: Sequence[AutoResolver] = (),
        templates: Mapping[str, ApprovalTemplate] = TEMPLATES,
        **fields: Any,
    ) -> LocalApprovalBackend:
        fields.setdefault("redact", ("secret",))
        fields.setdefault("audit", AuditLog(database, clock))
        return LocalApprovalBackend(
            database, templates=templates, roles=roles_of, resolvers=resolvers, clock=clock, **fields
        )

    return make


@pytest.fixture
async def backend(make_backend: BackendFactory) -> AsyncIterator[LocalApprovalBackend]:
    b = make_backend()
    await b.start()
    yield b
    await b.stop()
