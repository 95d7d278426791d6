-- Signing in on the web pages (the OAuth sign-in and consent pages): a password per user (a
-- libsodium Argon2id string; NULL while the user has none), one-time sign-in links the operator
-- hands out, and browser sessions. A link or session is stored as the SHA-256 of its token only,
-- so the database does not hold anything that signs in.
ALTER TABLE users ADD COLUMN password_hash TEXT;
ALTER TABLE users ADD COLUMN password_set_at INTEGER;

CREATE TABLE login_links (
    hash        TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    used_at     INTEGER
) STRICT, WITHOUT ROWID;

CREATE INDEX login_links_user ON login_links(user_id);
CREATE INDEX login_links_expires ON login_links(expires_at);

-- A session ends idle_ms after it was last seen (last_seen_at is written at most once a minute,
-- and moves expires_at along), and never later than its creation plus the store's maximum age.
CREATE TABLE web_sessions (
    hash          TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at    INTEGER NOT NULL,
    idle_ms       INTEGER NOT NULL,
    last_seen_at  INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX web_sessions_user ON web_sessions(user_id, created_at);
CREATE INDEX web_sessions_expires ON web_sessions(expires_at);
