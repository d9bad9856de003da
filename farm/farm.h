/* farm.h -- the build farm's server side (docs/build-farm.md): which
 * variants a build request means and the queue's limits, build.toml
 * planning, environments, leases, source tars and external sources, the
 * check and publication of outputs, builds on push. Functions take and
 * return values and enum khub_err; they never see a request: api/'s
 * handlers (api/builds*.c) parse, call here, and answer. Slow steps a
 * request waits for come back as a farm_job the handler hands to the work
 * queue. Below api/ and web/, above storage/, kernel/ and common/. */
#ifndef KHUB_FARM_H
#define KHUB_FARM_H

#include <jansson.h>

#include "common/common.h"
#include "kernel/kernel.h"
#include "storage/git/repo.h"
#include "storage/lfs/lfs.h"
#include "storage/db/db.h"
#include "storage/db/db_builds.h"
#include "storage/publish/publish.h"
#include "storage/db/variant_index.h"

/* ---- settings and errors (farm/farm.c) ---------------------------------------- */

/* What the server tells the farm (filled once at start-up; the push hook
 * and khub import fill what builds on push need). */
struct farm_settings {
	const char *repo_root;		/* {data_dir}/repos */
	struct lfs_store *lfs;
	long lease_seconds, heartbeat_seconds, max_attempts;
	int abi_enforce;	/* abi_policy = enforce (else warn) */
	const char *abi_manylinux;	/* abi_manylinux: "2_28", told to workers and checked in reports */
	long output_max_bytes;	/* an output tar, whole */
	const char *variants_file;	/* build_variants: "" = data/build-variants.json */
	const char *tmp_dir;	/* {data_dir}/build-tmp: output tars in transit */
	const char *sources_dir;	/* {data_dir}/build-sources: external git sources */
	const char *source_cache_dir;	/* {data_dir}/build-source-cache: source tars made */
	long long source_cache_bytes;	/* build_source_cache_mb: kept at most (one tar may pass it) */
	long wall_seconds, cpu_seconds, memory_mb, disk_mb;	/* limits told to workers */
	long queue_per_repo, queue_per_user, variants_per_request;	/* 0: no limit */
	long long log_max_bytes;	/* build_log_max_kb: a build's log kept, head and tail */
	long worker_live_seconds;	/* a worker's variants count while it was seen this recently */
	long campaign_on_new_variant;	/* 1: a variant newly offered starts a campaign */
	const char *plan_python;	/* reads build.toml (farm/build_plan.c) */
	long plan_wall_ms;		/* its wall-clock limit */
	const char *source_credentials;	/* netrc file for external fetches ("" = none) */
	const char *signing_key;	/* the hub's Ed25519 private key file: signs build provenance */
	const char *hub_url;		/* public_url, else http://<listen>: the builder in provenance */
	/* Something new may be claimed (an enqueue, a lapsed lease): the
	 * server wakes the parked claimers (NULL: no one waits here). */
	void (*queue_changed)(void);
};
extern struct farm_settings farm_settings;

/* The farm's one answer beyond enum khub_err: the request is understood
 * but leaves nothing the farm can build or fetch (build.toml or the
 * environment refuses it, the source cannot be fetched or has no
 * build.toml): handlers answer 422. Below every khub_err. */
#define FARM_EREFUSED (-100)

/* 1 when target names a manylinux target as abi_manylinux takes it: "2_N"
 * (glibc 2.N). */
int farm_abi_target_valid(const char *target);
/* Whether an output's ABI report (NULL: none) lets it be published under
 * the manylinux target (farm_settings.abi_manylinux): "ok", and checked
 * against that target or an older one, and no symbol needing a newer glibc
 * than the target's. 1, or 0 with why naming the rule (and the symbols
 * over the target) (farm/build_publish.c). */
int farm_abi_report_passes(json_t *report, const char *target, char *why, size_t size);

/* Tell the server the queue changed (farm_settings.queue_changed). */
void farm_queue_changed(void);

/* A slow step a request waits for, for the HTTP layer's work queue: run(arg)
 * on a worker thread returns 0 or a negative error; free_arg(arg) is called
 * whatever happens; one job runs per key (a request for a key whose job
 * runs joins it). The caller owns arg until it hands the job on. */
#define FARM_JOB_KEY_MAX 96
struct farm_job {
	char key[FARM_JOB_KEY_MAX];
	int (*run)(void *arg);
	void (*free_arg)(void *arg);
	void *arg;
};

