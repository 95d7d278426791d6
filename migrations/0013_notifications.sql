-- Notifications: where each user wants to hear that a run ended or opened a pull request (a few
-- targets each: a signed webhook, an ntfy topic), and an outbox of what is still to be sent.

-- sealed: a webhook's signing secret, sealed with the credentials key and bound to the user and
-- the target (NULL for ntfy). last_*: how the latest delivery to it went, for the account page.
CREATE TABLE notify_targets (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL CHECK (kind IN ('webhook', 'ntfy')),
    url         TEXT NOT NULL,
    sealed      BLOB,
    created_at  INTEGER NOT NULL,
    last_status TEXT CHECK (last_status IN ('delivered', 'failed', 'dropped')),
    last_error  TEXT,
    last_at     INTEGER
) STRICT;

CREATE INDEX notify_targets_user ON notify_targets(user_id, created_at);

-- One row per (event, target), written in the transaction that records the event (a run's final
-- status), so that an event recorded is never an event lost. The sender claims a due row by
-- moving next_at past the attempt's end (a crash mid-attempt retries it then), retries with
-- backoff, and ends it delivered or failed; ended rows are pruned a day later. event_id is
-- derived from the event, so the same event is queued once per target however often it is
-- recorded, and is the Idempotency-Key of every attempt. payload is fixed at the first attempt.
CREATE TABLE notify_outbox (
    n           INTEGER PRIMARY KEY,
    target_id   TEXT NOT NULL REFERENCES notify_targets(id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    type        TEXT NOT NULL,  -- run.succeeded, run.failed, run.cancelled, pull_request.opened, test
    run_id      TEXT,
    pr_url      TEXT,
    created_at  INTEGER NOT NULL,
    payload     TEXT,
    state       TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts    INTEGER NOT NULL DEFAULT 0,
    next_at     INTEGER NOT NULL,
    last_error  TEXT,
    done_at     INTEGER,
    UNIQUE (event_id, target_id)
) STRICT;

CREATE INDEX notify_outbox_due ON notify_outbox(next_at) WHERE state = 'pending';
CREATE INDEX notify_outbox_user ON notify_outbox(user_id, state);
CREATE INDEX notify_outbox_target ON notify_outbox(target_id, state);
CREATE INDEX notify_outbox_done ON notify_outbox(done_at) WHERE state <> 'pending';
