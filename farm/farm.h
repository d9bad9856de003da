/* builds.h -- what the build farm's files in api/ share (builds.c,
 * build_enqueue.c, build_worker.c, build_source.c, build_output.c,
 * build_trigger.c, build_source_cache.c, build_leases.c); nothing outside
 * api/ includes it. */
#ifndef KHUB_API_BUILDS_H
#define KHUB_API_BUILDS_H

#include "api/api.h"
#include "kernel/kernel.h"
#include "storage/db_builds.h"

/* Parked claimers wait on this key; an enqueue wakes them. */
#define BUILD_QUEUE_WAKE_KEY "build-queue"

/* The job named by the route's {arg} into *id; 404 queued when it is no
 * number. */
int build_id_from_request(struct request *req, int64_t *id, enum MHD_Result *result);
/* BUILD (docs/build-farm.md) of one row of enum build_column; the caller
 * owns it. */
json_t *build_json(const struct db_rows *rows, size_t row);
/* JOB, the claim's answer, of one row. */
json_t *build_job_json(const struct db_rows *rows, size_t row);
/* For the lease-holding worker's routes: 0 when the caller holds the
 * job's lease and its scope covers the job's repo now; else the answer is
 * queued (404 also when out of scope, 409 {"error", "state"} when the lease
 * is not its own or was taken back for its scope, 503). */
int build_require_lease(struct request *req, int64_t id, enum MHD_Result *result);
/* build_require_lease for the routes that answer a lost lease themselves
 * (heartbeat, log, fail, release): only the scope is checked. */
int build_require_scope(struct request *req, int64_t id, enum MHD_Result *result);

/* The required list default builds come from: the build_variants file,
 * else data/build-variants.json (borrowed; parsed once). */
const struct required_variants *build_required_list(void);
/* Every variant some live worker (seen within build_worker_live_seconds)
 * can build (sorted, owned: free each and the array with
 * build_names_free). 0 or KHUB_EDB. */
int build_worker_variants(char ***names, size_t *n);
/* The same, and in *stale what only workers not seen lately offer. */
int build_worker_offers(char ***live, size_t *nlive, char ***stale, size_t *nstale);
void build_names_free(char **names, size_t n);
/* 1 when name is one of names[0..n). */
int build_names_contain(char *const *names, size_t n, const char *name);
/* The default variants of plan (api/build_plan.c): what live workers can
 * build that the plan takes, the required list's first when it has some
 * (owned like build_worker_variants'); every variant left out, and every
 * backend nothing is built for, as {"variant", "reason"} in skipped (may
 * be NULL). 0 or KHUB_EDB. */
struct build_plan;
int build_default_variants(const struct build_plan *plan, char ***names, size_t *n, json_t *skipped);
/* Enqueue variants of commit for rec; each becomes a BUILD in builds or a
 * {"variant", "reason", "build"} in skipped (either may be NULL). Wakes
 * parked claimers when something was queued. 0, KHUB_EDB, or a refusal of
 * the queue limits (nothing queued: KHUB_ETOOBIG, KHUB_EINVAL; see
 * build_queue_refusal). */
int build_enqueue_all(const struct repo_record *rec, const char *commit, char *const *variants, size_t n, int force,
		      const char *requested_by, const char *source_url, const char *source_revision, json_t *builds,
		      json_t *skipped);

/* ---- queue limits (api/build_queue_limits.c) -------------------------------- */

/* Before enqueueing n variants: KHUB_EINVAL (refused) when n passes
 * build_variants_per_request; else a transaction is open, enqueues taking
 * turns, until build_queue_end. */
int build_queue_begin(size_t n);
/* After the enqueues (rc: how they went): commits when every limit holds,
 * else rolls back (nothing queued) and returns KHUB_ETOOBIG (refused) or
 * the failure. */
int build_queue_end(const struct repo_record *rec, const char *requested_by, int rc);
/* Why this thread's last enqueue was refused (NULL when it was not). */
const char *build_queue_refusal(void);
/* The answer to a refused enqueue: 429 with Retry-After for a full queue
 * (KHUB_ETOOBIG), 400 for too many variants (KHUB_EINVAL), 503. */
