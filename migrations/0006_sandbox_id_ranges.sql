-- Each sandbox maps its root to a host id range of its own: slot N is the 65536 ids from
-- SANDBOX_UID_BASE + N * 65536. A slot stays with the sandbox while its files exist (they are
-- owned by that range) and is freed when they are removed, for another sandbox to reuse.
ALTER TABLE sandboxes ADD COLUMN id_slot INTEGER;
CREATE UNIQUE INDEX sandboxes_id_slot ON sandboxes(id_slot) WHERE id_slot IS NOT NULL;
