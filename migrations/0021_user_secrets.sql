-- Each user's secrets for runs (src/store/user_secrets.c): an environment variable's name, its
-- value sealed with the server's key in DATA_DIR/secrets/credentials.key and bound to the user
-- and the name, the repositories it applies to ("*", or owner/name patterns, space-separated),
-- and whether the agent sees it (agent = 1) or only the run's setup. size is the value's length,
-- for the per-user caps; the value itself is never read back but to run.
CREATE TABLE user_secrets (
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    repos       TEXT NOT NULL,
    agent       INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    sealed      BLOB NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (user_id, name)
) STRICT, WITHOUT ROWID;
