/* db_mirror.c -- the mirror's tables: per-repo pull status and counters,
 * pull triggers, the stored mirror configuration, and the upstream a lazy
 * fetch goes to. */
#include "storage/db/db_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void fill_mirror_status(void *item, const struct db_rows *rows, size_t i)
{
	struct mirror_status *m = item;
	m->type = REPO_KERNEL;
	repo_type_parse(db_rows_get(rows, i, 1), &m->type);
	db_rows_read(rows, i, DB_FIELDS(DB_STR(0, &m->repo), DB_STR(2, &m->selection), DB_STR(3, &m->upstream_name),
					DB_STR(4, &m->upstream_url), DB_STR(5, &m->upstream_repo),
					DB_TIME(6, &m->last_sync_started), DB_TIME(7, &m->last_sync_finished),
					DB_TIME(8, &m->last_success), DB_I64_OR(9, &m->lag_seconds, -1),
					DB_I64(10, &m->refs_behind), DB_STR_OR_NULL(11, &m->last_error),
					DB_STR_OR_NULL(12, &m->warnings), DB_I64(13, &m->bytes), DB_I64(14, &m->objects),
					DB_I64(15, &m->syncs), DB_BOOL(16, &m->lazy)));
}

int db_mirror_status_list(struct mirror_status_list *out)
{
	int rc;
	out->items = db_query_items(sizeof(*out->items), fill_mirror_status, &out->count, &rc,
				    "SELECT r.namespace || '/' || r.name, r.type, m.selection, m.upstream_name, m.upstream_url,"
				    " m.upstream_repo, extract(epoch FROM m.last_sync_started)::bigint,"
				    " extract(epoch FROM m.last_sync_finished)::bigint, extract(epoch FROM m.last_success)::bigint,"
				    " extract(epoch FROM now() - m.last_success)::bigint, m.refs_behind, m.last_error, m.warnings,"
				    " m.bytes_total, m.objects_total, m.syncs_total, m.lazy"
				    " FROM mirror_repos m JOIN repos r ON r.id = m.repo_id ORDER BY 1", 0, NULL);
	return rc;
}

void mirror_status_list_release(struct mirror_status_list *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->count; i++) {
		struct mirror_status *m = &list->items[i];
		free(m->repo);
		free(m->selection);
		free(m->upstream_name);
		free(m->upstream_url);
		free(m->upstream_repo);
		free(m->last_error);
		free(m->warnings);
	}
	free(list->items);
	list->items = NULL;
	list->count = 0;
}

int db_mirror_pull_started(const struct mirror_pull_start *s)
{
	char id[24];
	const char *params[8] = { db_param_int(id, s->repo_id), s->selection, s->upstream_name, s->upstream_url, s->upstream_repo,
				  s->token_env, s->token_file, s->lazy ? "true" : "false" };
	return db_run("INSERT INTO mirror_repos (repo_id, selection, upstream_name, upstream_url, upstream_repo,"
		      " token_env, token_file, lazy, last_sync_started) VALUES ($1,$2,$3,$4,$5,$6,$7,$8, now())"
		      " ON CONFLICT (repo_id) DO UPDATE SET selection = $2, upstream_name = $3, upstream_url = $4,"
		      " upstream_repo = $5, token_env = $6, token_file = $7, lazy = $8, last_sync_started = now()",
		      8, params);
}

int db_mirror_pull_finished(int64_t repo_id, int ok, const char *error, const char *warnings, uint64_t bytes,
			    uint64_t objects, int refs_behind)
{
	char id[24], b[24], o[24], behind[24];
	snprintf(b, sizeof(b), "%" PRIu64, bytes);
	snprintf(o, sizeof(o), "%" PRIu64, objects);
	const char *params[7] = { db_param_int(id, repo_id), ok ? "true" : "false", error, warnings, b, o,
				  db_param_int(behind, refs_behind) };
	return db_run("UPDATE mirror_repos SET last_sync_finished = now(),"
		      " last_success = CASE WHEN $2::boolean THEN now() ELSE last_success END,"
		      " last_error = $3, warnings = $4, bytes_total = bytes_total + $5::bigint,"
		      " objects_total = objects_total + $6::bigint, refs_behind = $7::int,"
		      " syncs_total = syncs_total + 1 WHERE repo_id = $1", 7, params);
}

