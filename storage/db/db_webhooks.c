/* db_webhooks.c -- the webhooks' tables (sql/0037_webhooks.sql): hooks,
 * their deliveries as a durable queue, and the log of attempts. */
#include "storage/db/db_internal.h"
#include "storage/db/webhooks.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define ISO(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

/* ---- hooks ---------------------------------------------------------------------- */

int db_webhook_create(int64_t repo_id, const char *url, const char *secret, int content, int build,
		      int benchmark, const char *created_by, int64_t *id)
{
	char rid[24], scopes[96];
	snprintf(rid, sizeof(rid), "%" PRId64, repo_id);
	snprintf(scopes, sizeof(scopes), "{%s%s%s%s%s}", content ? WEBHOOK_SCOPE_CONTENT : "",
		 content && build ? "," : "", build ? WEBHOOK_SCOPE_BUILD : "",
		 (content || build) && benchmark ? "," : "", benchmark ? WEBHOOK_SCOPE_BENCHMARK : "");
	const char *params[5] = { rid, url, secret, scopes, created_by };
	struct db_rows rows;
	int rc = db_query_one(&rows, "INSERT INTO webhooks (repo_id, url, secret, scopes, created_by)"
			      " VALUES ($1, $2, $3, $4::text[], $5) RETURNING id", 5, params);
	if (rc == 0)
		*id = db_rows_int(&rows, 0, 0, 0);
	db_rows_release(&rows);
	return rc == KHUB_ENOTFOUND ? KHUB_EDB : rc;
}

static void fill_hook(void *item, const struct db_rows *rows, size_t row)
{
	struct db_webhook *w = item;
	w->id = db_rows_int(rows, row, 0, 0);
	w->url = db_rows_strdup(rows, row, 1);
	w->content = db_rows_int(rows, row, 2, 0) != 0;
	w->build = db_rows_int(rows, row, 3, 0) != 0;
	snprintf(w->created_by, sizeof(w->created_by), "%s", db_rows_get(rows, row, 4));
	snprintf(w->created_at, sizeof(w->created_at), "%s", db_rows_get(rows, row, 5));
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
	snprintf(rid, sizeof(rid), "%" PRId64, repo_id);
	const char *params[1] = { rid };
	*out = db_query_items(sizeof(**out), fill_hook, n, &rc,
			      "SELECT id, url, ('" WEBHOOK_SCOPE_CONTENT "' = ANY(scopes))::int,"
			      " ('" WEBHOOK_SCOPE_BUILD "' = ANY(scopes))::int, created_by, " ISO("created_at") ","
			      " ('" WEBHOOK_SCOPE_BENCHMARK "' = ANY(scopes))::int FROM webhooks WHERE repo_id = $1 ORDER BY id", 1, params);
	return rc;
}

int db_webhook_delete(int64_t repo_id, int64_t id)
{
	char rid[24], wid[24];
	snprintf(rid, sizeof(rid), "%" PRId64, repo_id);
	snprintf(wid, sizeof(wid), "%" PRId64, id);
	const char *params[2] = { rid, wid };
	return db_run_one("DELETE FROM webhooks WHERE repo_id = $1 AND id = $2", 2, params);
}

/* ---- the log ---------------------------------------------------------------------- */

static void fill_attempt(void *item, const struct db_rows *rows, size_t row)
{
	struct db_webhook_attempt *a = item;
	a->delivery_id = db_rows_int(rows, row, 0, 0);
	snprintf(a->event, sizeof(a->event), "%s", db_rows_get(rows, row, 1));
	snprintf(a->state, sizeof(a->state), "%s", db_rows_get(rows, row, 2));
	a->attempt = (int)db_rows_int(rows, row, 3, 0);
	snprintf(a->at, sizeof(a->at), "%s", db_rows_get(rows, row, 4));
	a->status_code = (int)db_rows_int(rows, row, 5, 0);
	a->duration_ms = db_rows_int(rows, row, 6, 0);
	a->error = db_rows_strdup(rows, row, 7);
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
	snprintf(rid, sizeof(rid), "%" PRId64, repo_id);
	snprintf(wid, sizeof(wid), "%" PRId64, id);
	snprintf(lim, sizeof(lim), "%ld", limit);
	const char *params[3] = { rid, wid, lim };
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
	struct db_rows rows;
	snprintf(lease, sizeof(lease), "%ld", lease_s);
	const char *params[1] = { lease };
	memset(out, 0, sizeof(*out));
	int rc = db_query_one(&rows,
			      "UPDATE webhook_deliveries d SET attempts = d.attempts + 1,"
			      " next_attempt_at = now() + make_interval(secs => $1::int)"
			      " FROM webhooks w WHERE w.id = d.webhook_id AND d.id = ("
			      "  SELECT id FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= now()"
			      "  ORDER BY next_attempt_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
			      " RETURNING d.id, d.webhook_id, d.attempts, d.event, d.payload, w.url, w.secret", 1, params);
	if (rc == 0) {
		out->id = db_rows_int(&rows, 0, 0, 0);
		out->webhook_id = db_rows_int(&rows, 0, 1, 0);
		out->attempt = (int)db_rows_int(&rows, 0, 2, 0);
		snprintf(out->event, sizeof(out->event), "%s", db_rows_get(&rows, 0, 3));
		out->payload = db_rows_strdup(&rows, 0, 4);
		out->url = db_rows_strdup(&rows, 0, 5);
		out->secret = db_rows_strdup(&rows, 0, 6);
	}
	db_rows_release(&rows);
	return rc;
}

int db_webhook_attempt_done(const struct db_webhook_delivery *d, int ok, int status_code, int64_t duration_ms,
			    const char *error, long retry_s)
{
	char did[24], attempt[16], status[16], ms[24], retry[24];
	snprintf(did, sizeof(did), "%" PRId64, d->id);
	snprintf(attempt, sizeof(attempt), "%d", d->attempt);
	snprintf(status, sizeof(status), "%d", status_code);
	snprintf(ms, sizeof(ms), "%" PRId64, duration_ms);
	snprintf(retry, sizeof(retry), "%ld", retry_s);
	const char *log[5] = { did, attempt, status_code ? status : NULL, ms, error };
	int rc = db_run("INSERT INTO webhook_attempts (delivery_id, attempt, status_code, duration_ms, error)"
			" VALUES ($1, $2, $3, $4, $5)", 5, log);
	if (rc < 0)
		return rc;
	const char *state = ok ? "delivered" : retry_s < 0 ? "failed" : "pending";
	const char *params[3] = { did, state, retry };
	return db_run("UPDATE webhook_deliveries SET state = $2,"
		      " next_attempt_at = now() + make_interval(secs => greatest($3::int, 0)) WHERE id = $1", 3, params);
}

int db_webhook_prune(long days)
{
	char d[24];
	snprintf(d, sizeof(d), "%ld", days);
	const char *params[1] = { d };
	return db_run_count("DELETE FROM webhook_deliveries WHERE state <> 'pending'"
			    " AND next_attempt_at < now() - make_interval(days => $1::int)", 1, params);
}
