/* db_builds.c -- build jobs: enqueue with de-duplication, claims with
 * leases (FOR UPDATE SKIP LOCKED), heartbeats, expiry with backoff, the
 * end states, and logs kept as chunks at byte offsets. */
#include "storage/db/db_internal.h"
#include "storage/db/db_builds.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define LOG_PIECE (256 * 1024)	/* the largest row of build_log_chunks */
#define LOG_TAIL_SLACK 4096	/* a tail may outgrow its share by the worker's last lines */

#define ISO(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"

/* The columns of enum build_column, over builds b JOIN repos r. */
#define BUILD_COLUMNS \
	"b.id, b.repo_id, r.namespace, r.name, r.private, b.source_commit, b.variant, b.state, b.attempt," \
	" b.max_attempts, " ISO("b.not_before") ", b.worker_id, w.name, " ISO("b.lease_expires_at") "," \
	" " ISO("b.created_at") ", " ISO("b.started_at") ", " ISO("b.finished_at") ", b.error, b.abi_report," \
	" b.published_branch, b.published_commit, b.force, b.requested_by, b.source_url, b.source_revision," \
	" b.log_length, b.note, b.kind, b.device, b.variant_commit, coalesce(b.superseded_by, 0)"
#define BUILD_FROM " FROM builds b JOIN repos r ON r.id = b.repo_id LEFT JOIN workers w ON w.id = b.worker_id"
/* BUILD_COLUMNS in order, and then db_build_matrices' duration. */
enum build_column {
	BUILD_COL_ID, BUILD_COL_REPO_ID, BUILD_COL_NS, BUILD_COL_NAME, BUILD_COL_PRIVATE, BUILD_COL_COMMIT,
	BUILD_COL_VARIANT, BUILD_COL_STATE, BUILD_COL_ATTEMPT, BUILD_COL_MAX_ATTEMPTS, BUILD_COL_NOT_BEFORE,
	BUILD_COL_WORKER_ID, BUILD_COL_WORKER, BUILD_COL_LEASE_EXPIRES, BUILD_COL_CREATED, BUILD_COL_STARTED,
	BUILD_COL_FINISHED, BUILD_COL_ERROR, BUILD_COL_ABI_REPORT, BUILD_COL_BRANCH, BUILD_COL_PUBLISHED,
	BUILD_COL_FORCE, BUILD_COL_REQUESTED_BY, BUILD_COL_SOURCE_URL, BUILD_COL_SOURCE_REVISION,
	BUILD_COL_LOG_LENGTH, BUILD_COL_NOTE, BUILD_COL_KIND, BUILD_COL_DEVICE, BUILD_COL_VARIANT_COMMIT,
	BUILD_COL_SUPERSEDED_BY,
	BUILD_COL_DURATION,
};

/* Row i of BUILD_COLUMNS rows into b (zeroed before). */
static void build_row_fill(void *item, const struct db_rows *rows, size_t i)
{
	struct build_row *b = item;
	db_rows_read(rows, i, DB_FIELDS(
		DB_I64(BUILD_COL_ID, &b->id), DB_I64(BUILD_COL_REPO_ID, &b->repo_id),
		DB_I64(BUILD_COL_WORKER_ID, &b->worker_id),
		DB_I64(BUILD_COL_SUPERSEDED_BY, &b->superseded_by), DB_STR(BUILD_COL_NS, &b->ns), DB_STR(BUILD_COL_NAME, &b->name),
		DB_STR(BUILD_COL_COMMIT, &b->commit), DB_STR(BUILD_COL_VARIANT, &b->variant),
		DB_STR(BUILD_COL_STATE, &b->state), DB_BOOL(BUILD_COL_PRIVATE, &b->private_repo),
		DB_BOOL(BUILD_COL_FORCE, &b->force), DB_LONG(BUILD_COL_ATTEMPT, &b->attempt),
		DB_LONG(BUILD_COL_MAX_ATTEMPTS, &b->max_attempts), DB_STR_OR_NULL(BUILD_COL_NOT_BEFORE, &b->not_before),
		DB_STR_OR_NULL(BUILD_COL_WORKER, &b->worker), DB_STR_OR_NULL(BUILD_COL_LEASE_EXPIRES, &b->lease_expires),
		DB_STR_OR_NULL(BUILD_COL_CREATED, &b->created), DB_STR_OR_NULL(BUILD_COL_STARTED, &b->started),
		DB_STR_OR_NULL(BUILD_COL_FINISHED, &b->finished), DB_STR_OR_NULL(BUILD_COL_ERROR, &b->error),
		DB_STR_OR_NULL(BUILD_COL_ABI_REPORT, &b->abi_report), DB_STR_OR_NULL(BUILD_COL_BRANCH, &b->branch),
		DB_STR_OR_NULL(BUILD_COL_PUBLISHED, &b->published),
		DB_STR_OR_NULL(BUILD_COL_REQUESTED_BY, &b->requested_by),
		DB_STR_OR_NULL(BUILD_COL_SOURCE_URL, &b->source_url),
		DB_STR_OR_NULL(BUILD_COL_SOURCE_REVISION, &b->source_revision),
		DB_STR_OR_NULL(BUILD_COL_NOTE, &b->note), DB_STR_OR_NULL(BUILD_COL_DEVICE, &b->device),
		DB_STR_OR_NULL(BUILD_COL_VARIANT_COMMIT, &b->variant_commit),
		DB_I64(BUILD_COL_LOG_LENGTH, &b->log_length)));
	b->benchmark = strcmp(db_rows_get(rows, i, BUILD_COL_KIND), "benchmark") == 0;
	b->has_duration = rows->columns > BUILD_COL_DURATION && !db_rows_isnull(rows, i, BUILD_COL_DURATION);
	b->duration = b->has_duration ? db_rows_int(rows, i, BUILD_COL_DURATION, 0) : 0;
}

void build_row_release(struct build_row *b)
{
	if (!b)
		return;
	char **strings[] = { &b->ns, &b->name, &b->commit, &b->variant, &b->state, &b->not_before, &b->worker,
			     &b->lease_expires, &b->created, &b->started, &b->finished, &b->error, &b->abi_report,
			     &b->branch, &b->published, &b->requested_by, &b->source_url, &b->source_revision,
			     &b->note, &b->device, &b->variant_commit };
	for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++)
		free(*strings[i]);
	memset(b, 0, sizeof(*b));
}

