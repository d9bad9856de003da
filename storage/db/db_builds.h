/* db_builds.h -- storage: the build farm's tables (sql/0007_builds.sql):
 * build jobs with their leases and logs, and the workers that claim them.
 * Functions return 0 or a negative enum khub_err unless they say otherwise;
 * rows come back as struct build_row or struct worker_row (the caller
 * releases them with build_row_release, build_rows_release,
 * worker_rows_release). */
#ifndef KHUB_STORAGE_DB_BUILDS_H
#define KHUB_STORAGE_DB_BUILDS_H

#include "storage/db/db.h"

/* One build job (db_build_get, db_build_list, db_build_claim,
 * db_build_matrices). Strings owned; NULL where the column is NULL (ns,
 * name, commit, variant and state never are). Times are ISO 8601 UTC text. */
struct build_row {
	int64_t id, repo_id;
	int64_t worker_id;		/* 0: none */
	int64_t superseded_by;		/* a superseded build: the newer one (sql/0042); else 0 */
	char *ns, *name, *commit, *variant, *state;
	int private_repo, force;
	long attempt, max_attempts;
	char *not_before, *worker, *lease_expires, *created, *started, *finished;
	char *error, *abi_report;	/* abi_report: JSON text */
	char *branch, *published;	/* published: the commit the output went to */
	char *requested_by, *source_url, *source_revision, *note;
	int benchmark;			/* kind 'benchmark' (sql/0040_benchmark_jobs.sql): */
	char *device, *variant_commit;	/* its device model and the commit with build/<variant>/ */
	int64_t log_length;
	int has_duration;		/* db_build_matrices only: */
	int64_t duration;		/* seconds started to finished (or now) */
};
/* An array of build rows (owned). */
struct build_rows {
	struct build_row *items;
	size_t count;
};
/* Free row's strings and zero it; accepts NULL. */
void build_row_release(struct build_row *row);
/* Release every row and the array; accepts NULL; leaves it empty. */
void build_rows_release(struct build_rows *rows);

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

/* Queue a benchmark job of r->commit's variant (its build/<variant>/ at
 * variant_commit) on device unless one exists, whatever its state
 * (*outcome BUILD_SKIP_ACTIVE); *id is the new job's or the existing one's. */
int db_build_enqueue_benchmark(const struct build_request *r, const char *variant, const char *variant_commit,
			       const char *device, enum build_enqueue_outcome *outcome, int64_t *id);

/* Open a transaction for enqueues, holding DB_LOCK_BUILD_QUEUE until it
 * ends (db_tx_commit or db_tx_rollback): counts taken inside it stay true
 * until then. */
int db_build_queue_begin(void);
/* Jobs queued (not yet claimed) of repo_id, and requested by requested_by. */
int db_build_queued_counts(int64_t repo_id, const char *requested_by, long *repo_queued, long *requester_queued);

/* One job: KHUB_ENOTFOUND when there is none. */
int db_build_get(int64_t id, struct build_row *out);
/* A repo's jobs (repo_id 0: every repo's), newest first; state NULL = any. */
int db_build_list(int64_t repo_id, const char *state, long limit, long offset, struct build_rows *out);

/* Build matrices (docs/build-farm.md, "The build matrix"): of repo_id's
 * commit (not NULL), or of its commits with builds newest first (the
 * commit of the newest job first; commits limit and offset), the newest
 * job of each commit and variant, with its duration, grouped by commit in
 * that order, by variant within one. */
int db_build_matrices(int64_t repo_id, const char *commit, long limit, long offset, struct build_rows *out);
/* The benchmark jobs (kind 'benchmark') of the same commits as
 * db_build_matrices with the same arguments, grouped by commit in the same
 * order, every job (one per variant and device), with the duration. */
int db_build_matrix_benchmarks(int64_t repo_id, const char *commit, long limit, long offset, struct build_rows *out);
/* How many commits of repo_id have builds. */
int db_build_matrix_count(int64_t repo_id, long *commits);

/* State changes. Only farm/build_states.c calls them (the build job's one
 * owner, whose table says which states each may start from: `from`, the
 * NULL-terminated state names an UPDATE below is limited to where it takes
 * one; t0238 checks that nothing else calls them): db_build_enqueue, db_build_enqueue_benchmark,
 * db_build_expire_leases, db_build_take_back_out_of_scope, db_build_claim,
 * db_build_lease_check, db_build_heartbeat, db_build_log_append,
 * db_build_fail, db_build_release, db_build_finish, db_build_cancel,
 * db_build_retry, db_build_merged, db_build_supersede_older. */

/* Jobs a bulk change moved, each with the state it ended in (the farm
 * tells their repos' webhooks). Owned; build_changes_release frees. */
