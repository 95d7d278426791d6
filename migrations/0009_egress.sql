-- Sandbox network: how much of it a user and a run may have (never more than the deployment's
-- SANDBOX_NETWORK), and what each sandbox tried to reach.

-- NULL: the deployment's mode.
ALTER TABLE users ADD COLUMN network TEXT CHECK (network IN ('none', 'allowlist', 'public'));
-- The mode the run was given when it was submitted (the narrowest of the deployment's, the
-- user's and the one run_task asked for); NULL for runs from before sandboxes had network.
ALTER TABLE runs ADD COLUMN network TEXT CHECK (network IN ('none', 'allowlist', 'public'));

-- Every attempt through a sandbox's egress proxy, counted per sandbox, run, destination and
-- outcome: the same destination with the same outcome adds to one row. A sandbox and run keep at
-- most a fixed number of rows (STORE_EGRESS_ROWS_MAX, 200); beyond it, new destinations are
-- counted under host '*'.
CREATE TABLE egress_attempts (
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    sandbox_id  TEXT NOT NULL,
    run_id      TEXT NOT NULL DEFAULT '', -- '' outside a run
    host        TEXT NOT NULL,            -- as the sandbox asked for it
    port        INTEGER NOT NULL,
    verdict     TEXT NOT NULL CHECK (verdict IN ('allowed', 'denied')),
    reason      TEXT NOT NULL,            -- ok, not_listed, port, address, self, ...
    why         TEXT NOT NULL,            -- the latest one-line answer ('' when connected)
    addr        TEXT NOT NULL,            -- the latest address chosen ('' when none)
    attempts    INTEGER NOT NULL,
    bytes_up    INTEGER NOT NULL,         -- sandbox to upstream
    bytes_down  INTEGER NOT NULL,
    first_at    INTEGER NOT NULL,
    last_at     INTEGER NOT NULL,
    PRIMARY KEY (sandbox_id, run_id, host, port, verdict, reason)
) STRICT, WITHOUT ROWID;

CREATE INDEX egress_attempts_run ON egress_attempts(run_id) WHERE run_id <> '';
CREATE INDEX egress_attempts_last ON egress_attempts(last_at) WHERE run_id = '';
