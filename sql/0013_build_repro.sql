-- 0013_build_repro.sql -- a retried build's log keeps each attempt apart,
-- and a rebuild that gives the bytes already published says so.

-- Where the running attempt's log starts (after khub's "attempt N" line):
-- a worker's log offsets count from there, so a new attempt never lands
-- inside an earlier one.
ALTER TABLE builds ADD COLUMN log_base bigint NOT NULL DEFAULT 0;

-- What became of a succeeded build besides its branch and commit: "identical
-- to published commit X" when its output had the digest already published
-- (nothing new was committed).
ALTER TABLE builds ADD COLUMN note text;
