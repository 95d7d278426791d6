-- Each user's secrets for runs; see migrations/0021_user_secrets.sql.
CREATE TABLE user_secrets (
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    repos       TEXT NOT NULL,
    agent       BIGINT NOT NULL,
    size        BIGINT NOT NULL,
    sealed      BYTEA NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (user_id, name)
);
