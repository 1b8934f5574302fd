"""The local approval backend's tables (requests, decisions, console sessions, seal manifests,
similar-call rules, delegations) and their migration history.

The revisions live in ``schema_versions/``; the table objects here describe the head
revision. A deployment whose backend is ARAP never creates these tables.
"""

from pathlib import Path

from sqlalchemy import BigInteger, Column, Index, Integer, MetaData, String, Table, Text

from mcp_approval.storage.migrations import Migrations

__all__ = [
    "LOCAL_BACKEND_MIGRATIONS",
    "approval_decisions_table",
    "approval_delegations_table",
    "approval_requests_table",
    "approval_seal_manifests_table",
    "console_sessions_table",
    "metadata",
    "similar_call_rules_table",
]

#: The local backend's history; release schema version 2 created its tables.
LOCAL_BACKEND_MIGRATIONS = Migrations(
    "local_backend", Path(__file__).with_name("schema_versions"), legacy=((2, "local_0001"),)
)

metadata = MetaData()

approval_requests_table = Table(
    "approval_requests",
    metadata,
    # The local backend's durable handle.
    Column("request_id", String(64), primary_key=True),
    Column("idempotency_key", String(64), nullable=False, unique=True),
    # SHA-256 of the canonical submission body: a repeat with another body is a conflict.
    Column("body_digest", String(64), nullable=False),
    Column("body_json", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("tool_name", String(256), nullable=False),
    Column("requester", String(256), nullable=False),
    Column("template", String(256), nullable=True),
    Column("approvals_required", Integer, nullable=False, default=1),
    Column("created_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=True),
    Column("approved_until", BigInteger, nullable=True),
    Column("decided_at", BigInteger, nullable=True),
    Column("updated_at", BigInteger, nullable=False),
    Column("version", Integer, nullable=False, default=0),
    # The backend's keyed seal over the content reviewers see (see LocalApprovalBackend's ``seal``).
    Column("content_seal", Text, nullable=True),
    # Added by revision local_0005: the decision rules the request was submitted under
    # (RequestRules.to_text(), covered by content_seal) and, for listing by role, their reviewer role.
    Column("rules_json", Text, nullable=True),
    Column("reviewer_role", String(256), nullable=True),
)

Index("ix_approval_requests_status", approval_requests_table.c.status, approval_requests_table.c.created_at)
# Added by revision local_0004: the change feed (requests that left ``pending`` since a time).
Index("ix_approval_requests_changed", approval_requests_table.c.status, approval_requests_table.c.updated_at)

approval_decisions_table = Table(
    "approval_decisions",
    metadata,
    Column("request_id", String(64), primary_key=True),
    Column("reviewer", String(256), primary_key=True),
    Column("decision", String(16), nullable=False),
    Column("comment", Text, nullable=True),
    Column("decided_at", BigInteger, nullable=False),
    # Added by revision local_0005: the backend's keyed seal over the decision (see ``seals``).
    Column("seal", Text, nullable=True),
    # Added by revision local_0008: a decision made under a delegation names its delegator and the
    # delegation (both covered by ``seal``); ``None`` for a reviewer deciding in their own right.
    Column("on_behalf_of", String(256), nullable=True),
    Column("delegation_id", String(64), nullable=True),
)

console_sessions_table = Table(
    "console_sessions",
    metadata,
    # SHA-256 of the session cookie (the table never holds a usable cookie).
    Column("session_key", String(64), primary_key=True),
    Column("principal", String(256), nullable=False),
    # The reviewer's bearer token, AES-GCM under a key derived from the cookie: only its holder opens it.
    Column("sealed_token", Text, nullable=False),
    Column("csrf", String(64), nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("seen_ms", BigInteger, nullable=False),
    # Messages for the next page: [[kind, text], ...].
    Column("flashes_json", Text, nullable=False),
)

Index("ix_console_sessions_seen", console_sessions_table.c.seen_ms)

# Added by revision local_0006: what an operator's one-time sealing of requests stored before
# sealing sealed as found (see ``seal_upgrade``), one row per step, sealed under the binding key.
approval_seal_manifests_table = Table(
    "approval_seal_manifests",
    metadata,
    # The step ("seal-requests"): the key makes it one-time.
    Column("step", String(64), primary_key=True),
    Column("sealed_at", BigInteger, nullable=False),
    # Who ran it (as the command was told, or the operating-system user).
    Column("actor", String(256), nullable=False),
    # The manifest (SealManifest.to_json()) as canonical JSON, and its seal.
    Column("manifest_json", Text, nullable=False),
    Column("seal", Text, nullable=False),
)

# Added by revision local_0007: similar-call rules (see ``similar``), one row each, sealed under the
# binding key with their author and scope; and an index counting a rule's decisions.
similar_call_rules_table = Table(
    "similar_call_rules",
    metadata,
    Column("rule_id", String(64), primary_key=True),
    Column("template", String(256), nullable=True),
    Column("tool_name", String(256), nullable=False),
    Column("author", String(256), nullable=False),
    # The request whose approval wrote the rule.
    Column("source_request", String(64), nullable=False),
    # SimilarCallScope.to_text(), covered by ``seal``.
    Column("scope_json", Text, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Column("max_uses", Integer, nullable=False),
    # Decisions made so far: bumped by a compare-and-set, checked against the rule's sealed decisions.
    Column("uses", Integer, nullable=False),
    Column("revoked_at", BigInteger, nullable=True),
    Column("revoked_by", String(256), nullable=True),
    Column("seal", Text, nullable=False),
)

Index("ix_similar_call_rules_tool", similar_call_rules_table.c.tool_name, similar_call_rules_table.c.expires_at)
Index("ix_approval_decisions_reviewer", approval_decisions_table.c.reviewer)

# Added by revision local_0008: delegations (see ``delegations``), one row each, sealed under the
# binding key with their delegator, delegate, template and period.
approval_delegations_table = Table(
    "approval_delegations",
    metadata,
    Column("delegation_id", String(64), primary_key=True),
    Column("delegator", String(256), nullable=False),
    Column("delegate", String(256), nullable=False),
    Column("template", String(256), nullable=False),
    # The period the delegate may decide in (epoch ms, ``ends_at`` excluded).
    Column("starts_at", BigInteger, nullable=False),
    Column("ends_at", BigInteger, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("revoked_at", BigInteger, nullable=True),
    Column("revoked_by", String(256), nullable=True),
    Column("seal", Text, nullable=False),
)

Index("ix_approval_delegations_delegate", approval_delegations_table.c.delegate, approval_delegations_table.c.template)
