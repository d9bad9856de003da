-- 0039_build_campaigns.sql -- fleet rebuilds (docs/build-farm.md, "Fleet
-- rebuilds"): a campaign queues one variant for every kernel whose
-- build.toml allows it; each kernel's builds are staged on a pull request
-- ref (refs/pr/N) that a writer merges into v<N>, unless the repo publishes
-- campaign builds directly.

CREATE TABLE build_campaigns (
    id           bigserial PRIMARY KEY,
    variant      text NOT NULL,
    reason       text NOT NULL,                  -- 'admin' or 'policy: toolchain <name> of worker <w>'
    requested_by text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- One row per kernel the campaign looked at: planned (build set), or
-- skipped with why; pr_ref/pr_base once the first build staged its PR.
CREATE TABLE build_campaign_kernels (
    campaign_id  bigint NOT NULL REFERENCES build_campaigns(id) ON DELETE CASCADE,
    repo_id      bigint NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    position     integer NOT NULL,               -- newest version first
    source_commit text NOT NULL,
    version      bigint,
    build_id     bigint REFERENCES builds(id) ON DELETE SET NULL,
    skipped      text,                           -- why nothing was queued
    pr_ref       text,                           -- refs/pr/N
    pr_base      text,                           -- the v<N> head it started from ('' none)
    description  text,
    merged_at    timestamptz,
    PRIMARY KEY (campaign_id, repo_id)
);
CREATE INDEX build_campaign_kernels_build ON build_campaign_kernels (build_id);

-- 'pr' (a writer merges the campaign's pull request) or 'direct' (onto v<N>).
ALTER TABLE repos ADD COLUMN campaign_publish text NOT NULL DEFAULT 'pr'
    CHECK (campaign_publish IN ('pr', 'direct'));
