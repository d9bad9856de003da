-- 0005_lfs_links.sql -- which repos may use which LFS objects. The store is
-- content-addressed and shared, so knowing a sha256 must not be enough to
-- read another repo's private bytes: an object becomes usable in a repo only
-- once its bytes were uploaded, committed, imported or mirrored for it.
CREATE TABLE lfs_repo_objects (
    repo_id    bigint NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    oid        text NOT NULL,
    linked_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (repo_id, oid)
);
