/* db_repos.c -- the repo registry: ids, owners and visibility. */
#include "storage/db/db_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void fill_repo(PGresult *res, int row, struct repo_record *out)
{
	out->id = strtoll(PQgetvalue(res, row, 0), NULL, 10);
	repo_type_parse(PQgetvalue(res, row, 1), &out->type);
	out->owner_id = strtoll(PQgetvalue(res, row, 2), NULL, 10);
	snprintf(out->ns, sizeof(out->ns), "%s", PQgetvalue(res, row, 3));
	snprintf(out->name, sizeof(out->name), "%s", PQgetvalue(res, row, 4));
	out->private = PQgetvalue(res, row, 5)[0] == 't';
	out->last_modified = (time_t)strtoll(PQgetvalue(res, row, 6), NULL, 10);
	out->downloads = strtoll(PQgetvalue(res, row, 7), NULL, 10);
	out->mirrored = PQgetvalue(res, row, 8)[0] == 't';
}

#define REPO_COLUMNS "id, type, owner_id, namespace, name, private," \
	" extract(epoch FROM last_modified)::bigint, downloads, mirrored"

int db_repo_get(enum repo_type type, const char *ns, const char *name, struct repo_record *out)
{
	const char *params[3] = { repo_type_name(type), ns, name };
	PGresult *res = db_exec("SELECT " REPO_COLUMNS " FROM repos WHERE type = $1"
				" AND lower(namespace) = lower($2) AND lower(name) = lower($3)",
				3, params, NULL);
	if (!res)
		return KHUB_EDB;
	int rc = KHUB_ENOTFOUND;
	if (PQntuples(res) == 1) {
		fill_repo(res, 0, out);
		rc = 0;
	}
	PQclear(res);
	return rc;
}

int db_repo_insert(enum repo_type type, const char *ns, const char *name, int private,
		   struct repo_record *out)
{
	struct account owner;
	int rc = db_account_get(ns, &owner);
	if (rc < 0)
		return rc;
	char owner_id[24];
	const char *params[5] = { repo_type_name(type), db_param_int(owner_id, owner.id), owner.name, name,
				  private ? "true" : "false" };
	const char *state = NULL;
	PGresult *res = db_exec("INSERT INTO repos (type, owner_id, namespace, name, private)"
				" VALUES ($1, $2, $3, $4, $5) RETURNING " REPO_COLUMNS, 5, params, &state);
	if (!res)
		return state && strcmp(state, "23505") == 0 ? KHUB_EEXIST : KHUB_EDB;
	if (out)
		fill_repo(res, 0, out);
	PQclear(res);
	return 0;
}

int db_repo_touch(int64_t repo_id)
{
	int n = db_run_id("UPDATE repos SET last_modified = now() WHERE id = $1", repo_id);
	return n < 0 ? n : 0;
}

int db_repo_delete(int64_t repo_id)
{
	int n = db_run_id("DELETE FROM repos WHERE id = $1", repo_id);
	return n < 0 ? n : n == 1 ? 0 : KHUB_ENOTFOUND;
}

int db_repo_rename(int64_t repo_id, const char *ns, const char *name, struct repo_record *out)
{
	struct account owner;
	int rc = db_account_get(ns, &owner);
	if (rc < 0)
		return rc;
	char id[24], owner_id[24];
	const char *params[4] = { db_param_int(id, repo_id), db_param_int(owner_id, owner.id), owner.name, name };
	const char *state = NULL;
	PGresult *res = db_exec("UPDATE repos SET owner_id = $2, namespace = $3, name = $4, last_modified = now()"
				" WHERE id = $1 RETURNING " REPO_COLUMNS, 4, params, &state);
	if (!res)
		return state && strcmp(state, "23505") == 0 ? KHUB_EEXIST : KHUB_EDB;
	rc = PQntuples(res) == 1 ? 0 : KHUB_ENOTFOUND;
	if (rc == 0 && out)
		fill_repo(res, 0, out);
	PQclear(res);
	return rc;
}

