-- Nodes sharing this store; see migrations/0016_nodes.sql.
CREATE TABLE nodes (
    id             TEXT PRIMARY KEY,
    url            TEXT NOT NULL,
    max_sandboxes  BIGINT NOT NULL,
    max_runs       BIGINT NOT NULL,
    started_at     BIGINT NOT NULL,
    heartbeat_at   BIGINT NOT NULL,
    state          TEXT NOT NULL CHECK (state IN ('up', 'lost', 'stopped'))
);

ALTER TABLE sandboxes ADD COLUMN node_id TEXT NOT NULL DEFAULT '';
DROP INDEX sandboxes_id_slot;
CREATE UNIQUE INDEX sandboxes_id_slot ON sandboxes(node_id, id_slot) WHERE id_slot IS NOT NULL;
CREATE INDEX sandboxes_node ON sandboxes(node_id, state);

-- The node a session lives on, with its sandbox: where its runs run ('' for sessions from before
-- nodes, which the first node to start takes as its own).
ALTER TABLE sessions ADD COLUMN node_id TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_node ON sessions(node_id);
