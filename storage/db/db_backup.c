/* db_backup.c -- what khub backup and khub restore ask the database: an
 * exported snapshot (pg_dump --snapshot reads the database as it was at
 * that moment), the server's major version, and whether a database to
 * restore into is empty. */
#include "storage/db/db_internal.h"

#include <stdlib.h>
#include <string.h>

int db_snapshot_export(char *snapshot, size_t size)
{
	struct db_rows rows = { 0 };
	int rc = db_tx_begin();
	if (rc < 0)
		return rc;
	/* the snapshot is taken by the first query after this */
	if ((rc = db_run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", 0, NULL)) < 0 ||
	    (rc = db_query_one(&rows, "SELECT pg_export_snapshot()", 0, NULL)) < 0) {
		db_tx_rollback();
		return rc == KHUB_ENOTFOUND ? KHUB_EDB : rc;
	}
	db_rows_read(&rows, 0, DB_FIELDS(DB_TEXT(0, snapshot, size)));
	db_rows_release(&rows);
	return 0;
}

void db_snapshot_release(void)
{
	db_tx_rollback();
}

int db_server_major(int *major)
{
	int rc = db_query_row("SELECT current_setting('server_version_num')::int / 10000", 0, NULL,
			      DB_FIELDS(DB_INT(0, major)));
	return rc == KHUB_ENOTFOUND ? KHUB_EDB : rc;
}

int db_is_empty(void)
{
	struct db_rows rows = { 0 };
	int rc = db_query_one(&rows,
			      "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
			      "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') "
			      "AND n.nspname NOT LIKE 'pg_toast%' AND c.relkind IN ('r', 'v', 'S', 'm', 'p')",
			      0, NULL);
	if (rc < 0)
		return rc == KHUB_ENOTFOUND ? KHUB_EDB : rc;
	int empty = db_rows_int(&rows, 0, 0, 1) == 0;
	db_rows_release(&rows);
	return empty;
}

int db_lfs_inflight_clear(void)
{
	return db_run("DELETE FROM lfs_inflight", 0, NULL);
}

/* Append value to sb quoted for a conninfo string. */
static void add_quoted(struct strbuf *sb, const char *value)
{
	strbuf_add(sb, "'", 1);
	for (const char *p = value; *p; p++) {
		if (*p == '\'' || *p == '\\')
			strbuf_add(sb, "\\", 1);
		strbuf_add(sb, p, 1);
	}
	strbuf_add(sb, "'", 1);
}

int db_conninfo_split_password(const char *conninfo, char **without, char **password)
{
	char *err = NULL;
	PQconninfoOption *opts = PQconninfoParse(conninfo, &err);
	if (!opts) {
		PQfreemem(err);
		return KHUB_EINVAL;
	}
	struct strbuf sb = STRBUF_INIT;
	*password = NULL;
	for (PQconninfoOption *o = opts; o->keyword; o++) {
		if (!o->val || !o->val[0])
			continue;
		if (strcmp(o->keyword, "password") == 0) {
			*password = xstrdup(o->val);
			continue;
		}
		strbuf_addf(&sb, "%s%s=", sb.len ? " " : "", o->keyword);
		add_quoted(&sb, o->val);
	}
	PQconninfoFree(opts);
	*without = strbuf_detach(&sb, NULL);
	return 0;
}