struct build_change {
	int64_t id;
	char state[16];
};
struct build_changes {
	struct build_change *items;
	size_t count;
};
/* Free the array and leave it empty; accepts NULL. */
void build_changes_release(struct build_changes *changes);

/* Running jobs whose lease expired go back to the queue with a backoff of
 * 5 s × 2^(attempt-1) (at most 5 min), or fail after max_attempts: those
 * jobs into *out (released by the caller). Returns how many changed, or
 * KHUB_EDB (out empty). */
int db_build_expire_leases(struct build_changes *out);
/* Milliseconds until the first lease of a running job lapses (0: one has
 * lapsed), -1 when no job runs. */
int db_build_next_lease_expiry(long *ms);
/* Running jobs whose worker's scope no longer covers their repo (the
 * repo turned private, the scope narrowed, the worker removed) go back to
 * the queue without counting the attempt: those jobs into *out (released by
 * the caller). How many, or KHUB_EDB (out empty). */
int db_build_take_back_out_of_scope(struct build_changes *out);
/* In one transaction: expire leases (the jobs that lapsed into *lapsed,
 * released by the caller; empty when the claim fails), then, when worker_id runs fewer jobs than the concurrency it registered,
 * take a queued job whose variant is one of variants[0..n), whose repo the
 * worker's scope covers and whose backoff is over (FOR UPDATE SKIP
 * LOCKED): of the repos with such jobs, the one whose last claim is oldest
 * (never claimed first), its oldest job; leased to worker_id for
 * lease_seconds. 0 with the job in out, 1 when none is ready, 2 when the
 * worker is at its concurrency, KHUB_EDB. */
int db_build_claim(int64_t worker_id, const char *const *variants, size_t n, long lease_seconds,
		   struct build_row *out, struct build_changes *lapsed);

/* The lease of a job, with the worker's scope checked against the job's
 * repo as it is now: 0 when worker_id holds it (running); KHUB_ECONFLICT
 * when it does not (*state says what the job is); KHUB_EPERM when it held
 * it (running or canceled) but its scope no longer covers the repo (a
 * running job is put back in the queue: *state "queued"); KHUB_ENOTFOUND
 * when there is no such job or the worker's scope does not cover it.
 * *taken_back is 1 when this call took the running job back (from this
 * worker or another). */
int db_build_lease_check(int64_t id, int64_t worker_id, char state[16], int *taken_back);
/* Extend the lease: *cancel 1 when the job was canceled while this worker
 * held it; KHUB_ECONFLICT when the lease is someone else's or gone. */
int db_build_heartbeat(int64_t id, int64_t worker_id, const char *const *from, long lease_seconds, char expires[40],
		       int *cancel);
/* Append len bytes at byte `at` of the running attempt's log (the lease
 * holder only: else KHUB_ECONFLICT; 2, nothing stored, when attempt >= 0 is
 * not the job's attempt). Offsets count from the attempt's first byte:
 * every claim starts a new part of the log after a line "[khub] attempt N
 * of M on worker W". A chunk that ends at or before the current length is
 * ignored (sent twice); a chunk starting past the end returns 1 while the
 * log is in its head. *length is the attempt's log length after (every
 * byte received, kept or not). Of the whole log only the first
 * max_bytes / 2 bytes are stored as they come; bytes past them are counted
 * and stored only from a `tail` chunk (the log's last bytes, sent when the
 * attempt ends; it may start past the end, the bytes between dropped), at
 * most max_bytes / 2 plus 4 KiB of them an attempt (3 when over that; 1
 * when it would leave a second gap), the older part of the log past the
 * head cut to its last max_bytes / 2. */
int db_build_log_append(int64_t id, int64_t worker_id, const char *const *from, int attempt, int64_t at,
			const void *data, size_t len, int tail, int64_t max_bytes, int64_t *length);
/* How many bytes of the claimed attempt's log (from its first byte) the
 * head still keeps as they come under max_bytes (-1: no cap). */
int db_build_log_head_left(int64_t id, int64_t max_bytes, int64_t *left);
/* At most max stored bytes of the log from byte `from` into out, with a
 * line "[khub: 55.1 MB cut from this log]" where the read crosses the part
 * that was not kept; *length the whole log's length, *next the offset to
 * read on from. KHUB_ENOTFOUND for no such job. */
int db_build_log_read(int64_t id, int64_t from, size_t max, struct strbuf *out, int64_t *length, int64_t *next);
/* The job's state ("running"...) and its log's length, in one cheap read
 * (a follower's poll). KHUB_ENOTFOUND for no such job. */
int db_build_log_progress(int64_t id, char state[16], int64_t *length);