enum MHD_Result build_queue_respond_refused(struct request *req, int rc);

/* The variants of the branch v<N> that the build.toml of source_sha (in
 * src) names, from the index (none when there is no such branch yet):
 * release with variant_rows_release; -1 when an answer was queued. */
int build_version_branch_variants(struct request *req, git_repository *src, const char *source_sha,
				  struct variant_rows *rows, enum MHD_Result *result);

/* ---- builds asked for by environment (api/build_environment.c) -------------- */

/* The variant a client environment ({"torch": "2.11", "cuda": "13.0", ...},
 * the keys of GET .../variants) would load, to build from source_sha: 1 with
 * *names = {that variant} (owned, build_names_free) and *info = {"variant",
 * "environment"} (owned) when it should be built; -1 when an answer was
 * queued: 200 when a published variant of v<N> already loads there, 400 for
 * a bad environment, 422 when nothing compiled loads there or no registered
 * worker can build it, 503. */
struct build_plan;
int build_environment_variants(struct request *req, json_t *environment, git_repository *src,
			       const char *source_sha, const struct build_plan *plan, char ***names, size_t *n,
			       json_t **info, enum MHD_Result *result);

/* ---- external git sources (api/build_external.c) ---------------------------- */

/* 1 for an http, https or git URL of sane length without spaces or
 * control characters (no file:// or ssh: the server fetches it). */
int build_source_url_valid(const char *url);
/* 1 for a 40-hex sha or a valid branch or tag name. */
int build_source_revision_valid(const char *rev);
/* {sources_dir}/<hash of url>.git (the caller frees). */
char *build_source_dir(const char *url);
/* Open the fetched copy of url (git_repository_free it); KHUB_ENOTFOUND. */
int build_source_open(const char *url, git_repository **out);
/* A fetched branch, tag or sha to its commit; KHUB_ENOTFOUND. */
int build_source_resolve(git_repository *git, const char *revision, char sha[41]);
/* Fetch url's branches and tags on the fetch pool's thread, as
 * work_queue_run: 1 parked (return *result), 0 done (*fetch_rc: 0 or
 * KHUB_ENOTFOUND when the fetch failed: build_source_fetch_error says
 * why), -1 answered. A failed first fetch leaves nothing on disk. */
int build_source_fetch(struct request *req, const char *url, int *fetch_rc, enum MHD_Result *result);
/* Remove the temporary folders of first fetches a crash cut short (at
 * start, before any fetch). */
void build_sources_clean(void);
/* Why the last fetch of url failed, into why ("" when unknown). */
void build_source_fetch_error(const char *url, char *why, size_t why_size);
/* The git store a job builds from (its repo, or its external source's
 * fetched copy): git_repository_free it. */
int build_open_job_source(const struct db_rows *rows, size_t row, git_repository **out);

/* ---- the network of external fetches (api/build_source_net.c) ------------------ */

struct sockaddr;
/* Limits of one fetch (configuration build_source_*). */
struct source_net_limits {
	long connect_timeout_s;		/* per connection attempt */
	long low_speed_bytes, low_speed_s;	/* fewer bytes a second over a window: fail (0: off) */
	long deadline_s;		/* the whole fetch */
};
/* Set the limits and the allow-list (comma-separated addresses, CIDR
 * ranges and host names that may be reached although private): 0, or -1
 * with the bad entry in why. */
int source_net_configure(const char *allow, const struct source_net_limits *limits, char *why, size_t why_size);
void source_net_release(void);
/* Route libgit2's TCP connections through the checked stream (once, at
 * start-up): 0 or KHUB_EIO. */
int source_net_register(void);
/* 1 when sa may be reached for a URL naming host, else 0 with the reason
 * in why (loopback, private, link-local, reserved, not allow-listed). */
int source_net_address_allowed(const char *host, const struct sockaddr *sa, char *why, size_t why_size);
/* The calling thread's connections between begin and end are a fetch's:
 * addresses checked, limits applied, the deadline counted from begin. */
void source_net_begin(void);
void source_net_end(void);
/* Why the calling thread's fetch last failed ("" when it did not say). */
const char *source_net_failure(void);

