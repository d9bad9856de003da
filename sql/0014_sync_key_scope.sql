-- 0014_sync_key_scope.sql -- air-gap bundles: which orgs (namespaces) a
-- trusted signing key may bring in. A key without a row may bring in any;
-- a bundle signed by a key with a row is refused when it carries (or
-- deletes) a repo of a namespace that no pattern of the row matches.

CREATE TABLE sync_key_scopes (
    key_id   text PRIMARY KEY CHECK (key_id ~ '^[0-9a-f]{16}$'),
    orgs     text[] NOT NULL,
    set_by   text NOT NULL,
    set_at   timestamptz NOT NULL DEFAULT now()
);
