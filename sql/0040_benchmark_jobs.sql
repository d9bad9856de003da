-- 0040_benchmark_jobs.sql -- benchmark jobs (docs/build-farm.md, "Benchmark
-- jobs"): a job of kind 'benchmark' runs a published variant's benchmarks/
-- on one device model and submits farm runs; it never publishes. One per
-- (repo, commit, variant, device), ever: queueing it again is a no-op.
ALTER TABLE builds
    ADD COLUMN kind text NOT NULL DEFAULT 'build' CHECK (kind IN ('build', 'benchmark')),
    ADD COLUMN device text,               -- a benchmark job's device model ("cpu", a GPU's name)
    ADD COLUMN variant_commit text CHECK (variant_commit ~ '^[0-9a-f]{40}$'),  -- where build/<variant>/ is
    ADD CONSTRAINT builds_benchmark_fields CHECK ((kind = 'benchmark') = (device IS NOT NULL AND variant_commit IS NOT NULL));
-- A build and a benchmark job of the same commit and variant do not exclude each other.
DROP INDEX builds_active_key;
CREATE UNIQUE INDEX builds_active_key ON builds (repo_id, source_commit, variant)
    WHERE state IN ('queued', 'running') AND kind = 'build';
CREATE UNIQUE INDEX builds_benchmark_key ON builds (repo_id, source_commit, variant, device)
    WHERE kind = 'benchmark';

-- After a successful farm publication, benchmark the variant on every
-- device model a live benchmark worker registered (off by default).
ALTER TABLE repos ADD COLUMN benchmark_after_publish boolean NOT NULL DEFAULT false;
