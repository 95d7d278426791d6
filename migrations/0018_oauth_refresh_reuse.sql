-- The rotation overlap (OAUTH_REFRESH_REUSE_SECONDS, docs/OAUTH.md): a refresh token rotated
-- moments ago may be presented again by its client, a few times (OAUTH_REFRESH_REUSE_MAX);
-- reuses counts those on the spent token's row, so that the count and the cap hold across
-- requests served at once, on one node or several.
ALTER TABLE oauth_tokens ADD COLUMN reuses INTEGER NOT NULL DEFAULT 0;
