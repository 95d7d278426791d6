-- An agent's questions to the person who started its run (src/runs/ask.c): a question with
-- optional choices, or a plan to approve (kind 'plan', run_task plan_first). The run waits for
-- the answer (phase 'waiting'); the answer comes from answer_run, tasks/update, an input-required
-- retry of get_result or the run's page, or, past deadline_at (ms), is "no answer" (answered_by
-- 'timeout'). One unanswered question per run at a time; answering is one conditional update, so
-- two answers arriving at once leave the first.
CREATE TABLE run_questions (
    id          TEXT PRIMARY KEY,
    run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    text        TEXT NOT NULL,
    choices     TEXT NOT NULL DEFAULT '',
    asked_at    INTEGER NOT NULL,
    deadline_at INTEGER NOT NULL,
    answer      TEXT,
    answered_by TEXT NOT NULL DEFAULT '',
    answered_at INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX run_questions_run ON run_questions(run_id, asked_at);
CREATE INDEX run_questions_open ON run_questions(deadline_at) WHERE answered_at = 0;
-- What run_task asked of a run: a plan approved before any change (plan_first), and how long a
-- question waits for its answer (question_timeout_s; 0: the server's default), new columns of
-- the rebuilt table below.
--
-- A run waiting for an answer has the phase "waiting". SQLite cannot change a CHECK constraint
-- in place: runs is rebuilt as migration 0020 did (its columns in their order, constraints and
-- indexes those of migrations 0004 to 0027, only phase's CHECK has one value more).
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
                                         'waiting', 'finishing', 'delivering', 'succeeded',
                                         'failed', 'cancelled')),
    phase_step     INTEGER NOT NULL DEFAULT 0,
    phase_detail   TEXT,
    phase_at       INTEGER,
    setup          TEXT,
    setup_result   TEXT,
    rebuild        TEXT NOT NULL DEFAULT '',
    group_id       TEXT NOT NULL DEFAULT '',
    delivers       TEXT NOT NULL DEFAULT '',
    test_outcome   TEXT NOT NULL DEFAULT '',
    origin         TEXT NOT NULL DEFAULT '',
    plan_first     INTEGER NOT NULL DEFAULT 0,
    question_timeout_s INTEGER NOT NULL DEFAULT 0
) STRICT;
INSERT INTO runs_new (n, id, user_id, session_id, status, status_reason, task, title, model, agent,
        repository, branch, workdir, timeout_ms, created_at, started_at, finished_at,
        base_commit, agent_pid, events_offset, event_count, exit_code, success, summary, error,
        changes, input_tokens, output_tokens, cost, view_generation, network, diff,
        pull_request, delivery, phase, phase_step, phase_detail, phase_at, setup, setup_result,
        rebuild, group_id, delivers, test_outcome, origin, plan_first, question_timeout_s)
    SELECT n, id, user_id, session_id, status, status_reason, task, title, model, agent,
        repository, branch, workdir, timeout_ms, created_at, started_at, finished_at,
        base_commit, agent_pid, events_offset, event_count, exit_code, success, summary, error,
        changes, input_tokens, output_tokens, cost, view_generation, network, diff,
        pull_request, delivery, phase, phase_step, phase_detail, phase_at, setup, setup_result,
        rebuild, group_id, delivers, test_outcome, origin, 0, 0
    FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
CREATE INDEX runs_user ON runs(user_id, n);
CREATE INDEX runs_user_status ON runs(user_id, status, n);
CREATE INDEX runs_session ON runs(session_id, n);
CREATE INDEX runs_active ON runs(status) WHERE status IN ('queued', 'running');
CREATE INDEX runs_group ON runs(group_id, n) WHERE group_id <> '';
