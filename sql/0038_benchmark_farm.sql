-- 0038_benchmark_farm.sql -- a third source of benchmark runs, "farm": the
-- hub measured the kernel itself on a worker's known device (submitted only
-- with a worker's token, for a job it holds); listings keep it apart.
ALTER TABLE benchmark_runs DROP CONSTRAINT IF EXISTS benchmark_runs_source_check;
ALTER TABLE benchmark_runs ADD CONSTRAINT benchmark_runs_source_check
    CHECK (source IN ('maintainer', 'community', 'farm'));
ALTER TABLE benchmark_runs
    ADD COLUMN worker_id bigint REFERENCES workers(id) ON DELETE SET NULL,
    ADD COLUMN build_id bigint REFERENCES builds(id) ON DELETE SET NULL;
CREATE INDEX benchmark_runs_build ON benchmark_runs (build_id) WHERE build_id IS NOT NULL;