/* ---- a job as JSON (farm/build_json.c) ------------------------------------------ */

/* BUILD (docs/build-farm.md) of a build job; the caller owns it. */
json_t *build_json(const struct build_row *b);
/* JOB, the claim's answer. */
json_t *build_job_json(const struct build_row *b);
/* WORKER of the admin workers list. */
json_t *build_worker_json(const struct worker_row *w);

/* ---- which variants (farm/build_variants.c) ------------------------------------- */

/* data/build-variants.json, parsed once (borrowed). */
const struct required_variants *kernel_required_variants(void);
extern const char embedded_build_variants_json[];
extern const size_t embedded_build_variants_json_len;
/* The required list default builds come from: the build_variants file,
 * else data/build-variants.json (borrowed; parsed once). */
const struct required_variants *build_required_list(void);
/* Every variant some live worker (seen within build_worker_live_seconds)
 * can build (sorted, owned: free each and the array with
 * build_names_free). 0 or KHUB_EDB. */
int build_worker_variants(char ***names, size_t *n);
/* What workers offer (owned, build_worker_offers_release): the live
 * variants, those only workers not seen lately offer, and the live ones a
 * toolchain with a hipify tool offers (it builds ROCm from CUDA sources). */
struct worker_offers {
	char **live, **stale, **hipify;
	size_t nlive, nstale, nhipify;
};
int build_worker_offers(struct worker_offers *w);
void build_worker_offers_release(struct worker_offers *w);
void build_names_free(char **names, size_t n);
/* The build variant names of a JSON array (strings, valid names, in order):
 * a new list (build_names_free), or NULL with *bad the index of the first
 * that is not. */
char **build_variant_list(json_t *array, size_t *n, size_t *bad);
/* A worker's registration: toolchains (as it sent them: objects whose
 * "variants" are build variant names) stored with version and concurrency,
 * *count the variants it offers: 0; KHUB_EINVAL with why (the entry that
 * is not); KHUB_ENOTFOUND (the worker was removed); KHUB_EDB. */
int build_worker_register(int64_t worker_id, const char *version, long concurrency, json_t *toolchains,
			  size_t *count, char *why, size_t why_size);
/* 1 when name is one of names[0..n). */
int build_names_contain(char *const *names, size_t n, const char *name);
/* The default variants of plan: what live workers can build that the
 * plan takes, the required list's first when it has some (owned like
 * build_worker_variants'); every variant left out, and every backend
 * nothing is built for, as {"variant", "reason"} in skipped (may be NULL).
 * 0 or KHUB_EDB. */
struct build_plan;
int build_default_variants(const struct build_plan *plan, char ***names, size_t *n, json_t *skipped);
/* The head of the branch v<N> that the build.toml of source_sha (in src)
 * names, in repo (the kernel's own store) into head: 0, or KHUB_ENOTFOUND
 * when there is no such branch yet. */
int build_version_branch(git_repository *repo, git_repository *src, const char *source_sha, char head[41]);
/* What plan allows that no live worker can build (docs/build-farm.md,
 * "The build matrix"): the variants only workers not seen lately offer,
 * and each backend nothing live builds, as {"variant", "reason"} appended
 * to out (the planner's reasons). 0 or KHUB_EDB. */
int build_unbuildable_variants(const struct build_plan *plan, json_t *out);
/* The required variants that published (the indexed variants of that
 * branch's head, empty when there is none) lacks or holds with invalid
 * metadata: *names owned (build_names_free). */
void build_missing_variants(const struct variant_rows *published, char ***names, size_t *n);
/* The variants named in a request, checked as names: 0 with *names owned,
 * or KHUB_EINVAL with why ("variants[i] is not a build variant name..."). */
int build_named_variants(json_t *variants, char ***names, size_t *n, char *why, size_t why_size);

/* ---- enqueueing (farm/build_enqueue.c, farm/build_queue_limits.c) ----------------- */

/* Enqueue variants of commit for rec; each becomes a BUILD in builds or a
 * {"variant", "reason", "build"} in skipped (either may be NULL). Tells
 * the server when something was queued. 0, KHUB_EDB, or a refusal of the
 * queue limits (nothing queued: KHUB_ETOOBIG, KHUB_EINVAL; see
 * build_queue_refusal). */
