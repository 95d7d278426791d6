-- Each user's own credentials for the services runs deliver to (a GitHub token), sealed with the
-- server's key in DATA_DIR/secrets/credentials.key and bound to the user and the service: the
-- database alone does not give them away, and a value moved to another row does not open.
CREATE TABLE credentials (
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    service     TEXT NOT NULL CHECK (service IN ('github')),
    sealed      BLOB NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (user_id, service)
) STRICT, WITHOUT ROWID;
