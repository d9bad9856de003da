/* db_sync.c -- the database side of air-gap bundles (sync/): the exporting
 * hub's identity and bundle sequence, the repos it ever exported, the
 * bundles an importing hub applied, and repo registration that is safe
 * inside the import's one transaction (no statement that can fail on a
 * conflict, which would abort the transaction). */
#include "storage/db/db_internal.h"

#include <stdlib.h>
#include <string.h>

int db_sync_next_sequence(const char *candidate, char exporter[37], int64_t *seq)
{
	const char *params[1] = { candidate };
	int rc = db_query_row("INSERT INTO sync_exporter (id, exporter, sequence) VALUES (1, $1, 1)"
			      " ON CONFLICT (id) DO UPDATE SET sequence = sync_exporter.sequence + 1"
			      " RETURNING exporter, sequence", 1, params,
			      DB_FIELDS(DB_TEXT(0, exporter, 37), DB_I64(1, seq)));
	return rc == KHUB_ENOTFOUND ? KHUB_EDB : rc;
}

int db_sync_exported_add(enum repo_type type, const char *ns, const char *name)
{
	const char *params[3] = { repo_type_name(type), ns, name };
	return db_run("INSERT INTO sync_exported_repos (type, namespace, name) VALUES ($1, $2, $3)"
		      " ON CONFLICT DO NOTHING", 3, params);
}

int db_sync_exported_gone(enum repo_type type, int (*cb)(const char *ns, const char *name, void *arg), void *arg)
{
	const char *params[1] = { repo_type_name(type) };
	struct db_rows rows;
	int rc = db_query(&rows, "SELECT e.namespace, e.name FROM sync_exported_repos e WHERE e.type = $1"
			  " AND NOT EXISTS (SELECT 1 FROM repos r WHERE r.type = e.type"
			  "  AND lower(r.namespace) = lower(e.namespace) AND lower(r.name) = lower(e.name))"
			  " ORDER BY lower(e.namespace), lower(e.name)", 1, params);
	for (size_t i = 0; rc == 0 && i < rows.count; i++)
		rc = cb(db_rows_get(&rows, i, 0), db_rows_get(&rows, i, 1), arg);
	db_rows_release(&rows);
	return rc;
}

int db_sync_import_last(const char *exporter, struct sync_import_record *out)
{
	const char *params[1] = { exporter };
	struct db_rows rows;
	memset(out, 0, sizeof(*out));
	int rc = db_query_one(&rows, "SELECT i.bundle, i.sequence, i.state = 'done' FROM sync_imports i"
			      " JOIN sync_exporter_keys k ON k.exporter = i.exporter AND k.key_id = i.key_id"
			      " WHERE i.exporter = $1 ORDER BY i.sequence DESC, i.id DESC LIMIT 1", 1, params);
	if (rc < 0)
		return rc;
	db_rows_read(&rows, 0, DB_FIELDS(DB_TEXT(0, out->bundle, sizeof(out->bundle)), DB_I64(1, &out->sequence)));
	out->done = strcmp(db_rows_get(&rows, 0, 2), "t") == 0;
	db_rows_release(&rows);
	return 0;
}

int db_sync_exporter_key_get(const char *exporter, char key_id[17])
{
	const char *params[1] = { exporter };
	key_id[0] = '\0';
	return db_query_row("SELECT key_id FROM sync_exporter_keys WHERE exporter = $1", 1, params,
			    DB_FIELDS(DB_TEXT(0, key_id, 17)));
}

int db_sync_exporter_key_set(const char *exporter, const char *key_id, const char *bound_by, int replace)
{
	const char *params[3] = { exporter, key_id, bound_by };
	return db_query_exists(replace ? "INSERT INTO sync_exporter_keys (exporter, key_id, bound_by) VALUES ($1, $2, $3)"
					 " ON CONFLICT (exporter) DO UPDATE SET key_id = excluded.key_id,"
					 " bound_by = excluded.bound_by, bound_at = now() RETURNING 1"
				       : "INSERT INTO sync_exporter_keys (exporter, key_id, bound_by) VALUES ($1, $2, $3)"
					 " ON CONFLICT (exporter) DO NOTHING RETURNING 1",
			       3, params);
}

/* Each row of a four-column listing (sql, no parameters) told to cb, in
 * order; stops at cb's first nonzero answer and returns it. */
static int each_row_of_four(const char *sql, int (*cb)(const char *, const char *, const char *, const char *, void *),
			    void *arg)
{
	struct db_rows rows;
	int rc = db_query(&rows, sql, 0, NULL);
	if (rc < 0)
		return rc;
	for (size_t i = 0; rc == 0 && i < rows.count; i++)
		rc = cb(db_rows_get(&rows, i, 0), db_rows_get(&rows, i, 1), db_rows_get(&rows, i, 2),
			db_rows_get(&rows, i, 3), arg);
	db_rows_release(&rows);
	return rc;
}

int db_sync_exporter_key_list(int (*cb)(const char *exporter, const char *key_id, const char *bound_by,
					const char *bound_at, void *arg),
			      void *arg)
{
	return each_row_of_four("SELECT exporter, key_id, bound_by,"
				" to_char(bound_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
				" FROM sync_exporter_keys ORDER BY exporter", cb, arg);
}

int db_sync_import_begin(const char *exporter, int64_t seq, const char *bundle, const char *key_id,
			 const char *hub, const char *operator_)
{
	char s[24];
	const char *params[6] = { exporter, db_param_int(s, seq), bundle, key_id, hub, operator_ };
	return db_run("INSERT INTO sync_imports (exporter, sequence, bundle, key_id, hub, operator, state)"
		      " VALUES ($1, $2, $3, $4, $5, $6, 'applying') ON CONFLICT (bundle) DO NOTHING", 6, params);
}