void build_rows_release(struct build_rows *rows)
{
	if (!rows)
		return;
	for (size_t i = 0; i < rows->count; i++)
		build_row_release(&rows->items[i]);
	free(rows->items);
	rows->items = NULL;
	rows->count = 0;
}

/* One build row of a query into out: 0, KHUB_ENOTFOUND or KHUB_EDB. */
static int build_query_one(struct build_row *out, const char *sql, int nparams, const char *const *params)
{
	struct build_rows rows = { 0 };
	int rc = 0;
	memset(out, 0, sizeof(*out));
	rows.items = db_query_items(sizeof(*rows.items), build_row_fill, &rows.count, &rc, sql, nparams, params);
	if (rc == 0 && rows.count == 0)
		rc = KHUB_ENOTFOUND;
	if (rc == 0) {
		*out = rows.items[0];
		memset(&rows.items[0], 0, sizeof(rows.items[0]));
	}
	build_rows_release(&rows);
	return rc;
}

/* Build rows of a query into out: 0 or KHUB_EDB (then out is empty). */
static int build_query(struct build_rows *out, const char *sql, int nparams, const char *const *params)
{
	int rc = 0;
	out->items = db_query_items(sizeof(*out->items), build_row_fill, &out->count, &rc, sql, nparams, params);
	return rc;
}

/* Whether worker w (a workers row) may build a job of repo r (a repos row)
 * now: not removed; a private repo only with scope_private; inside its
 * namespaces or repos when it lists any (sql/0009_worker_scopes.sql). */
#define WORKER_MAY_BUILD(w, r) \
	"(" w ".removed_at IS NULL AND (NOT " r ".private OR " w ".scope_private) AND" \
	" (cardinality(" w ".scope_orgs) + cardinality(" w ".scope_repos) = 0" \
	"  OR lower(" r ".namespace) = ANY(" w ".scope_orgs)" \
	"  OR lower(" r ".namespace || '/' || " r ".name) = ANY(" w ".scope_repos)))"

/* A running job b (of repo r) whose worker w may no longer build it goes
 * back to the queue, its attempt not counted, as a release would. */
#define TAKE_BACK_SET \
	" state = 'queued', attempt = greatest(b.attempt - 1, 0), worker_id = NULL, lease_expires_at = NULL," \
	" not_before = now(), error = 'taken back from worker ' || w.name || ': its scope no longer covers '" \
	"  || r.namespace || '/' || r.name || CASE WHEN r.private THEN ' (private)' ELSE '' END"

/* Seconds a retried attempt waits: 5 s × 2^(attempt-1), at most 5 min. */
#define BACKOFF "make_interval(secs => least(300, 5 * power(2, greatest(b.attempt, 1) - 1)))"

/* The states a transition may start from (NULL-terminated, from the farm's
 * table) as an array literal for "state = ANY($n::text[])". */
static void states_literal(const char *const *from, char out[96])
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_adds(&sb, "{");
	for (size_t i = 0; from && from[i]; i++) {
		if (i)
			strbuf_adds(&sb, ",");
		db_array_add(&sb, from[i]);
	}
	strbuf_adds(&sb, "}");
	snprintf(out, 96, "%s", sb.buf);
	strbuf_release(&sb);
}

int db_build_enqueue(const struct build_request *r, const char *variant, enum build_enqueue_outcome *outcome,
		     int64_t *id)
{
	char repo[24], attempts[24];
	const char *params[8] = { db_param_int(repo, r->repo_id), r->commit, variant, r->force ? "true" : "false",
				  db_param_int(attempts, r->max_attempts > 0 ? r->max_attempts : 3),
				  r->requested_by ? r->requested_by : "", r->source_url, r->source_revision };
	struct db_rows rows;
	/* one statement: the partial unique index settles races between
	 * two enqueues; a succeeded job stops it unless forced */
	int rc = db_query(&rows,
			  "WITH done AS (SELECT id FROM builds WHERE repo_id = $1 AND source_commit = $2 AND variant = $3"
			  "  AND kind = 'build' AND state IN ('succeeded', 'staged') AND NOT $4::boolean ORDER BY id DESC LIMIT 1),"
			  " ins AS (INSERT INTO builds (repo_id, source_commit, variant, force, max_attempts, requested_by,"
			  "  source_url, source_revision)"
			  "  SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE NOT EXISTS (SELECT 1 FROM done)"
			  "  ON CONFLICT (repo_id, source_commit, variant) WHERE state IN ('queued', 'running') AND kind = 'build'"
			  "  DO NOTHING"
			  "  RETURNING id)"
			  " SELECT 'new', id FROM ins UNION ALL SELECT 'done', id FROM done", 8, params);
	if (rc < 0)
		return rc;
	if (rows.count > 0) {
		*outcome = strcmp(db_rows_get(&rows, 0, 0), "new") == 0 ? BUILD_ENQUEUED : BUILD_SKIP_SUCCEEDED;
		*id = db_rows_int(&rows, 0, 1, 0);
		db_rows_release(&rows);
		return 0;
	}
	db_rows_release(&rows);
	*outcome = BUILD_SKIP_ACTIVE;
	rc = db_query(&rows, "SELECT id FROM builds WHERE repo_id = $1 AND source_commit = $2 AND variant = $3"
			     " AND state IN ('queued', 'running') AND kind = 'build'", 3, params);
	if (rc < 0)
		return rc;
	*id = rows.count ? db_rows_int(&rows, 0, 0, 0) : 0;
	db_rows_release(&rows);
	return 0;
}