/* The worker gives up: error kept, abi_report (JSON text or NULL) stored;
 * retry with attempts left queues it again with the backoff, else it
 * fails. state_out gets the new state. KHUB_ECONFLICT without the lease. */
int db_build_fail(int64_t id, int64_t worker_id, const char *const *from, const char *error, int retry,
		  const char *abi_report, char state_out[16]);
/* Given back without counting the attempt. KHUB_ECONFLICT without the lease. */
int db_build_release(int64_t id, int64_t worker_id, const char *const *from);
/* The output was published (branch and commit: state to "succeeded", or
 * "staged" on a pull request) or refused (error, to "failed"); the report
 * is kept either way; note (may be NULL) says more of a success
 * ("identical to published commit X"). KHUB_ECONFLICT when the lease was
 * lost. */
int db_build_finish(int64_t id, int64_t worker_id, const char *const *from, const char *to, const char *error,
		    const char *abi_report, const char *branch, const char *commit, const char *note);
/* A staged job's pull request was merged: succeeded. KHUB_ECONFLICT when
 * it is in none of from. */
int db_build_merged(int64_t id, const char *const *from);
/* The jobs of the same repo and variant older than job id in one of from
 * become superseded (error "superseded by build #id"): into *out (released
 * by the caller). How many, or KHUB_EDB. */
int db_build_supersede_older(int64_t id, const char *const *from, struct build_changes *out);
/* The commit an earlier succeeded build of the same repo, source commit
 * and variant as job id published (the newest), "" when none. */
int db_build_earlier_publication(int64_t id, char commit[41]);
/* The build's signed provenance (a DSSE envelope, sql/0036_build_provenance.sql):
 * stored, or replaced when a publication is tried again. */
int db_build_provenance_put(int64_t id, const char *envelope, const char *sha256, const char *key_id);
/* The stored envelope (the caller frees *envelope) and its sha256;
 * KHUB_ENOTFOUND when the build has none. */
int db_build_provenance_get(int64_t id, char **envelope, char sha256[65]);
/* Queued jobs are canceled at once, running ones too (their worker hears
 * it at its next heartbeat). KHUB_ECONFLICT when it already ended. */
int db_build_cancel(int64_t id, const char *const *from, char state_out[16]);
/* A failed or canceled job queued again with its attempts reset.
 * KHUB_ECONFLICT when it is in another state or the same commit and
 * variant is queued or running again. */
int db_build_retry(int64_t id, const char *const *from);

/* ---- workers (storage/db/db_workers.c) ------------------------------------------- */

/* What a worker may build (sql/0009_worker_scopes.sql): the namespaces
 * (orgs or users) and repos ("ns/name") listed, every namespace when both
 * lists are empty; private repos only with private_repos. Strings owned. */
struct worker_scope {
	struct strvec orgs, repos;
	int private_repos;
};
#define WORKER_SCOPE_INIT { STRVEC_INIT, STRVEC_INIT, 0 }

/* A new worker identity with a token "khw_" + 40 random characters (stored
 * as its SHA-256; the caller frees *token) and its scope (borrowed).
 * KHUB_EEXIST when the name is taken by a worker not removed. */
int db_worker_create(const char *name, const char *created_by, const struct worker_scope *scope, char **token,
		     int64_t *id);
/* Replace a worker's scope. KHUB_ENOTFOUND when unknown. Its running jobs
 * the new scope leaves out are the caller's to take back
 * (db_build_take_back_out_of_scope). */
int db_worker_set_scope(const char *name, const struct worker_scope *scope);
/* A new token for the worker (the caller frees *token); the old one stops
 * working at once, the worker's jobs and history stay its own.
 * KHUB_ENOTFOUND when unknown. */
int db_worker_rotate(const char *name, char **token);
/* Remove (its token stops working). KHUB_ENOTFOUND when unknown. */
int db_worker_remove(const char *name);
/* The principal of a worker token (worker_id set, user_id 0, scope
 * ROLE_NONE); KHUB_ENOTFOUND when it is none. */
int db_worker_token_lookup(const char *token, struct principal *out);
/* What it registered: capabilities (JSON text), variants (array literal). */
int db_worker_register(int64_t id, const char *version, long concurrency, const char *capabilities,
		       const char *variants);
/* A worker not removed (db_worker_list). Strings owned; variants, jobs
 * and the scope's lists as JSON text; created, registered and heartbeat
 * NULL when unset, the others "" at worst. */
struct worker_row {
	char *name, *version, *capabilities, *variants;
	long concurrency;
	char *created, *registered, *heartbeat;
	char *jobs, *token_prefix, *scope_orgs, *scope_repos;
	int scope_private;
};
/* Release every row and the array (count rows); accepts NULL. */
void worker_rows_release(struct worker_row *rows, size_t count);
/* Workers not removed, by name: *rows (owned) and *count. */
int db_worker_list(struct worker_row **rows, size_t *count);
/* Every variant some worker not removed registered, sorted, split into
 * live ones (one of its workers registered, claimed or heartbeat within
 * live_seconds) and stale ones: NULL-terminated arrays of owned strings
 * (free_strings them), *nlive and *nstale long. */
