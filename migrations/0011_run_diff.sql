-- A run's full diff against its starting commit, as its web page shows it: JSON (files with
-- their hunks, cut to a size a phone can show; src/runs/diff.h), NULL for runs that ended
-- before it was collected or without a repository. Only the page reads it.
ALTER TABLE runs ADD COLUMN diff TEXT;
