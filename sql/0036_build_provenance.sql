-- 0036_build_provenance.sql -- a farm build's signed provenance: the DSSE
-- envelope (an in-toto Statement v1 with a SLSA provenance v1 predicate,
-- signed with the hub's Ed25519 key) that GET /api/builds/{id}/provenance
-- serves byte for byte; the publishing commit names its sha256. Kept here,
-- never in the repo: build/<variant>/ holds only what its digest lists.
CREATE TABLE build_provenance (
    build_id    bigint PRIMARY KEY REFERENCES builds(id) ON DELETE CASCADE,
    envelope    text NOT NULL,
    sha256      text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    key_id      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