int build_enqueue_all(const struct repo_record *rec, const char *commit, char *const *variants, size_t n, int force,
		      const char *requested_by, const char *source_url, const char *source_revision, json_t *builds,
		      json_t *skipped);
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
/* What a refused requester is told to wait (seconds): jobs leave the
 * queue at the farm's pace, minutes rather than seconds. */
#define BUILD_QUEUE_FULL_RETRY_AFTER 60

/* ---- builds asked for by environment (farm/build_environment.c) -------------- */

/* The variant a client environment ({"torch": "2.11", "cuda": "13.0", ...},
 * the keys of GET .../variants) would load, as planned. */
struct build_env_target {
	struct variant_env env;
	char name[VARIANT_NAME_MAX + 1];	/* the variant to build */
	char tag[48];				/* the environment's backend: cu130 */
};
/* The target of environment under plan: 0, KHUB_EINVAL (a bad
 * environment: 400) or FARM_EREFUSED (nothing compiled loads there, or the
 * plan does not build it: 422), with why. */
int build_environment_target(json_t *environment, const struct build_plan *plan, struct build_env_target *t,
			     char *why, size_t why_size);
/* Whether t should be built, given published (the indexed variants of the
 * branch v<N>, see build_version_branch): 1 with *names = {t's variant}
 * (owned, build_names_free) and *info = {"variant", "backend"} (owned);
 * 0 with *info the answer (owned) when a published variant already loads
 * there; FARM_EREFUSED (no live worker can build it) with why; KHUB_EDB. */
int build_environment_variants(const struct build_env_target *t, const struct variant_rows *published,
			       char ***names, size_t *n, json_t **info, char *why, size_t why_size);

/* ---- external git sources (farm/build_external.c) ---------------------------- */

/* 1 for an http, https or git URL of sane length without spaces or
 * control characters (no file:// or ssh: the server fetches it) and
 * without credentials (see build_source_url_has_userinfo). */
int build_source_url_valid(const char *url);
/* 1 when url holds userinfo (user[:password]@ before its host): refused,
 * since a source URL is shown to whoever may read the build; the fetch's
 * credentials are the server's (build_source_credentials). */
int build_source_url_has_userinfo(const char *url);
/* url without its userinfo, for every answer, log line and error that
 * shows a source URL (the caller frees; NULL gives NULL). */
char *build_source_url_public(const char *url);
/* 1 for a 40-hex sha or a valid branch or tag name. */
int build_source_revision_valid(const char *rev);
/* {sources_dir}/<hash of url>.git (the caller frees). */
char *build_source_dir(const char *url);
/* Open the fetched copy of url (git_repository_free it); KHUB_ENOTFOUND. */
int build_source_open(const char *url, git_repository **out);
/* A fetched branch, tag or sha to its commit; KHUB_ENOTFOUND. */
int build_source_resolve(git_repository *git, const char *revision, char sha[41]);
/* The job that fetches url's branches and tags (for the fetch pool; its
 * result: 0 or KHUB_ENOTFOUND, build_source_fetch_error saying why). A
 * failed first fetch leaves nothing on disk. */
void build_source_fetch_job(const char *url, struct farm_job *job);
/* After the fetch (fetch_rc its result): rev of url's fetched copy into
 * sha, with build.toml at its root: 0; FARM_EREFUSED (the fetch failed,
 * or no build.toml) or KHUB_ENOTFOUND (no such revision) with why. */
int build_source_commit(const char *url, const char *rev, int fetch_rc, char sha[41], char *why, size_t why_size);
/* Remove the temporary folders of first fetches a crash cut short (at
 * start, before any fetch). */
void build_sources_clean(void);
/* Why the last fetch of url failed, into why ("" when unknown). */
void build_source_fetch_error(const char *url, char *why, size_t why_size);
/* The git store a job builds from (its repo, or its external source's
 * fetched copy): git_repository_free it. */
int build_open_job_source(const struct build_row *b, git_repository **out);

/* ---- the network of external fetches (farm/build_source_net.c) ------------------ */

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

/* ---- source tars (farm/build_source_cache.c) ------------------------------------ */

/* Make the source-tar cache's folder, drop temp files an earlier run left
 * and trim it to its bound; fatal on failure. */
void build_source_cache_init(void);
/* The cached tar of repo_id's commit sha: *fd (the caller closes it) and
 * *size; complete_only: only a tar with every LFS object's content (counted
 * as a cache hit), else a partial one too. KHUB_ENOTFOUND when none. */