int db_sync_import_done(const char *bundle, long refs_moved)
{
	char n[24];
	const char *params[2] = { bundle, db_param_int(n, refs_moved) };
	return db_run("UPDATE sync_imports SET state = 'done', finished_at = now(), refs_moved = refs_moved + $2"
		      " WHERE bundle = $1 AND state = 'applying'", 2, params);
}

int db_sync_account_kind(const char *name)
{
	const char *params[1] = { name };
	struct db_rows rows;
	int rc = db_query(&rows, "SELECT mirrored FROM accounts WHERE lower(name) = lower($1)", 1, params);
	if (rc < 0)
		return rc;
	int kind = rows.count == 0 ? SYNC_ACCOUNT_NONE
		   : strcmp(db_rows_get(&rows, 0, 0), "t") == 0 ? SYNC_ACCOUNT_MIRRORED : SYNC_ACCOUNT_LOCAL;
	db_rows_release(&rows);
	return kind;
}

int db_sync_register_repo(enum repo_type type, const char *ns, const char *name, int private_)
{
	const char *params[4] = { ns, repo_type_name(type), name, private_ ? "true" : "false" };
	int rc = db_run("INSERT INTO accounts (kind, name, mirrored) VALUES ('org', $1, true)"
			" ON CONFLICT ((lower(name))) DO NOTHING", 1, params);
	if (rc == 0)
		rc = db_run("INSERT INTO repos (type, owner_id, namespace, name, private, mirrored)"
			    " SELECT $2, a.id, a.name, $3, $4, true FROM accounts a WHERE lower(a.name) = lower($1)"
			    " ON CONFLICT (type, lower(namespace), lower(name)) DO NOTHING", 4, params);
	return rc;
}

static void fill_history(void *item, const struct db_rows *rows, size_t i)
{
	struct sync_import_record *r = item;
	db_rows_read(rows, i, DB_FIELDS(DB_TEXT(0, r->bundle, sizeof(r->bundle)), DB_I64(1, &r->sequence),
					DB_TEXT(3, r->exporter, sizeof(r->exporter)), DB_TEXT(4, r->key_id, sizeof(r->key_id)),
					DB_STR_OR_NULL(5, &r->hub), DB_STR_OR_NULL(6, &r->operator_),
					DB_I64(7, &r->refs_moved), DB_STR_OR_NULL(8, &r->started)));
	r->done = strcmp(db_rows_get(rows, i, 2), "done") == 0;
}

struct sync_import_record *db_sync_history(size_t *count, int *rc)
{
	return db_query_items(sizeof(struct sync_import_record), fill_history, count, rc,
			      "SELECT bundle, sequence, state, exporter, key_id, hub, operator, refs_moved,"
			      " to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
			      " FROM sync_imports ORDER BY id", 0, NULL);
}

void db_sync_history_free(struct sync_import_record *items, size_t count)
{
	for (size_t i = 0; items && i < count; i++) {
		free(items[i].hub);
		free(items[i].operator_);
		free(items[i].started);
	}
	free(items);
}

int db_sync_trust_differs(const char *name, int trusted)
{
	const char *params[2] = { name, trusted ? "true" : "false" };
	return db_query_exists("SELECT 1 FROM accounts WHERE lower(name) = lower($1) AND mirrored"
			       " AND trust_override IS NULL AND trusted_kernel_publisher <> $2::boolean", 2, params);
}

int db_sync_deletable(enum repo_type type, const char *ns, const char *name, int64_t *repo_id)
{
	const char *params[3] = { repo_type_name(type), ns, name };
	struct db_rows rows;
	int rc = db_query(&rows, "SELECT r.id FROM repos r WHERE r.type = $1 AND lower(r.namespace) = lower($2)"
			  " AND lower(r.name) = lower($3) AND r.mirrored"
			  " AND NOT EXISTS (SELECT 1 FROM mirror_repos m WHERE m.repo_id = r.id)", 3, params);
	if (rc < 0)
		return rc;
	rc = rows.count > 0;
	if (rc && repo_id)
		*repo_id = db_rows_int(&rows, 0, 0, 0);
	db_rows_release(&rows);
	return rc;
}

int db_sync_key_scope_get(const char *key_id, char **orgs)
{
	const char *params[1] = { key_id };
	*orgs = NULL;
	return db_query_row("SELECT array_to_string(orgs, ',') FROM sync_key_scopes WHERE key_id = $1", 1, params,
			    DB_FIELDS(DB_STR_OR_NULL(0, orgs)));
}

int db_sync_key_scope_set(const char *key_id, const char *orgs, const char *set_by)
{
	const char *params[3] = { key_id, orgs, set_by };
	if (!orgs)
		return db_run("DELETE FROM sync_key_scopes WHERE key_id = $1", 1, params);
	return db_run("INSERT INTO sync_key_scopes (key_id, orgs, set_by) VALUES ($1, string_to_array($2, ','), $3)"
		      " ON CONFLICT (key_id) DO UPDATE SET orgs = excluded.orgs, set_by = excluded.set_by, set_at = now()",
		      3, params);
}

int db_sync_key_scope_list(int (*cb)(const char *key_id, const char *orgs, const char *set_by, const char *set_at,
				     void *arg),
			   void *arg)
{
	return each_row_of_four("SELECT key_id, array_to_string(orgs, ','), set_by,"
				" to_char(set_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
				" FROM sync_key_scopes ORDER BY key_id", cb, arg);
}