int db_build_enqueue_benchmark(const struct build_request *r, const char *variant, const char *variant_commit,
			       const char *device, enum build_enqueue_outcome *outcome, int64_t *id)
{
	char repo[24], attempts[24];
	const char *params[7] = { db_param_int(repo, r->repo_id), r->commit, variant, device, variant_commit,
				  db_param_int(attempts, r->max_attempts > 0 ? r->max_attempts : 3),
				  r->requested_by ? r->requested_by : "" };
	struct db_rows rows;
	int rc = db_query(&rows,
			  "WITH ins AS (INSERT INTO builds (repo_id, source_commit, variant, kind, device, variant_commit,"
			  "  max_attempts, requested_by) VALUES ($1, $2, $3, 'benchmark', $4, $5, $6, $7)"
			  "  ON CONFLICT (repo_id, source_commit, variant, device) WHERE kind = 'benchmark' DO NOTHING"
			  "  RETURNING id)"
			  " SELECT 'new', id FROM ins UNION ALL SELECT 'old', id FROM builds WHERE repo_id = $1"
			  "  AND source_commit = $2 AND variant = $3 AND device = $4 AND kind = 'benchmark'"
			  "  AND NOT EXISTS (SELECT 1 FROM ins)", 7, params);
	if (rc < 0)
		return rc;
	*outcome = rows.count && strcmp(db_rows_get(&rows, 0, 0), "new") == 0 ? BUILD_ENQUEUED : BUILD_SKIP_ACTIVE;
	*id = rows.count ? db_rows_int(&rows, 0, 1, 0) : 0;
	db_rows_release(&rows);
	return 0;
}

int db_build_queue_begin(void)
{
	int rc = db_tx_begin();
	if (rc == 0 && (rc = db_lock_xact(DB_LOCK_BUILD_QUEUE, 0)) < 0)
		db_tx_rollback();
	return rc;
}

int db_build_queued_counts(int64_t repo_id, const char *requested_by, long *repo_queued, long *requester_queued)
{
	char repo[24];
	const char *params[2] = { db_param_int(repo, repo_id), requested_by ? requested_by : "" };
	int rc = db_query_row("SELECT (SELECT count(*) FROM builds WHERE state = 'queued' AND repo_id = $1),"
			      " (SELECT count(*) FROM builds WHERE state = 'queued' AND requested_by = $2)", 2, params,
			      DB_FIELDS(DB_LONG(0, repo_queued), DB_LONG(1, requester_queued)));
	return rc == KHUB_ENOTFOUND ? KHUB_EDB : rc;
}

int db_build_get(int64_t id, struct build_row *out)
{
	char bid[24];
	const char *params[1] = { db_param_int(bid, id) };
	return build_query_one(out, "SELECT " BUILD_COLUMNS BUILD_FROM " WHERE b.id = $1", 1, params);
}

int db_build_list(int64_t repo_id, const char *state, long limit, long offset, struct build_rows *out)
{
	char repo[24], lim[24], off[24];
	const char *params[4] = { db_param_int(repo, repo_id), state, db_param_int(lim, limit), db_param_int(off, offset) };
	return build_query(out, "SELECT " BUILD_COLUMNS BUILD_FROM " WHERE ($1::bigint = 0 OR b.repo_id = $1) AND ($2::text IS NULL OR b.state = $2)"
			     " ORDER BY b.id DESC LIMIT $3 OFFSET $4", 4, params);
}

/* The commits of a matrix page: one ($4), or a page of the repo's. */
#define MATRIX_COMMITS \
	"WITH c AS (SELECT source_commit, max(id) AS newest FROM builds WHERE repo_id = $1 AND kind = 'build'" \
	" AND ($4::text IS NULL OR source_commit = $4) GROUP BY source_commit ORDER BY newest DESC LIMIT $2 OFFSET $3)"

/* The jobs of kind (and what picks them: DISTINCT ON, ORDER BY) of the
 * commits MATRIX_COMMITS picks, with their duration. */
#define MATRIX_JOBS(distinct, kind, order) \
	MATRIX_COMMITS " SELECT " distinct BUILD_COLUMNS "," \
	" extract(epoch FROM coalesce(b.finished_at, CASE WHEN b.state = 'running' THEN now() END)" \
	"  - b.started_at)::bigint" BUILD_FROM " JOIN c ON c.source_commit = b.source_commit" \
	" WHERE b.repo_id = $1 AND b.kind = '" kind "' ORDER BY c.newest DESC, " order

static int matrix_query(const char *sql, int64_t repo_id, const char *commit, long limit, long offset,
			struct build_rows *out)
{
	char repo[24], lim[24], off[24];
	const char *params[4] = { db_param_int(repo, repo_id), db_param_int(lim, limit), db_param_int(off, offset), commit };
	return build_query(out, sql, 4, params);
}

int db_build_matrices(int64_t repo_id, const char *commit, long limit, long offset, struct build_rows *out)
{
	return matrix_query(MATRIX_JOBS("DISTINCT ON (c.newest, b.variant) ", "build", "b.variant, b.id DESC"), repo_id,
			    commit, limit, offset, out);
}

int db_build_matrix_benchmarks(int64_t repo_id, const char *commit, long limit, long offset, struct build_rows *out)
{
	return matrix_query(MATRIX_JOBS("", "benchmark", "b.variant, b.device, b.id"), repo_id, commit, limit, offset,
			    out);
}

int db_build_matrix_count(int64_t repo_id, long *commits)
{
	char repo[24];
	const char *params[1] = { db_param_int(repo, repo_id) };
	int rc = db_query_row("SELECT count(DISTINCT source_commit) FROM builds WHERE repo_id = $1 AND kind = 'build'", 1,
			      params, DB_FIELDS(DB_LONG(0, commits)));
	return rc == KHUB_ENOTFOUND ? KHUB_EDB : rc;
}

void build_changes_release(struct build_changes *changes)
{
	if (!changes)
		return;
	free(changes->items);
	changes->items = NULL;
	changes->count = 0;
}

static void build_change_fill(void *item, const struct db_rows *rows, size_t i)
{
	struct build_change *c = item;
	db_rows_read(rows, i, DB_FIELDS(DB_I64(0, &c->id), DB_TEXT(1, c->state, sizeof(c->state))));
}

/* The jobs an UPDATE … RETURNING b.id, b.state changed into out: how many. */
static int build_changes_query(struct build_changes *out, const char *sql)
{
	int rc = 0;
	out->items = db_query_items(sizeof(*out->items), build_change_fill, &out->count, &rc, sql, 0, NULL);
	return rc < 0 ? rc : (int)out->count;
}

