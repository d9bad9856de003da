-- 0001_init.sql -- accounts (users and orgs), memberships, tokens, repos,
-- trusted kernel publishers and the audit log.

CREATE TABLE accounts (
    id                        bigserial PRIMARY KEY,
    kind                      text NOT NULL CHECK (kind IN ('user', 'org')),
    name                      text NOT NULL,
    fullname                  text NOT NULL DEFAULT '',
    email                     text,
    is_site_admin             boolean NOT NULL DEFAULT false,
    trusted_kernel_publisher  boolean NOT NULL DEFAULT false,
    created_at                timestamptz NOT NULL DEFAULT now()
);
-- Names are case-insensitive, as on the Hub; users and orgs share them.
CREATE UNIQUE INDEX accounts_name_key ON accounts (lower(name));

CREATE TABLE memberships (
    org_id      bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    user_id     bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    role        text NOT NULL CHECK (role IN ('read', 'write', 'admin')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, user_id)
);

CREATE TABLE tokens (
    id            bigserial PRIMARY KEY,
    user_id       bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    name          text NOT NULL DEFAULT '',
    token_sha256  text NOT NULL UNIQUE,       -- hex SHA-256 of the whole token
    token_prefix  text NOT NULL,              -- first 7 chars, for listings
    scope         text NOT NULL CHECK (scope IN ('read', 'write', 'admin')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz,
    revoked_at    timestamptz,
    last_used_at  timestamptz
);
CREATE INDEX tokens_user ON tokens (user_id);

CREATE TABLE repos (
    id              bigserial PRIMARY KEY,
    type            text NOT NULL CHECK (type IN ('model', 'dataset', 'space', 'kernel')),
    owner_id        bigint NOT NULL REFERENCES accounts(id),
    namespace       text NOT NULL,
    name            text NOT NULL,
    private         boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_modified   timestamptz NOT NULL DEFAULT now(),
    downloads       bigint NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX repos_id_key ON repos (type, lower(namespace), lower(name));

-- Trusted kernel publishers are a flag on accounts; this keeps who set it.
CREATE TABLE trusted_publisher_changes (
    id          bigserial PRIMARY KEY,
    account_id  bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    trusted     boolean NOT NULL,
    changed_by  text NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE audit_log (
    id           bigserial PRIMARY KEY,
    at           timestamptz NOT NULL DEFAULT now(),
    actor_id     bigint,
    actor_name   text NOT NULL,
    action       text NOT NULL,
    target       text NOT NULL,
    details      jsonb,
    remote_addr  text
);
CREATE INDEX audit_log_at ON audit_log (at);
