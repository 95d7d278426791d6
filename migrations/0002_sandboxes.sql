-- Sandboxes: one per user for the container_* tools (session_id NULL) and one per run session.
-- A running sandbox records its init process (pid and start time, so a restarted server can
-- tell the same process from a reused pid) and its cgroup.
CREATE TABLE sandboxes (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    session_id    TEXT,
    template      TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('stopped', 'running')),
    init_pid      INTEGER,
    init_start    INTEGER,
    cgroup        TEXT,
    created_at    INTEGER NOT NULL,
    started_at    INTEGER,
    last_used_at  INTEGER
) STRICT;

CREATE UNIQUE INDEX sandboxes_user_default ON sandboxes(user_id) WHERE session_id IS NULL;
CREATE UNIQUE INDEX sandboxes_session ON sandboxes(session_id) WHERE session_id IS NOT NULL;
CREATE INDEX sandboxes_state ON sandboxes(state);
