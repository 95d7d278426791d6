-- The whole schema as of SQLite's migration 0015, in PostgreSQL's dialect: PostgreSQL support
-- began there, so its first migration carries that number and every later one is numbered like
-- its SQLite twin in migrations/. Times are milliseconds (or seconds, where a column says so)
-- since the epoch, in bigint as in SQLite; each table and column means what the SQLite
-- migrations' comments say it means.

CREATE TABLE users (
    id               TEXT PRIMARY KEY,
    name             TEXT COLLATE "C" NOT NULL UNIQUE,
    created_at       BIGINT NOT NULL,
    password_hash    TEXT,
    password_set_at  BIGINT,
    network          TEXT CHECK (network IN ('none', 'allowlist', 'public'))
);

CREATE TABLE tokens (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    hash          TEXT NOT NULL UNIQUE,
    prefix        TEXT NOT NULL,
    label         TEXT NOT NULL DEFAULT '',
    created_at    BIGINT NOT NULL,
    last_used_at  BIGINT,
    revoked_at    BIGINT
);
CREATE INDEX tokens_user ON tokens(user_id, created_at);

CREATE TABLE sandboxes (
    id            TEXT PRIMARY KEY,
    user_id       TEXT REFERENCES users(id) ON DELETE CASCADE,
    session_id    TEXT,
    template      TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('stopped', 'running')),
    init_pid      BIGINT,
    init_start    BIGINT,
    cgroup        TEXT,
    created_at    BIGINT NOT NULL,
    started_at    BIGINT,
    last_used_at  BIGINT,
    id_slot       BIGINT
);
CREATE UNIQUE INDEX sandboxes_user_default ON sandboxes(user_id) WHERE session_id IS NULL;
CREATE UNIQUE INDEX sandboxes_session ON sandboxes(session_id) WHERE session_id IS NOT NULL;
CREATE INDEX sandboxes_state ON sandboxes(state);
CREATE UNIQUE INDEX sandboxes_id_slot ON sandboxes(id_slot) WHERE id_slot IS NOT NULL;
CREATE INDEX sandboxes_unowned ON sandboxes(id) WHERE user_id IS NULL;