int db_mirror_count_transfer(int64_t repo_id, uint64_t bytes, uint64_t objects)
{
	char id[24], b[24], o[24];
	snprintf(b, sizeof(b), "%" PRIu64, bytes);
	snprintf(o, sizeof(o), "%" PRIu64, objects);
	const char *params[3] = { db_param_int(id, repo_id), b, o };
	return db_run("UPDATE mirror_repos SET bytes_total = bytes_total + $2::bigint,"
		      " objects_total = objects_total + $3::bigint WHERE repo_id = $1", 3, params);
}

int db_mirror_lazy_source(int64_t repo_id, struct mirror_lazy_source *out)
{
	memset(out, 0, sizeof(*out));
	char id[24];
	const char *params[1] = { db_param_int(id, repo_id) };
	struct db_rows rows;
	int rc = db_query_one(&rows, "SELECT m.upstream_url, m.upstream_repo, m.token_env, m.token_file, r.type"
			      " FROM mirror_repos m JOIN repos r ON r.id = m.repo_id WHERE m.repo_id = $1 AND m.lazy",
			      1, params);
	if (rc < 0)
		return rc;
	db_rows_read(&rows, 0, DB_FIELDS(DB_STR(0, &out->upstream_url), DB_STR(1, &out->upstream_repo),
					 DB_STR_OR_NULL(2, &out->token_env), DB_STR_OR_NULL(3, &out->token_file)));
	out->type = REPO_KERNEL;
	repo_type_parse(db_rows_get(&rows, 0, 4), &out->type);
	db_rows_release(&rows);
	return 0;
}

void mirror_lazy_source_release(struct mirror_lazy_source *src)
{
	if (!src)
		return;
	free(src->upstream_url);
	free(src->upstream_repo);
	free(src->token_env);
	free(src->token_file);
	memset(src, 0, sizeof(*src));
}

int db_mirror_trigger_add(const char *selection, const char *requested_by, int64_t *id)
{
	const char *params[2] = { selection, requested_by };
	struct db_rows rows;
	int rc = db_query(&rows, "INSERT INTO mirror_triggers (selection, requested_by) VALUES ($1, $2) RETURNING id",
			  2, params);
	if (rc < 0)
		return rc;
	*id = rows.count == 1 ? db_rows_int(&rows, 0, 0, 0) : 0;
	db_rows_release(&rows);
	return 0;
}

int db_mirror_trigger_claim(int64_t *id, char **selection)
{
	*id = 0;
	*selection = NULL;
	int rc = db_query_row("UPDATE mirror_triggers SET started_at = now() WHERE id = ("
			      " SELECT id FROM mirror_triggers WHERE started_at IS NULL ORDER BY id"
			      " FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id, coalesce(selection, '')", 0, NULL,
			      DB_FIELDS(DB_I64(0, id), DB_STR(1, selection)));
	return rc == KHUB_ENOTFOUND ? 1 : rc;
}

int db_mirror_trigger_finish(int64_t id)
{
	char s[24];
	const char *params[1] = { db_param_int(s, id) };
	return db_run("UPDATE mirror_triggers SET finished_at = now() WHERE id = $1", 1, params);
}

int db_mirror_config_get(char **json)
{
	*json = NULL;
	return db_query_row("SELECT config::text FROM mirror_config WHERE id = 1", 0, NULL, DB_FIELDS(DB_STR(0, json)));
}

int db_mirror_config_put(const char *json, const char *updated_by)
{
	const char *params[2] = { json, updated_by };
	return db_run("INSERT INTO mirror_config (id, config, updated_by) VALUES (1, $1::jsonb, $2)"
		      " ON CONFLICT (id) DO UPDATE SET config = EXCLUDED.config, updated_by = $2, updated_at = now()",
		      2, params);
}
