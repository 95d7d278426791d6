-- Registrations no user approved are evicted, oldest first, when the table of them is full
-- (OAUTH_CLIENTS_MAX). approved_at: when a user first approved the client (0: never); such a
-- client is never evicted. The index finds the oldest unapproved client and counts them without
-- reading the table; oauth_grants_client lets the prune ask whether a client holds a grant.
ALTER TABLE oauth_clients ADD COLUMN approved_at INTEGER NOT NULL DEFAULT 0;
UPDATE oauth_clients SET approved_at = created_at
    WHERE id IN (SELECT client_id FROM oauth_grants);
CREATE INDEX oauth_clients_unapproved ON oauth_clients(approved_at, created_at);
CREATE INDEX oauth_grants_client ON oauth_grants(client_id);
