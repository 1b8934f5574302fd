"""The reference ARAP Access Request Service's tables and their migration history.

The human workflow (who decides, N-of-M, decisions) stays in the local backend's tables; these
hold only what ARAP adds around it. Only ``arap-server`` creates them. The revisions live in
``ars_schema_versions/``; the table objects here describe the head revision.
"""

from pathlib import Path

from sqlalchemy import BigInteger, Column, Index, Integer, MetaData, String, Table, Text

from mcp_approval.storage.migrations import Migrations

__all__ = [
    "ARS_MIGRATIONS",
    "arap_approvals_table",
    "arap_callbacks_table",
    "arap_evaluations_table",
    "arap_jti_table",
    "arap_tasks_table",
    "metadata",
]

#: The reference ARS's history; release schema version 3 created its tables.
ARS_MIGRATIONS = Migrations("ars", Path(__file__).with_name("ars_schema_versions"), legacy=((3, "ars_0001"),))

metadata = MetaData()

arap_evaluations_table = Table(
    "arap_evaluations",
    metadata,
    # One requestable denial the reference PDP issued (the shared-state, evaluation_id-only binding).
    Column("evaluation_id", String(64), primary_key=True),
    Column("binding_hash", String(64), nullable=False),
    Column("members_json", Text, nullable=False),
    Column("template", String(256), nullable=True),
    Column("display_json", Text, nullable=True),
    Column("expires_at", BigInteger, nullable=False),
    Column("created_at", BigInteger, nullable=False),
)

Index("ix_arap_evaluations_expires_at", arap_evaluations_table.c.expires_at)

arap_tasks_table = Table(
    "arap_tasks",
    metadata,
    Column("task_id", String(64), primary_key=True),
    # The authenticated PEP client that submitted it; the Idempotency-Key is scoped to it.
    Column("caller", String(256), nullable=False),
    Column("idempotency_key", String(256), nullable=True),
    # SHA-256 of the canonical (RFC 8785) submission body.
    Column("body_digest", String(64), nullable=False),
    # The approval_requests row (local backend handle) that carries the human workflow.
    Column("request_id", String(64), nullable=False, unique=True),
    Column("binding_hash", String(64), nullable=False),
    Column("members_json", Text, nullable=False),
    Column("evaluation_id", String(64), nullable=True),
    Column("callback_endpoint", Text, nullable=True),
    Column("callback_state", Text, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    # task.expires_at: a pending task expires then.
    Column("expires_at", BigInteger, nullable=False),
    # The handle answers until then; afterwards it is task_expired.
    Column("retain_until", BigInteger, nullable=False),
)

Index("ix_arap_tasks_idempotency", arap_tasks_table.c.caller, arap_tasks_table.c.idempotency_key, unique=True)

arap_approvals_table = Table(
    "arap_approvals",
    metadata,
    # The approval object the ARS issued for an approved task (at most one per task).
    Column("approval_id", String(64), primary_key=True),
    Column("task_id", String(64), nullable=False, unique=True),
    Column("binding_hash", String(64), nullable=False),
    Column("members_json", Text, nullable=False),
    Column("approved_at", BigInteger, nullable=False),
    Column("approved_until", BigInteger, nullable=False),
    # The signed approval.state (compact JWS) exactly as it was handed out.
    Column("state", Text, nullable=False),
    Column("revoked_at", BigInteger, nullable=True),
)

arap_jti_table = Table(
    "arap_jti",
    metadata,
    # binding_token ids already used for a submission, kept until the token expires.
    Column("jti", String(256), primary_key=True),
    Column("expires_at", BigInteger, nullable=False),
)

Index("ix_arap_jti_expires_at", arap_jti_table.c.expires_at)

arap_callbacks_table = Table(
    "arap_callbacks",
    metadata,
    # The callback owed for a task that ended (at most one: a task ends once), written in the
    # transaction that ended it; the outbox (reference/ars_outbox.py) delivers it.
    Column("task_id", String(64), primary_key=True),
    Column("endpoint", Text, nullable=False),
    Column("state", Text, nullable=True),
    # The terminal status the body reports.
    Column("status", String(16), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("attempts", Integer, nullable=False),
    # When the next attempt is due; NULL once delivered or abandoned.
    Column("next_attempt_at", BigInteger, nullable=True),
    # The worker delivering it, and until when that claim holds.
    Column("lease_owner", String(64), nullable=True),
    Column("lease_expires_at", BigInteger, nullable=True),
    Column("delivered_at", BigInteger, nullable=True),
    Column("abandoned_at", BigInteger, nullable=True),
    Column("last_error", Text, nullable=True),
)

Index("ix_arap_callbacks_due", arap_callbacks_table.c.next_attempt_at)
