-- 0009_worker_scopes.sql -- what each build worker may build, token
-- rotation, and the indexes the fair claim order and the queue limits read.

-- A worker's scope: the namespaces (orgs or users) and repos ("ns/name") it
-- may build, lower-cased; both empty = every namespace. Private repos only
-- with scope_private (inside the namespaces and repos listed, if any). Every
-- worker route about a job checks it against the job's repo as it is now.
ALTER TABLE workers
    ADD COLUMN scope_orgs text[] NOT NULL DEFAULT '{}',
    ADD COLUMN scope_repos text[] NOT NULL DEFAULT '{}',
    ADD COLUMN scope_private boolean NOT NULL DEFAULT false,
    ADD COLUMN token_rotated_at timestamptz;

-- The claim takes the oldest job of the repo whose last claim is oldest:
-- a repo's last claim is max(started_at) of its jobs.
CREATE INDEX builds_repo_started ON builds (repo_id, started_at);
-- The queue limits count queued jobs per repo and per requester.
CREATE INDEX builds_queued_repo ON builds (repo_id) WHERE state = 'queued';
CREATE INDEX builds_queued_by ON builds (requested_by) WHERE state = 'queued';