int db_build_expire_leases(struct build_changes *out)
{
	return build_changes_query(out, "UPDATE builds b SET"
			    " state = CASE WHEN b.attempt >= b.max_attempts THEN 'failed' ELSE 'queued' END,"
			    " error = 'lease expired (attempt ' || b.attempt || ' of ' || b.max_attempts || ')',"
			    " not_before = now() + " BACKOFF ", worker_id = NULL, lease_expires_at = NULL,"
			    " finished_at = CASE WHEN b.attempt >= b.max_attempts THEN now() END"
			    " WHERE b.state = 'running' AND b.lease_expires_at < now() RETURNING b.id, b.state");
}

/* Round robin by repo: first the repo whose last claim is oldest (never
 * claimed: first of all), then its oldest job; one repo's flood of jobs
 * does not starve another's single job. */
#define FAIR_ORDER \
	" ORDER BY (SELECT max(x.started_at) FROM builds x WHERE x.repo_id = b.repo_id) NULLS FIRST," \
	" b.created_at, b.id"

/* A build job of a variant in the claim's list ($2); a benchmark job of a
 * device model one of the worker's registered toolchains runs benchmarks
 * on (sql/0040_benchmark_jobs.sql). */
#define CLAIMABLE_KIND \
	"((b.kind = 'build' AND b.variant = ANY($2::text[])) OR (b.kind = 'benchmark' AND EXISTS" \
	" (SELECT 1 FROM jsonb_array_elements(CASE jsonb_typeof(w.capabilities) WHEN 'array' THEN w.capabilities" \
	"  ELSE '[]' END) t WHERE t->>'benchmarks' = 'true' AND t->>'device' = b.device)))"

int db_build_take_back_out_of_scope(struct build_changes *out)
{
	return build_changes_query(out, "UPDATE builds b SET" TAKE_BACK_SET " FROM workers w, repos r"
				   " WHERE b.state = 'running' AND w.id = b.worker_id AND r.id = b.repo_id"
				   " AND NOT " WORKER_MAY_BUILD("w", "r") " RETURNING b.id, b.state");
}

/* A claimed job's log gets a line of khub's own, "[khub] attempt N of M on
 * worker W", and the new attempt's offsets start after it (log_base). */
static int log_start_attempt(const char *bid, const char *wid)
{
	const char *params[2] = { bid, wid };
	return db_run("WITH h AS (SELECT b.id, b.log_length AS at, convert_to(CASE WHEN b.log_length > 0 THEN E'\\n'"
		      "  ELSE '' END || '[khub] attempt ' || b.attempt || ' of ' || b.max_attempts || ' on worker '"
		      "  || coalesce((SELECT name FROM workers WHERE id = $2), '?') || E'\\n', 'UTF8') AS data"
		      "  FROM builds b WHERE b.id = $1),"
		      " i AS (INSERT INTO build_log_chunks (build_id, at, data) SELECT id, at, data FROM h)"
		      " UPDATE builds b SET log_length = h.at + length(h.data), log_base = h.at + length(h.data)"
		      " FROM h WHERE b.id = h.id", 2, params);
}

int db_build_claim(int64_t worker_id, const char *const *variants, size_t n, long lease_seconds,
		   struct build_row *out, struct build_changes *lapsed)
{
	struct strbuf list = STRBUF_INIT;
	struct db_rows room = { 0 };
	struct build_rows claimed = { 0 };
	char wid[24], lease[24], bid[24];
	db_param_int(wid, worker_id);
	db_param_int(lease, lease_seconds);
	memset(out, 0, sizeof(*out));
	memset(lapsed, 0, sizeof(*lapsed));
	strbuf_adds(&list, "{");
	for (size_t i = 0; i < n; i++) {
		if (i)
			strbuf_adds(&list, ",");
		db_array_add(&list, variants[i]);
	}
	strbuf_adds(&list, "}");
	const char *params[3] = { wid, list.buf, lease };
	int rc = db_tx_begin();
	if (rc < 0)
		goto cleanup;
	if ((rc = db_build_expire_leases(lapsed)) < 0)
		goto rollback;
	/* the worker's row locked first, in a statement of its own: its
	 * concurrent claims take turns, and the count below (a new snapshot)
	 * sees the jobs the one before took */
	if ((rc = db_run("SELECT 1 FROM workers WHERE id = $1 FOR UPDATE", 1, params)) < 0)
		goto rollback;
	rc = db_query(&room, "SELECT w.concurrency > (SELECT count(*) FROM builds b WHERE b.worker_id = w.id"
			     "  AND b.state = 'running') FROM workers w WHERE w.id = $1", 1, params);
	if (rc < 0)
		goto rollback;
	int has_room = room.count == 1 && db_rows_get(&room, 0, 0)[0] == 't';
	if (has_room)
		rc = build_query(&claimed,
				 "WITH c AS (SELECT b.id FROM builds b JOIN repos r ON r.id = b.repo_id, workers w"
				 "  WHERE w.id = $1 AND b.state = 'queued' AND b.not_before <= now()"
				 "  AND " CLAIMABLE_KIND " AND " WORKER_MAY_BUILD("w", "r") FAIR_ORDER
				 "  LIMIT 1 FOR UPDATE OF b SKIP LOCKED),"
				 " u AS (UPDATE builds b SET state = 'running', attempt = b.attempt + 1, worker_id = $1,"
				 "  lease_expires_at = now() + make_interval(secs => $3::int), started_at = now(),"
				 "  finished_at = NULL FROM c WHERE b.id = c.id RETURNING b.*)"
				 " SELECT " BUILD_COLUMNS " FROM u b JOIN repos r ON r.id = b.repo_id"
				 " LEFT JOIN workers w ON w.id = b.worker_id", 3, params);
	if (rc < 0)
		goto rollback;
	if ((rc = db_run("UPDATE workers SET last_heartbeat = now() WHERE id = $1", 1, params)) < 0 ||
	    (rc = db_tx_commit()) < 0)
		goto rollback;	/* nothing left to roll back when the commit failed */
	if (claimed.count == 1) {
		if ((rc = log_start_attempt(db_param_int(bid, claimed.items[0].id), wid)) < 0)
			goto rollback;
	}
	rc = !has_room ? 2 : claimed.count ? 0 : 1;
	if (rc == 0) {
		*out = claimed.items[0];
		memset(&claimed.items[0], 0, sizeof(claimed.items[0]));
	}
	goto cleanup;
rollback:
	db_tx_rollback();
	build_changes_release(lapsed);	/* rolled back with the rest */
cleanup:
	db_rows_release(&room);
	build_rows_release(&claimed);
	strbuf_release(&list);
	return rc;
}