/* ---- source tars (api/build_source_cache.c) ------------------------------------ */

/* The cached tar of repo_id's commit sha: *fd (the caller closes it) and
 * *size; complete_only: only a tar with every LFS object's content (counted
 * as a cache hit), else a partial one too. KHUB_ENOTFOUND when none. */
int build_source_cache_open(int64_t repo_id, const char *sha, int complete_only, int *fd, uint64_t *size);
/* Make the tar of the job in row of rows on the work queue, one job per
 * repo and commit, as work_queue_run: 1 parked (return *result), 0 done
 * (*job_rc: 0, then build_source_cache_open finds it; KHUB_ENOTFOUND,
 * KHUB_EIO, KHUB_EDB, KHUB_ENOSPC), -1 answered (503). */
int build_source_make(struct request *req, const struct db_rows *rows, size_t row, int *job_rc,
		      enum MHD_Result *result);
/* Tars made and cache hits since start. */
void build_source_stats(uint64_t *made, uint64_t *hits);
/* Leases the timer found lapsed since start (api/build_leases.c). */
uint64_t build_leases_expired(void);

/* ---- planning from build.toml (api/build_plan.c) ------------------------------ */

/* build.toml larger than this is refused unread. */
#define BUILD_TOML_MAX (256 * 1024)

/* What builder-worker/build_toml.py --plan printed for a build.toml, or why
 * it cannot be built from. */
struct build_plan {
	json_t *doc;		/* owned; NULL when refused */
	char *refused;		/* owned: "build.toml: <key>: <what>"; NULL when doc */
};
void build_plan_release(struct build_plan *p);	/* accepts NULL */
/* build.toml of commit sha (bounded by BUILD_TOML_MAX, not LFS) into *text
 * (the caller frees): KHUB_ENOTFOUND, KHUB_EINVAL, KHUB_ETOOBIG (why says
 * it for the author) or KHUB_EIO. */
int build_plan_read_toml(git_repository *git, const char *sha, char **text, size_t *len, char *why, size_t size);
/* Plan build.toml text in a child Python on this thread (never a request
 * thread: it takes up to build_plan_wall_ms). 0 with out->doc or
 * out->refused (release it), KHUB_EIO when the planner cannot run.
 * Results are kept by the text's hash. */
int build_plan_text(const char *toml, size_t len, struct build_plan *out);
/* The same for build.toml of commit sha, a missing or unreadable file
 * being a refusal too. */
int build_plan_commit(git_repository *git, const char *sha, struct build_plan *out);
/* For a request: planned on the work queue, the request parked (1 time
 * per distinct build.toml). 0 with out->doc; -1 when an answer was queued
 * (return *result): parked, 422 {"error": the refusal}, 500, 503. */
int build_plan_load(struct request *req, git_repository *git, const char *sha, struct build_plan *out,
		    enum MHD_Result *result);
/* 1 when plan builds variant name, else 0 with the reason in why. */
int build_plan_judge(const struct build_plan *plan, const char *name, char *why, size_t size);
/* Keep in names (NULL-terminated again) those plan builds; the others are
 * freed and answered in skipped (may be NULL) as {"variant", "reason"}. */
void build_plan_filter(const struct build_plan *plan, char **names, size_t *n, json_t *skipped);
/* The default variants of plan given what live and stale workers offer
 * (see build_default_variants). */
void build_plan_default(const struct build_plan *plan, char *const *live, size_t nlive, char *const *stale,
			size_t nstale, const struct required_variants *list, char ***names, size_t *n,
			json_t *skipped);
/* {"framework", "backends", "compiled", "warning"?} of plan (owned). */
json_t *build_plan_json(const struct build_plan *plan);
extern const char embedded_build_toml_py[];

/* "version = N" in the [general] table of build.toml text (enough to name
 * the branch and to compare with metadata.json; the worker parses the file
 * for real): -1 when it says none (api/build_output.c). */
long build_toml_version(const char *text);

/* Set while the farm publishes a build's output on this thread: the
 * trigger leaves those commits alone. */
extern __thread int build_publishing;

#endif
