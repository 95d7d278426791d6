-- Users and their API tokens. Only a SHA-256 of each token is stored.
CREATE TABLE users (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE tokens (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    hash          TEXT NOT NULL UNIQUE,
    prefix        TEXT NOT NULL,
    label         TEXT NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL,
    last_used_at  INTEGER,
    revoked_at    INTEGER
) STRICT;

CREATE INDEX tokens_user ON tokens(user_id, created_at);
