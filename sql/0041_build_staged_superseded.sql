-- 0041_build_staged_superseded.sql -- two states of the build job's state
-- machine (farm/build_states.c; docs/build-farm.md, "The job's states"):
-- staged (a fleet rebuild's output committed on the kernel's pull request,
-- awaiting a merge) and superseded (a newer build of the same kernel and
-- variant was staged or published: never merged over the newer work).
-- Builds staged before this migration stay succeeded; their merge works.

ALTER TABLE builds DROP CONSTRAINT IF EXISTS builds_state_check;
ALTER TABLE builds ADD CONSTRAINT builds_state_check
    CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'canceled', 'staged', 'superseded'));
