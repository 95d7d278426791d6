-- The review loop (src/github): a session's pull request as the webhook and the poller name it
-- (pr_repo: "owner/name" in lowercase, set with pr_number), the login of the credential that
-- opened it (pr_author: who may steer the session from GitHub besides the operator's list), and
-- its state: '' (none yet, or not known), 'open', 'closed' or 'merged'. A closed or merged one
-- ends the session's steering.
ALTER TABLE sessions ADD COLUMN pr_repo TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN pr_author TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN pr_state TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_pull_request ON sessions(pr_repo, pr_number) WHERE pr_number > 0;
-- Failing CI fixed by runs (run_task fix_ci): whether the session asks for it, the head commit
-- the server last pushed to its branch (CI on another head, a person's push, is not the
-- session's to fix), and the fix runs made since that lineage began (at most CI_FIX_ATTEMPTS).
ALTER TABLE sessions ADD COLUMN fix_ci INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN ci_head TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN ci_fixes INTEGER NOT NULL DEFAULT 0;
-- A user's runs on a repository fix their pull requests' failing CI unless a run says otherwise.
ALTER TABLE repo_settings ADD COLUMN fix_ci INTEGER NOT NULL DEFAULT 0;
-- GitHub logins the user lets steer their sessions on the repository from its pull requests,
-- comma-separated, besides their own.
ALTER TABLE repo_settings ADD COLUMN steerers TEXT NOT NULL DEFAULT '';
-- The poller (a server GitHub cannot reach): the creation time (GitHub's ISO 8601) of the newest
-- comment or review it has read, and when it last looked (ms), oldest looked at first.
ALTER TABLE sessions ADD COLUMN poll_cursor TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN polled_at INTEGER NOT NULL DEFAULT 0;
-- What started a run, when not a call of its owner's: '' for run_task, else a JSON object
-- {"kind": "comment" | "review" | "review_comment" | "ci", "url", "login", "repo",
-- "pull_request"} for a follow-up the pull request asked for, answered on it when the run ends.
ALTER TABLE runs ADD COLUMN origin TEXT NOT NULL DEFAULT '';
-- Webhook deliveries acted on (X-GitHub-Delivery), so that a redelivery runs nothing twice.
-- Only deliveries with a good signature are kept; the oldest go past GITHUB_DELIVERIES_MAX.
CREATE TABLE github_deliveries (
    id          TEXT PRIMARY KEY,
    received_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX github_deliveries_received ON github_deliveries(received_at);
