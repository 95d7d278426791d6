-- The OAuth 2.1 authorization server: clients, the grants users approve, codes and tokens.
-- Codes and tokens are kept as SHA-256 hashes only.

-- A client registered through /register (RFC 7591), or one known by the URL of its metadata
-- document (its client_id), cached until expires_at.
CREATE TABLE oauth_clients (
    id            TEXT PRIMARY KEY,
    kind          TEXT NOT NULL CHECK (kind IN ('registered', 'document')),
    name          TEXT NOT NULL,
    redirect_uris TEXT NOT NULL, -- JSON array of strings
    auth_method   TEXT NOT NULL CHECK (auth_method IN ('none', 'client_secret_post',
                                                       'client_secret_basic')),
    secret_hash   TEXT,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL DEFAULT 0 -- documents: when to fetch again
) STRICT;

-- A user's approval of a client for some scopes, remembered until revoked (revoking deletes
-- it, and with it every code and token issued under it).
CREATE TABLE oauth_grants (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    client_id     TEXT NOT NULL,
    client_name   TEXT NOT NULL,
    redirect_host TEXT NOT NULL,
    scope         TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    last_used_at  INTEGER,
    UNIQUE (user_id, client_id)
) STRICT;

CREATE TABLE oauth_codes (
    hash          TEXT PRIMARY KEY,
    grant_id      TEXT NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
    redirect_uri  TEXT NOT NULL,
    challenge     TEXT NOT NULL,
    resource      TEXT NOT NULL,
    scope         TEXT NOT NULL,
    expires_at    INTEGER NOT NULL,
    used_at       INTEGER
) STRICT;

-- Access and refresh tokens. family is the hash of the code the chain started from: a code or
-- a refresh token presented a second time ends its whole family.
CREATE TABLE oauth_tokens (
    hash          TEXT PRIMARY KEY,
    grant_id      TEXT NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
    family        TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
    scope         TEXT NOT NULL,
    resource      TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    spent_at      INTEGER
) STRICT;

CREATE INDEX oauth_tokens_family ON oauth_tokens(family);
CREATE INDEX oauth_tokens_expiry ON oauth_tokens(expires_at);
CREATE INDEX oauth_codes_expiry ON oauth_codes(expires_at);
CREATE INDEX oauth_grants_user ON oauth_grants(user_id, created_at);