int db_repo_ensure_mirrored(enum repo_type type, const char *ns, const char *name, struct repo_record *out)
{
	int rc = db_repo_get(type, ns, name, out);
	if (rc == KHUB_ENOTFOUND) {
		struct account acct;
		if (db_account_get(ns, &acct) == KHUB_ENOTFOUND) {
			int64_t org = 0;
			rc = db_account_create(ACCOUNT_ORG, ns, ns, 0, &org);
			if (rc < 0 && rc != KHUB_EEXIST)
				return rc;
			/* made here for a mirror: bundles may change it (accounts.mirrored) */
			if (rc == 0 && (rc = db_run_id("UPDATE accounts SET mirrored = true WHERE id = $1", org)) < 0)
				return rc;
		}
		rc = db_repo_insert(type, ns, name, 0, out);
		if (rc == KHUB_EEXIST)
			rc = db_repo_get(type, ns, name, out);
		if (rc < 0)
			return rc;
	} else if (rc < 0) {
		return rc;
	}
	if (!out->mirrored) {
		if ((rc = db_run_id("UPDATE repos SET mirrored = true WHERE id = $1", out->id)) < 0)
			return rc;
		out->mirrored = 1;
	}
	return 0;
}

int db_lfs_link_many(int64_t repo_id, const char *const *oids, size_t n)
{
	char id[24];
	struct strbuf list;
	const char *params[2] = { db_param_int(id, repo_id), NULL };
	db_columns_init(&list, 1);
	for (size_t i = 0; i < n; i++) {
		db_columns_row(&list, 1, i);
		db_array_add(&list, oids[i]);
	}
	db_columns_end(&list, 1, params + 1);
	int rc = db_run("INSERT INTO lfs_repo_objects (repo_id, oid) SELECT $1, o FROM unnest($2::text[]) o "
			"ON CONFLICT DO NOTHING", 2, params);
	db_columns_release(&list, 1);
	return rc;
}

int db_lfs_link(int64_t repo_id, const char *oid)
{
	return db_lfs_link_many(repo_id, &oid, 1);
}

int db_lfs_links(int64_t repo_id, char ***oids, size_t *n)
{
	char id[24];
	const char *params[1] = { db_param_int(id, repo_id) };
	return db_query_texts(oids, n, "SELECT oid FROM lfs_repo_objects WHERE repo_id = $1 ORDER BY oid", 1, params);
}

int db_lfs_linked(int64_t repo_id, const char *oid)
{
	char id[24];
	const char *params[2] = { db_param_int(id, repo_id), oid };
	PGresult *res = db_exec("SELECT 1 FROM lfs_repo_objects WHERE repo_id = $1 AND oid = $2", 2, params, NULL);
	if (!res)
		return KHUB_EDB;
	int linked = PQntuples(res) == 1;
	PQclear(res);
	return linked;
}

int db_repo_count_owned(int64_t owner_id, enum repo_type type, int include_private, int64_t *count)
{
	char id[24];
	const char *params[3] = { db_param_int(id, owner_id), repo_type_name(type), include_private ? "true" : "false" };
	*count = 0;
	int rc = db_query_row("SELECT count(*) FROM repos WHERE owner_id = $1 AND type = $2"
			      " AND (NOT private OR $3::boolean)", 3, params, DB_FIELDS(DB_I64(0, count)));
	return rc == KHUB_ENOTFOUND ? 0 : rc;
}

int db_repo_count_by_type(int include_private, int64_t counts[REPO_TYPE_COUNT])
{
	const char *params[1] = { include_private ? "true" : "false" };
	struct db_rows rows;
	for (int t = 0; t < REPO_TYPE_COUNT; t++)
		counts[t] = 0;
	int rc = db_query(&rows, "SELECT type, count(*) FROM repos WHERE NOT private OR $1::boolean GROUP BY type",
			  1, params);
	for (size_t i = 0; rc == 0 && i < rows.count; i++) {
		enum repo_type type;
		if (repo_type_parse(db_rows_get(&rows, i, 0), &type) == 0)
			counts[type] = db_rows_int(&rows, i, 1, 0);
	}
	db_rows_release(&rows);
	return rc;
}

int db_repo_each(int (*fn)(const struct repo_record *rec, void *arg), void *arg)
{
	PGresult *res = db_exec("SELECT " REPO_COLUMNS " FROM repos ORDER BY id", 0, NULL, NULL);
	if (!res)
		return KHUB_EDB;
	int rc = 0;
	for (int i = 0; rc == 0 && i < PQntuples(res); i++) {
		struct repo_record rec = { 0 };
		fill_repo(res, i, &rec);
		rc = fn(&rec, arg);
	}
	PQclear(res);
	return rc;
}
