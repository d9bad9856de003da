/* db_builds.h -- storage: the build farm's tables (sql/0007_builds.sql):
 * build jobs with their leases and logs, and the workers that claim them.
 * Functions return 0 or a negative enum khub_err unless they say otherwise;
 * rows come back as struct db_rows with the columns of enum build_column or
 * enum worker_column (the caller releases them with db_rows_release). */
#ifndef KHUB_STORAGE_DB_BUILDS_H
#define KHUB_STORAGE_DB_BUILDS_H

#include "storage/db.h"

/* Columns of a build row (db_build_get, db_build_list, db_build_claim). */
enum build_column {
	BUILD_COL_ID, BUILD_COL_REPO_ID, BUILD_COL_NS, BUILD_COL_NAME, BUILD_COL_PRIVATE, BUILD_COL_COMMIT,
	BUILD_COL_VARIANT, BUILD_COL_STATE, BUILD_COL_ATTEMPT, BUILD_COL_MAX_ATTEMPTS, BUILD_COL_NOT_BEFORE,
	BUILD_COL_WORKER_ID, BUILD_COL_WORKER, BUILD_COL_LEASE_EXPIRES, BUILD_COL_CREATED, BUILD_COL_STARTED,
	BUILD_COL_FINISHED, BUILD_COL_ERROR, BUILD_COL_ABI_REPORT, BUILD_COL_BRANCH, BUILD_COL_PUBLISHED,
	BUILD_COL_FORCE, BUILD_COL_REQUESTED_BY, BUILD_COL_SOURCE_URL, BUILD_COL_SOURCE_REVISION,
	BUILD_COL_LOG_LENGTH, BUILD_COL_NOTE,
};
/* Times are ISO 8601 UTC text; NULL cells where unset. */

/* What an enqueue asks (strings borrowed). */
struct build_request {
	int64_t repo_id;
	const char *commit;		/* 40 hex */
	int force;			/* build again what succeeded */
	int max_attempts;
	const char *requested_by;
	const char *source_url, *source_revision;	/* NULL: the repo itself */
};
enum build_enqueue_outcome { BUILD_ENQUEUED, BUILD_SKIP_ACTIVE, BUILD_SKIP_SUCCEEDED };
/* Queue one variant unless the same commit and variant is queued or
 * running (*outcome BUILD_SKIP_ACTIVE) or succeeded and force is off
 * (BUILD_SKIP_SUCCEEDED); *id is the new job's or the one that made it skip. */
int db_build_enqueue(const struct build_request *r, const char *variant, enum build_enqueue_outcome *outcome,
		     int64_t *id);

/* One job: KHUB_ENOTFOUND when there is none. */
int db_build_get(int64_t id, struct db_rows *out);
/* A repo's jobs (repo_id 0: every repo's), newest first; state NULL = any. */
int db_build_list(int64_t repo_id, const char *state, long limit, long offset, struct db_rows *out);

/* Running jobs whose lease expired go back to the queue with a backoff of
 * 5 s × 2^(attempt-1) (at most 5 min), or fail after max_attempts. Returns
 * how many changed, or KHUB_EDB. */
int db_build_expire_leases(void);
/* Milliseconds until the first lease of a running job lapses (0: one has
 * lapsed), -1 when no job runs. */
int db_build_next_lease_expiry(long *ms);
/* In one transaction: expire leases, then, when worker_id runs fewer jobs
 * than the concurrency it registered, take the oldest queued job whose
 * variant is one of variants[0..n) and whose backoff is over (FOR UPDATE
 * SKIP LOCKED), leased to worker_id for lease_seconds. 0 with one row in
 * out, 1 when none is ready, 2 when the worker is at its concurrency,
 * KHUB_EDB. */
int db_build_claim(int64_t worker_id, const char *const *variants, size_t n, long lease_seconds,
		   struct db_rows *out);

/* The lease of a job: 0 when worker_id holds it (running), KHUB_ECONFLICT
 * when it does not (*state says what the job is, "" when unknown),
 * KHUB_ENOTFOUND. */
int db_build_lease_check(int64_t id, int64_t worker_id, char state[16]);
/* Extend the lease: *cancel 1 when the job was canceled while this worker
 * held it; KHUB_ECONFLICT when the lease is someone else's or gone. */
