-- object function approval_count_approval_intents()
CREATE FUNCTION approval_count_approval_intents() RETURNS trigger
    LANGUAGE plpgsql
    AS $$ BEGIN INSERT INTO approval_counts (scope, delta) VALUES ('rate:' || NEW.principal_digest || ':' || lpad((NEW.created_at / 60000)::text, 12, '0'), 1); RETURN NULL; END $$;

-- object function approval_count_pending()
CREATE FUNCTION approval_count_pending() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
            DECLARE
                before_pending boolean := false;
                after_pending boolean := false;
                r approval_workflows%ROWTYPE;
            BEGIN
                IF TG_OP <> 'INSERT' THEN before_pending := OLD.phase = 'pending'; r := OLD; END IF;
                IF TG_OP <> 'DELETE' THEN after_pending := NEW.phase = 'pending'; r := NEW; END IF;
                IF before_pending <> after_pending AND r.principal_digest IS NOT NULL THEN
                    INSERT INTO approval_counts (scope, delta)
                    VALUES ('pending:' || r.principal_digest, CASE WHEN after_pending THEN 1 ELSE -1 END);
                END IF;
                RETURN NULL;
            END $$;

-- object function task_counts_delta()
CREATE FUNCTION task_counts_delta() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  before_active boolean := false;
  after_active boolean := false;
  d integer;
  r tasks%ROWTYPE;
BEGIN
  IF TG_OP <> 'INSERT' THEN before_active := OLD.status IN ('input_required', 'working'); r := OLD; END IF;
  IF TG_OP <> 'DELETE' THEN after_active := NEW.status IN ('input_required', 'working'); r := NEW; END IF;
  IF before_active = after_active THEN RETURN NULL; END IF;
  d := CASE WHEN after_active THEN 1 ELSE -1 END;
  INSERT INTO task_counts (scope, delta) VALUES ('tasks', d);
  IF r.principal_digest IS NOT NULL THEN
    INSERT INTO task_counts (scope, delta) VALUES ('tasks:' || r.principal_digest, d);
  END IF;
  RETURN NULL;
END $$;

-- object table alembic_version_approval
CREATE TABLE alembic_version_approval (
    version_num character varying(32) NOT NULL
);

-- object table alembic_version_audit
CREATE TABLE alembic_version_audit (
    version_num character varying(32) NOT NULL
);

-- object table alembic_version_local_backend
CREATE TABLE alembic_version_local_backend (
    version_num character varying(32) NOT NULL
);

-- object table alembic_version_shared
CREATE TABLE alembic_version_shared (
    version_num character varying(32) NOT NULL
);

-- object table alembic_version_tasks
CREATE TABLE alembic_version_tasks (
    version_num character varying(32) NOT NULL
);

-- object table approval_counts
CREATE TABLE approval_counts (
    id integer NOT NULL,
    scope character varying(100) NOT NULL,
    delta bigint NOT NULL
);

-- object sequence approval_counts_id_seq
CREATE SEQUENCE approval_counts_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

-- object sequence_owned_by approval_counts_id_seq
ALTER SEQUENCE approval_counts_id_seq OWNED BY approval_counts.id;

-- object table approval_decisions
CREATE TABLE approval_decisions (
    request_id character varying(64) NOT NULL,
    reviewer character varying(256) NOT NULL,
    decision character varying(16) NOT NULL,
    comment text,
    decided_at bigint NOT NULL
);

-- object table approval_intents
CREATE TABLE approval_intents (
    idempotency_key character varying(64) NOT NULL,
    task_id character varying(64) NOT NULL,
    generation integer NOT NULL,
    principal_digest character varying(64) NOT NULL,
    tool_name character varying(256) NOT NULL,
    arguments_digest character varying(64) NOT NULL,
    body_ciphertext text NOT NULL,
    key_id character varying(64) NOT NULL,
    state character varying(16) NOT NULL,
    handle character varying(512),
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
);

-- object table approval_requests
CREATE TABLE approval_requests (
    request_id character varying(64) NOT NULL,
    idempotency_key character varying(64) NOT NULL,
    body_digest character varying(64) NOT NULL,
    body_json text NOT NULL,
    status character varying(16) NOT NULL,
    tool_name character varying(256) NOT NULL,
    requester character varying(256) NOT NULL,
    template character varying(256),
    approvals_required integer NOT NULL,
    created_at bigint NOT NULL,
    expires_at bigint,
    approved_until bigint,
    decided_at bigint,
    updated_at bigint NOT NULL,
    version integer NOT NULL,
    content_seal text
);

