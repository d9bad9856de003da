-- 0015_gc.sql -- LFS objects being written: khub gc never removes an object
-- a row names. An upload (or a commit installing the LFS content it carried)
-- inserts its row before the object reaches the store and deletes it once
-- the object is linked to its repo, so an object is always named by a row
-- or a link from the moment it is stored. Rows left by a crash are removed
-- by khub gc after a day.
CREATE TABLE lfs_inflight (
    id          bigserial PRIMARY KEY,
    oid         text NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX lfs_inflight_oid ON lfs_inflight (oid);
