-- An agent's questions to the person who started its run (src/runs/ask.c): a question with
-- optional choices, or a plan to approve (kind 'plan', run_task plan_first). The run waits for
-- the answer (phase 'waiting'); the answer comes from answer_run, tasks/update, an input-required
-- retry of get_result or the run's page, or, past deadline_at (ms), is "no answer" (answered_by
-- 'timeout'). One unanswered question per run at a time; answering is one conditional update, so
-- two answers arriving at once leave the first.
CREATE TABLE run_questions (
    id          TEXT PRIMARY KEY,
    run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    text        TEXT NOT NULL,
    choices     TEXT NOT NULL DEFAULT '',
    asked_at    BIGINT NOT NULL,
    deadline_at BIGINT NOT NULL,
    answer      TEXT,
    answered_by TEXT NOT NULL DEFAULT '',
    answered_at BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX run_questions_run ON run_questions(run_id, asked_at);
CREATE INDEX run_questions_open ON run_questions(deadline_at) WHERE answered_at = 0;
-- What run_task asked of a run: a plan approved before any change, and how long a question
-- waits for its answer (seconds; 0: the server's default).
ALTER TABLE runs ADD COLUMN plan_first INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN question_timeout_s BIGINT NOT NULL DEFAULT 0;
-- A run waiting for an answer has the phase "waiting".
ALTER TABLE runs DROP CONSTRAINT runs_phase_check;
ALTER TABLE runs ADD CONSTRAINT runs_phase_check
    CHECK (phase IN ('queued', 'preparing', 'cloning', 'setting up', 'agent', 'waiting',
                     'finishing', 'delivering', 'succeeded', 'failed', 'cancelled'));
