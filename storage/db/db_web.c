/* db_web.c -- what the web UI stores or lists beyond the API's needs: browser
 * sessions (sql/0008_web_sessions.sql, their one-time message 0033), an org's members, every account. */
#include "storage/db/db_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int db_web_session_create(const char *id_sha256, int64_t token_id, long ttl_seconds)
{
	char tid[24], ttl[24];
	const char *params[3] = { id_sha256, db_param_int(tid, token_id), db_param_int(ttl, ttl_seconds) };
	/* a sign-in also sweeps sessions that expired long ago */
	int rc = db_run("DELETE FROM web_sessions WHERE expires_at < now() - interval '1 day'", 0, NULL);
	if (rc < 0)
		return rc;
	return db_run("INSERT INTO web_sessions (id_sha256, token_id, expires_at)"
		      " VALUES ($1, $2, now() + make_interval(secs => $3::int))", 3, params);
}

int db_web_session_lookup(const char *id_sha256, struct principal *out)
{
	const char *params[1] = { id_sha256 };
	struct db_rows rows;
	int rc = db_query_one(&rows, "SELECT " PRINCIPAL_COLUMNS " FROM web_sessions s JOIN tokens t ON t.id = s.token_id"
			      " JOIN accounts a ON a.id = t.user_id WHERE s.id_sha256 = $1 AND s.expires_at > now()"
			      " AND " TOKEN_USABLE, 1, params);
	if (rc == 0) {
		db_principal_from_row(&rows, out);
		db_token_touch(out->token_id);
	}
	db_rows_release(&rows);
	return rc;
}

int db_web_session_flash_set(const char *id_sha256, const char *flash)
{
	const char *params[2] = { id_sha256, flash };
	return db_run("UPDATE web_sessions SET flash = $2 WHERE id_sha256 = $1", 2, params);
}

int db_web_session_flash_take(const char *id_sha256, char **out)
{
	const char *params[1] = { id_sha256 };
	*out = NULL;
	/* the old value, cleared in the same statement: two loads of the page
	 * cannot both show it */
	int rc = db_query_row("WITH old AS (SELECT id_sha256, flash FROM web_sessions WHERE id_sha256 = $1"
			      " AND flash IS NOT NULL FOR UPDATE)"
			      " UPDATE web_sessions s SET flash = NULL FROM old WHERE s.id_sha256 = old.id_sha256"
			      " RETURNING old.flash", 1, params, DB_FIELDS(DB_STR(0, out)));
	return rc == KHUB_ENOTFOUND ? 0 : rc;
}

int db_web_session_delete(const char *id_sha256)
{
	const char *params[1] = { id_sha256 };
	return db_run("DELETE FROM web_sessions WHERE id_sha256 = $1", 1, params);
}

static void fill_member(void *item, const struct db_rows *rows, size_t i)
{
	struct org_member_row *m = item;
	db_rows_read(rows, i, DB_FIELDS(DB_STR(0, &m->name), DB_STR(1, &m->role)));
}

int db_org_members(int64_t org_id, struct org_member_row **rows, size_t *n)
{
	char id[24];
	int rc = 0;
	const char *params[1] = { db_param_int(id, org_id) };
	*rows = db_query_items(sizeof(**rows), fill_member, n, &rc,
			       "SELECT a.name, m.role FROM memberships m JOIN accounts a ON a.id = m.user_id"
			       " WHERE m.org_id = $1 ORDER BY lower(a.name)", 1, params);
	return rc;
}

void org_member_rows_free(struct org_member_row *rows, size_t n)
{
	for (size_t i = 0; rows && i < n; i++) {
		free(rows[i].name);
		free(rows[i].role);
	}
	free(rows);
}

static void fill_account(void *item, const struct db_rows *rows, size_t i)
{
	struct account_row *a = item;
	db_rows_read(rows, i, DB_FIELDS(DB_STR(0, &a->kind), DB_STR(1, &a->name), DB_BOOL(2, &a->site_admin),
					DB_BOOL(3, &a->trusted), DB_TEXT(4, a->created, sizeof(a->created))));
}

int db_account_rows(long limit, struct account_row **rows, size_t *n)
{
	char lim[24];
	int rc = 0;
	const char *params[1] = { db_param_int(lim, limit) };
	*rows = db_query_items(sizeof(**rows), fill_account, n, &rc,
			       "SELECT kind, name, is_site_admin, trusted_kernel_publisher,"
			       " to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
			       " FROM accounts ORDER BY kind DESC, lower(name) LIMIT $1::int", 1, params);
	return rc;
}

void account_rows_free(struct account_row *rows, size_t n)
{
	for (size_t i = 0; rows && i < n; i++) {
		free(rows[i].kind);
		free(rows[i].name);
	}
	free(rows);
}

static void fill_download_day(void *item, const struct db_rows *rows, size_t i)
{
	struct download_day *d = item;
	db_rows_read(rows, i, DB_FIELDS(DB_I64(0, &d->repo_id), DB_LONG(1, &d->days_ago), DB_LONG(2, &d->count)));
}

int db_downloads_daily(const int64_t *repo_ids, size_t n, long days, struct download_day **rows, size_t *nrows)
{
	struct strbuf ids = STRBUF_INIT;
	char num[24], d[24];
	strbuf_adds(&ids, "{");
	for (size_t i = 0; i < n; i++) {
		snprintf(num, sizeof(num), "%s%" PRId64, i ? "," : "", repo_ids[i]);
		strbuf_adds(&ids, num);
	}
	strbuf_adds(&ids, "}");
	const char *params[2] = { ids.buf, db_param_int(d, days) };
	int rc = 0;
	*rows = db_query_items(sizeof(**rows), fill_download_day, nrows, &rc,
			       "SELECT repo_id, ((now() AT TIME ZONE 'UTC')::date - day), sum(count)::bigint"
			       " FROM download_counts WHERE repo_id = ANY($1::bigint[])"
			       " AND day > (now() AT TIME ZONE 'UTC')::date - $2::int GROUP BY 1, 2", 2, params);
	strbuf_release(&ids);
	return rc;
}

static void fill_audit(void *item, const struct db_rows *rows, size_t i)
{
	struct audit_row *a = item;
	db_rows_read(rows, i, DB_FIELDS(DB_STR(0, &a->at), DB_STR(1, &a->actor), DB_STR(2, &a->action),
					DB_STR(3, &a->target)));
}

int db_audit_recent(long limit, struct audit_row **rows, size_t *n)
{
	char lim[24];
	int rc = 0;
	const char *params[1] = { db_param_int(lim, limit) };
	*rows = db_query_items(sizeof(**rows), fill_audit, n, &rc,
			       "SELECT to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), actor_name, action, target"
			       " FROM audit_log ORDER BY id DESC LIMIT $1::int", 1, params);
	return rc;
}

void audit_rows_free(struct audit_row *rows, size_t n)
{
	for (size_t i = 0; rows && i < n; i++) {
		free(rows[i].at);
		free(rows[i].actor);
		free(rows[i].action);
		free(rows[i].target);
	}
	free(rows);
}
