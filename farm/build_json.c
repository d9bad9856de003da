/* build_json.c -- a build job as JSON: BUILD, what users and the web UI
 * see, and JOB, what a claim hands a worker (docs/build-farm.md). */
#include "farm/farm.h"

#include <stdio.h>
#include <stdlib.h>

static json_t *cell_string(const struct db_rows *rows, size_t row, enum build_column c)
{
	return db_rows_isnull(rows, row, c) ? json_null() : json_string(db_rows_get(rows, row, c));
}

/* A source URL as shown: never its userinfo (rows queued before such
 * URLs were refused may hold some). */
static json_t *cell_url(const struct db_rows *rows, size_t row, enum build_column c)
{
	if (db_rows_isnull(rows, row, c))
		return json_null();
	char *shown = build_source_url_public(db_rows_get(rows, row, c));
	json_t *v = json_string(shown);
	free(shown);
	return v;
}

static json_int_t cell_int(const struct db_rows *rows, size_t row, enum build_column c)
{
	return (json_int_t)strtoll(db_rows_get(rows, row, c), NULL, 10);
}

json_t *build_json(const struct db_rows *rows, size_t row)
{
	char repo[2 * REPO_NAME_MAX + 2];
	snprintf(repo, sizeof(repo), "%s/%s", db_rows_get(rows, row, BUILD_COL_NS), db_rows_get(rows, row, BUILD_COL_NAME));
	json_t *report = NULL;
	if (!db_rows_isnull(rows, row, BUILD_COL_ABI_REPORT))
		report = json_loads(db_rows_get(rows, row, BUILD_COL_ABI_REPORT), 0, NULL);
	json_t *source = json_null();
	if (!db_rows_isnull(rows, row, BUILD_COL_SOURCE_URL))
		source = json_pack("{s:o, s:o}", "url", cell_url(rows, row, BUILD_COL_SOURCE_URL), "revision",
				   cell_string(rows, row, BUILD_COL_SOURCE_REVISION));
	json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
			      "id", cell_int(rows, row, BUILD_COL_ID), "repo", repo, "commit",
			      db_rows_get(rows, row, BUILD_COL_COMMIT), "variant", db_rows_get(rows, row, BUILD_COL_VARIANT),
			      "state", db_rows_get(rows, row, BUILD_COL_STATE), "attempt",
			      cell_int(rows, row, BUILD_COL_ATTEMPT), "max_attempts",
			      cell_int(rows, row, BUILD_COL_MAX_ATTEMPTS), "worker", cell_string(rows, row, BUILD_COL_WORKER),
			      "created_at", cell_string(rows, row, BUILD_COL_CREATED), "started_at",
			      cell_string(rows, row, BUILD_COL_STARTED), "finished_at",
			      cell_string(rows, row, BUILD_COL_FINISHED), "not_before",
			      cell_string(rows, row, BUILD_COL_NOT_BEFORE), "lease_expires_at",
			      cell_string(rows, row, BUILD_COL_LEASE_EXPIRES), "error", cell_string(rows, row, BUILD_COL_ERROR),
			      "source", source);
	json_object_set_new(o, "published", db_rows_isnull(rows, row, BUILD_COL_BRANCH) ? json_null()
				: json_pack("{s:o, s:o}", "branch", cell_string(rows, row, BUILD_COL_BRANCH), "commit",
					    cell_string(rows, row, BUILD_COL_PUBLISHED)));
	json_object_set_new(o, "abi_report", report ? report : json_null());
	json_object_set_new(o, "force", json_boolean(db_rows_get(rows, row, BUILD_COL_FORCE)[0] == 't'));
	json_object_set_new(o, "requested_by", cell_string(rows, row, BUILD_COL_REQUESTED_BY));
	json_object_set_new(o, "log_length", json_integer(cell_int(rows, row, BUILD_COL_LOG_LENGTH)));
	json_object_set_new(o, "note", cell_string(rows, row, BUILD_COL_NOTE));
	return o;
}

json_t *build_job_json(const struct db_rows *rows, size_t row)
{
	char repo[2 * REPO_NAME_MAX + 2];
	const struct farm_settings *s = &farm_settings;
	snprintf(repo, sizeof(repo), "%s/%s", db_rows_get(rows, row, BUILD_COL_NS), db_rows_get(rows, row, BUILD_COL_NAME));
	return json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:{s:I, s:I, s:I, s:I}, s:s?}", "id",
			 cell_int(rows, row, BUILD_COL_ID), "repo", repo, "repo_type", "kernel", "commit",
			 db_rows_get(rows, row, BUILD_COL_COMMIT), "variant", db_rows_get(rows, row, BUILD_COL_VARIANT),
			 "attempt", cell_int(rows, row, BUILD_COL_ATTEMPT), "max_attempts",
			 cell_int(rows, row, BUILD_COL_MAX_ATTEMPTS), "lease_seconds", (json_int_t)s->lease_seconds,
			 "heartbeat_seconds", (json_int_t)s->heartbeat_seconds, "limits", "wall_seconds",
			 (json_int_t)s->wall_seconds, "cpu_seconds", (json_int_t)s->cpu_seconds, "memory_mb",
			 (json_int_t)s->memory_mb, "disk_mb", (json_int_t)s->disk_mb, "abi_manylinux", s->abi_manylinux);
}

/* WORKER of GET /api/admin/workers: one row of enum worker_column. */
json_t *build_worker_json(const struct db_rows *rows, size_t row)
{
	json_t *caps = json_loads(db_rows_get(rows, row, WORKER_COL_CAPABILITIES), 0, NULL);
	json_t *variants = json_loads(db_rows_get(rows, row, WORKER_COL_VARIANTS), 0, NULL);
	json_t *jobs = json_loads(db_rows_get(rows, row, WORKER_COL_JOBS), 0, NULL);
	json_t *orgs = json_loads(db_rows_get(rows, row, WORKER_COL_SCOPE_ORGS), 0, NULL);
	json_t *repos = json_loads(db_rows_get(rows, row, WORKER_COL_SCOPE_REPOS), 0, NULL);
	json_t *w = json_pack("{s:s, s:s, s:I, s:o, s:o, s:o, s:s}", "name", db_rows_get(rows, row, WORKER_COL_NAME),
			      "version", db_rows_get(rows, row, WORKER_COL_VERSION), "concurrency",
			      (json_int_t)atol(db_rows_get(rows, row, WORKER_COL_CONCURRENCY)), "toolchains",
			      caps ? caps : json_array(), "variants", variants ? variants : json_array(), "jobs",
			      jobs ? jobs : json_array(), "token_prefix", db_rows_get(rows, row, WORKER_COL_TOKEN_PREFIX));
	json_object_set_new(w, "scope", json_pack("{s:o, s:o, s:b}", "orgs", orgs ? orgs : json_array(), "repos",
						  repos ? repos : json_array(), "private",
						  db_rows_get(rows, row, WORKER_COL_SCOPE_PRIVATE)[0] == 't'));
	static const struct { const char *key; enum worker_column col; } times[] = {
		{ "created_at", WORKER_COL_CREATED }, { "registered_at", WORKER_COL_REGISTERED },
		{ "last_heartbeat", WORKER_COL_HEARTBEAT },
	};
	for (size_t t = 0; t < sizeof(times) / sizeof(times[0]); t++)
		json_object_set_new(w, times[t].key, db_rows_isnull(rows, row, times[t].col) ? json_null()
					: json_string(db_rows_get(rows, row, times[t].col)));
	return w;
}
