-- 0003_benchmarks_downloads.sql -- benchmark runs as `kernels benchmark`
-- uploads them, and download counters per repo, variant, day and client.

-- One upload: the machine, the commit it measured, who sent it. The
-- *_key/_family columns are derived from machineInfo at upload so the
-- backend and variant filters are plain comparisons.
CREATE TABLE benchmark_runs (
    id                     bigserial PRIMARY KEY,
    repo_id                bigint NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    commit_sha             text NOT NULL,     -- kernelCommitSha resolved to 40 hex
    kernel_commit_sha      text NOT NULL,     -- as sent
    benchmark_script_path  text NOT NULL,
    benchmark_script_sha   text,
    gpu                    text NOT NULL,
    gpu_cores              integer,
    backend                text NOT NULL,     -- "CUDA 12.8", "ROCm 6.3", "XPU", "MPS", "NPU", "CPU"
    backend_family         text NOT NULL,     -- cuda, rocm, xpu, metal, cann, cpu, ...
    backend_key            text NOT NULL,     -- cu128, rocm63, or the family
    pytorch_version        text NOT NULL,
    torch_key              text NOT NULL,     -- torch211, '' when unknown
    os                     text NOT NULL,
    os_family              text NOT NULL,     -- linux, darwin, windows, ''
    cpu                    text NOT NULL,
    submitter_id           bigint REFERENCES accounts(id) ON DELETE SET NULL,
    submitter_name         text NOT NULL,
    submitted_at           timestamptz NOT NULL DEFAULT now(),
    payload                jsonb NOT NULL     -- the body as received (fields we do not know yet)
);
CREATE INDEX benchmark_runs_repo ON benchmark_runs (repo_id, id DESC);

-- One workload of a run (TimingResults of kernels' benchmark.py).
CREATE TABLE benchmark_results (
    run_id      bigint NOT NULL REFERENCES benchmark_runs(id) ON DELETE CASCADE,
    workload    text NOT NULL,
    mean_ms     double precision NOT NULL,
    std_ms      double precision NOT NULL,
    min_ms      double precision NOT NULL,
    max_ms      double precision NOT NULL,
    q1_ms       double precision NOT NULL,
    q3_ms       double precision NOT NULL,
    iqr_ms      double precision NOT NULL,
    outliers    integer NOT NULL,
    iterations  integer NOT NULL,
    verified    boolean,
    PRIMARY KEY (run_id, workload)
);

-- Variant downloads (a GET of build/<variant>/metadata.json, or of
-- __init__.py for a variant without metadata.json), added in batches by
-- the server; the client dimensions come from the User-Agent ('' = absent).
CREATE TABLE download_counts (
    repo_id          bigint NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    day              date NOT NULL,       -- UTC
    variant          text NOT NULL,
    kernels_version  text NOT NULL,
    torch_version    text NOT NULL,
    backend          text NOT NULL,
    count            bigint NOT NULL,
    PRIMARY KEY (repo_id, day, variant, kernels_version, torch_version, backend)
);
