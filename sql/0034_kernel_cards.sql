-- 0034_kernel_cards.sql -- each kernel repo's README card (main's README.md:
-- front matter license and tags, the first paragraph as description, the
-- body's text), written by the indexer when main moves (publish, push,
-- import; existing repos by the catch-up thread at start), so that listing
-- and search read one row per repo and never a README.
CREATE TABLE kernel_cards (
    repo_id       bigint PRIMARY KEY REFERENCES repos(id) ON DELETE CASCADE,
    commit_sha    text NOT NULL,                 -- main's head when read; '' when there is no main
    card_version  integer NOT NULL,              -- redone when what is read grows
    license       text,
    library_name  text,
    tags          jsonb NOT NULL DEFAULT '[]',   -- array of strings
    description   text NOT NULL DEFAULT '',
    words         text NOT NULL DEFAULT '',      -- tags, license and library name, for search
    body          text NOT NULL DEFAULT '',      -- the README body (bounded), for search
    document      tsvector GENERATED ALWAYS AS (
                      setweight(to_tsvector('english', description || ' ' || words), 'A') ||
                      to_tsvector('english', body)) STORED
);
CREATE INDEX kernel_cards_document ON kernel_cards USING gin (document);
