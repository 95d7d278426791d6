-- A run's phase: what it is doing now (queued, preparing, cloning, agent, finishing, delivering)
-- and, once it has ended, how (succeeded, failed, cancelled). phase_step counts the agent's steps
-- (its turns with the model); phase_detail is the phase in a few words ("ran `make test`",
-- "cloning https://...", "at step 3" for a run that ended there); phase_at is when it began.
-- NULL phase: a run from before phases were kept.
ALTER TABLE runs ADD COLUMN phase TEXT CHECK (phase IN ('queued', 'preparing', 'cloning', 'agent',
    'finishing', 'delivering', 'succeeded', 'failed', 'cancelled'));
ALTER TABLE runs ADD COLUMN phase_step INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN phase_detail TEXT;
ALTER TABLE runs ADD COLUMN phase_at INTEGER;
