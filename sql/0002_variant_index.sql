-- 0002_variant_index.sql -- the kernel variant index: per commit of a kernel
-- repo, every build/<variant> with its parsed name and metadata.json, and
-- each repo's branch heads (what the listing filters look at).

-- One row per indexed commit: the index of a commit is written once (a
-- commit never changes) and redone only when index_version grows.
CREATE TABLE kernel_commits (
    repo_id        bigint NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    commit_sha     text NOT NULL,
    index_version  integer NOT NULL,
    variant_count  integer NOT NULL,
    indexed_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (repo_id, commit_sha)
);

CREATE TABLE kernel_variants (
    repo_id            bigint NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    commit_sha         text NOT NULL,
    variant            text NOT NULL,            -- the directory name under build/
    name_valid         boolean NOT NULL,         -- false: the loader skips it
    name_error         text,
    -- the parsed name (NULL when name_valid is false)
    framework          text,                     -- torch | torch-stable-abi | tvm-ffi | torch-noarch
    framework_major    integer,
    framework_minor    integer,
    cxx_abi            text,                     -- cxx11 | cxx98 | NULL (no tag)
    backend            text,                     -- cuda, rocm, xpu, cpu, metal, ...; noarch: the name after torch-
    backend_tag        text,                     -- cu128, rocm71, xpu20253, cpu; noarch: as backend
    backend_major      integer,
    backend_minor      integer,
    arch               text,                     -- x86_64, aarch64; NULL for noarch
    os                 text,                     -- linux, darwin, windows; NULL for noarch
    -- the files of build/<variant>/ (LFS files count with their real size)
    file_count         integer NOT NULL,
    total_size         bigint NOT NULL,
    -- build/<variant>/metadata.json
    metadata_status    text NOT NULL CHECK (metadata_status IN ('ok', 'missing', 'invalid')),
    metadata_error     text,
    kernel_id          text,
    kernel_name        text,
    kernel_version     bigint,
    license            text,
    backend_type       text,
    backend_archs      jsonb,
    python_depends     jsonb,
    metadata           jsonb,                    -- the whole document when it is JSON
    warnings           jsonb NOT NULL DEFAULT '[]',
    PRIMARY KEY (repo_id, commit_sha, variant)
);

-- Branch tips as last seen by the indexer (every commit, push and import
-- refreshes them); the listing's backend/torch/arch filters join these.
CREATE TABLE kernel_heads (
    repo_id     bigint NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    ref         text NOT NULL,                   -- refs/heads/v1
    commit_sha  text NOT NULL,
    PRIMARY KEY (repo_id, ref)
);
CREATE INDEX kernel_heads_commit ON kernel_heads (repo_id, commit_sha);
