"""The metrics count decisions by person and by similar-call rule, from the audit log (SQLite and PostgreSQL)."""

from __future__ import annotations

import os
import secrets

import pytest
from sqlalchemy import update

from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS
from mcp_approval.backends import LocalApprovalBackend, SimilarRuleSpec
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS, similar_call_rules_table
from mcp_approval.keyring import BindingCipher
from mcp_approval.metrics import ApprovalMetrics
from mcp_approval.storage import AUDIT_MIGRATIONS, SHARED_MIGRATIONS, AuditLog, migrate, open_database
from tests.backends.conftest import TEMPLATES, roles_of, submission
from tests.support.metrics import parse_samples, sample_value

pytestmark = pytest.mark.anyio


async def test_decisions_are_counted_by_person_and_by_rule(db_url: str) -> None:
    database = open_database(db_url)
    try:
        for history in (AUDIT_MIGRATIONS, SHARED_MIGRATIONS, APPROVAL_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS):
            await migrate(database, history)
        seal = BindingCipher({"k1": os.urandom(32)})
        backend = LocalApprovalBackend(database, templates=TEMPLATES, roles=roles_of, seal=seal)
        first = await backend.submit(secrets.token_hex(16), submission())
        _, rule = await backend.approve_similar(first, "bob", SimilarRuleSpec(600, 5))
        denied = await backend.submit(secrets.token_hex(16), submission(requester="bob", tool="refund"))
        await backend.decide(denied, "carol", "deny")
        for _ in range(2):
            handle = await database.write(lambda conn: backend.submit_in(conn, secrets.token_hex(16), submission()))
            assert await backend.decide_by_similar_rules(handle) == rule.id
        await backend.stop()
        metrics = ApprovalMetrics(database, AuditLog(database))
        await metrics.refresh()
        samples = parse_samples(metrics.exposition().decode())
        by_rule = "mcp_approval_similar_rule_decisions_total"
        assert sample_value(samples, by_rule, rule=rule.id, author="bob") == 2
        by_person = "mcp_approval_reviewer_decisions_total"
        assert sample_value(samples, by_person, reviewer="bob", decision="approve") == 1
        assert sample_value(samples, by_person, reviewer="carol", decision="deny") == 1
        assert not any(f"similar-rule:{rule.id}" in str(key) for key in samples)
        assert sample_value(samples, "mcp_approval_integrity_failures_total") == 0
        # A rule row edited in the database is an integrity failure, counted when it is met.
        rules = similar_call_rules_table
        await database.write(
            lambda conn: conn.execute(update(rules).where(rules.c.rule_id == rule.id).values(max_uses=10**6))
        )
        handle = await database.write(lambda conn: backend.submit_in(conn, secrets.token_hex(16), submission()))
        assert await backend.decide_by_similar_rules(handle) is None
        await metrics.refresh()
        samples = parse_samples(metrics.exposition().decode())
        assert sample_value(samples, "mcp_approval_integrity_failures_total") == 1
    finally:
        await database.close()
