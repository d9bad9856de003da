-- 0007_builds.sql -- the build farm: workers (with their tokens), build jobs
-- (one per repo, source commit and variant) and their logs in chunks.

-- A commit or push that changes a kernel's sources enqueues builds unless off.
ALTER TABLE repos ADD COLUMN build_on_push boolean NOT NULL DEFAULT true;

-- A worker is known by its token (scope "worker": the build farm's worker
-- routes and nothing else); removing one keeps its row for the job history.
CREATE TABLE workers (
    id              bigserial PRIMARY KEY,
    name            text NOT NULL,
    token_sha256    text NOT NULL UNIQUE,
    token_prefix    text NOT NULL,
    version         text NOT NULL DEFAULT '',
    concurrency     integer NOT NULL DEFAULT 1,
    capabilities    jsonb NOT NULL DEFAULT '[]',   -- the toolchains it registered
    variants        text[] NOT NULL DEFAULT '{}',  -- every variant those can build
    created_by      text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    registered_at   timestamptz,
    last_heartbeat  timestamptz,
    removed_at      timestamptz
);
CREATE UNIQUE INDEX workers_name_key ON workers (lower(name)) WHERE removed_at IS NULL;

CREATE TABLE builds (
    id                bigserial PRIMARY KEY,
    repo_id           bigint NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    source_commit     text NOT NULL CHECK (source_commit ~ '^[0-9a-f]{40}$'),
    variant           text NOT NULL,
    state             text NOT NULL DEFAULT 'queued'
                      CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'canceled')),
    attempt           integer NOT NULL DEFAULT 0,      -- claims so far
    max_attempts      integer NOT NULL DEFAULT 3,
    not_before        timestamptz NOT NULL DEFAULT now(),  -- backoff after a failed attempt
    worker_id         bigint REFERENCES workers(id) ON DELETE SET NULL,  -- the lease holder
    lease_expires_at  timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz,
    error             text,
    abi_report        jsonb,
    published_branch  text,
    published_commit  text,
    force             boolean NOT NULL DEFAULT false,
    requested_by      text NOT NULL DEFAULT '',
    source_url        text,            -- an external git source (fetched by the server)
    source_revision   text,
    log_length        bigint NOT NULL DEFAULT 0
);
-- The same commit and variant is never queued or running twice.
CREATE UNIQUE INDEX builds_active_key ON builds (repo_id, source_commit, variant)
    WHERE state IN ('queued', 'running');
CREATE INDEX builds_queue ON builds (created_at, id) WHERE state = 'queued';
CREATE INDEX builds_leases ON builds (lease_expires_at) WHERE state = 'running';
CREATE INDEX builds_repo ON builds (repo_id, id DESC);

-- A build's log: chunks at byte offsets, so reading from an offset reads
-- only the chunks that reach past it.
CREATE TABLE build_log_chunks (
    build_id  bigint NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    at        bigint NOT NULL,
    data      bytea NOT NULL,
    PRIMARY KEY (build_id, at)
);
