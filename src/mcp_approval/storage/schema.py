"""The SQLAlchemy Core schema shared by SQLite and PostgreSQL.

Times are integer milliseconds since the Unix epoch; JSON documents are stored as text that
this project serializes itself, so both databases keep byte-identical values.
"""

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, MetaData, String, Table, Text

metadata = MetaData()

schema_version_table = Table(
    "schema_version",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("applied_at", BigInteger, nullable=False),
)

tasks_table = Table(
    "tasks",
    metadata,
    Column("task_id", String(64), primary_key=True),
    # SHA-256 hex digest of the owning principal; NULL for an anonymous (bearer-capability) task.
    Column("principal_digest", String(64), nullable=True),
    Column("tool_name", String(256), nullable=False),
    Column("status", String(16), nullable=False),
    Column("status_message", Text, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("ttl_ms", BigInteger, nullable=True),
    # created_at + ttl_ms, kept beside it so the sweeper's query is one indexed range.
    Column("expires_at", BigInteger, nullable=True),
    Column("poll_interval_ms", BigInteger, nullable=True),
    Column("result_json", Text, nullable=True),
    Column("error_json", Text, nullable=True),
    # Outstanding input requests: {key: {method, params}}.
    Column("input_requests_json", Text, nullable=False, default="{}"),
    # Answers received through tasks/update and not yet taken by the owning worker.
    Column("input_responses_json", Text, nullable=False, default="{}"),
    # Input keys are numbered per task and never reused.
    Column("input_seq", Integer, nullable=False, default=0),
    Column("cancel_requested", Boolean, nullable=False, default=False),
    # The worker running the task and how long its lease holds; NULL when nothing runs it.
    Column("owner", String(64), nullable=True),
    Column("lease_expires_at", BigInteger, nullable=True),
    # Bumped by every write; read-modify-write operations compare-and-set on it.
    Column("version", Integer, nullable=False, default=0),
    # Added by schema version 2. The component that drives a task no in-process execution runs
    # (e.g. "approval"), and the _meta every tasks/get repeats while the task is not terminal.
    Column("handler", String(32), nullable=True),
    Column("meta_json", Text, nullable=True),
)

Index("ix_tasks_principal_status", tasks_table.c.principal_digest, tasks_table.c.status)
Index("ix_tasks_status", tasks_table.c.status)
Index("ix_tasks_expires_at", tasks_table.c.expires_at)
Index("ix_tasks_owner", tasks_table.c.owner)
Index("ix_tasks_lease", tasks_table.c.lease_expires_at)

# -- tool approval (SEP-2848) ---------------------------------------------------------------

approval_workflows_table = Table(
    "approval_workflows",
    metadata,
    # One workflow per approval task; the task row (tasks.task_id) carries the wire status.
    Column("task_id", String(64), primary_key=True),
    Column("principal_digest", String(64), nullable=False),
    Column("tool_name", String(256), nullable=False),
    # JCS (RFC 8785) + SHA-256 of the arguments: the dedup scope and an integrity check.
    Column("arguments_digest", String(64), nullable=False),
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
    # When the resolver next looks at this workflow (polling, retry backoff).
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
)

Index(
    "ix_approval_workflows_dedup",
    approval_workflows_table.c.principal_digest,
    approval_workflows_table.c.tool_name,
    approval_workflows_table.c.arguments_digest,
)
Index("ix_approval_workflows_due", approval_workflows_table.c.phase, approval_workflows_table.c.next_check_at)
# The bound on outstanding pending tasks counts a principal's workflows by phase.
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
Index(
    "ix_approval_intents_dedup",
    approval_intents_table.c.principal_digest,
    approval_intents_table.c.tool_name,
    approval_intents_table.c.arguments_digest,
)

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
)

Index("ix_approval_requests_status", approval_requests_table.c.status, approval_requests_table.c.created_at)

approval_decisions_table = Table(
    "approval_decisions",
    metadata,
    Column("request_id", String(64), primary_key=True),
    Column("reviewer", String(256), primary_key=True),
    Column("decision", String(16), nullable=False),
    Column("comment", Text, nullable=True),
    Column("decided_at", BigInteger, nullable=False),
)

audit_events_table = Table(
    "audit_events",
    metadata,
    Column("event_id", Integer, primary_key=True, autoincrement=True),
    Column("at", BigInteger, nullable=False),
    Column("kind", String(64), nullable=False),
    # The approval request or task the event is about.
    Column("subject", String(128), nullable=True),
    Column("actor", String(256), nullable=True),
    Column("data_json", Text, nullable=False, default="{}"),
)

Index("ix_audit_events_subject", audit_events_table.c.subject, audit_events_table.c.event_id)

# -- reference ARAP Access Request Service (schema version 3) -------------------------------
# The human workflow (who decides, N-of-M, decisions, audit) stays in approval_requests and
# approval_decisions; these tables hold only what ARAP adds around it.

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
