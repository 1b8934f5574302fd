-- object table alembic_version_approval
CREATE TABLE alembic_version_approval (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_approval_pkc PRIMARY KEY (version_num)
);

-- object table alembic_version_audit
CREATE TABLE alembic_version_audit (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_audit_pkc PRIMARY KEY (version_num)
);

-- object table alembic_version_local_backend
CREATE TABLE alembic_version_local_backend (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_local_backend_pkc PRIMARY KEY (version_num)
);

-- object table alembic_version_shared
CREATE TABLE alembic_version_shared (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_shared_pkc PRIMARY KEY (version_num)
);

-- object table alembic_version_tasks
CREATE TABLE alembic_version_tasks (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_tasks_pkc PRIMARY KEY (version_num)
);

-- object table approval_counts
CREATE TABLE approval_counts (
	id INTEGER NOT NULL, 
	scope VARCHAR(100) NOT NULL, 
	delta BIGINT NOT NULL, 
	PRIMARY KEY (id)
);

-- object table approval_decisions
CREATE TABLE approval_decisions (
	request_id VARCHAR(64) NOT NULL, 
	reviewer VARCHAR(256) NOT NULL, 
	decision VARCHAR(16) NOT NULL, 
	comment TEXT, 
	decided_at BIGINT NOT NULL, 
	PRIMARY KEY (request_id, reviewer)
);

-- object table approval_intents
CREATE TABLE approval_intents (
	idempotency_key VARCHAR(64) NOT NULL, 
	task_id VARCHAR(64) NOT NULL, 
	generation INTEGER NOT NULL, 
	principal_digest VARCHAR(64) NOT NULL, 
	tool_name VARCHAR(256) NOT NULL, 
	arguments_digest VARCHAR(64) NOT NULL, 
	body_ciphertext TEXT NOT NULL, 
	key_id VARCHAR(64) NOT NULL, 
	state VARCHAR(16) NOT NULL, 
	handle VARCHAR(512), 
	created_at BIGINT NOT NULL, 
	updated_at BIGINT NOT NULL, 
	PRIMARY KEY (idempotency_key)
);

-- object table approval_requests
CREATE TABLE approval_requests (
	request_id VARCHAR(64) NOT NULL, 
	idempotency_key VARCHAR(64) NOT NULL, 
	body_digest VARCHAR(64) NOT NULL, 
	body_json TEXT NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	tool_name VARCHAR(256) NOT NULL, 
	requester VARCHAR(256) NOT NULL, 
	template VARCHAR(256), 
	approvals_required INTEGER NOT NULL, 
	created_at BIGINT NOT NULL, 
	expires_at BIGINT, 
	approved_until BIGINT, 
	decided_at BIGINT, 
	updated_at BIGINT NOT NULL, 
	version INTEGER NOT NULL, content_seal TEXT, 
	PRIMARY KEY (request_id), 
	UNIQUE (idempotency_key)
);

-- object table approval_workflows
CREATE TABLE approval_workflows (
	task_id VARCHAR(64) NOT NULL, 
	principal_digest VARCHAR(64) NOT NULL, 
	tool_name VARCHAR(256) NOT NULL, 
	arguments_digest VARCHAR(64) NOT NULL, 
	binding_ciphertext TEXT, 
	key_id VARCHAR(64) NOT NULL, 
	tool_fingerprint VARCHAR(64), 
	phase VARCHAR(16) NOT NULL, 
	generation INTEGER NOT NULL, 
	backend VARCHAR(64) NOT NULL, 
	handle VARCHAR(512), 
	template VARCHAR(256), 
	request_deadline BIGINT, 
	approval_expires_at BIGINT, 
	next_check_at BIGINT NOT NULL, 
	attempts INTEGER NOT NULL, 
	lease_owner VARCHAR(64), 
	lease_expires_at BIGINT, 
	execution_deadline BIGINT, 
	disposition VARCHAR(32), 
	created_at BIGINT NOT NULL, 
	updated_at BIGINT NOT NULL, 
	version INTEGER NOT NULL, owed_to_retry INTEGER, 
	PRIMARY KEY (task_id)
);

-- object table audit_chain_head
CREATE TABLE audit_chain_head (
	id INTEGER NOT NULL, 
	seq BIGINT NOT NULL, 
	hash VARCHAR(64) NOT NULL, 
	PRIMARY KEY (id)
);

