"""``audit verify`` follows delegations through the chain: a delegated decision must come after its
delegation was created, before it was revoked, within its period, by its delegate for its
delegator; and each person counts once toward an execution's approvals."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from typing import Any

import pytest
from typer.testing import CliRunner

from mcp_approval.backends import ApprovalStatus, LocalApprovalBackend
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.cli.main import app
from mcp_approval.keyring import BindingCipher
from mcp_approval.storage import AUDIT_MIGRATIONS, AuditLog, migrate, open_database
from mcp_approval.storage.audit_rules import ExecutionRules
from tests.backends.conftest import TEMPLATES, roles_of, submission

SEAL = BindingCipher({"k1": os.urandom(32)})
runner = CliRunner()


def delegated(url: str, *, forge: dict[str, Any] | None = None, revoke: bool = False) -> tuple[str, str]:
    """carol delegates "single" to dave, who approves one request; the delegation's id and the request.

    ``forge``: then record an ``approval.decision`` event under the delegation with these data, as
    someone writing the database might (the chain stays linked: only the rules can tell).
    """

    async def run() -> tuple[str, str]:
        database = open_database(url)
        try:
            await migrate(database, AUDIT_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS)
            backend = LocalApprovalBackend(database, templates=TEMPLATES, roles=roles_of, seal=SEAL)
            delegation = await backend.delegate("carol", "dave", "single", 3600)
            handle = await backend.submit(secrets.token_hex(16), submission())
            record = await backend.decide(handle, "dave", "approve")
            assert record.status is ApprovalStatus.APPROVED
            if revoke:
                await backend.revoke_delegation(delegation.id, "carol")
            if forge is not None:
                data = {"decision": "approve", "delegation": delegation.id, "on_behalf_of": "carol", **forge}
                actor = str(data.pop("actor", "dave"))
                await AuditLog(database).record("approval.decision", subject="apr_forged", actor=actor, data=data)
            return delegation.id, handle
        finally:
            await database.close()

    return asyncio.run(run())


def test_verify_holds_for_a_delegated_decision(db_url: str) -> None:
    delegated(db_url)
    result = runner.invoke(app, ["audit", "verify", "--db", db_url])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("forge", "revoke", "reason"),
    [
        ({}, True, "the delegation was revoked by carol before it"),
        ({"delegation": "dlg_never"}, False, "no such delegation was created before it"),
        ({"actor": "mallory"}, False, "the delegation is from carol to dave"),
        ({"on_behalf_of": "bob"}, False, "the delegation is from carol to dave"),
    ],
)
def test_verify_names_a_delegated_decision_its_delegation_did_not_allow(
    db_url: str, forge: dict[str, Any], revoke: bool, reason: str
) -> None:
    delegated(db_url, forge=forge, revoke=revoke)
    result = runner.invoke(app, ["audit", "verify", "--db", db_url, "--json"])
    assert result.exit_code == 1, result.output
    assert reason in json.loads(result.output)["broken"]["reason"]


def test_a_decision_outside_the_period_is_named_and_each_person_counts_once() -> None:
    rules = ExecutionRules()
    created = {"delegate": "dave", "template": "pair", "starts_at": 1000, "ends_at": 2000}
    assert rules.fault("approval.delegation_created", "dlg_1", "carol", created, 1000) is None
    submitted = {"approvals_required": 2, "call_digest": "d"}
    assert rules.fault("approval.submitted", "apr_1", "alice", submitted, 1000) is None
    late = {"decision": "approve", "delegation": "dlg_1", "on_behalf_of": "carol"}
    assert "outside the delegation's period" in str(rules.fault("approval.decision", "apr_x", "dave", late, 2000))
    assert rules.fault("approval.decision", "apr_1", "dave", late, 1500) is None
    assert rules.fault("approval.decision", "apr_1", "carol", {"decision": "approve"}, 1600) is None
    execution = {"backend": "local", "request": "apr_1", "call_digest": "d"}
    fault = rules.fault("approval.execution_claimed", "task", None, execution, 1700)
    assert fault is not None
    assert "1 were recorded" in fault  # dave for carol, then carol: one person's approval
    assert rules.fault("approval.decision", "apr_1", "bob", {"decision": "approve"}, 1800) is None
    assert rules.fault("approval.execution_claimed", "task", None, execution, 1900) is None
