-- 0011_sync_sequence.sql -- air-gap bundles: the exporting hub's identity
-- and bundle sequence, the repos it ever exported (so a deletion crosses),
-- the bundles an importing hub applied per exporter (rollback refused), and
-- which accounts imports or the mirror made (a bundle never touches a local one).

CREATE TABLE sync_exporter (
    id        integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    exporter  uuid NOT NULL,
    sequence  bigint NOT NULL
);

CREATE TABLE sync_exported_repos (
    type       text NOT NULL,
    namespace  text NOT NULL,
    name       text NOT NULL
);
CREATE UNIQUE INDEX sync_exported_repos_key ON sync_exported_repos (type, lower(namespace), lower(name));

CREATE TABLE sync_imports (
    id           bigserial PRIMARY KEY,
    exporter     uuid NOT NULL,
    sequence     bigint NOT NULL,
    bundle       uuid NOT NULL UNIQUE,
    key_id       text NOT NULL,
    hub          text NOT NULL,
    operator     text NOT NULL,
    state        text NOT NULL CHECK (state IN ('applying', 'done')),
    refs_moved   integer NOT NULL DEFAULT 0,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);
CREATE INDEX sync_imports_exporter ON sync_imports (exporter, sequence DESC);

ALTER TABLE accounts ADD COLUMN mirrored boolean NOT NULL DEFAULT false;
-- orgs made by earlier imports or the mirror: only mirrored repos, no members
UPDATE accounts a SET mirrored = true WHERE a.kind = 'org'
    AND EXISTS (SELECT 1 FROM repos r WHERE r.owner_id = a.id AND r.mirrored)
    AND NOT EXISTS (SELECT 1 FROM repos r WHERE r.owner_id = a.id AND NOT r.mirrored)
    AND NOT EXISTS (SELECT 1 FROM memberships m WHERE m.org_id = a.id);
