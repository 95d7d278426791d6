-- Runs: coding tasks handed to an agent in a session's sandbox. A session is the conversation and
-- workspace that later runs continue; a run moves queued -> running -> succeeded | failed |
-- cancelled, each move recorded in run_transitions; the agent's events are kept in run_events in
-- the order it wrote them, with the byte offset of its event file already read kept on the run
-- (so a restarted server resumes ingest exactly where the last one stopped).
CREATE TABLE sessions (
    id             TEXT PRIMARY KEY,
    user_id        TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    agent          TEXT NOT NULL,
    agent_session  TEXT,              -- the agent's own conversation id, to continue it
    repository     TEXT,              -- the latest repository its runs named
    created_at     INTEGER NOT NULL,
    last_run_at    INTEGER NOT NULL,
    cleaned_at     INTEGER            -- workspace removed after retention
) STRICT;

CREATE INDEX sessions_user ON sessions(user_id);
CREATE INDEX sessions_last_run ON sessions(last_run_at) WHERE cleaned_at IS NULL;

CREATE TABLE runs (
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
    cost           REAL NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX runs_user ON runs(user_id, n);
CREATE INDEX runs_user_status ON runs(user_id, status, n);
CREATE INDEX runs_session ON runs(session_id, n);
CREATE INDEX runs_active ON runs(status) WHERE status IN ('queued', 'running');

CREATE TABLE run_transitions (
    run_id   TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    at       INTEGER NOT NULL,
    status   TEXT NOT NULL,
    reason   TEXT NOT NULL
) STRICT;

CREATE INDEX run_transitions_run ON run_transitions(run_id, at);

CREATE TABLE run_events (
    run_id   TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq      INTEGER NOT NULL,
    time     INTEGER NOT NULL,
    type     TEXT NOT NULL,
    summary  TEXT NOT NULL,
    raw      TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;