-- object table audit_delivery_cursors
CREATE TABLE audit_delivery_cursors (
	consumer VARCHAR(128) NOT NULL, 
	last_seq BIGINT NOT NULL, 
	attempts INTEGER NOT NULL, 
	next_attempt_at BIGINT NOT NULL, 
	lease_owner VARCHAR(64), 
	lease_expires_at BIGINT, 
	delivered BIGINT NOT NULL, 
	failures BIGINT NOT NULL, 
	last_error TEXT, 
	updated_at BIGINT NOT NULL, 
	PRIMARY KEY (consumer)
);

-- object table audit_events
CREATE TABLE audit_events (
	event_id INTEGER NOT NULL, 
	at BIGINT NOT NULL, 
	kind VARCHAR(64) NOT NULL, 
	subject VARCHAR(128), 
	actor VARCHAR(256), 
	data_json TEXT NOT NULL, seq BIGINT, prev_hash VARCHAR(64), hash VARCHAR(64), 
	PRIMARY KEY (event_id)
);

-- object table console_sessions
CREATE TABLE console_sessions (
	session_key VARCHAR(64) NOT NULL, 
	principal VARCHAR(256) NOT NULL, 
	sealed_token TEXT NOT NULL, 
	csrf VARCHAR(64) NOT NULL, 
	created_ms BIGINT NOT NULL, 
	seen_ms BIGINT NOT NULL, 
	flashes_json TEXT NOT NULL, 
	PRIMARY KEY (session_key)
);

-- object table rate_events
CREATE TABLE rate_events (
	event_id INTEGER NOT NULL, 
	"key" VARCHAR(320) NOT NULL, 
	at BIGINT NOT NULL, 
	PRIMARY KEY (event_id)
);

-- object table seen_once
CREATE TABLE seen_once (
	digest VARCHAR(64) NOT NULL, 
	expires_at BIGINT NOT NULL, 
	PRIMARY KEY (digest)
);

-- object table task_counts
CREATE TABLE task_counts (
	id INTEGER NOT NULL, 
	scope VARCHAR(100) NOT NULL, 
	delta BIGINT NOT NULL, 
	PRIMARY KEY (id)
);

-- object table task_workers
CREATE TABLE task_workers (
	worker_id VARCHAR(64) NOT NULL, 
	lease_expires_at BIGINT NOT NULL, 
	PRIMARY KEY (worker_id)
);

-- object table tasks
CREATE TABLE tasks (
	task_id VARCHAR(64) NOT NULL, 
	principal_digest VARCHAR(64), 
	tool_name VARCHAR(256) NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	status_message TEXT, 
	created_at BIGINT NOT NULL, 
	updated_at BIGINT NOT NULL, 
	ttl_ms BIGINT, 
	expires_at BIGINT, 
	poll_interval_ms BIGINT, 
	result_json TEXT, 
	error_json TEXT, 
	input_requests_json TEXT NOT NULL, 
	input_responses_json TEXT NOT NULL, 
	input_seq INTEGER NOT NULL, 
	cancel_requested BOOLEAN NOT NULL, 
	owner VARCHAR(64), 
	lease_expires_at BIGINT, 
	version INTEGER NOT NULL, handler VARCHAR(32), meta_json TEXT, 
	PRIMARY KEY (task_id)
);

-- object index ix_approval_counts_scope
CREATE INDEX ix_approval_counts_scope ON approval_counts (scope, delta);

-- object trigger approval_count_approval_intents_insert
CREATE TRIGGER approval_count_approval_intents_insert AFTER INSERT ON approval_intents BEGIN INSERT INTO approval_counts (scope, delta) VALUES ('rate:' || NEW.principal_digest || ':' || printf('%012d', NEW.created_at / 60000), 1); END;

-- object index ix_approval_intents_dedup
CREATE INDEX ix_approval_intents_dedup ON approval_intents (principal_digest, tool_name, arguments_digest);

-- object index ix_approval_intents_handle
CREATE INDEX ix_approval_intents_handle ON approval_intents (handle);

-- object index ix_approval_intents_rate
CREATE INDEX ix_approval_intents_rate ON approval_intents (principal_digest, created_at);

-- object index ix_approval_intents_state
CREATE INDEX ix_approval_intents_state ON approval_intents (state);

-- object index ix_approval_intents_task
CREATE UNIQUE INDEX ix_approval_intents_task ON approval_intents (task_id, generation);

-- object index ix_approval_requests_changed
CREATE INDEX ix_approval_requests_changed ON approval_requests (status, updated_at);

-- object index ix_approval_requests_status
CREATE INDEX ix_approval_requests_status ON approval_requests (status, created_at);

