-- Background rebuilds of environment snapshots (runs/envs.c). uses: the sessions that started on
-- a snapshot since it was built (only one used since is rebuilt when it ages out). A rebuild is a
-- run of the snapshot's owner without an agent: rebuild names the snapshot it replaces ('' for
-- every other run); such runs are left out of list_runs and send no notification.
ALTER TABLE envs ADD COLUMN uses INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN rebuild TEXT NOT NULL DEFAULT '';