int build_source_cache_open(int64_t repo_id, const char *sha, int complete_only, int *fd, uint64_t *size);
/* The job that makes the tar of build job b, one per repo and
 * commit; its result: 0 (then build_source_cache_open finds it),
 * KHUB_ENOTFOUND, KHUB_EIO, KHUB_EDB, KHUB_ENOSPC. */
void build_source_make_job(const struct build_row *b, struct farm_job *job);
/* Tars made and cache hits since start. */
void build_source_stats(uint64_t *made, uint64_t *hits);

/* ---- the build job's state machine (farm/build_states.c) ---------------------- */

/* Every change to a build job goes through here (docs/build-farm.md, "The
 * job's states"): build_job_transitions is the table of (from state,
 * event, to state, guard, who may trigger it, the routes that do), the
 * storage calls get the states an event may start from out of it, and
 * what a change ends in is checked against it. Nothing else calls the
 * state-changing functions of storage/db/db_builds.h (t0238 checks it). To
 * add a state or an event is to add a value and its rows. */
enum build_state {
	BUILD_NONE,		/* before the enqueue */
	BUILD_QUEUED, BUILD_RUNNING, BUILD_SUCCEEDED, BUILD_FAILED, BUILD_CANCELED,
	BUILD_STAGED,		/* a fleet rebuild's output on the kernel's pull request, awaiting a merge */
	BUILD_SUPERSEDED,	/* staged, then a newer build of the kernel and variant came: never merged */
	BUILD_STATE_COUNT,
};
enum build_event {
	BUILD_EV_ENQUEUE, BUILD_EV_CLAIM, BUILD_EV_HEARTBEAT, BUILD_EV_LOG, BUILD_EV_PUBLISH, BUILD_EV_REFUSE,
	BUILD_EV_FAIL, BUILD_EV_RELEASE, BUILD_EV_CANCEL, BUILD_EV_RETRY, BUILD_EV_LAPSE, BUILD_EV_TAKE_BACK,
	BUILD_EV_MEASURE, BUILD_EV_STAGE, BUILD_EV_MERGE, BUILD_EV_SUPERSEDE,
	BUILD_EVENT_COUNT,
};
/* Who may trigger an event (a bit set). */
enum build_actor {
	BUILD_BY_WORKER = 1,	/* the worker holding the lease (a claim: any worker) */
	BUILD_BY_OWNER = 2,	/* a writer of the job's repo */
	BUILD_BY_ADMIN = 4,	/* a site admin (khub admin worker ...) */
	BUILD_BY_SYSTEM = 8,	/* the server itself: lease timer, push trigger, lease checks */
};
struct build_transition {
	enum build_state from;
	enum build_event event;
	enum build_state to;
	unsigned actors;	/* enum build_actor bits */
	const char *guard;	/* when the event takes this row, in words */
	const char *routes;	/* "METHOD pattern" of the routes that send it, ", "-separated; "" none */
};
extern const struct build_transition build_job_transitions[];	/* ends with from = BUILD_STATE_COUNT */
const char *build_state_name(enum build_state s);
/* What the build matrix shows for a state: "queued", "building",
 * "published", "failed", "canceled" ("not built" for none; static). */
const char *build_state_status(enum build_state s);
/* The same for a job of either kind: a benchmark job's succeeded is
 * "measured" (it never publishes); static. */
const char *build_state_status_of_kind(enum build_state s, int benchmark);
const char *build_event_name(enum build_event e);
/* The state named name (as stored: "queued"...), BUILD_STATE_COUNT for none. */
enum build_state build_state_named(const char *name);
/* 1 when the table has a row event: from -> to. */
int build_transition_allowed(enum build_state from, enum build_event event, enum build_state to);
/* {"states", "events", "actors", "transitions": [{"from", "event", "to",
 * "actors", "guard", "routes"}]} (the caller owns it): khub builds states. */
json_t *build_states_json(void);

/* The transitions (0 or a negative khub_err; KHUB_ECONFLICT when the job
 * is in no state the event starts from, or the worker does not hold it).
 * none -> queued (build_enqueue_all's one step): see db_build_enqueue. */
int build_job_enqueue(const struct build_request *r, const char *variant, enum build_enqueue_outcome *outcome,
		      int64_t *id);
/* ---- benchmark jobs (farm/benchmark_jobs.c) ---- */

