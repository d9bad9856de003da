-- 0032_scheduled_jobs.sql -- the periodic jobs of khub serve (gc, scrub,
-- repack, backup; server/jobs.c): one row per job with its last run, shared
-- by every node on this database, so each reports the same state and the
-- interval is measured from the last success cluster-wide; and one row per
-- run, so an operator (and the tests) can see which node ran what when
-- (kept 90 days).

CREATE TABLE scheduled_jobs (
    name             text PRIMARY KEY,
    requested_at     timestamptz,          -- khub jobs run NAME: run as soon as a node can
    last_started_at  timestamptz,
    last_node        text,
    last_success_at  timestamptz,
    last_failure_at  timestamptz,
    last_duration_ms bigint,
    last_error       text,
    successes        bigint NOT NULL DEFAULT 0,
    failures         bigint NOT NULL DEFAULT 0
);

CREATE TABLE scheduled_job_runs (
    id          bigserial PRIMARY KEY,
    job         text NOT NULL,
    node        text NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    ok          boolean,
    detail      text
);
CREATE INDEX scheduled_job_runs_job ON scheduled_job_runs (job, id);
-- each node asks once a second whether a run is open
CREATE INDEX scheduled_job_runs_open ON scheduled_job_runs (job) WHERE finished_at IS NULL;
