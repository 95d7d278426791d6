-- A run's setup; see migrations/0019_run_setup.sql.
ALTER TABLE runs ADD COLUMN setup TEXT;
ALTER TABLE runs ADD COLUMN setup_result TEXT;