/* What to benchmark (strings borrowed; NULL: the defaults). */
struct benchmark_ask {
	const char *commit;	/* NULL: the newest source commit the farm published a variant of */
	const char *variant;	/* NULL: every variant published of it */
	const char *device;	/* NULL: every device model of a live benchmark worker */
	const char *requested_by;
};
/* Queue the benchmark jobs ask names (one per commit, variant and device,
 * ever): each, new or not, appended to jobs as {"id", "commit", "variant",
 * "variant_commit", "device", "queued"}. 0; FARM_EREFUSED with why
 * (nothing published, no benchmarks/, no device); KHUB_EDB, KHUB_EIO. */
int benchmark_jobs_queue(const struct repo_record *rec, const struct benchmark_ask *ask, json_t *jobs, char *why,
			 size_t why_size);
/* After the farm published variant of commit: the jobs queued when the
 * repo's benchmarkAfterPublish is on (failures logged). */
void benchmark_jobs_after_publish(const struct repo_record *rec, const char *commit, const char *variant);

/* none -> queued, a benchmark job (see db_build_enqueue_benchmark). */
int build_job_enqueue_benchmark(const struct build_request *r, const char *variant, const char *variant_commit,
				const char *device, enum build_enqueue_outcome *outcome, int64_t *id);
/* queued -> running, leased to worker_id for build_lease_seconds (see
 * db_build_claim: 0 with the row in out, 1 none ready, 2 the worker at its
 * concurrency); *head_left the bytes the log's head still keeps (-1: no
 * cap, or unknown). */
int build_job_claim(int64_t worker_id, const char *const *variants, size_t n, struct build_row *out,
		    int64_t *head_left);
/* The lease rule for a worker's request about job id: 0 when worker_id
 * holds the running job's lease; KHUB_ECONFLICT when it does not (*state
 * what the job is); KHUB_EPERM when it held it but its scope no longer
 * covers the repo (a running job is taken back: *state "queued");
 * KHUB_ENOTFOUND when its scope does not cover the job or there is none. */
int build_job_lease(int64_t id, int64_t worker_id, char state[16]);
/* running -> running (the lease extended), canceled -> canceled (*cancel 1). */
int build_job_heartbeat(int64_t id, int64_t worker_id, char expires[40], int *cancel);
/* A log chunk of the lease holder (running or canceled; see
 * db_build_log_append: 2, 3 and 1 as it says), under build_log_max_kb. */
int build_job_log_append(int64_t id, int64_t worker_id, int attempt, int64_t at, const void *data, size_t len,
			 int tail, int64_t *length);
/* running -> queued (retry with attempts left) or failed; state the new one. */
int build_job_fail(int64_t id, int64_t worker_id, const char *error, int retry, const char *abi_report,
		   char state[16]);
/* running -> queued, the attempt not counted. */
int build_job_release(int64_t id, int64_t worker_id);
/* running -> succeeded: published at commit on branch (note may be NULL);
 * then the older staged jobs of its repo and variant -> superseded. */
int build_job_publish(int64_t id, int64_t worker_id, const char *abi_report, const char *branch, const char *commit,
		      const char *note);
/* running -> staged: a fleet rebuild's output committed on the pull
 * request pr_ref at commit; the older staged jobs -> superseded, as above. */
int build_job_stage(int64_t id, int64_t worker_id, const char *abi_report, const char *pr_ref, const char *commit,
		    const char *note);
/* staged -> succeeded: its pull request was merged (KHUB_ECONFLICT when
 * it is not staged). */
int build_job_merge(int64_t id);
/* running -> failed: the output refused for why (report kept). */
int build_job_refuse(int64_t id, int64_t worker_id, const char *why, const char *abi_report);
/* running -> succeeded: a benchmark job's worker submitted its farm runs
 * (note, may be NULL, says how many). */
int build_job_measured(int64_t id, int64_t worker_id, const char *note);
/* queued or running -> canceled; state the new one. */
int build_job_cancel(int64_t id, char state[16]);
/* failed or canceled -> queued, attempts reset (KHUB_ECONFLICT also when
 * the same commit and variant is queued or running again). */
int build_job_retry(int64_t id);
/* running -> queued or failed for every job whose lease lapsed: how many. */
int build_jobs_expire_leases(void);
/* running -> queued for every job whose worker's scope no longer covers
 * its repo: how many. */
int build_jobs_take_back(void);

/* ---- leases (farm/build_leases.c) ------------------------------------------------ */