-- object table approval_workflows
CREATE TABLE approval_workflows (
    task_id character varying(64) NOT NULL,
    principal_digest character varying(64) NOT NULL,
    tool_name character varying(256) NOT NULL,
    arguments_digest character varying(64) NOT NULL,
    binding_ciphertext text,
    key_id character varying(64) NOT NULL,
    tool_fingerprint character varying(64),
    phase character varying(16) NOT NULL,
    generation integer NOT NULL,
    backend character varying(64) NOT NULL,
    handle character varying(512),
    template character varying(256),
    request_deadline bigint,
    approval_expires_at bigint,
    next_check_at bigint NOT NULL,
    attempts integer NOT NULL,
    lease_owner character varying(64),
    lease_expires_at bigint,
    execution_deadline bigint,
    disposition character varying(32),
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    version integer NOT NULL,
    owed_to_retry integer
);

-- object table audit_chain_head
CREATE TABLE audit_chain_head (
    id integer NOT NULL,
    seq bigint NOT NULL,
    hash character varying(64) NOT NULL
);

-- object table audit_delivery_cursors
CREATE TABLE audit_delivery_cursors (
    consumer character varying(128) NOT NULL,
    last_seq bigint NOT NULL,
    attempts integer NOT NULL,
    next_attempt_at bigint NOT NULL,
    lease_owner character varying(64),
    lease_expires_at bigint,
    delivered bigint NOT NULL,
    failures bigint NOT NULL,
    last_error text,
    updated_at bigint NOT NULL
);

-- object table audit_events
CREATE TABLE audit_events (
    event_id integer NOT NULL,
    at bigint NOT NULL,
    kind character varying(64) NOT NULL,
    subject character varying(128),
    actor character varying(256),
    data_json text NOT NULL,
    seq bigint,
    prev_hash character varying(64),
    hash character varying(64)
);

-- object sequence audit_events_event_id_seq
CREATE SEQUENCE audit_events_event_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

-- object sequence_owned_by audit_events_event_id_seq
ALTER SEQUENCE audit_events_event_id_seq OWNED BY audit_events.event_id;

-- object table console_sessions
CREATE TABLE console_sessions (
    session_key character varying(64) NOT NULL,
    principal character varying(256) NOT NULL,
    sealed_token text NOT NULL,
    csrf character varying(64) NOT NULL,
    created_ms bigint NOT NULL,
    seen_ms bigint NOT NULL,
    flashes_json text NOT NULL
);

-- object table rate_events
CREATE TABLE rate_events (
    event_id integer NOT NULL,
    key character varying(320) NOT NULL,
    at bigint NOT NULL
);

-- object sequence rate_events_event_id_seq
CREATE SEQUENCE rate_events_event_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

-- object sequence_owned_by rate_events_event_id_seq
ALTER SEQUENCE rate_events_event_id_seq OWNED BY rate_events.event_id;

-- object table seen_once
CREATE TABLE seen_once (
    digest character varying(64) NOT NULL,
    expires_at bigint NOT NULL
);

-- object table task_counts
CREATE TABLE task_counts (
    id integer NOT NULL,
    scope character varying(100) NOT NULL,
    delta bigint NOT NULL
);

-- object sequence task_counts_id_seq
CREATE SEQUENCE task_counts_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

-- object sequence_owned_by task_counts_id_seq
ALTER SEQUENCE task_counts_id_seq OWNED BY task_counts.id;

-- object table task_workers
CREATE TABLE task_workers (
    worker_id character varying(64) NOT NULL,
    lease_expires_at bigint NOT NULL
);

-- object table tasks
CREATE TABLE tasks (
    task_id character varying(64) NOT NULL,
    principal_digest character varying(64),
    tool_name character varying(256) NOT NULL,
    status character varying(16) NOT NULL,
    status_message text,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    ttl_ms bigint,
    expires_at bigint,
    poll_interval_ms bigint,
    result_json text,
    error_json text,
    input_requests_json text NOT NULL,
    input_responses_json text NOT NULL,
    input_seq integer NOT NULL,
    cancel_requested boolean NOT NULL,
    owner character varying(64),
    lease_expires_at bigint,
    version integer NOT NULL,
    handler character varying(32),
    meta_json text
);

-- object default approval_counts.id
ALTER TABLE ONLY approval_counts ALTER COLUMN id SET DEFAULT nextval('approval_counts_id_seq'::regclass);

