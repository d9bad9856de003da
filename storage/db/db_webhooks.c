/* db_webhooks.c -- the webhooks' tables (sql/0037_webhooks.sql): hooks,
 * their deliveries as a durable queue, and the log of attempts. */
#include "storage/db/db_internal.h"
#include "storage/db/webhooks.h"

#include <stdlib.h>
#include <string.h>

#define ISO(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

/* ---- hooks ---------------------------------------------------------------------- */

int db_webhook_create(int64_t repo_id, const char *url, const char *secret, int content, int build,
		      int benchmark, const char *created_by, int64_t *id)
{
	char rid[24], scopes[96];
	snprintf(scopes, sizeof(scopes), "{%s%s%s%s%s}", content ? WEBHOOK_SCOPE_CONTENT : "",
		 content && build ? "," : "", build ? WEBHOOK_SCOPE_BUILD : "",
		 (content || build) && benchmark ? "," : "", benchmark ? WEBHOOK_SCOPE_BENCHMARK : "");
	const char *params[5] = { db_param_int(rid, repo_id), url, secret, scopes, created_by };
	int rc = db_query_row("INSERT INTO webhooks (repo_id, url, secret, scopes, created_by)"
			      " VALUES ($1, $2, $3, $4::text[], $5) RETURNING id", 5, params, DB_FIELDS(DB_I64(0, id)));
	return rc == KHUB_ENOTFOUND ? KHUB_EDB : rc;
}

static void fill_hook(void *item, const struct db_rows *rows, size_t row)
{
	struct db_webhook *w = item;
	db_rows_read(rows, row, DB_FIELDS(DB_I64(0, &w->id), DB_STR_OR_NULL(1, &w->url),
					  DB_TEXT(4, w->created_by, sizeof(w->created_by)),
					  DB_TEXT(5, w->created_at, sizeof(w->created_at))));
	w->content = db_rows_int(rows, row, 2, 0) != 0;
	w->build = db_rows_int(rows, row, 3, 0) != 0;
	w->benchmark = db_rows_int(rows, row, 6, 0) != 0;
}

void db_webhooks_free(struct db_webhook *hooks, size_t n)
{
	for (size_t i = 0; hooks && i < n; i++)
		free(hooks[i].url);
	free(hooks);
}

int db_webhook_list(int64_t repo_id, struct db_webhook **out, size_t *n)
{
	char rid[24];
	int rc;
	const char *params[1] = { db_param_int(rid, repo_id) };
	*out = db_query_items(sizeof(**out), fill_hook, n, &rc,
			      "SELECT id, url, ('" WEBHOOK_SCOPE_CONTENT "' = ANY(scopes))::int,"
			      " ('" WEBHOOK_SCOPE_BUILD "' = ANY(scopes))::int, created_by, " ISO("created_at") ","
			      " ('" WEBHOOK_SCOPE_BENCHMARK "' = ANY(scopes))::int FROM webhooks WHERE repo_id = $1 ORDER BY id", 1, params);
	return rc;
}

int db_webhook_delete(int64_t repo_id, int64_t id)
{
	char rid[24], wid[24];
	const char *params[2] = { db_param_int(rid, repo_id), db_param_int(wid, id) };
	return db_run_one("DELETE FROM webhooks WHERE repo_id = $1 AND id = $2", 2, params);
}

/* ---- the log ---------------------------------------------------------------------- */

static void fill_attempt(void *item, const struct db_rows *rows, size_t row)
{
	struct db_webhook_attempt *a = item;
	db_rows_read(rows, row, DB_FIELDS(DB_I64(0, &a->delivery_id), DB_TEXT(1, a->event, sizeof(a->event)),
					  DB_TEXT(2, a->state, sizeof(a->state)), DB_INT(3, &a->attempt),
					  DB_TEXT(4, a->at, sizeof(a->at)), DB_INT(5, &a->status_code),
					  DB_I64(6, &a->duration_ms), DB_STR_OR_NULL(7, &a->error)));
}

