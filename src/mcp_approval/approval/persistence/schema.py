"""The approval layer's tables (workflows, submission intents) and their migration history.

The revisions live in ``schema_versions/``; the table objects here describe the head revision.
"""

from pathlib import Path

from sqlalchemy import BigInteger, Column, Index, Integer, MetaData, String, Table, Text

from mcp_approval.storage.counts import counts_table
from mcp_approval.storage.migrations import Migrations

__all__ = [
    "APPROVAL_MIGRATIONS",
    "approval_counts_table",
    "approval_executions_table",
    "approval_intents_table",
    "approval_workflows_table",
    "metadata",
]

#: The approval tables' history; release schema version 2 created them.
APPROVAL_MIGRATIONS = Migrations(
    "approval", Path(__file__).with_name("schema_versions"), legacy=((2, "approval_0001"),)
)

metadata = MetaData()

approval_workflows_table = Table(
    "approval_workflows",
    metadata,
    # One workflow per approval task; the task row (tasks.task_id) carries the wire status.
    Column("task_id", String(64), primary_key=True),
    Column("principal_digest", String(64), nullable=False),
    Column("tool_name", String(256), nullable=False),
    # JCS (RFC 8785) + SHA-256 of the arguments: the dedup scope and an integrity check.
    Column("arguments_digest", String(64), nullable=False),
    # SHA-256 of principal, tool and arguments digest (records.call_scope): the dedup scope's key.
    Column("call_scope", String(64), nullable=True),
    # The immutable call binding, AES-GCM encrypted; key_id names the key that sealed it.
    Column("binding_ciphertext", Text, nullable=True),
    Column("key_id", String(64), nullable=False),
    # Hash of the tool's definition when the call was made (fail closed if it changes).
    Column("tool_fingerprint", String(64), nullable=True),
    # pending -> claimed -> finished; pending -> fenced. See approval.states.
    Column("phase", String(16), nullable=False),
    Column("generation", Integer, nullable=False, default=1),
    Column("backend", String(64), nullable=False),
    # The current generation's durable backend handle.
    Column("handle", String(512), nullable=True),
    Column("template", String(256), nullable=True),
    Column("request_deadline", BigInteger, nullable=True),
    Column("approval_expires_at", BigInteger, nullable=True),
    # When the workflow driver next looks at this workflow (polling, retry backoff).
    Column("next_check_at", BigInteger, nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    # The worker resolving or executing it, and how long that lease holds.
    Column("lease_owner", String(64), nullable=True),
    Column("lease_expires_at", BigInteger, nullable=True),
    Column("execution_deadline", BigInteger, nullable=True),
    Column("disposition", String(32), nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("version", Integer, nullable=False, default=0),
    # 1 while a request opened for a client without tasks owes its outcome to the identical retry;
    # NULL for task-backed workflows and once the retry took the outcome (the approval is spent).
    Column("owed_to_retry", Integer, nullable=True),
)

# Dedup reads look a call up by this one column, so no other index matches them: a plan cached
# while the table was small (and unanalyzed) cannot fall back on a scan of the principal's rows.
Index("ix_approval_workflows_call_scope", approval_workflows_table.c.call_scope)
Index("ix_approval_workflows_due", approval_workflows_table.c.phase, approval_workflows_table.c.next_check_at)
# Read by workers of the release before approval_0004 only (during a rolling upgrade).
Index(
    "ix_approval_workflows_dedup",
    approval_workflows_table.c.principal_digest,
    approval_workflows_table.c.tool_name,
    approval_workflows_table.c.arguments_digest,
)
Index("ix_approval_workflows_pending", approval_workflows_table.c.principal_digest, approval_workflows_table.c.phase)

approval_intents_table = Table(
    "approval_intents",
    metadata,
    # The fresh idempotency key of one submission (initial or chained), 256 random bits.
    Column("idempotency_key", String(64), primary_key=True),
    Column("task_id", String(64), nullable=False),
    Column("generation", Integer, nullable=False),
    Column("principal_digest", String(64), nullable=False),
    Column("tool_name", String(256), nullable=False),
    Column("arguments_digest", String(64), nullable=False),
    Column("call_scope", String(64), nullable=True),  # as the workflow's
    # The exact submission body, encrypted like the binding (it may hold the arguments).
    Column("body_ciphertext", Text, nullable=False),
    Column("key_id", String(64), nullable=False),
    # open (not yet bound) -> bound -> consumed; open -> abandoned.
    Column("state", String(16), nullable=False),
    Column("handle", String(512), nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)

Index("ix_approval_intents_task", approval_intents_table.c.task_id, approval_intents_table.c.generation, unique=True)
Index("ix_approval_intents_state", approval_intents_table.c.state)
Index("ix_approval_intents_handle", approval_intents_table.c.handle)
# The per-principal submission rate check counts recent intents.
Index("ix_approval_intents_rate", approval_intents_table.c.principal_digest, approval_intents_table.c.created_at)
Index("ix_approval_intents_call_scope", approval_intents_table.c.call_scope)
# Read by workers of the release before approval_0004 only (during a rolling upgrade).
Index(
    "ix_approval_intents_dedup",
    approval_intents_table.c.principal_digest,
    approval_intents_table.c.tool_name,
    approval_intents_table.c.arguments_digest,
)

# Added by revision approval_0005: one sealed row per execution, written by the claim before the
# call runs and never updated or deleted (see ``executions``).
approval_executions_table = Table(
    "approval_executions",
    metadata,
    Column("task_id", String(64), primary_key=True),
    Column("generation", Integer, primary_key=True),
    # SHA-256 of the backend and the request's handle (executions.request_key): one run per request.
    Column("request_key", String(64), nullable=False),
    Column("backend", String(64), nullable=False),
    Column("handle", String(512), nullable=False),
    Column("call_scope", String(64), nullable=True),
    Column("worker", String(64), nullable=False),
    Column("claimed_at", BigInteger, nullable=False),
    # The fact (ExecutionFact.document()) sealed under the binding key to its task and generation.
    Column("seal", Text, nullable=False),
)

Index("ix_approval_executions_request", approval_executions_table.c.request_key, unique=True)

#: Admission counts kept by the triggers of revision approval_0003 (see
#: :mod:`mcp_approval.storage.counts`): ``"pending:<principal digest>"`` (pending workflows) and
#: ``"rate:<principal digest>:<minute since the epoch, 12 digits>"`` (intents recorded then).
approval_counts_table = counts_table("approval_counts", metadata)
