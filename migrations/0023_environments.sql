-- Environment snapshots (runs/envs.c): a sandbox's layer and workspace after a successful setup,
-- kept in the node's DATA_DIR/envs/<id> for later sessions of the same repository to start on.
-- key: what a session must match to start on it (who it serves, the repository, the template,
-- the run's own setup); scope: the user it serves ('' when shared between users: a public
-- repository, when the operator allows it); fingerprint: the lock files and setup files it was
-- built from ("<blob> <path>" lines), compared once the session's checkout is there; dropped:
-- replaced or evicted, its directory removed once no sandbox starts on it.
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
    bytes         INTEGER NOT NULL,
    files         INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    last_used_at  INTEGER NOT NULL,
    dropped       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (node_id, id)
) STRICT;
CREATE INDEX envs_key ON envs(node_id, key, dropped);

-- The snapshot a sandbox starts on ('' for the template alone): kept across idle stops, so a
-- snapshot is not removed while a sandbox names it.
ALTER TABLE sandboxes ADD COLUMN env TEXT NOT NULL DEFAULT '';
