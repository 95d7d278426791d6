-- Nodes: the servers that share one store (PostgreSQL; with SQLite there is one). Each keeps its
-- row alive with a heartbeat; a node whose heartbeat stops is marked lost by another after a
-- timeout, which fails its runs ("node lost") and lets its users' next calls start afresh
-- elsewhere. url: where the other nodes reach it (NODE_URL) to forward a call to a sandbox it
-- holds.
CREATE TABLE nodes (
    id             TEXT PRIMARY KEY,
    url            TEXT NOT NULL,
    max_sandboxes  INTEGER NOT NULL,
    max_runs       INTEGER NOT NULL,
    started_at     INTEGER NOT NULL,
    heartbeat_at   INTEGER NOT NULL,
    state          TEXT NOT NULL CHECK (state IN ('up', 'lost', 'stopped'))
) STRICT;

-- The node a sandbox lives on ('' for sandboxes from before nodes, which the first node to start
-- takes as its own). Host id ranges are a node's own: a slot is unique per node.
ALTER TABLE sandboxes ADD COLUMN node_id TEXT NOT NULL DEFAULT '';
DROP INDEX sandboxes_id_slot;
CREATE UNIQUE INDEX sandboxes_id_slot ON sandboxes(node_id, id_slot) WHERE id_slot IS NOT NULL;
CREATE INDEX sandboxes_node ON sandboxes(node_id, state);

-- The node a session lives on, with its sandbox: where its runs run ('' for sessions from before
-- nodes, which the first node to start takes as its own).
ALTER TABLE sessions ADD COLUMN node_id TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_node ON sessions(node_id);