CREATE TABLE proxy_tokens (
    jti            TEXT PRIMARY KEY,
    user_id        TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    run_id         TEXT,
    session_id     TEXT,
    sandbox_id     TEXT,
    services       TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    expires_at     BIGINT NOT NULL,
    revoked_at     BIGINT,
    requests       BIGINT NOT NULL DEFAULT 0,
    input_tokens   BIGINT NOT NULL DEFAULT 0,
    output_tokens  BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX proxy_tokens_run ON proxy_tokens(run_id) WHERE run_id IS NOT NULL;

CREATE TABLE sessions (
    id               TEXT PRIMARY KEY,
    user_id          TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    agent            TEXT NOT NULL,
    agent_session    TEXT,
    repository       TEXT,
    created_at       BIGINT NOT NULL,
    last_run_at      BIGINT NOT NULL,
    cleaned_at       BIGINT,
    view_generation  BIGINT NOT NULL DEFAULT 0,
    work_branch      TEXT,
    base_branch      TEXT,
    pr_number        BIGINT,
    pr_url           TEXT
);
CREATE INDEX sessions_user ON sessions(user_id);
CREATE INDEX sessions_last_run ON sessions(last_run_at) WHERE cleaned_at IS NULL;

CREATE TABLE runs (
    n                BIGSERIAL PRIMARY KEY,
    id               TEXT NOT NULL UNIQUE,
    user_id          TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    session_id       TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    status           TEXT NOT NULL
                     CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    status_reason    TEXT,
    task             TEXT NOT NULL,
    title            TEXT,
    model            TEXT NOT NULL,
    agent            TEXT NOT NULL,
    repository       TEXT,
    branch           TEXT,
    workdir          TEXT,
    timeout_ms       BIGINT NOT NULL,
    created_at       BIGINT NOT NULL,
    started_at       BIGINT,
    finished_at      BIGINT,
    base_commit      TEXT,
    agent_pid        BIGINT,
    events_offset    BIGINT NOT NULL DEFAULT 0,
    event_count      BIGINT NOT NULL DEFAULT 0,
    exit_code        BIGINT,
    success          BIGINT,
    summary          TEXT,
    error            TEXT,
    changes          TEXT,
    input_tokens     BIGINT NOT NULL DEFAULT 0,
    output_tokens    BIGINT NOT NULL DEFAULT 0,
    cost             DOUBLE PRECISION NOT NULL DEFAULT 0,
    view_generation  BIGINT NOT NULL DEFAULT 0,
    network          TEXT CHECK (network IN ('none', 'allowlist', 'public')),
    diff             TEXT,
    pull_request     TEXT CHECK (pull_request IN ('none', 'draft', 'ready')),
    delivery         TEXT,
    phase            TEXT CHECK (phase IN ('queued', 'preparing', 'cloning', 'agent', 'finishing',
                                           'delivering', 'succeeded', 'failed', 'cancelled')),
    phase_step       BIGINT NOT NULL DEFAULT 0,
    phase_detail     TEXT,
    phase_at         BIGINT
);
CREATE INDEX runs_user ON runs(user_id, n);
CREATE INDEX runs_user_status ON runs(user_id, status, n);
CREATE INDEX runs_session ON runs(session_id, n);
CREATE INDEX runs_active ON runs(status) WHERE status IN ('queued', 'running');

-- rowid: the order transitions were recorded in, which SQLite keeps without a column
CREATE TABLE run_transitions (
    rowid    BIGSERIAL PRIMARY KEY,
    run_id   TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    at       BIGINT NOT NULL,
    status   TEXT NOT NULL,
    reason   TEXT NOT NULL
);
CREATE INDEX run_transitions_run ON run_transitions(run_id, at);

CREATE TABLE run_events (
    run_id   TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq      BIGINT NOT NULL,
    time     BIGINT NOT NULL,
    type     TEXT NOT NULL,
    summary  TEXT NOT NULL,
    raw      TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE login_links (
    hash        TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    used_at     BIGINT
);
CREATE INDEX login_links_user ON login_links(user_id);
CREATE INDEX login_links_expires ON login_links(expires_at);

CREATE TABLE web_sessions (
    hash          TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at    BIGINT NOT NULL,
    idle_ms       BIGINT NOT NULL,
    last_seen_at  BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL
);
CREATE INDEX web_sessions_user ON web_sessions(user_id, created_at);
CREATE INDEX web_sessions_expires ON web_sessions(expires_at);

CREATE TABLE oauth_clients (
    id            TEXT PRIMARY KEY,
    kind          TEXT NOT NULL CHECK (kind IN ('registered', 'document')),
    name          TEXT NOT NULL,
    redirect_uris TEXT NOT NULL,
    auth_method   TEXT NOT NULL CHECK (auth_method IN ('none', 'client_secret_post',
                                                       'client_secret_basic')),
    secret_hash   TEXT,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE oauth_grants (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    client_id     TEXT NOT NULL,
    client_name   TEXT NOT NULL,
    redirect_host TEXT NOT NULL,
    scope         TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    last_used_at  BIGINT,
    UNIQUE (user_id, client_id)
);

CREATE TABLE oauth_codes (
    hash          TEXT PRIMARY KEY,
    grant_id      TEXT NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
    redirect_uri  TEXT NOT NULL,
    challenge     TEXT NOT NULL,
    resource      TEXT NOT NULL,
    scope         TEXT NOT NULL,
    expires_at    BIGINT NOT NULL,
    used_at       BIGINT
);

CREATE TABLE oauth_tokens (
    hash          TEXT PRIMARY KEY,
    grant_id      TEXT NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
    family        TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
    scope         TEXT NOT NULL,
    resource      TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL,
    spent_at      BIGINT
);
CREATE INDEX oauth_tokens_family ON oauth_tokens(family);
CREATE INDEX oauth_tokens_expiry ON oauth_tokens(expires_at);
CREATE INDEX oauth_codes_expiry ON oauth_codes(expires_at);
CREATE INDEX oauth_grants_user ON oauth_grants(user_id, created_at);

CREATE TABLE egress_attempts (
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    sandbox_id  TEXT NOT NULL,
    run_id      TEXT NOT NULL DEFAULT '',
    host        TEXT NOT NULL,
    port        BIGINT NOT NULL,
    verdict     TEXT NOT NULL CHECK (verdict IN ('allowed', 'denied')),
    reason      TEXT NOT NULL,
    why         TEXT NOT NULL,
    addr        TEXT NOT NULL,
    attempts    BIGINT NOT NULL,
    bytes_up    BIGINT NOT NULL,
    bytes_down  BIGINT NOT NULL,
    first_at    BIGINT NOT NULL,
    last_at     BIGINT NOT NULL,
    PRIMARY KEY (sandbox_id, run_id, host, port, verdict, reason)
);
CREATE INDEX egress_attempts_run ON egress_attempts(run_id) WHERE run_id <> '';
CREATE INDEX egress_attempts_last ON egress_attempts(last_at) WHERE run_id = '';

CREATE TABLE credentials (
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    service     TEXT NOT NULL CHECK (service IN ('github')),
    sealed      BYTEA NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (user_id, service)
);

CREATE TABLE notify_targets (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL CHECK (kind IN ('webhook', 'ntfy')),
    url         TEXT NOT NULL,
    sealed      BYTEA,
    created_at  BIGINT NOT NULL,
    last_status TEXT CHECK (last_status IN ('delivered', 'failed', 'dropped')),
    last_error  TEXT,
    last_at     BIGINT
);
CREATE INDEX notify_targets_user ON notify_targets(user_id, created_at);

CREATE TABLE notify_outbox (
    n           BIGSERIAL PRIMARY KEY,
    target_id   TEXT NOT NULL REFERENCES notify_targets(id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    type        TEXT NOT NULL,
    run_id      TEXT,
    pr_url      TEXT,
    created_at  BIGINT NOT NULL,
    payload     TEXT,
    state       TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts    BIGINT NOT NULL DEFAULT 0,
    next_at     BIGINT NOT NULL,
    last_error  TEXT,
    done_at     BIGINT,
    UNIQUE (event_id, target_id)
);
CREATE INDEX notify_outbox_due ON notify_outbox(next_at) WHERE state = 'pending';
CREATE INDEX notify_outbox_user ON notify_outbox(user_id, state);
CREATE INDEX notify_outbox_target ON notify_outbox(target_id, state);
CREATE INDEX notify_outbox_done ON notify_outbox(done_at) WHERE state <> 'pending';
