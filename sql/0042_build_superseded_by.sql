-- 0042_build_superseded_by.sql -- which build superseded a superseded one
-- (docs/build-farm.md, "Fleet rebuilds"): its campaign's pull request reads
-- as closed, pointing at the newer build. Builds superseded before this
-- migration get it from their error ("superseded by build #N").
ALTER TABLE builds ADD COLUMN superseded_by bigint REFERENCES builds (id) ON DELETE SET NULL;
UPDATE builds o SET superseded_by = n.id
    FROM builds n
    WHERE o.state = 'superseded' AND n.id = substring(o.error FROM '^superseded by build #([0-9]+)$')::bigint;
