-- 0031_sync_exporter_keys.sql -- air-gap bundles: which signing key may sign
-- for an exporter id. A bundle names its exporter (the id whose sequence it
-- advances); only the key bound to that id may sign for it, so a trusted key
-- cannot advance, and so freeze, another exporter's sequence. An id is bound
-- to the key of the first bundle of it this hub records, or by the operator
-- (khub sync key-scope KEY --exporter ID). Ids already imported are bound to
-- the key of their first recorded bundle.

CREATE TABLE sync_exporter_keys (
    exporter  uuid PRIMARY KEY,
    key_id    text NOT NULL CHECK (key_id ~ '^[0-9a-f]{16}$'),
    bound_by  text NOT NULL,
    bound_at  timestamptz NOT NULL DEFAULT now()
);

INSERT INTO sync_exporter_keys (exporter, key_id, bound_by)
    SELECT DISTINCT ON (exporter) exporter, key_id, 'migration 0031'
    FROM sync_imports WHERE key_id ~ '^[0-9a-f]{16}$' ORDER BY exporter, id;
