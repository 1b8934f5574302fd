CREATE TABLE approval_decisions (
	request_id VARCHAR(64) NOT NULL, 
	reviewer VARCHAR(256) NOT NULL, 
	decision VARCHAR(16) NOT NULL, 
	comment TEXT, 
	decided_at BIGINT NOT NULL, 
	PRIMARY KEY (request_id, reviewer)
);

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

CREATE INDEX ix_approval_intents_dedup ON approval_intents (principal_digest, tool_name, arguments_digest);

CREATE INDEX ix_approval_intents_handle ON approval_intents (handle);

CREATE INDEX ix_approval_intents_rate ON approval_intents (principal_digest, created_at);

CREATE INDEX ix_approval_intents_state ON approval_intents (state);

CREATE UNIQUE INDEX ix_approval_intents_task ON approval_intents (task_id, generation);

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
	version INTEGER NOT NULL, 
	PRIMARY KEY (request_id), 
	UNIQUE (idempotency_key)
);

CREATE INDEX ix_approval_requests_status ON approval_requests (status, created_at);

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
	version INTEGER NOT NULL, 
	PRIMARY KEY (task_id)
);

CREATE INDEX ix_approval_workflows_dedup ON approval_workflows (principal_digest, tool_name, arguments_digest);

CREATE INDEX ix_approval_workflows_due ON approval_workflows (phase, next_check_at);

CREATE INDEX ix_approval_workflows_pending ON approval_workflows (principal_digest, phase);

CREATE TABLE arap_approvals (
	approval_id VARCHAR(64) NOT NULL, 
	task_id VARCHAR(64) NOT NULL, 
	binding_hash VARCHAR(64) NOT NULL, 
	members_json TEXT NOT NULL, 
	approved_at BIGINT NOT NULL, 
	approved_until BIGINT NOT NULL, 
	state TEXT NOT NULL, 
	revoked_at BIGINT, 
	PRIMARY KEY (approval_id), 
	UNIQUE (task_id)
);

CREATE TABLE arap_evaluations (
	evaluation_id VARCHAR(64) NOT NULL, 
	binding_hash VARCHAR(64) NOT NULL, 
	members_json TEXT NOT NULL, 
	template VARCHAR(256), 
	display_json TEXT, 
	expires_at BIGINT NOT NULL, 
	created_at BIGINT NOT NULL, 
	PRIMARY KEY (evaluation_id)
);

CREATE INDEX ix_arap_evaluations_expires_at ON arap_evaluations (expires_at);

CREATE TABLE arap_jti (
	jti VARCHAR(256) NOT NULL, 
	expires_at BIGINT NOT NULL, 
	PRIMARY KEY (jti)
);

CREATE INDEX ix_arap_jti_expires_at ON arap_jti (expires_at);

CREATE TABLE arap_tasks (
	task_id VARCHAR(64) NOT NULL, 
	caller VARCHAR(256) NOT NULL, 
	idempotency_key VARCHAR(256), 
	body_digest VARCHAR(64) NOT NULL, 
	request_id VARCHAR(64) NOT NULL, 
	binding_hash VARCHAR(64) NOT NULL, 
	members_json TEXT NOT NULL, 
	evaluation_id VARCHAR(64), 
	callback_endpoint TEXT, 
	callback_state TEXT, 
	created_at BIGINT NOT NULL, 
	expires_at BIGINT NOT NULL, 
	retain_until BIGINT NOT NULL, 
	PRIMARY KEY (task_id), 
	UNIQUE (request_id)
);

CREATE UNIQUE INDEX ix_arap_tasks_idempotency ON arap_tasks (caller, idempotency_key);

CREATE TABLE audit_events (
	event_id INTEGER NOT NULL, 
	at BIGINT NOT NULL, 
	kind VARCHAR(64) NOT NULL, 
	subject VARCHAR(128), 
	actor VARCHAR(256), 
	data_json TEXT NOT NULL, 
	PRIMARY KEY (event_id)
);

CREATE INDEX ix_audit_events_subject ON audit_events (subject, event_id);

CREATE TABLE schema_version (
	version INTEGER NOT NULL, 
	applied_at BIGINT NOT NULL, 
	PRIMARY KEY (version)
);

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
	version INTEGER NOT NULL, 
	handler VARCHAR(32), 
	meta_json TEXT, 
	PRIMARY KEY (task_id)
);

CREATE INDEX ix_tasks_expires_at ON tasks (expires_at);

CREATE INDEX ix_tasks_lease ON tasks (lease_expires_at);

CREATE INDEX ix_tasks_owner ON tasks (owner);

CREATE INDEX ix_tasks_principal_status ON tasks (principal_digest, status);

CREATE INDEX ix_tasks_status ON tasks (status);
