"""``audit verify`` names the similar-call rule behind each automatic decision, and names a rule's
decision its rule did not allow (never created, revoked before it, beyond its uses)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from typing import Any

import pytest
from typer.testing import CliRunner

from mcp_approval.backends import ApprovalStatus, LocalApprovalBackend, SimilarRuleSpec
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.cli.main import app
from mcp_approval.keyring import BindingCipher
from mcp_approval.storage import AUDIT_MIGRATIONS, AuditLog, migrate, open_database
from tests.backends.conftest import TEMPLATES, roles_of, submission

SEAL = BindingCipher({"k1": os.urandom(32)})
runner = CliRunner()


def decided_by_a_rule(url: str, *, forge: dict[str, Any] | None = None, revoke: bool = False) -> tuple[str, list[str]]:
    """bob approves one request with a 2-use rule, which decides two more; the rule's id and those two.

    ``forge``: then record an ``approval.decision`` event naming the rule with these extra data, as
    someone writing the database might (the chain stays linked: only the rules can tell).
    """

    async def run() -> tuple[str, list[str]]:
        database = open_database(url)
        try:
            await migrate(database, AUDIT_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS)
            backend = LocalApprovalBackend(database, templates=TEMPLATES, roles=roles_of, seal=SEAL)
            first = await backend.submit(secrets.token_hex(16), submission())
            _, rule = await backend.approve_similar(first, "bob", SimilarRuleSpec(600, 3 if revoke else 2))
            later = []
            for _ in range(2):
                handle = await database.write(lambda conn: backend.submit_in(conn, secrets.token_hex(16), submission()))
                await backend.decide_by_similar_rules(handle)
                assert (await backend.status(handle)).status is ApprovalStatus.APPROVED
                later.append(handle)
            if revoke:
                await backend.revoke_similar_rule(rule.id, "bob")
            if forge is not None:
                data = {"decision": "approve", "similar_rule": rule.id, "rule_author": "bob", **forge}
                await AuditLog(database).record("approval.decision", subject="apr_forged", actor="x", data=data)
            await backend.stop()
            return rule.id, later
        finally:
            await database.close()

    return asyncio.run(run())


def test_verify_names_the_rule_behind_each_automatic_decision(db_url: str) -> None:
    rule_id, later = decided_by_a_rule(db_url)
    result = runner.invoke(app, ["audit", "verify", "--db", db_url])
    assert result.exit_code == 0, result.output
    for handle in later:
        assert f"request {handle} approved by similar-call rule {rule_id} written by bob" in result.output
    as_json = json.loads(runner.invoke(app, ["audit", "verify", "--db", db_url, "--json"]).output)
    assert [(d["request"], d["rule"], d["author"]) for d in as_json["rule_decisions"]] == [
        (handle, rule_id, "bob") for handle in later
    ]


@pytest.mark.parametrize(
    ("forge", "revoke", "reason"),
    [
        ({}, False, "had already made its 2 decision(s)"),
        ({}, True, "the rule was revoked by bob before it"),
        ({"similar_rule": "sim_never"}, False, "no such rule was created before it"),
    ],
)
def test_verify_names_a_rule_decision_its_rule_did_not_allow(
    db_url: str, forge: dict[str, Any], revoke: bool, reason: str
) -> None:
    decided_by_a_rule(db_url, forge=forge, revoke=revoke)
    result = runner.invoke(app, ["audit", "verify", "--db", db_url, "--json"])
    assert result.exit_code == 1, result.output
    assert reason in json.loads(result.output)["broken"]["reason"]