-- object default audit_events.event_id
ALTER TABLE ONLY audit_events ALTER COLUMN event_id SET DEFAULT nextval('audit_events_event_id_seq'::regclass);

-- object default rate_events.event_id
ALTER TABLE ONLY rate_events ALTER COLUMN event_id SET DEFAULT nextval('rate_events_event_id_seq'::regclass);

-- object default task_counts.id
ALTER TABLE ONLY task_counts ALTER COLUMN id SET DEFAULT nextval('task_counts_id_seq'::regclass);

-- object constraint alembic_version_approval.alembic_version_approval_pkc
ALTER TABLE ONLY alembic_version_approval
    ADD CONSTRAINT alembic_version_approval_pkc PRIMARY KEY (version_num);

-- object constraint alembic_version_audit.alembic_version_audit_pkc
ALTER TABLE ONLY alembic_version_audit
    ADD CONSTRAINT alembic_version_audit_pkc PRIMARY KEY (version_num);

-- object constraint alembic_version_local_backend.alembic_version_local_backend_pkc
ALTER TABLE ONLY alembic_version_local_backend
    ADD CONSTRAINT alembic_version_local_backend_pkc PRIMARY KEY (version_num);

-- object constraint alembic_version_shared.alembic_version_shared_pkc
ALTER TABLE ONLY alembic_version_shared
    ADD CONSTRAINT alembic_version_shared_pkc PRIMARY KEY (version_num);

-- object constraint alembic_version_tasks.alembic_version_tasks_pkc
ALTER TABLE ONLY alembic_version_tasks
    ADD CONSTRAINT alembic_version_tasks_pkc PRIMARY KEY (version_num);

-- object constraint approval_counts.approval_counts_pkey
ALTER TABLE ONLY approval_counts
    ADD CONSTRAINT approval_counts_pkey PRIMARY KEY (id);

-- object constraint approval_decisions.approval_decisions_pkey
ALTER TABLE ONLY approval_decisions
    ADD CONSTRAINT approval_decisions_pkey PRIMARY KEY (request_id, reviewer);

-- object constraint approval_intents.approval_intents_pkey
ALTER TABLE ONLY approval_intents
    ADD CONSTRAINT approval_intents_pkey PRIMARY KEY (idempotency_key);

-- object constraint approval_requests.approval_requests_idempotency_key_key
ALTER TABLE ONLY approval_requests
    ADD CONSTRAINT approval_requests_idempotency_key_key UNIQUE (idempotency_key);

-- object constraint approval_requests.approval_requests_pkey
ALTER TABLE ONLY approval_requests
    ADD CONSTRAINT approval_requests_pkey PRIMARY KEY (request_id);

-- object constraint approval_workflows.approval_workflows_pkey
ALTER TABLE ONLY approval_workflows
    ADD CONSTRAINT approval_workflows_pkey PRIMARY KEY (task_id);

-- object constraint audit_chain_head.audit_chain_head_pkey
ALTER TABLE ONLY audit_chain_head
    ADD CONSTRAINT audit_chain_head_pkey PRIMARY KEY (id);

-- object constraint audit_delivery_cursors.audit_delivery_cursors_pkey
ALTER TABLE ONLY audit_delivery_cursors
    ADD CONSTRAINT audit_delivery_cursors_pkey PRIMARY KEY (consumer);

-- object constraint audit_events.audit_events_pkey
ALTER TABLE ONLY audit_events
    ADD CONSTRAINT audit_events_pkey PRIMARY KEY (event_id);

-- object constraint console_sessions.console_sessions_pkey
ALTER TABLE ONLY console_sessions
    ADD CONSTRAINT console_sessions_pkey PRIMARY KEY (session_key);

-- object constraint rate_events.rate_events_pkey
ALTER TABLE ONLY rate_events
    ADD CONSTRAINT rate_events_pkey PRIMARY KEY (event_id);

-- object constraint seen_once.seen_once_pkey
ALTER TABLE ONLY seen_once
    ADD CONSTRAINT seen_once_pkey PRIMARY KEY (digest);

-- object constraint task_counts.task_counts_pkey
ALTER TABLE ONLY task_counts
    ADD CONSTRAINT task_counts_pkey PRIMARY KEY (id);

-- object constraint task_workers.task_workers_pkey
ALTER TABLE ONLY task_workers
    ADD CONSTRAINT task_workers_pkey PRIMARY KEY (worker_id);

