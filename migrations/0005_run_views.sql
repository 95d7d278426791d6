-- The web pages of runs and sessions are opened with a view token derived from the server's
-- secret, the run's (or session's) id and this generation; revoking the page's links is
-- increasing the generation. No token is stored.
ALTER TABLE runs ADD COLUMN view_generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN view_generation INTEGER NOT NULL DEFAULT 0;