void db_webhook_attempts_free(struct db_webhook_attempt *a, size_t n)
{
	for (size_t i = 0; a && i < n; i++)
		free(a[i].error);
	free(a);
}

int db_webhook_attempts(int64_t repo_id, int64_t id, long limit, struct db_webhook_attempt **out, size_t *n)
{
	char rid[24], wid[24], lim[24];
	struct db_rows rows;
	int rc;
	const char *params[3] = { db_param_int(rid, repo_id), db_param_int(wid, id), db_param_int(lim, limit) };
	*out = NULL;
	*n = 0;
	rc = db_query_one(&rows, "SELECT 1 FROM webhooks WHERE repo_id = $1 AND id = $2", 2, params);
	db_rows_release(&rows);
	if (rc < 0)
		return rc;
	*out = db_query_items(sizeof(**out), fill_attempt, n, &rc,
			      "SELECT d.id, d.event, d.state, a.attempt, " ISO("a.at") ", a.status_code, a.duration_ms,"
			      " a.error FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id"
			      " WHERE d.webhook_id = $1 ORDER BY d.id DESC, a.attempt DESC LIMIT $2", 2, params + 1);
	return rc;
}

/* ---- the queue ----------------------------------------------------------------------- */

void db_webhook_delivery_release(struct db_webhook_delivery *d)
{
	free(d->payload);
	free(d->url);
	free(d->secret);
	memset(d, 0, sizeof(*d));
}

int db_webhook_claim(long lease_s, struct db_webhook_delivery *out)
{
	char lease[24];
	const char *params[1] = { db_param_int(lease, lease_s) };
	memset(out, 0, sizeof(*out));
	return db_query_row("UPDATE webhook_deliveries d SET attempts = d.attempts + 1,"
			    " next_attempt_at = now() + make_interval(secs => $1::int)"
			    " FROM webhooks w WHERE w.id = d.webhook_id AND d.id = ("
			    "  SELECT id FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= now()"
			    "  ORDER BY next_attempt_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
			    " RETURNING d.id, d.webhook_id, d.attempts, d.event, d.payload, w.url, w.secret", 1, params,
			    DB_FIELDS(DB_I64(0, &out->id), DB_I64(1, &out->webhook_id), DB_INT(2, &out->attempt),
				      DB_TEXT(3, out->event, sizeof(out->event)), DB_STR_OR_NULL(4, &out->payload),
				      DB_STR_OR_NULL(5, &out->url), DB_STR_OR_NULL(6, &out->secret)));
}

int db_webhook_attempt_done(const struct db_webhook_delivery *d, int ok, int status_code, int64_t duration_ms,
			    const char *error, long retry_s)
{
	char did[24], attempt[24], status[24], ms[24], retry[24];
	const char *log[5] = { db_param_int(did, d->id), db_param_int(attempt, d->attempt),
			       status_code ? db_param_int(status, status_code) : NULL, db_param_int(ms, duration_ms), error };
	int rc = db_run("INSERT INTO webhook_attempts (delivery_id, attempt, status_code, duration_ms, error)"
			" VALUES ($1, $2, $3, $4, $5)", 5, log);
	if (rc < 0)
		return rc;
	const char *state = ok ? "delivered" : retry_s < 0 ? "failed" : "pending";
	const char *params[3] = { did, state, db_param_int(retry, retry_s) };
	return db_run("UPDATE webhook_deliveries SET state = $2,"
		      " next_attempt_at = now() + make_interval(secs => greatest($3::int, 0)) WHERE id = $1", 3, params);
}

int db_webhook_prune(long days)
{
	char d[24];
	const char *params[1] = { db_param_int(d, days) };
	return db_run_count("DELETE FROM webhook_deliveries WHERE state <> 'pending'"
			    " AND next_attempt_at < now() - make_interval(days => $1::int)", 1, params);
}
