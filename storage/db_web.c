/* db_web.c -- what the web UI stores or lists beyond the API's needs: browser
 * sessions (sql/0008_web_sessions.sql, their one-time message 0033), an org's members, every account. */
#include "storage/db_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int db_web_session_create(const char *id_sha256, int64_t token_id, long ttl_seconds)
{
	char tid[24], ttl[24];
	snprintf(tid, sizeof(tid), "%" PRId64, token_id);
	snprintf(ttl, sizeof(ttl), "%ld", ttl_seconds);
	const char *params[3] = { id_sha256, tid, ttl };
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
	struct db_rows rows;
	*out = NULL;
	/* the old value, cleared in the same statement: two loads of the page
	 * cannot both show it */
	int rc = db_query_one(&rows, "WITH old AS (SELECT id_sha256, flash FROM web_sessions WHERE id_sha256 = $1"
			      " AND flash IS NOT NULL FOR UPDATE)"
			      " UPDATE web_sessions s SET flash = NULL FROM old WHERE s.id_sha256 = old.id_sha256"
			      " RETURNING old.flash", 1, params);
	if (rc == KHUB_ENOTFOUND)
		return 0;
	if (rc < 0)
		return rc;
	*out = xstrdup(db_rows_get(&rows, 0, 0));
	db_rows_release(&rows);
	return 0;
}

int db_web_session_delete(const char *id_sha256)
{
	const char *params[1] = { id_sha256 };
	return db_run("DELETE FROM web_sessions WHERE id_sha256 = $1", 1, params);
}

int db_org_members(int64_t org_id, struct db_rows *out)
{
	char id[24];
	snprintf(id, sizeof(id), "%" PRId64, org_id);
	const char *params[1] = { id };
	return db_query(out, "SELECT a.name, m.role FROM memberships m JOIN accounts a ON a.id = m.user_id"
			" WHERE m.org_id = $1 ORDER BY lower(a.name)", 1, params);
}

int db_account_rows(long limit, struct db_rows *out)
{
	char lim[24];
	snprintf(lim, sizeof(lim), "%ld", limit);
	const char *params[1] = { lim };
	return db_query(out, "SELECT kind, name, is_site_admin, trusted_kernel_publisher,"
			" to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
			" FROM accounts ORDER BY kind DESC, lower(name) LIMIT $1::int", 1, params);
}

int db_downloads_daily(const int64_t *repo_ids, size_t n, long days, struct db_rows *out)
{
	struct strbuf ids = STRBUF_INIT;
	char num[24], d[24];
	strbuf_adds(&ids, "{");
	for (size_t i = 0; i < n; i++) {
		snprintf(num, sizeof(num), "%s%" PRId64, i ? "," : "", repo_ids[i]);
		strbuf_adds(&ids, num);
	}
	strbuf_adds(&ids, "}");
	snprintf(d, sizeof(d), "%ld", days);
	const char *params[2] = { ids.buf, d };
	int rc = db_query(out, "SELECT repo_id, ((now() AT TIME ZONE 'UTC')::date - day), sum(count)::bigint"
			  " FROM download_counts WHERE repo_id = ANY($1::bigint[])"
			  " AND day > (now() AT TIME ZONE 'UTC')::date - $2::int GROUP BY 1, 2", 2, params);
	strbuf_release(&ids);
	return rc;
}

int db_audit_recent(long limit, struct db_rows *out)
{
	char lim[24];
	snprintf(lim, sizeof(lim), "%ld", limit);
	const char *params[1] = { lim };
	return db_query(out, "SELECT to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), actor_name, action, target"
			" FROM audit_log ORDER BY id DESC LIMIT $1::int", 1, params);
}
