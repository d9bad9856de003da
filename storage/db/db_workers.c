/* db_workers.c -- build workers: identities with a token of scope
 * "worker" (rotated in place), what each may build (its scope) and
 * registered it can build (the repo's buildOnPush is read with its other
 * settings: db_repo_settings.c). */
#include "storage/db/db_internal.h"
#include "storage/db/db_builds.h"

#include <ctype.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The scope's lists as PostgreSQL array literals, lower-cased (names
 * match case-insensitively, as repos_id_key does). */
static void scope_arrays(const struct worker_scope *scope, struct strbuf *orgs, struct strbuf *repos)
{
	const struct strvec *lists[2] = { &scope->orgs, &scope->repos };
	struct strbuf *out[2] = { orgs, repos };
	for (int l = 0; l < 2; l++) {
		strbuf_adds(out[l], "{");
		for (size_t i = 0; i < lists[l]->count; i++) {
			char *lower = xstrdup(lists[l]->items[i]);
			for (char *c = lower; *c; c++)
				*c = (char)tolower((unsigned char)*c);
			if (i)
				strbuf_adds(out[l], ",");
			db_array_add(out[l], lower);
			free(lower);
		}
		strbuf_adds(out[l], "}");
	}
}

/* A new token "khw_" + 40 random characters: secret, its hash and prefix. */
static int new_worker_token(char secret[4 + 40 + 1], char hash[65], char prefix[9])
{
	if (db_token_secret("khw_", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", 40, secret, hash) < 0)
		return KHUB_EIO;
	snprintf(prefix, 9, "%.8s", secret);
	return 0;
}

int db_worker_create(const char *name, const char *created_by, const struct worker_scope *scope, char **token,
		     int64_t *id)
{
	char secret[4 + 40 + 1], hash[65], prefix[9];
	if (new_worker_token(secret, hash, prefix) < 0)
		return KHUB_EIO;
	struct strbuf orgs = STRBUF_INIT, repos = STRBUF_INIT;
	scope_arrays(scope, &orgs, &repos);
	const char *params[7] = { name, hash, prefix, created_by ? created_by : "", orgs.buf, repos.buf,
				  scope->private_repos ? "true" : "false" };
	const char *sqlstate = NULL;
	PGresult *res = db_exec("INSERT INTO workers (name, token_sha256, token_prefix, created_by, scope_orgs,"
				" scope_repos, scope_private) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
				7, params, &sqlstate);
	strbuf_release(&orgs);
	strbuf_release(&repos);
	if (!res)
		return sqlstate && strcmp(sqlstate, "23505") == 0 ? KHUB_EEXIST : KHUB_EDB;
	*id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	*token = xstrdup(secret);
	return 0;
}

int db_worker_set_scope(const char *name, const struct worker_scope *scope)
{
	struct strbuf orgs = STRBUF_INIT, repos = STRBUF_INIT;
	scope_arrays(scope, &orgs, &repos);
	const char *params[4] = { name, orgs.buf, repos.buf, scope->private_repos ? "true" : "false" };
	int rc = db_run_one("UPDATE workers SET scope_orgs = $2, scope_repos = $3, scope_private = $4"
			    " WHERE lower(name) = lower($1) AND removed_at IS NULL", 4, params);
	strbuf_release(&orgs);
	strbuf_release(&repos);
	return rc;
}

int db_worker_rotate(const char *name, char **token)
{
	char secret[4 + 40 + 1], hash[65], prefix[9];
	if (new_worker_token(secret, hash, prefix) < 0)
		return KHUB_EIO;
	const char *params[3] = { name, hash, prefix };
	int rc = db_run_one("UPDATE workers SET token_sha256 = $2, token_prefix = $3, token_rotated_at = now()"
			    " WHERE lower(name) = lower($1) AND removed_at IS NULL", 3, params);
	if (rc == 0)
		*token = xstrdup(secret);
	return rc;
}

int db_worker_remove(const char *name)
{
	const char *params[1] = { name };
	return db_run_one("UPDATE workers SET removed_at = now() WHERE lower(name) = lower($1) AND removed_at IS NULL",
			  1, params);
}

int db_worker_token_lookup(const char *token, struct principal *out)
{
	char hash[65];
	sha256_hex(token, strlen(token), hash);
	const char *params[1] = { hash };
	struct db_rows rows;
	int rc = db_query_one(&rows, "SELECT id, name, extract(epoch FROM created_at)::bigint FROM workers"
				     " WHERE token_sha256 = $1 AND removed_at IS NULL", 1, params);
	if (rc < 0)
		return rc;
	memset(out, 0, sizeof(*out));
	db_rows_read(&rows, 0, DB_FIELDS(DB_I64(0, &out->worker_id), DB_TEXT(1, out->name, sizeof(out->name)),
					 DB_TIME(2, &out->token_created_at)));
	snprintf(out->token_name, sizeof(out->token_name), "worker");
	out->scope = ROLE_NONE;
	db_rows_release(&rows);
	return 0;
}

int db_worker_register(int64_t id, const char *version, long concurrency, const char *capabilities,
		       const char *variants)
{
	char wid[24], conc[24];
	const char *params[5] = { db_param_int(wid, id), version, db_param_int(conc, concurrency), capabilities, variants };
	return db_run_one("UPDATE workers SET version = $2, concurrency = $3, capabilities = $4::jsonb,"
			  " variants = $5::text[], registered_at = now(), last_heartbeat = now()"
			  " WHERE id = $1 AND removed_at IS NULL", 5, params);
}

#define ISO(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"

/* The columns of db_worker_list's query. */
enum worker_column {
	WORKER_COL_NAME, WORKER_COL_VERSION, WORKER_COL_CONCURRENCY, WORKER_COL_CAPABILITIES, WORKER_COL_VARIANTS,
	WORKER_COL_CREATED, WORKER_COL_REGISTERED, WORKER_COL_HEARTBEAT, WORKER_COL_JOBS, WORKER_COL_TOKEN_PREFIX,
	WORKER_COL_SCOPE_ORGS, WORKER_COL_SCOPE_REPOS, WORKER_COL_SCOPE_PRIVATE,
};

static void worker_row_fill(void *item, const struct db_rows *rows, size_t i)
{
	struct worker_row *w = item;
	db_rows_read(rows, i, DB_FIELDS(
		DB_STR(WORKER_COL_NAME, &w->name), DB_STR(WORKER_COL_VERSION, &w->version),
		DB_STR(WORKER_COL_CAPABILITIES, &w->capabilities), DB_STR(WORKER_COL_VARIANTS, &w->variants),
		DB_STR(WORKER_COL_JOBS, &w->jobs), DB_STR(WORKER_COL_TOKEN_PREFIX, &w->token_prefix),
		DB_STR(WORKER_COL_SCOPE_ORGS, &w->scope_orgs), DB_STR(WORKER_COL_SCOPE_REPOS, &w->scope_repos),
		DB_LONG(WORKER_COL_CONCURRENCY, &w->concurrency), DB_STR_OR_NULL(WORKER_COL_CREATED, &w->created),
		DB_STR_OR_NULL(WORKER_COL_REGISTERED, &w->registered), DB_STR_OR_NULL(WORKER_COL_HEARTBEAT, &w->heartbeat),
		DB_BOOL(WORKER_COL_SCOPE_PRIVATE, &w->scope_private)));
}

void worker_rows_release(struct worker_row *rows, size_t count)
{
	if (!rows)
		return;
	for (size_t i = 0; i < count; i++) {
		struct worker_row *w = &rows[i];
		char *strings[] = { w->name, w->version, w->capabilities, w->variants, w->created, w->registered,
				    w->heartbeat, w->jobs, w->token_prefix, w->scope_orgs, w->scope_repos };
		for (size_t s = 0; s < sizeof(strings) / sizeof(strings[0]); s++)
			free(strings[s]);
	}
	free(rows);
}

int db_worker_list(struct worker_row **rows, size_t *count)
{
	int rc = 0;
	*rows = db_query_items(sizeof(**rows), worker_row_fill, count, &rc,
			"SELECT w.name, w.version, w.concurrency, w.capabilities::text, to_json(w.variants)::text,"
			" " ISO("w.created_at") ", " ISO("w.registered_at") ", " ISO("w.last_heartbeat") ","
			" coalesce((SELECT json_agg(json_build_object('id', b.id, 'repo', r.namespace || '/' || r.name,"
			"   'commit', b.source_commit, 'variant', b.variant, 'state', b.state, 'attempt', b.attempt,"
			"   'leaseExpiresAt', " ISO("b.lease_expires_at") ") ORDER BY b.id)"
			"  FROM builds b JOIN repos r ON r.id = b.repo_id"
			"  WHERE b.worker_id = w.id AND b.state = 'running'), '[]')::text,"
			" w.token_prefix, to_json(w.scope_orgs)::text, to_json(w.scope_repos)::text, w.scope_private"
			" FROM workers w WHERE w.removed_at IS NULL ORDER BY lower(w.name)", 0, NULL);
	return rc;
}

int db_worker_variants(long live_seconds, char ***live, size_t *nlive, char ***stale, size_t *nstale)
{
	struct db_rows rows;
	char secs[24];
	const char *params[1] = { db_param_int(secs, live_seconds) };
	*live = *stale = NULL;
	*nlive = *nstale = 0;
	int rc = db_query(&rows, "SELECT v, bool_or(coalesce(last_heartbeat > now() - make_interval(secs => $1::int), false))"
				 " FROM workers, unnest(variants) v WHERE removed_at IS NULL GROUP BY v ORDER BY v",
			  1, params);
	if (rc < 0)
		return rc;
	*live = xcalloc(rows.count + 1, sizeof(char *));
	*stale = xcalloc(rows.count + 1, sizeof(char *));
	for (size_t i = 0; i < rows.count; i++) {
		if (db_rows_get(&rows, i, 1)[0] == 't')
			(*live)[(*nlive)++] = xstrdup(db_rows_get(&rows, i, 0));
		else
			(*stale)[(*nstale)++] = xstrdup(db_rows_get(&rows, i, 0));
	}
	db_rows_release(&rows);
	return 0;
}

int db_worker_hipify_variants(long live_seconds, char ***names, size_t *n)
{
	char secs[24];
	const char *params[1] = { db_param_int(secs, live_seconds) };
	return db_query_texts(names, n, "SELECT DISTINCT v FROM workers w,"
			      " jsonb_array_elements(CASE WHEN jsonb_typeof(w.capabilities) = 'array'"
			      "  THEN w.capabilities ELSE '[]'::jsonb END) tc,"
			      " jsonb_array_elements_text(CASE WHEN jsonb_typeof(tc->'variants') = 'array'"
			      "  THEN tc->'variants' ELSE '[]'::jsonb END) v"
			      " WHERE w.removed_at IS NULL AND jsonb_typeof(tc->'hipify') = 'string'"
			      " AND coalesce(w.last_heartbeat > now() - make_interval(secs => $1::int), false)"
			      " ORDER BY v", 1, params);
}

int db_repo_build_owner(int64_t repo_id, int64_t *owner_id)
{
	char rid[24];
	snprintf(rid, sizeof(rid), "%" PRId64, repo_id);
	const char *params[1] = { rid };
	struct db_rows rows;
	int rc = db_query_one(&rows, "SELECT owner_id FROM repos WHERE id = $1", 1, params);
	if (rc < 0)
		return rc;
	*owner_id = strtoll(db_rows_get(&rows, 0, 0), NULL, 10);
	db_rows_release(&rows);
	return 0;
}

int db_worker_benchmark_devices(long live_seconds, struct strvec *devices)
{
	struct db_rows rows;
	char secs[24];
	snprintf(secs, sizeof(secs), "%ld", live_seconds);
	const char *params[1] = { secs };
	int rc = db_query(&rows, "SELECT DISTINCT t->>'device' FROM workers w, jsonb_array_elements(CASE"
				 " jsonb_typeof(w.capabilities) WHEN 'array' THEN w.capabilities ELSE '[]' END) t"
				 " WHERE w.removed_at IS NULL AND w.last_heartbeat > now() - make_interval(secs => $1::int)"
				 " AND t->>'benchmarks' = 'true' AND coalesce(t->>'device', '') <> '' ORDER BY 1", 1, params);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < rows.count; i++)
		strvec_pushf(devices, "%s", db_rows_get(&rows, i, 0));
	db_rows_release(&rows);
	return 0;
}
