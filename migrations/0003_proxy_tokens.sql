-- Proxy tokens handed to agents (and minted by operators), by their JWT id: who holds them,
-- what they may reach, whether they were revoked (a run that ended revokes its token), and the
-- provider usage counted against them.
CREATE TABLE proxy_tokens (
    jti            TEXT PRIMARY KEY,
    user_id        TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    run_id         TEXT,
    session_id     TEXT,
    sandbox_id     TEXT,
    services       TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL,
    revoked_at     INTEGER,
    requests       INTEGER NOT NULL DEFAULT 0,
    input_tokens   INTEGER NOT NULL DEFAULT 0,
    output_tokens  INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX proxy_tokens_run ON proxy_tokens(run_id) WHERE run_id IS NOT NULL;
