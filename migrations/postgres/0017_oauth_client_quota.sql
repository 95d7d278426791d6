-- Unapproved registrations are evicted oldest first; see migrations/0017_oauth_client_quota.sql.
ALTER TABLE oauth_clients ADD COLUMN approved_at BIGINT NOT NULL DEFAULT 0;
UPDATE oauth_clients SET approved_at = created_at
    WHERE id IN (SELECT client_id FROM oauth_grants);
CREATE INDEX oauth_clients_unapproved ON oauth_clients(approved_at, created_at);
CREATE INDEX oauth_grants_client ON oauth_grants(client_id);
