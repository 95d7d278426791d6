-- Sandboxes without an owner: the warm pool's, started ahead of any call and given to a user on
-- their first, and those on their way out (replaced by container_initialize, or found at start
-- by a server that did not make them), whose files are removed before their row. So user_id may
-- be NULL now, which SQLite lets a column become only by copying the table.
CREATE TABLE sandboxes_new (
    id            TEXT PRIMARY KEY,
    user_id       TEXT REFERENCES users(id) ON DELETE CASCADE,
    session_id    TEXT,
    template      TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('stopped', 'running')),
    init_pid      INTEGER,
    init_start    INTEGER,
    cgroup        TEXT,
    created_at    INTEGER NOT NULL,
    started_at    INTEGER,
    last_used_at  INTEGER,
    id_slot       INTEGER
) STRICT;
INSERT INTO sandboxes_new(id, user_id, session_id, template, state, init_pid, init_start, cgroup,
                          created_at, started_at, last_used_at, id_slot)
    SELECT id, user_id, session_id, template, state, init_pid, init_start, cgroup, created_at,
           started_at, last_used_at, id_slot FROM sandboxes;
DROP TABLE sandboxes;
ALTER TABLE sandboxes_new RENAME TO sandboxes;
CREATE UNIQUE INDEX sandboxes_user_default ON sandboxes(user_id) WHERE session_id IS NULL;
CREATE UNIQUE INDEX sandboxes_session ON sandboxes(session_id) WHERE session_id IS NOT NULL;
CREATE INDEX sandboxes_state ON sandboxes(state);
CREATE UNIQUE INDEX sandboxes_id_slot ON sandboxes(id_slot) WHERE id_slot IS NOT NULL;
CREATE INDEX sandboxes_unowned ON sandboxes(id) WHERE user_id IS NULL;
