-- Reuses of a rotated refresh token within the overlap; see migrations/0018_oauth_refresh_reuse.sql.
ALTER TABLE oauth_tokens ADD COLUMN reuses BIGINT NOT NULL DEFAULT 0;
