-- A run's "setting up" phase and a user's settings for a repository's runs; see
-- migrations/0020_setting_up.sql.
ALTER TABLE runs DROP CONSTRAINT runs_phase_check;
ALTER TABLE runs ADD CONSTRAINT runs_phase_check
    CHECK (phase IN ('queued', 'preparing', 'cloning', 'setting up', 'agent', 'finishing',
                     'delivering', 'succeeded', 'failed', 'cancelled'));

CREATE TABLE repo_settings (
    user_id          TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    repository       TEXT NOT NULL,
    setup            TEXT,
    on_setup_failure TEXT NOT NULL DEFAULT 'start' CHECK (on_setup_failure IN ('start', 'stop')),
    updated_at       BIGINT NOT NULL,
    PRIMARY KEY (user_id, repository)
);