/* Start (and stop) the thread that requeues running jobs whose lease lapsed:
 * every check_ms, and at the next lapse when sooner. */
void build_lease_timer_start(long check_ms);
void build_lease_timer_stop(void);
/* Leases the timer found lapsed since start. */
uint64_t build_leases_expired(void);
/* The build farm's counters, Prometheus text, for /metrics (site admins). */
void build_metrics_add(struct strbuf *sb);

/* ---- planning from build.toml (farm/build_plan.c) ------------------------------ */

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
/* For a request, which must not plan on its thread: the kept plan of
 * build.toml of sha: 0 with out->doc or out->refused (release it); 1 when
 * it must be planned first: run *job (on the work queue), then
 * build_plan_kept(job's key); KHUB_EIO (the file cannot be read) or
 * FARM_EREFUSED (no build.toml, in LFS, too large) with why. */
int build_plan_lookup(git_repository *git, const char *sha, struct build_plan *out, struct farm_job *job,
		      char *why, size_t why_size);
/* After the job of build_plan_lookup ended: the plan it kept under key
 * (the job's key): 0 with out->doc or out->refused; KHUB_ENOTFOUND when
 * none was kept (the planner could not run). */
int build_plan_kept(const char *key, struct build_plan *out);
/* 1 when plan builds variant name, else 0 with the reason in why. */
int build_plan_judge(const struct build_plan *plan, const char *name, char *why, size_t size);
/* Keep in names (NULL-terminated again) those plan builds; the others are
 * freed and answered in skipped (may be NULL) as {"variant", "reason"}. */
void build_plan_filter(const struct build_plan *plan, char **names, size_t *n, json_t *skipped);
/* The default variants of plan given what live and stale workers offer
 * (see build_default_variants). */
void build_plan_default(const struct build_plan *plan, const struct worker_offers *w,
			const struct required_variants *list, char ***names, size_t *n, json_t *skipped);
/* For the variants names (those planned): each capability build.toml's
 * kernels name that a variant's toolkit does not build, as
 * [{"variant", "capability", "reason"}] (the caller owns it). */
json_t *build_plan_left_out(const struct build_plan *plan, char *const *names, size_t n);
/* {"framework", "backends", "compiled", "warning"?} of plan (owned). */
json_t *build_plan_json(const struct build_plan *plan);
extern const char embedded_build_toml_py[];

/* ---- signed provenance (farm/build_provenance.c) -------------------------------- */

#define BUILD_PROVENANCE_PREDICATE "https://slsa.dev/provenance/v1"

/* One published file: its name below build/<variant>/ and bytes (borrowed). */
struct build_provenance_file {
	const char *name;
	const void *data;
	size_t len;
};
/* What the statement says of one build (strings borrowed; NULL where the
 * field says so). */
struct build_provenance_input {
	int64_t id;
	const char *hub;			/* the hub's base URL: runDetails.builder.id */
	const char *ns, *name, *commit, *variant;
	const char *source_url, *source_revision;	/* an external source, or NULL */
	const char *build_toml_sha256;		/* "" when none was read */
	const char *worker;
	const char *started;			/* ISO 8601 UTC, or NULL */
	const char *metadata;			/* the output's metadata.json: khub.toolchain, khub.sandbox */
	size_t metadata_len;
	const struct build_provenance_file *files;	/* a later one of a name replaces an earlier */
	size_t nfiles;
};
/* The in-toto Statement v1 (SLSA provenance v1 predicate) as compact JSON
 * text with sorted keys, finishedOn now (the caller frees). */
char *build_provenance_statement(const struct build_provenance_input *in);
/* statement in a DSSE envelope (payloadType application/vnd.in-toto+json,
 * the signature over DSSE's PAE) signed with the private key file key_path:
 * *envelope (one line of JSON and a newline; the caller frees), its sha256
 * and the key's id; an error of ed25519_sign with err. */
int build_provenance_sign(const char *key_path, const char *statement, char **envelope, char sha256[65],
			  char key_id[ED25519_KEY_ID_LEN + 1], char *err, size_t errlen);
/* Check an envelope's signature under key, then that its payload is an
 * in-toto Statement v1 of SLSA provenance v1: 0 with *statement (the
 * caller owns it); KHUB_EPERM (the signature) or KHUB_EINVAL (the form)
 * with err. */
int build_provenance_open(const char *envelope, size_t len, EVP_PKEY *key, json_t **statement, char *err,
			  size_t errlen);
