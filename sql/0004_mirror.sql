-- 0004_mirror.sql -- mirrored repos (read-only to users), their sync state,
-- sync triggers from the admin API, and the mirror configuration.

ALTER TABLE repos ADD COLUMN mirrored boolean NOT NULL DEFAULT false;
-- An admin's word on an org's trust flag beats the upstream's (NULL = copy).
ALTER TABLE accounts ADD COLUMN trust_override boolean;

CREATE TABLE mirror_repos (
    repo_id            bigint PRIMARY KEY REFERENCES repos(id) ON DELETE CASCADE,
    selection          text NOT NULL,
    upstream_name      text NOT NULL,
    upstream_url       text NOT NULL,          -- base URL of the upstream hub
    upstream_repo      text NOT NULL,          -- ns/name upstream
    token_env          text,                   -- where the server finds the token for lazy fetches
    token_file         text,
    lazy               boolean NOT NULL DEFAULT true,
    last_sync_started  timestamptz,
    last_sync_finished timestamptz,
    last_success       timestamptz,
    last_error         text,
    refs_behind        integer NOT NULL DEFAULT 0,   -- upstream refs not yet visible here
    warnings           text,                         -- policy decisions (kept refs, diverged)
    bytes_total        bigint NOT NULL DEFAULT 0,
    objects_total      bigint NOT NULL DEFAULT 0,
    syncs_total        bigint NOT NULL DEFAULT 0
);

CREATE TABLE mirror_triggers (
    id            bigserial PRIMARY KEY,
    selection     text,                        -- NULL = every selection
    requested_by  text NOT NULL,
    requested_at  timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    finished_at   timestamptz
);

CREATE TABLE mirror_config (
    id          integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    config      jsonb NOT NULL,
    updated_by  text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
