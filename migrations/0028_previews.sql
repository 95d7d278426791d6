-- Previews (src/preview): a port of a session's sandbox served at a capability URL,
-- PUBLIC_URL/preview/<id>-<mac>/, the mac an HMAC of the id under a key derived from the
-- server's secret (so no token is stored, and every node can tell the URL again). A preview ends
-- at expires_at (ms) or when revoked (revoked_at, ms); a run's agent may open one for its
-- sandbox (run_id: that run, '' for container_preview). At most PREVIEWS_PER_SANDBOX are open at
-- once per sandbox; ended ones are pruned a day after they end.
CREATE TABLE previews (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    session_id  TEXT NOT NULL,
    sandbox_id  TEXT NOT NULL,
    port        INTEGER NOT NULL,
    run_id      TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    revoked_at  INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX previews_sandbox ON previews(sandbox_id, expires_at);
CREATE INDEX previews_run ON previews(run_id) WHERE run_id <> '';