int db_worker_variants(long live_seconds, char ***live, size_t *nlive, char ***stale, size_t *nstale);
/* The live variants (as db_worker_variants) a toolchain registered with a
 * "hipify" tool offers: it builds ROCm from CUDA sources. Sorted, owned
 * (free_strings), NULL-terminated, *n long. */
int db_worker_hipify_variants(long live_seconds, char ***names, size_t *n);

/* The account that owns repo_id (the push planner's fairness key). */
int db_repo_build_owner(int64_t repo_id, int64_t *owner_id);
/* The device models live benchmark workers (a heartbeat within
 * live_seconds) registered toolchains with "benchmarks": true for,
 * sorted, appended to devices (owned by the caller). */
int db_worker_benchmark_devices(long live_seconds, struct strvec *devices);
/* What a benchmark of repo_id may measure: for commit (NULL: the newest
 * source commit the farm published a variant of) each variant (NULL:
 * every one) the farm published, three strings appended to out each
 * (source commit, variant, the commit with build/<variant>/). */
int db_benchmark_targets(int64_t repo_id, const char *commit, const char *variant, struct strvec *out);

/* ---- fleet rebuilds (storage/db/db_campaigns.c, sql/0039_build_campaigns.sql) ---- */

/* A campaign with its kernels counted by what their build is now. */
struct db_campaign {
	int64_t id;
	char variant[256];
	char *reason, *requested_by;	/* owned */
	char created[40];
	long kernels, built, failed, waiting, skipped, merged;
};
void db_campaigns_free(struct db_campaign *c, size_t n);	/* accepts NULL */
/* Newest first (at most limit), or the one of id when id > 0 (*n 0: none). */
int db_campaign_list(int64_t id, long limit, struct db_campaign **out, size_t *n);
/* A new campaign of variant: *id. */
int db_campaign_create(const char *variant, const char *reason, const char *requested_by, int64_t *id);

/* One kernel of a campaign (strings owned, NULL for none). */
struct db_campaign_kernel {
	int64_t campaign_id, repo_id, build_id, version;	/* build_id 0, version -1: none */
	char ns[REPO_NAME_MAX + 1], name[REPO_NAME_MAX + 1];
	char commit[41], variant[256];
	char state[16];		/* the build's state, "" none */
	char *skipped, *pr_ref, *pr_base, *description;
	int merged, publish_direct;	/* the repo's campaign_publish = direct */
	int64_t superseded_by;		/* its build superseded: by that build; else 0 */
};
void db_campaign_kernels_free(struct db_campaign_kernel *k, size_t n);	/* accepts NULL */
/* The kernels of campaign id in its order. */
int db_campaign_kernels(int64_t id, struct db_campaign_kernel **out, size_t *n);
/* The campaign kernel build_id belongs to: 0 with *out (release it with
 * db_campaign_kernel_release), KHUB_ENOTFOUND when it is no campaign's. */
int db_campaign_of_build(int64_t build_id, struct db_campaign_kernel *out);
/* The campaign kernels of repo_id that opened a pull request, the newest
 * campaign first (*out owned: db_campaign_kernels_free). */
int db_campaign_prs_of_repo(int64_t repo_id, struct db_campaign_kernel **out, size_t *n);
/* The same by campaign and repo. */
int db_campaign_kernel_get(int64_t campaign_id, int64_t repo_id, struct db_campaign_kernel *out);
void db_campaign_kernel_release(struct db_campaign_kernel *k);	/* accepts NULL */
/* Record what the campaign did for a kernel (build_id 0 and skipped, or a
 * build); again for the same kernel: replaced. */
int db_campaign_kernel_add(int64_t campaign_id, int64_t repo_id, int position, const char *commit, long version,
			   int64_t build_id, const char *skipped);
/* The kernel's pull request, once its first build staged it. */
int db_campaign_set_pr(int64_t campaign_id, int64_t repo_id, const char *pr_ref, const char *pr_base,
		       long version, const char *description);
int db_campaign_set_merged(int64_t campaign_id, int64_t repo_id);
/* Kernel repos a campaign looks at (not mirrors), by id: *out owned (free). */
struct db_campaign_candidate {
	int64_t id, owner_id;
	char ns[REPO_NAME_MAX + 1], name[REPO_NAME_MAX + 1];
};
int db_campaign_candidates(struct db_campaign_candidate **out, size_t *n);

#endif
