-- Attempts (run_task attempts): runs started together on one task, each in a session of its own,
-- share a group_id ('' for a run on its own). An attempt's delivery waits until the user picks
-- it (deliver_run): then a run without an agent in the picked attempt's session, whose delivers
-- names the attempt ('' for every other run), pushes its commits and opens its pull request.
ALTER TABLE runs ADD COLUMN group_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN delivers TEXT NOT NULL DEFAULT '';
-- How the last test command the agent ran ended ('' when it ran none), for comparing attempts:
-- "passed: npm test", "failed: npm test (exit 1)".
ALTER TABLE runs ADD COLUMN test_outcome TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_group ON runs(group_id, n) WHERE group_id <> '';
-- The commit a group's attempts all start from: the first attempt to have its workspace ready
-- records its own, and the others check that one out. picked: the attempt the user picked to
-- deliver ('' until then), set by compare-and-set so that nodes picking at once agree.
CREATE TABLE run_groups (
    id          TEXT PRIMARY KEY,
    base_commit TEXT NOT NULL,
    picked      TEXT NOT NULL DEFAULT ''
) STRICT, WITHOUT ROWID;
