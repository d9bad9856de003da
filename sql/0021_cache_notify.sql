-- 0021_cache_notify.sql -- several khub nodes share one database: every
-- write to a row that a node keeps in memory (repo records, token lookups)
-- sends NOTIFY khub_cache in the writing transaction, so every node's
-- listener (storage/db_listen.c) drops its copy once the write commits and
-- never before. The payload names the cache: 'repos' or 'tokens'.
-- Columns written on every request (tokens.last_used_at, repos.downloads)
-- notify nothing.

CREATE FUNCTION khub_notify_cache() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('khub_cache', TG_ARGV[0]);
    RETURN NULL;
END;
$$;

CREATE TRIGGER repos_cache_notify
    AFTER INSERT OR DELETE OR UPDATE OF type, owner_id, namespace, name, private, last_modified ON repos
    FOR EACH STATEMENT EXECUTE FUNCTION khub_notify_cache('repos');
CREATE TRIGGER mirror_repos_cache_notify
    AFTER INSERT OR DELETE ON mirror_repos
    FOR EACH STATEMENT EXECUTE FUNCTION khub_notify_cache('repos');
CREATE TRIGGER tokens_cache_notify
    AFTER INSERT OR DELETE OR UPDATE OF user_id, scope, expires_at, revoked_at ON tokens
    FOR EACH STATEMENT EXECUTE FUNCTION khub_notify_cache('tokens');
CREATE TRIGGER accounts_cache_notify
    AFTER DELETE OR UPDATE OF name, is_site_admin ON accounts
    FOR EACH STATEMENT EXECUTE FUNCTION khub_notify_cache('tokens');