-- object trigger approval_count_pending_delete
CREATE TRIGGER approval_count_pending_delete AFTER DELETE ON approval_workflows WHEN OLD.phase = 'pending' BEGIN INSERT INTO approval_counts (scope, delta) SELECT 'pending:' || OLD.principal_digest, -1 WHERE OLD.principal_digest IS NOT NULL; END;

-- object trigger approval_count_pending_insert
CREATE TRIGGER approval_count_pending_insert AFTER INSERT ON approval_workflows WHEN NEW.phase = 'pending' BEGIN INSERT INTO approval_counts (scope, delta) SELECT 'pending:' || NEW.principal_digest, 1 WHERE NEW.principal_digest IS NOT NULL; END;

-- object trigger approval_count_pending_update
CREATE TRIGGER approval_count_pending_update AFTER UPDATE OF phase ON approval_workflows WHEN (OLD.phase = 'pending') <> (NEW.phase = 'pending') BEGIN INSERT INTO approval_counts (scope, delta) SELECT 'pending:' || NEW.principal_digest, CASE WHEN NEW.phase = 'pending' THEN 1 ELSE -1 END WHERE NEW.principal_digest IS NOT NULL; END;

-- object index ix_approval_workflows_dedup
CREATE INDEX ix_approval_workflows_dedup ON approval_workflows (principal_digest, tool_name, arguments_digest);

-- object index ix_approval_workflows_due
CREATE INDEX ix_approval_workflows_due ON approval_workflows (phase, next_check_at);

-- object index ix_approval_workflows_pending
CREATE INDEX ix_approval_workflows_pending ON approval_workflows (principal_digest, phase);

-- object index ix_audit_events_subject
CREATE INDEX ix_audit_events_subject ON audit_events (subject, event_id);

-- object index ux_audit_events_seq
CREATE UNIQUE INDEX ux_audit_events_seq ON audit_events (seq);

-- object index ix_console_sessions_seen
CREATE INDEX ix_console_sessions_seen ON console_sessions (seen_ms);

-- object index ix_rate_events_at
CREATE INDEX ix_rate_events_at ON rate_events (at);

-- object index ix_rate_events_key_at
CREATE INDEX ix_rate_events_key_at ON rate_events ("key", at);

-- object index ix_seen_once_expires_at
CREATE INDEX ix_seen_once_expires_at ON seen_once (expires_at);

-- object index ix_task_counts_scope
CREATE INDEX ix_task_counts_scope ON task_counts (scope, delta);

-- object index ix_task_workers_lease
CREATE INDEX ix_task_workers_lease ON task_workers (lease_expires_at);

-- object index ix_tasks_expires_at
CREATE INDEX ix_tasks_expires_at ON tasks (expires_at);

-- object index ix_tasks_lease
CREATE INDEX ix_tasks_lease ON tasks (lease_expires_at);

-- object index ix_tasks_owner_lease
CREATE INDEX ix_tasks_owner_lease ON tasks (owner, lease_expires_at);

-- object index ix_tasks_owner_signals
CREATE INDEX ix_tasks_owner_signals ON tasks (owner) WHERE cancel_requested OR input_responses_json <> '{}';

-- object index ix_tasks_principal_status
CREATE INDEX ix_tasks_principal_status ON tasks (principal_digest, status);

-- object index ix_tasks_status
CREATE INDEX ix_tasks_status ON tasks (status);

-- object trigger task_counts_delete
CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks WHEN OLD.status IN ('input_required', 'working') BEGIN INSERT INTO task_counts (scope, delta) SELECT 'tasks', -1 UNION ALL SELECT 'tasks:' || OLD.principal_digest, -1 WHERE OLD.principal_digest IS NOT NULL; END;

-- object trigger task_counts_insert
CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks WHEN NEW.status IN ('input_required', 'working') BEGIN INSERT INTO task_counts (scope, delta) SELECT 'tasks', 1 UNION ALL SELECT 'tasks:' || NEW.principal_digest, 1 WHERE NEW.principal_digest IS NOT NULL; END;

-- object trigger task_counts_update
CREATE TRIGGER task_counts_update AFTER UPDATE OF status ON tasks WHEN (OLD.status IN ('input_required', 'working')) <> (NEW.status IN ('input_required', 'working')) BEGIN INSERT INTO task_counts (scope, delta) SELECT 'tasks', CASE WHEN NEW.status IN ('input_required', 'working') THEN 1 ELSE -1 END UNION ALL SELECT 'tasks:' || NEW.principal_digest, CASE WHEN NEW.status IN ('input_required', 'working') THEN 1 ELSE -1 END WHERE NEW.principal_digest IS NOT NULL; END;