int db_build_next_lease_expiry(long *ms)
{
	struct db_rows rows;
	int rc = db_query(&rows, "SELECT ceil(extract(epoch FROM min(lease_expires_at) - now()) * 1000)::bigint"
				 " FROM builds WHERE state = 'running'", 0, NULL);
	if (rc < 0)
		return rc;
	*ms = rows.count ? (long)db_rows_int(&rows, 0, 0, -1) : -1;
	if (*ms < -1)
		*ms = 0;	/* lapsed already */
	db_rows_release(&rows);
	return 0;
}

int db_build_lease_check(int64_t id, int64_t worker_id, char state[16], int *taken_back)
{
	char bid[24], wid[24];
	const char *params[2] = { db_param_int(bid, id), db_param_int(wid, worker_id) };
	int leased, held, allowed;
	state[0] = '\0';
	/* the job's worker (this one or another) that may no longer build it
	 * loses it first; the SELECT sees the rows as they were before */
	int rc = db_query_row("WITH back AS (UPDATE builds b SET" TAKE_BACK_SET " FROM workers w, repos r"
			      "  WHERE b.id = $1 AND b.state = 'running' AND w.id = b.worker_id AND r.id = b.repo_id"
			      "  AND NOT " WORKER_MAY_BUILD("w", "r") " RETURNING b.id)"
			      " SELECT b.state, b.worker_id = $2 AND b.lease_expires_at >= now(),"
			      "  b.worker_id = $2 AND b.state IN ('running', 'canceled'),"
			      "  " WORKER_MAY_BUILD("w", "r") ", EXISTS (SELECT 1 FROM back)"
			      " FROM builds b JOIN repos r ON r.id = b.repo_id, workers w WHERE b.id = $1 AND w.id = $2",
			      2, params, DB_FIELDS(DB_TEXT(0, state, 16), DB_BOOL(1, &leased), DB_BOOL(2, &held),
						   DB_BOOL(3, &allowed), DB_BOOL(4, taken_back)));
	if (rc < 0)
		return rc;
	int running = strcmp(state, "running") == 0;
	if (*taken_back)
		snprintf(state, 16, "queued");
	if (!allowed)
		return held ? KHUB_EPERM : KHUB_ENOTFOUND;
	return running && leased && !*taken_back ? 0 : KHUB_ECONFLICT;
}

int db_build_heartbeat(int64_t id, int64_t worker_id, const char *const *from, long lease_seconds, char expires[40],
		       int *cancel)
{
	char bid[24], wid[24], lease[24], states[96];
	states_literal(from, states);
	const char *params[4] = { db_param_int(bid, id), db_param_int(wid, worker_id), db_param_int(lease, lease_seconds),
				  states };
	/* a canceled job stays its worker's until it stops: the answer says
	 * cancel; an expired lease is lost even when nobody took it yet */
	int rc = db_query_row("UPDATE builds SET lease_expires_at = CASE WHEN state = 'running'"
			  "  THEN now() + make_interval(secs => $3::int) ELSE lease_expires_at END"
			  " WHERE id = $1 AND worker_id = $2 AND state = ANY($4::text[]) AND"
			  "  (state <> 'running' OR lease_expires_at >= now())"
			  " RETURNING state = 'canceled', "
			  ISO("coalesce(lease_expires_at, now())"), 4, params,
			  DB_FIELDS(DB_BOOL(0, cancel), DB_TEXT(1, expires, 40)));
	if (rc < 0)
		return rc == KHUB_ENOTFOUND ? KHUB_ECONFLICT : rc;
	return db_run("UPDATE workers SET last_heartbeat = now() WHERE id = $1", 1, params + 1);
}

/* Store data[from, to) as the log's bytes at `at` + from, in pieces of at
 * most LOG_PIECE bytes (a read from an offset starts at most one piece
 * before it); in the caller's transaction. */