int db_build_heartbeat(int64_t id, int64_t worker_id, long lease_seconds, char expires[40], int *cancel);
/* Append len bytes at byte `at` of the running attempt's log (the lease
 * holder only: else KHUB_ECONFLICT; 2, nothing stored, when attempt >= 0 is
 * not the job's attempt). Offsets count from the attempt's first byte: every claim
 * starts a new part of the log after a line "[khub] attempt N of M on
 * worker W". A chunk that ends at or before the current length is ignored
 * (sent twice); a chunk starting past the end returns 1. *length is the
 * attempt's log length after. */
int db_build_log_append(int64_t id, int64_t worker_id, int attempt, int64_t at, const void *data, size_t len,
			int64_t *length);
/* At most max bytes of the log from byte `from` into out; *length the
 * whole log's length. KHUB_ENOTFOUND for no such job. */
int db_build_log_read(int64_t id, int64_t from, size_t max, struct strbuf *out, int64_t *length);

/* The worker gives up: error kept, abi_report (JSON text or NULL) stored;
 * retry with attempts left queues it again with the backoff, else it
 * fails. state_out gets the new state. KHUB_ECONFLICT without the lease. */
int db_build_fail(int64_t id, int64_t worker_id, const char *error, int retry, const char *abi_report,
		  char state_out[16]);
/* Given back without counting the attempt. KHUB_ECONFLICT without the lease. */
int db_build_release(int64_t id, int64_t worker_id);
/* The output was published (branch and commit) or refused (error); the
 * report is kept either way; note (may be NULL) says more of a success
 * ("identical to published commit X"). KHUB_ECONFLICT when the lease was
 * lost. */
int db_build_finish(int64_t id, int64_t worker_id, int succeeded, const char *error, const char *abi_report,
		    const char *branch, const char *commit, const char *note);
/* The commit an earlier succeeded build of the same repo, source commit
 * and variant as job id published (the newest), "" when none. */
int db_build_earlier_publication(int64_t id, char commit[41]);
/* Queued jobs are canceled at once, running ones too (their worker hears
 * it at its next heartbeat). KHUB_ECONFLICT when it already ended. */
int db_build_cancel(int64_t id, char state_out[16]);
/* A failed or canceled job queued again with its attempts reset.
 * KHUB_ECONFLICT when it is in another state or the same commit and
 * variant is queued or running again. */
int db_build_retry(int64_t id);

/* ---- workers (storage/db_workers.c) ------------------------------------------- */

/* A new worker identity with a token "khw_" + 40 random characters (stored
 * as its SHA-256; the caller frees *token). KHUB_EEXIST when the name is
 * taken by a worker not removed. */
int db_worker_create(const char *name, const char *created_by, char **token, int64_t *id);
/* Remove (its token stops working). KHUB_ENOTFOUND when unknown. */
int db_worker_remove(const char *name);
/* The principal of a worker token (worker_id set, user_id 0, scope
 * ROLE_NONE); KHUB_ENOTFOUND when it is none. */
int db_worker_token_lookup(const char *token, struct principal *out);
/* What it registered: capabilities (JSON text), variants (array literal). */
int db_worker_register(int64_t id, const char *version, long concurrency, const char *capabilities,
		       const char *variants);
/* Columns of db_worker_list. */
enum worker_column {
	WORKER_COL_NAME, WORKER_COL_VERSION, WORKER_COL_CONCURRENCY, WORKER_COL_CAPABILITIES, WORKER_COL_VARIANTS,
	WORKER_COL_CREATED, WORKER_COL_REGISTERED, WORKER_COL_HEARTBEAT, WORKER_COL_JOBS, WORKER_COL_TOKEN_PREFIX,
};
/* Workers not removed, by name; variants and jobs as JSON text. */
int db_worker_list(struct db_rows *out);
/* Every variant some worker not removed registered (one column, sorted). */
int db_worker_variants(struct db_rows *out);

/* The repo's buildOnPush setting and whether it is a mirror. */
int db_repo_build_settings(int64_t repo_id, int *build_on_push, int *mirrored);
int db_repo_set_build_on_push(int64_t repo_id, int on);

#endif
