-- 0006_benchmark_source.sql -- who stands behind a benchmark run: "maintainer"
-- (a member with write access to the repo, or its owner) or "community"
-- (any other signed-in user). Listings and aggregates show maintainer runs
-- unless asked for community ones.
ALTER TABLE benchmark_runs ADD COLUMN source text NOT NULL DEFAULT 'community'
    CHECK (source IN ('maintainer', 'community'));

-- Runs stored before: maintainer when their submitter could write to the repo
-- then and still can (owner, site admin, or write/admin member of the owner).
UPDATE benchmark_runs r SET source = 'maintainer'
  FROM repos p
 WHERE p.id = r.repo_id
   AND (r.submitter_id = p.owner_id
        OR EXISTS (SELECT 1 FROM accounts a WHERE a.id = r.submitter_id AND a.is_site_admin)
        OR EXISTS (SELECT 1 FROM memberships m WHERE m.org_id = p.owner_id AND m.user_id = r.submitter_id
                   AND m.role IN ('write', 'admin')));

CREATE INDEX benchmark_runs_repo_source ON benchmark_runs (repo_id, source, id DESC);