static int log_store(const char *bid, int64_t at, const unsigned char *data, size_t from, size_t to)
{
	static const char digits[] = "0123456789abcdef";
	for (; from < to; from += LOG_PIECE) {
		size_t end = to - from > LOG_PIECE ? from + LOG_PIECE : to;
		char at_text[24];
		struct strbuf hex = STRBUF_INIT;
		strbuf_adds(&hex, "\\x");
		for (size_t i = from; i < end; i++) {
			char two[2] = { digits[data[i] >> 4], digits[data[i] & 15] };
			strbuf_add(&hex, two, 2);
		}
		const char *p3[3] = { bid, db_param_int(at_text, at + (int64_t)from), hex.buf };
		int rc = db_run("INSERT INTO build_log_chunks (build_id, at, data) VALUES ($1, $2, $3::bytea)", 3, p3);
		strbuf_release(&hex);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Past the head, keep only the bytes from keep_from on: older tail pieces
 * dropped, the one straddling it cut. */
static int log_trim_tail(const char *bid, int64_t head, int64_t keep_from)
{
	char head_text[24], keep_text[24];
	const char *p3[3] = { bid, db_param_int(head_text, head), db_param_int(keep_text, keep_from) };
	int rc = db_run("DELETE FROM build_log_chunks WHERE build_id = $1 AND at >= $2::bigint"
			" AND at + length(data) <= $3::bigint", 3, p3);
	if (rc == 0)
		rc = db_run("UPDATE build_log_chunks SET data = substring(data FROM ($3::bigint - at + 1)::int),"
			    " at = $3::bigint WHERE build_id = $1 AND at >= $2::bigint AND at < $3::bigint", 3, p3);
	return rc;
}

/* The end of the log's stored bytes, and how many of them lie at or past
 * tail_from. */
static int log_stored(const char *bid, int64_t tail_from, int64_t *stored_end, int64_t *tail_stored)
{
	char from_text[24];
	const char *p2[2] = { bid, db_param_int(from_text, tail_from) };
	return db_query_row("SELECT coalesce(max(at + length(data)), 0),"
			    " coalesce(sum(length(data)) FILTER (WHERE at >= $2::bigint), 0)"
			    " FROM build_log_chunks WHERE build_id = $1", 2, p2,
			    DB_FIELDS(DB_I64(0, stored_end), DB_I64(1, tail_stored)));
}

/* Store a tail chunk [at, at + len) of the attempt starting at base: the
 * bytes not stored yet, the ones before it (when it leaves a gap) cut.
 * Each attempt writes at most its tail's share plus LOG_TAIL_SLACK past the
 * head, once: 0, 1 (a second gap), 3 (over that). */
static int log_store_tail(const char *bid, int64_t base, int64_t at, const void *data, size_t len,
			  int64_t max_bytes)
{
	int64_t head = max_bytes / 2, tail = max_bytes - head, end = at + (int64_t)len;
	int64_t stored_end, tail_stored;
	int rc = log_stored(bid, head > base ? head : base, &stored_end, &tail_stored);
	if (rc < 0)
		return rc;
	int64_t from = at > stored_end ? at : stored_end;
	if (from >= end)
		return 0;	/* sent again */
	if (at > stored_end && tail_stored > 0)
		return 1;	/* the tail is one run of bytes */
	if (tail_stored + (end - from) > tail + LOG_TAIL_SLACK)
		return 3;
	if ((rc = log_store(bid, at, data, (size_t)(from - at), len)) < 0)
		return rc;
	/* one cut in the log: what an earlier attempt left past the head goes
	 * when this tail starts after a gap, else what falls out of the last
	 * `tail` bytes (never this attempt's) */
	int64_t keep_from = at > stored_end ? at : end - tail < base ? end - tail : base;
	return keep_from > head ? log_trim_tail(bid, head, keep_from) : 0;
}

/* Store what is new in a chunk [at, at + len) of the attempt starting at
 * base (the log's own offsets; `have` its length): the head's bytes (the
 * first half of max_bytes) as they come; past it only a tail chunk's (the
 * worker holds the log's last bytes and sends them at its end), so no byte
 * that the cap drops is ever written. 0, 1 (a gap where none may be), 3 (a
 * tail over its share). */
static int log_store_new(const char *bid, int64_t base, int64_t have, int64_t at, const void *data, size_t len,
			 int tail, int64_t max_bytes)
{
	int64_t end = at + (int64_t)len, head = max_bytes / 2;
	if (max_bytes <= 0)	/* no cap */
		return at > have ? 1 : end > have ? log_store(bid, at, data, (size_t)(have - at), len) : 0;
	if (tail)
		return log_store_tail(bid, base, at, data, len, max_bytes);
	if (at > have && have < head)
		return 1;	/* the head has no gap */
	int64_t to = end < head ? end : head;	/* past the head: counted, not stored */
	return have < to ? log_store(bid, at, data, (size_t)(have - at), (size_t)(to - at)) : 0;
}

int db_build_log_append(int64_t id, int64_t worker_id, const char *const *from, int attempt, int64_t at,
			const void *data, size_t len, int tail, int64_t max_bytes, int64_t *length)
{
	char bid[24], wid[24], att[24], states[96];
	states_literal(from, states);
	int rc = db_tx_begin();
	if (rc < 0)
		return rc;
	const char *params[4] = { db_param_int(bid, id), db_param_int(wid, worker_id), db_param_int(att, attempt),
				  states };
	int64_t end, base;
	int earlier;
	rc = db_query_row("SELECT log_length, log_base, $3::int >= 0 AND attempt <> $3::int FROM builds"
			  " WHERE id = $1 AND worker_id = $2 AND state = ANY($4::text[]) FOR UPDATE", 4, params,
			  DB_FIELDS(DB_I64(0, &end), DB_I64(1, &base), DB_BOOL(2, &earlier)));
	if (rc == KHUB_ENOTFOUND)
		rc = KHUB_ECONFLICT;
	if (rc < 0)
		goto rollback;
	if (earlier) {	/* a chunk of an earlier attempt: never mixed in */
		db_tx_rollback();
		return 2;
	}
	/* offsets count from the attempt's first byte */
	int64_t have = end - base;
	*length = have;
	/* stored at the log's own offsets (the attempt's base added), capped
	 * over the whole log */
	if ((rc = log_store_new(bid, base, base + have, base + at, data, len, tail, max_bytes)) != 0) {
		if (rc < 0)
			goto rollback;
		db_tx_rollback();
		return rc;
	}
	if (at + (int64_t)len > have) {
		char newlen[24];
		const char *p2[2] = { bid, db_param_int(newlen, base + at + (int64_t)len) };
		if ((rc = db_run("UPDATE builds SET log_length = $2 WHERE id = $1", 2, p2)) < 0)
			goto rollback;
		*length = at + (int64_t)len;
	}
	return db_tx_commit();
rollback:
	db_tx_rollback();
	return rc;
}

int db_build_log_head_left(int64_t id, int64_t max_bytes, int64_t *left)
{
	char bid[24];
	const char *params[1] = { db_param_int(bid, id) };
	int64_t base;
	int rc = db_query_row("SELECT log_base FROM builds WHERE id = $1", 1, params, DB_FIELDS(DB_I64(0, &base)));
	if (rc < 0)
		return rc;
	*left = max_bytes <= 0 ? -1 : max_bytes / 2 > base ? max_bytes / 2 - base : 0;
	return 0;
}

/* The stored bytes [from, from + max) of the log into out (nothing cut in
 * between: the caller reads on each side of the cut). */
static int log_read_range(const char *bid, int64_t from, int64_t max, struct strbuf *out)
{
	char from_text[24], max_text[24], piece[24];
	const char *p4[4] = { bid, db_param_int(from_text, from), db_param_int(max_text, max),
			      db_param_int(piece, LOG_PIECE) };
	struct db_rows rows;
	/* the chunks reaching past `from`, cut to [from, from + max) */
	int rc = db_query(&rows,
			  "SELECT encode(substring(string_agg(data, ''::bytea ORDER BY at)"
			  "  FROM ($2::bigint - min(at) + 1)::int FOR $3::int), 'hex')"
			  " FROM build_log_chunks WHERE build_id = $1 AND at > $2::bigint - $4::bigint"
			  " AND at + length(data) > $2::bigint AND at < $2::bigint + $3::bigint", 4, p4);
	if (rc < 0)
		return rc;
	const char *hex = rows.count ? db_rows_get(&rows, 0, 0) : "";
	for (size_t i = 0; hex[i] && hex[i + 1]; i += 2) {
		char pair[3] = { hex[i], hex[i + 1], '\0' };
		char c = (char)strtol(pair, NULL, 16);
		strbuf_add(out, &c, 1);
	}
	db_rows_release(&rows);
	return 0;
}

/* Where the log was cut: [*cut_from, *cut_to) not stored; both 0 when
 * nothing was. */
static int log_find_cut(const char *bid, int64_t *cut_from, int64_t *cut_to)
{
	const char *p1[1] = { bid };
	*cut_from = *cut_to = 0;
	int rc = db_query_row("SELECT e, n FROM (SELECT at + length(data) AS e, lead(at) OVER (ORDER BY at) AS n"
			      "  FROM build_log_chunks WHERE build_id = $1) g WHERE n > e ORDER BY e LIMIT 1", 1, p1,
			      DB_FIELDS(DB_I64(0, cut_from), DB_I64(1, cut_to)));
	return rc == KHUB_ENOTFOUND ? 0 : rc;
}

/* "[khub: 55.1 MB cut from this log]" for n bytes. */
static void log_cut_line(struct strbuf *out, int64_t n)
{
	if (n >= 1000000)
		strbuf_addf(out, "\n[khub: %.1f MB cut from this log]\n", (double)n / 1e6);
	else if (n >= 1000)
		strbuf_addf(out, "\n[khub: %.1f kB cut from this log]\n", (double)n / 1e3);
	else
		strbuf_addf(out, "\n[khub: %" PRId64 " bytes cut from this log]\n", n);
}

int db_build_log_read(int64_t id, int64_t from, size_t max, struct strbuf *out, int64_t *length, int64_t *next)
{
	char bid[24];
	const char *params[1] = { db_param_int(bid, id) };
	int rc = db_query_row("SELECT log_length FROM builds WHERE id = $1", 1, params, DB_FIELDS(DB_I64(0, length)));
	if (rc < 0)
		return rc;
	*next = from > *length ? from : *length;
	if (from >= *length)
		return 0;
	int64_t cut_from, cut_to, budget = (int64_t)max;
	if ((rc = log_find_cut(bid, &cut_from, &cut_to)) < 0)
		return rc;
	if (cut_to > cut_from && from < cut_from) {
		int64_t n = cut_from - from < budget ? cut_from - from : budget;
		if ((rc = log_read_range(bid, from, n, out)) < 0)
			return rc;
		budget -= n;
		*next = from + n;
		if (from + n < cut_from)
			return 0;
	}
	if (cut_to > cut_from && from < cut_to) {
		log_cut_line(out, cut_to - cut_from);
		from = cut_to;
	}
	/* past what is stored (a running build past its head, whose tail
	 * comes at its end) the read stops and reads on from there */
	size_t before = out->len;
	rc = log_read_range(bid, from, budget, out);
	*next = from + (int64_t)(out->len - before);
	return rc;
}

int db_build_log_progress(int64_t id, char state[16], int64_t *length)
{
	char bid[24];
	const char *params[1] = { db_param_int(bid, id) };
	return db_query_row("SELECT state, log_length FROM builds WHERE id = $1", 1, params,
			    DB_FIELDS(DB_TEXT(0, state, 16), DB_I64(1, length)));
}

/* Run an UPDATE of one job held by worker_id: KHUB_ECONFLICT when it
 * changed nothing; the first column of the returned row into state_out. */
static int update_held(const char *sql, int nparams, const char *const *params, char state_out[16])
{
	struct db_rows rows;
	int rc = db_query(&rows, sql, nparams, params);
	if (rc < 0)
		return rc;
	rc = rows.count ? 0 : KHUB_ECONFLICT;
	if (rows.count && state_out)
		db_rows_read(&rows, 0, DB_FIELDS(DB_TEXT(0, state_out, 16)));
	db_rows_release(&rows);
	return rc;
}

int db_build_fail(int64_t id, int64_t worker_id, const char *const *from, const char *error, int retry,
		  const char *abi_report, char state_out[16])
{
	char bid[24], wid[24], states[96];
	states_literal(from, states);
	const char *params[6] = { db_param_int(bid, id), db_param_int(wid, worker_id), error, retry ? "true" : "false",
				  abi_report, states };
	return update_held("UPDATE builds b SET"
			   " state = CASE WHEN $4::boolean AND b.attempt < b.max_attempts THEN 'queued' ELSE 'failed' END,"
			   " error = $3, abi_report = coalesce($5::jsonb, b.abi_report),"
			   " not_before = now() + " BACKOFF ", lease_expires_at = NULL,"
			   " worker_id = CASE WHEN $4::boolean AND b.attempt < b.max_attempts THEN NULL ELSE b.worker_id END,"
			   " finished_at = CASE WHEN $4::boolean AND b.attempt < b.max_attempts THEN NULL ELSE now() END"
			   " WHERE b.id = $1 AND b.worker_id = $2 AND b.state = ANY($6::text[]) RETURNING b.state",
			   6, params, state_out);
}

int db_build_release(int64_t id, int64_t worker_id, const char *const *from)
{
	char bid[24], wid[24], states[96];
	states_literal(from, states);
	const char *params[3] = { db_param_int(bid, id), db_param_int(wid, worker_id), states };
	return update_held("UPDATE builds SET state = 'queued', attempt = greatest(attempt - 1, 0), worker_id = NULL,"
			   " lease_expires_at = NULL, not_before = now()"
			   " WHERE id = $1 AND worker_id = $2 AND state = ANY($3::text[]) RETURNING state", 3, params, NULL);
}

int db_build_finish(int64_t id, int64_t worker_id, const char *const *from, const char *to, const char *error,
		    const char *abi_report, const char *branch, const char *commit, const char *note)
{
	char bid[24], wid[24], states[96];
	states_literal(from, states);
	const char *params[9] = { db_param_int(bid, id), db_param_int(wid, worker_id), to, error, abi_report, branch,
				  commit, note, states };
	return update_held("UPDATE builds SET state = $3, error = $4, abi_report = coalesce($5::jsonb, abi_report),"
			   " published_branch = $6, published_commit = $7, note = $8, finished_at = now(),"
			   " lease_expires_at = NULL"
			   " WHERE id = $1 AND worker_id = $2 AND state = ANY($9::text[]) RETURNING state", 9, params, NULL);
}

int db_build_earlier_publication(int64_t id, char commit[41])
{
	char bid[24];
	const char *params[1] = { db_param_int(bid, id) };
	commit[0] = '\0';
	int rc = db_query_row("SELECT o.published_commit FROM builds b JOIN builds o ON o.repo_id = b.repo_id"
			      " AND o.source_commit = b.source_commit AND o.variant = b.variant AND o.kind = 'build'"
			      " WHERE b.id = $1 AND o.id <> b.id AND o.state = 'succeeded'"
			      " AND o.published_commit ~ '^[0-9a-f]{40}$' ORDER BY o.id DESC LIMIT 1", 1, params,
			      DB_FIELDS(DB_TEXT(0, commit, 41)));
	return rc == KHUB_ENOTFOUND ? 0 : rc;
}

int db_build_merged(int64_t id, const char *const *from)
{
	char bid[24], states[96];
	states_literal(from, states);
	const char *params[2] = { db_param_int(bid, id), states };
	return update_held("UPDATE builds SET state = 'succeeded' WHERE id = $1 AND state = ANY($2::text[])"
			   " RETURNING state", 2, params, NULL);
}

int db_build_supersede_older(int64_t id, const char *const *from, struct build_changes *out)
{
	char bid[24], states[96];
	states_literal(from, states);
	const char *params[2] = { db_param_int(bid, id), states };
	int rc = 0;
	out->items = db_query_items(sizeof(*out->items), build_change_fill, &out->count, &rc,
				    "UPDATE builds o SET state = 'superseded', error = 'superseded by build #' || b.id, superseded_by = b.id"
				    " FROM builds b WHERE b.id = $1 AND o.repo_id = b.repo_id AND o.variant = b.variant"
				    " AND o.id < b.id AND o.state = ANY($2::text[]) RETURNING o.id, o.state", 2, params);
	return rc < 0 ? rc : (int)out->count;
}

int db_build_cancel(int64_t id, const char *const *from, char state_out[16])
{
	char bid[24], states[96];
	states_literal(from, states);
	const char *params[2] = { db_param_int(bid, id), states };
	return update_held("UPDATE builds SET state = 'canceled', finished_at = now(),"
			   " error = coalesce(error, 'canceled')"
			   " WHERE id = $1 AND state = ANY($2::text[]) RETURNING state", 2, params, state_out);
}

int db_build_retry(int64_t id, const char *const *from)
{
	char bid[24], states[96];
	states_literal(from, states);
	const char *params[2] = { db_param_int(bid, id), states };
	const char *sqlstate = NULL;
	PGresult *res = db_exec("UPDATE builds SET state = 'queued', attempt = 0, worker_id = NULL, lease_expires_at = NULL,"
				" not_before = now(), started_at = NULL, finished_at = NULL, error = NULL"
				" WHERE id = $1 AND state = ANY($2::text[]) RETURNING id", 2, params, &sqlstate);
	if (!res)
		return sqlstate && strcmp(sqlstate, "23505") == 0 ? KHUB_ECONFLICT : KHUB_EDB;
	int rc = PQntuples(res) == 1 ? 0 : KHUB_ECONFLICT;
	PQclear(res);
	return rc;
}

int db_build_provenance_put(int64_t id, const char *envelope, const char *sha256, const char *key_id)
{
	char bid[24];
	const char *params[4] = { db_param_int(bid, id), envelope, sha256, key_id };
	return db_run("INSERT INTO build_provenance (build_id, envelope, sha256, key_id) VALUES ($1, $2, $3, $4)"
		      " ON CONFLICT (build_id) DO UPDATE SET envelope = $2, sha256 = $3, key_id = $4,"
		      " created_at = now()", 4, params);
}

int db_build_provenance_get(int64_t id, char **envelope, char sha256[65])
{
	char bid[24];
	const char *params[1] = { db_param_int(bid, id) };
	return db_query_row("SELECT envelope, sha256 FROM build_provenance WHERE build_id = $1", 1, params,
			    DB_FIELDS(DB_STR_OR_NULL(0, envelope), DB_TEXT(1, sha256, 65)));
}

int db_benchmark_targets(int64_t repo_id, const char *commit, const char *variant, struct strvec *out)
{
	char repo[24];
	const char *params[3] = { db_param_int(repo, repo_id), commit, variant };
	struct db_rows rows;
	/* the newest publication of each variant of the commit (by default the
	 * newest commit the farm published a variant of) */
	int rc = db_query(&rows,
			  "WITH c AS (SELECT coalesce($2::text, (SELECT source_commit FROM builds WHERE repo_id = $1"
			  "  AND kind = 'build' AND state = 'succeeded' AND published_commit ~ '^[0-9a-f]{40}$'"
			  "  ORDER BY id DESC LIMIT 1)) AS sha)"
			  " SELECT DISTINCT ON (b.variant) b.source_commit, b.variant, b.published_commit FROM builds b, c"
			  " WHERE b.repo_id = $1 AND b.source_commit = c.sha AND b.kind = 'build' AND b.state = 'succeeded'"
			  " AND b.published_commit ~ '^[0-9a-f]{40}$' AND ($3::text IS NULL OR b.variant = $3)"
			  " ORDER BY b.variant, b.id DESC", 3, params);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < rows.count; i++)
		for (int col = 0; col < 3; col++)
			strvec_pushf(out, "%s", db_rows_get(&rows, i, col));
	db_rows_release(&rows);
	return 0;
}
