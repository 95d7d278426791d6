-- Delivery: a run's commits pushed to its session's branch and a pull request opened for them.
-- A session that delivers works on one branch (work_branch, made from base_branch with its
-- first run) and has at most one pull request; each later run pushes to the same branch.
ALTER TABLE sessions ADD COLUMN work_branch TEXT;
ALTER TABLE sessions ADD COLUMN base_branch TEXT;
ALTER TABLE sessions ADD COLUMN pr_number INTEGER;
ALTER TABLE sessions ADD COLUMN pr_url TEXT;

-- What the run was asked to deliver: none, draft or ready (NULL: runs before delivery).
ALTER TABLE runs ADD COLUMN pull_request TEXT CHECK (pull_request IN ('none', 'draft', 'ready'));
-- JSON: status (delivered, skipped, failed), reason, branch, commits, pull_request
ALTER TABLE runs ADD COLUMN delivery TEXT;