/* Compare a directory with a statement's subjects: every regular file
 * (symbolic links to files followed) listed with its sha256, none missing.
 * Each problem is reported through report and counted in problems; files
 * gets how many the statement lists. 0, or KHUB_EIO when dir cannot be read. */
struct build_provenance_check {
	void (*report)(void *arg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
	void *arg;
	size_t problems, files;
};
int build_provenance_check_dir(json_t *statement, const char *dir, struct build_provenance_check *c);

/* ---- outputs (farm/build_output.c, farm/build_publish.c) ------------------------ */

/* "version = N" in the [general] table of build.toml text (enough to name
 * the branch and to compare with metadata.json; the worker parses the file
 * for real): -1 when it says none. */
long build_toml_version(const char *text);

/* What the check read from a tar; strings owned. */
struct build_output {
	size_t entries, files;		/* files under <variant>/ */
	char *metadata;			/* <variant>/metadata.json */
	size_t metadata_len;
	long version;			/* its version: the branch v<version> */
	char *report_text;		/* abi-report.json, NULL when absent */
	json_t *report;
	char *readme;			/* README.md, NULL when absent */
	size_t readme_len;
};
void build_output_release(struct build_output *out);	/* accepts NULL */

/* Check the tar at path for the job's variant: every member a regular file
 * or directory under <variant>/, or abi-report.json or README.md; paths
 * clean; sizes bounded; <variant>/metadata.json valid with an integer
 * version (equal to build.toml's [general] version when build_toml says
 * one). 0, or KHUB_EINVAL with the reason in why. */
int build_output_check(const char *path, const char *variant, const char *build_toml, struct build_output *out,
		       char *why, size_t why_size);
/* Helpers shared with the publication: open the tar (struct archive of
 * libarchive), clean a member's name (NULL when refused), read a member
 * whole (NULL when over limit). */
struct archive;
int build_output_open(const char *path, struct archive **out);
char *build_output_clean_path(const char *raw);
char *build_output_read_member(struct archive *ar, int64_t size, size_t limit, size_t *len);

/* The job that checks and publishes the output tar at path (owned by the
 * job: removed when it ends; NULL for a request that joins the running
 * one), which worker worker_id (named worker) uploaded for build id: it
 * ends the build succeeded or failed in the database; its result is 0, or
 * a negative error when the build could not be ended (its state stays
 * running). */
void build_publish_job(int64_t id, int64_t worker_id, const char *worker, char *path, struct farm_job *job);

/* Set while the farm publishes a build's output on this thread: the
 * trigger leaves those commits alone. */
extern __thread int build_publishing;

/* ---- builds on push (farm/build_trigger.c) -------------------------------------- */

/* Registered with the publish module (server and push hook): a branch of a
 * kernel repo moved from old_sha (NULL: new branch) to new_sha; when its
 * tree has build.toml and the change touches more than build/, README.md
 * and benchmarks/, the default variants are enqueued (repo setting
 * buildOnPush; never for mirrors or the farm's own publications). */
void builds_on_new_commit(int64_t repo_id, git_repository *git, const char *ref, const char *old_sha,
			  const char *new_sha);

/* A push to plan: what planning needs, read from the commit while its
 * repository was open (the planner never opens it again). */
struct push_plan {
	int64_t repo_id, owner_id;	/* owner_id: the repo's owner, the planner's fairness key */
	char *ref;			/* owned: the full ref name */
	char sha[41];
	char *toml;			/* owned: build.toml, or NULL with refused */
	size_t len;
	char *refused;			/* owned: why it cannot be read */
	/* a fleet rebuild's kernel (farm/build_campaign.c): 0 for a push */
	int64_t campaign_id;
	char *variant;			/* owned: the campaign's variant */
	int position;			/* its place in the campaign: newest version first */
	long version;			/* build.toml's version, -1 none */
};
void push_plan_free(struct push_plan *p);	/* accepts NULL */
/* Plan p and enqueue its default variants, logging what was left out
 * (on a planner thread, or in khub import). */
void build_push_plan(const struct push_plan *p);
/* Where builds_on_new_commit hands a push to plan when no push planner
 * runs in this process: fn owns p from then (the push hook writes it for
 * the server that ran it, so the push's answer never waits for a plan);
 * NULL, the default: plan in place (khub import). */
void build_trigger_hand_off(void (*fn)(struct push_plan *p));
/* Append p to fp as one record for build_planner_take: 0, or -1 (errno). */
int push_plan_write(FILE *fp, const struct push_plan *p);
/* The next record of fp into *out (the caller owns it): 1, 0 at the end,
 * -1 for a record cut short or malformed (the rest is not read). */
int push_plan_read_next(FILE *fp, struct push_plan **out);

/* ---- the push planner (farm/build_planner.c) ------------------------------------- */

/* Threads that plan pushes after the push was answered (planning never
 * sits between a commit and its answer): at most queue_max pushes wait,
 * one owner at most a quarter of them, served round-robin across owners,
 * and a push of a repo and commit already waiting joins it. Without a
 * start, builds_on_new_commit hands the push off (the push hook, to the
 * server's planner: build_planner_take) or plans in place (khub import). */
void build_planner_start(long threads, long queue_max);
/* Drop what waits and join the threads (each ends its plan first). */
void build_planner_stop(void);
/* 1: the planner took p (owned by it from now, also when joined or
 * dropped because its owner's share is full); 0: no planner runs, the
 * caller still owns p. */
int build_planner_submit(struct push_plan *p);
/* After a git push ended (its answer sent): submit the plans its hook
 * wrote to fd (push_plan_write, read from the start) that are of repo_id,
 * the repo the push wrote; how many were submitted. fd stays open. */
size_t build_planner_take(int fd, int64_t repo_id);

/* ---- fleet rebuilds (farm/build_campaign.c) --------------------------------------- */

/* A campaign (docs/build-farm.md, "Fleet rebuilds") queues variant for
 * every kernel (not mirrors) whose build.toml at main's head allows it,
 * newest version first: recorded at once (*id), each kernel then planned
 * on the push planner (in place when none runs: the command line), its
 * build or why none in build_campaign_kernels. requested_by: who, reason:
 * "admin" or the policy's words. 0; KHUB_EINVAL (not a build variant
 * name) with why; KHUB_EDB. */
int build_campaign_start(const char *variant, const char *reason, const char *requested_by, int64_t *id,
			 char *why, size_t why_size);
/* The planner's step for a campaign's kernel p (plan NULL: the planner
 * could not run): its build queued, or why not, recorded. */
void build_campaign_plan(const struct push_plan *p, const struct build_plan *plan);
/* The policy (build_campaign_on_new_variant): after a worker registered,
 * a campaign for each variant of offered that was not in before (what live
 * workers offered until then). */
void build_campaign_policy(char *const *before, size_t nbefore, char *const *offered, size_t noffered,
			   const char *worker);
/* {"id", "variant", "reason", "requested_by", "created", "total" (kernels),
 * "built", "failed", "waiting", "skipped", "merged"} of c (owned). */
json_t *build_campaign_json(const struct db_campaign *c);
/* The kernels of campaign id as [{"kernel", "commit", "version", "build",
 * "state", "skipped", "pr", "pr_status", "superseded_by", "description",
 * "merged"}] (owned); NULL: KHUB_EDB. */
json_t *build_campaign_kernels_json(int64_t id);
/* What k's pull request reads as (static): "open" (staged, mergeable),
 * "merged", "closed" (its build was superseded by k->superseded_by: never
 * merged, the ref kept), NULL when the campaign opened none. The API, the
 * refs list and the pages all say this. */
const char *build_campaign_pr_status(const struct db_campaign_kernel *k);
/* Merge the campaign's pull request of the kernel in git (the caller holds
 * the repo's write lock): v<N> moves to the PR's head when it is still
 * where the PR started (created when there was none). 0 with branch and
 * sha; KHUB_ENOTFOUND (nothing staged for this kernel), KHUB_EEXIST
 * (merged already), KHUB_ECONFLICT (v<N> moved since) with why; KHUB_EIO. */
int build_campaign_merge(git_repository *git, const struct db_campaign_kernel *k, char branch[32], char sha[41],
			 char *why, size_t why_size);
/* Where a campaign build of job id publishes: 1 with *k (release it) when
 * on a pull request, 0 when as usual (no campaign, or the repo says
 * direct), KHUB_EDB. */
int build_campaign_target(int64_t id, struct db_campaign_kernel *k);
/* The variants workers (not removed) registered for a toolchain of that
 * name (owned, build_names_free); none: *n 0. 0 or KHUB_EDB. */
int build_toolchain_variants(const char *toolchain, char ***names, size_t *n);

#endif
