-- A run's setup gets a phase of its own, "setting up" (runs/setup.c), between preparing and the
-- agent; and a user's own settings for the runs on a repository (repo_settings).
--
-- SQLite cannot change a CHECK constraint in place: runs is rebuilt by the procedure of
-- https://sqlite.org/lang_altertable.html#otheralter (the migration runs with foreign keys off and
-- checks them before it commits, store/db_sqlite.c). Its columns (in their order), constraints
-- and indexes are those of migrations 0004 to 0019, only phase's CHECK has one value more.
-- run_transitions and run_events refer to runs(id) by name and are left as they are; no view or
-- trigger names runs.
CREATE TABLE runs_new (
    n              INTEGER PRIMARY KEY,   -- creation order, the list cursor
    id             TEXT NOT NULL UNIQUE,
    user_id        TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    session_id     TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    status         TEXT NOT NULL
                   CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    status_reason  TEXT,
    task           TEXT NOT NULL,
    title          TEXT,
    model          TEXT NOT NULL,
    agent          TEXT NOT NULL,
    repository     TEXT,
    branch         TEXT,                  -- requested, else the remote's default once cloned
    workdir        TEXT,                  -- where the agent works, inside the sandbox
    timeout_ms     INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    started_at     INTEGER,
    finished_at    INTEGER,
    base_commit    TEXT,
    agent_pid      INTEGER,               -- inside the sandbox's pid namespace
    events_offset  INTEGER NOT NULL DEFAULT 0,
    event_count    INTEGER NOT NULL DEFAULT 0,
    exit_code      INTEGER,
    success        INTEGER,
    summary        TEXT,
    error          TEXT,
    changes        TEXT,                  -- JSON: files, insertions, deletions, commits, branch
    input_tokens   INTEGER NOT NULL DEFAULT 0,
    output_tokens  INTEGER NOT NULL DEFAULT 0,
    cost           REAL NOT NULL DEFAULT 0,
    view_generation INTEGER NOT NULL DEFAULT 0,
    network        TEXT CHECK (network IN ('none', 'allowlist', 'public')),
    diff           TEXT,
    pull_request   TEXT CHECK (pull_request IN ('none', 'draft', 'ready')),
    delivery       TEXT,
    phase          TEXT CHECK (phase IN ('queued', 'preparing', 'cloning', 'setting up', 'agent',
                                         'finishing', 'delivering', 'succeeded', 'failed',
                                         'cancelled')),
    phase_step     INTEGER NOT NULL DEFAULT 0,
    phase_detail   TEXT,
    phase_at       INTEGER,
    setup          TEXT,
    setup_result   TEXT
) STRICT;
INSERT INTO runs_new (n, id, user_id, session_id, status, status_reason, task, title, model, agent,
                      repository, branch, workdir, timeout_ms, created_at, started_at,
                      finished_at, base_commit, agent_pid, events_offset, event_count,
                      exit_code, success, summary, error, changes, input_tokens, output_tokens,
                      cost, view_generation, network, diff, pull_request, delivery, phase,
                      phase_step, phase_detail, phase_at, setup, setup_result)
    SELECT n, id, user_id, session_id, status, status_reason, task, title, model, agent,
           repository, branch, workdir, timeout_ms, created_at, started_at, finished_at,
           base_commit, agent_pid, events_offset, event_count, exit_code, success, summary,
           error, changes, input_tokens, output_tokens, cost, view_generation, network, diff,
           pull_request, delivery, phase, phase_step, phase_detail, phase_at, setup,
           setup_result
    FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
CREATE INDEX runs_user ON runs(user_id, n);
CREATE INDEX runs_user_status ON runs(user_id, status, n);
CREATE INDEX runs_session ON runs(session_id, n);
CREATE INDEX runs_active ON runs(status) WHERE status IN ('queued', 'running');

-- A user's settings for the runs on one repository (runs/setup.c): repository is "owner/name"
-- in lowercase (runs_repo_slug), setup a script run before the agent in place of the
-- repository's own (at most 64 KiB, as run_task's; NULL: the repository's own), and
-- on_setup_failure what a failed setup does to the run: start the agent anyway (told), or stop
-- the run failed. At most RUNS_REPO_SETTINGS_MAX rows a user (store_repo_setting_set).
CREATE TABLE repo_settings (
    user_id          TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    repository       TEXT NOT NULL,
    setup            TEXT,
    on_setup_failure TEXT NOT NULL DEFAULT 'start' CHECK (on_setup_failure IN ('start', 'stop')),
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (user_id, repository)
) STRICT;
