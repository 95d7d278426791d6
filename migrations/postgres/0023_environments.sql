-- Environment snapshots; see migrations/0023_environments.sql.
CREATE TABLE envs (
    node_id       TEXT NOT NULL,
    id            TEXT NOT NULL,
    key           TEXT NOT NULL,
    scope         TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    repository    TEXT NOT NULL,
    template      TEXT NOT NULL,
    fingerprint   TEXT NOT NULL,
    base          TEXT NOT NULL,
    bytes         BIGINT NOT NULL,
    files         BIGINT NOT NULL,
    created_at    BIGINT NOT NULL,
    last_used_at  BIGINT NOT NULL,
    dropped       BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (node_id, id)
);
CREATE INDEX envs_key ON envs(node_id, key, dropped);

ALTER TABLE sandboxes ADD COLUMN env TEXT NOT NULL DEFAULT '';
