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
	m->repo = xstrdup(db_rows_get(rows, i, 0));
	m->type = REPO_KERNEL;
	repo_type_parse(db_rows_get(rows, i, 1), &m->type);
	m->selection = xstrdup(db_rows_get(rows, i, 2));
	m->upstream_name = xstrdup(db_rows_get(rows, i, 3));
	m->upstream_url = xstrdup(db_rows_get(rows, i, 4));
	m->upstream_repo = xstrdup(db_rows_get(rows, i, 5));
	m->last_sync_started = (time_t)db_rows_int(rows, i, 6, 0);
	m->last_sync_finished = (time_t)db_rows_int(rows, i, 7, 0);
	m->last_success = (time_t)db_rows_int(rows, i, 8, 0);
	m->lag_seconds = db_rows_int(rows, i, 9, -1);
	m->refs_behind = db_rows_int(rows, i, 10, 0);
	m->last_error = db_rows_strdup(rows, i, 11);
	m->warnings = db_rows_strdup(rows, i, 12);
	m->bytes = db_rows_int(rows, i, 13, 0);
	m->objects = db_rows_int(rows, i, 14, 0);
	m->syncs = db_rows_int(rows, i, 15, 0);
	m->lazy = db_rows_get(rows, i, 16)[0] == 't';
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
	snprintf(id, sizeof(id), "%" PRId64, s->repo_id);
	const char *params[8] = { id, s->selection, s->upstream_name, s->upstream_url, s->upstream_repo,
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
	char id[24], b[24], o[24], behind[16];
	snprintf(id, sizeof(id), "%" PRId64, repo_id);
	snprintf(b, sizeof(b), "%" PRIu64, bytes);
	snprintf(o, sizeof(o), "%" PRIu64, objects);
	snprintf(behind, sizeof(behind), "%d", refs_behind);
	const char *params[7] = { id, ok ? "true" : "false", error, warnings, b, o, behind };
	return db_run("UPDATE mirror_repos SET last_sync_finished = now(),"
		      " last_success = CASE WHEN $2::boolean THEN now() ELSE last_success END,"
		      " last_error = $3, warnings = $4, bytes_total = bytes_total + $5::bigint,"
		      " objects_total = objects_total + $6::bigint, refs_behind = $7::int,"
		      " syncs_total = syncs_total + 1 WHERE repo_id = $1", 7, params);
}

int db_mirror_count_transfer(int64_t repo_id, uint64_t bytes, uint64_t objects)
{
	char id[24], b[24], o[24];
	snprintf(id, sizeof(id), "%" PRId64, repo_id);
	snprintf(b, sizeof(b), "%" PRIu64, bytes);
	snprintf(o, sizeof(o), "%" PRIu64, objects);
	const char *params[3] = { id, b, o };
	return db_run("UPDATE mirror_repos SET bytes_total = bytes_total + $2::bigint,"
		      " objects_total = objects_total + $3::bigint WHERE repo_id = $1", 3, params);
}

int db_mirror_lazy_source(int64_t repo_id, struct mirror_lazy_source *out)
{
	memset(out, 0, sizeof(*out));
	char id[24];
	snprintf(id, sizeof(id), "%" PRId64, repo_id);
	const char *params[1] = { id };
	struct db_rows rows;
	int rc = db_query_one(&rows, "SELECT m.upstream_url, m.upstream_repo, m.token_env, m.token_file, r.type"
			      " FROM mirror_repos m JOIN repos r ON r.id = m.repo_id WHERE m.repo_id = $1 AND m.lazy",
			      1, params);
	if (rc < 0)
		return rc;
	out->upstream_url = xstrdup(db_rows_get(&rows, 0, 0));
	out->upstream_repo = xstrdup(db_rows_get(&rows, 0, 1));
	out->token_env = db_rows_strdup(&rows, 0, 2);
	out->token_file = db_rows_strdup(&rows, 0, 3);
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
	*id = rows.count == 1 ? strtoll(db_rows_get(&rows, 0, 0), NULL, 10) : 0;
	db_rows_release(&rows);
	return 0;
}

int db_mirror_trigger_claim(int64_t *id, char **selection)
{
	*id = 0;
	*selection = NULL;
	struct db_rows rows;
	int rc = db_query_one(&rows, "UPDATE mirror_triggers SET started_at = now() WHERE id = ("
			      " SELECT id FROM mirror_triggers WHERE started_at IS NULL ORDER BY id"
			      " FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id, coalesce(selection, '')", 0, NULL);
	if (rc == 0) {
		*id = strtoll(db_rows_get(&rows, 0, 0), NULL, 10);
		*selection = xstrdup(db_rows_get(&rows, 0, 1));
	}
	db_rows_release(&rows);
	return rc == KHUB_ENOTFOUND ? 1 : rc;
}

int db_mirror_trigger_finish(int64_t id)
{
	char s[24];
	snprintf(s, sizeof(s), "%" PRId64, id);
	const char *params[1] = { s };
	return db_run("UPDATE mirror_triggers SET finished_at = now() WHERE id = $1", 1, params);
}

int db_mirror_config_get(char **json)
{
	*json = NULL;
	struct db_rows rows;
	int rc = db_query_one(&rows, "SELECT config::text FROM mirror_config WHERE id = 1", 0, NULL);
	if (rc == 0)
		*json = xstrdup(db_rows_get(&rows, 0, 0));
	db_rows_release(&rows);
	return rc;
}

int db_mirror_config_put(const char *json, const char *updated_by)
{
	const char *params[2] = { json, updated_by };
	return db_run("INSERT INTO mirror_config (id, config, updated_by) VALUES (1, $1::jsonb, $2)"
		      " ON CONFLICT (id) DO UPDATE SET config = EXCLUDED.config, updated_by = $2, updated_at = now()",
		      2, params);
}