-- object constraint tasks.tasks_pkey
ALTER TABLE ONLY tasks
    ADD CONSTRAINT tasks_pkey PRIMARY KEY (task_id);

-- object index ix_approval_counts_scope
CREATE INDEX ix_approval_counts_scope ON approval_counts USING btree (scope, delta);

-- object index ix_approval_intents_dedup
CREATE INDEX ix_approval_intents_dedup ON approval_intents USING btree (principal_digest, tool_name, arguments_digest);

-- object index ix_approval_intents_handle
CREATE INDEX ix_approval_intents_handle ON approval_intents USING btree (handle);

-- object index ix_approval_intents_rate
CREATE INDEX ix_approval_intents_rate ON approval_intents USING btree (principal_digest, created_at);

-- object index ix_approval_intents_state
CREATE INDEX ix_approval_intents_state ON approval_intents USING btree (state);

-- object index ix_approval_intents_task
CREATE UNIQUE INDEX ix_approval_intents_task ON approval_intents USING btree (task_id, generation);

-- object index ix_approval_requests_changed
CREATE INDEX ix_approval_requests_changed ON approval_requests USING btree (status, updated_at);

-- object index ix_approval_requests_status
CREATE INDEX ix_approval_requests_status ON approval_requests USING btree (status, created_at);

-- object index ix_approval_workflows_dedup
CREATE INDEX ix_approval_workflows_dedup ON approval_workflows USING btree (principal_digest, tool_name, arguments_digest);

-- object index ix_approval_workflows_due
CREATE INDEX ix_approval_workflows_due ON approval_workflows USING btree (phase, next_check_at);

-- object index ix_approval_workflows_pending
CREATE INDEX ix_approval_workflows_pending ON approval_workflows USING btree (principal_digest, phase);

-- object index ix_audit_events_subject
CREATE INDEX ix_audit_events_subject ON audit_events USING btree (subject, event_id);

-- object index ix_console_sessions_seen
CREATE INDEX ix_console_sessions_seen ON console_sessions USING btree (seen_ms);

-- object index ix_rate_events_at
CREATE INDEX ix_rate_events_at ON rate_events USING btree (at);

-- object index ix_rate_events_key_at
CREATE INDEX ix_rate_events_key_at ON rate_events USING btree (key, at);

-- object index ix_seen_once_expires_at
CREATE INDEX ix_seen_once_expires_at ON seen_once USING btree (expires_at);

-- object index ix_task_counts_scope
CREATE INDEX ix_task_counts_scope ON task_counts USING btree (scope, delta);

-- object index ix_task_workers_lease
CREATE INDEX ix_task_workers_lease ON task_workers USING btree (lease_expires_at);

-- object index ix_tasks_expires_at
CREATE INDEX ix_tasks_expires_at ON tasks USING btree (expires_at);

-- object index ix_tasks_lease
CREATE INDEX ix_tasks_lease ON tasks USING btree (lease_expires_at);

-- object index ix_tasks_owner_lease
CREATE INDEX ix_tasks_owner_lease ON tasks USING btree (owner, lease_expires_at);

-- object index ix_tasks_owner_signals
CREATE INDEX ix_tasks_owner_signals ON tasks USING btree (owner) WHERE (cancel_requested OR (input_responses_json <> '{}'::text));

-- object index ix_tasks_principal_status
CREATE INDEX ix_tasks_principal_status ON tasks USING btree (principal_digest, status);

-- object index ix_tasks_status
CREATE INDEX ix_tasks_status ON tasks USING btree (status);

-- object index ux_audit_events_seq
CREATE UNIQUE INDEX ux_audit_events_seq ON audit_events USING btree (seq);

-- object trigger approval_intents.approval_count_approval_intents_insert
CREATE TRIGGER approval_count_approval_intents_insert AFTER INSERT ON approval_intents FOR EACH ROW EXECUTE FUNCTION approval_count_approval_intents();

-- object trigger approval_workflows.approval_count_pending
CREATE TRIGGER approval_count_pending AFTER INSERT OR DELETE OR UPDATE OF phase ON approval_workflows FOR EACH ROW EXECUTE FUNCTION approval_count_pending();

-- object trigger tasks.task_counts_delta
CREATE TRIGGER task_counts_delta AFTER INSERT OR DELETE OR UPDATE OF status ON tasks FOR EACH ROW EXECUTE FUNCTION task_counts_delta();
