-- A run's setup (runs/setup.c): setup is the script run_task was given (NULL: the repository's
-- own, if any); setup_result is what became of the setup that ran, as JSON (source, exit_status,
-- duration_ms, timed_out, failed), NULL when none ran.
ALTER TABLE runs ADD COLUMN setup TEXT;
ALTER TABLE runs ADD COLUMN setup_result TEXT;
