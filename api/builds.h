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
 * job's lease; else the answer is queued (404, 409 {"state"}, 503). */
int build_require_lease(struct request *req, int64_t id, enum MHD_Result *result);

/* The required list default builds come from: the build_variants file,
 * else data/build-variants.json (borrowed; parsed once). */
const struct required_variants *build_required_list(void);
/* Every variant some registered worker can build (sorted, owned: free
 * each and the array with build_names_free). 0 or KHUB_EDB. */
int build_worker_variants(char ***names, size_t *n);
void build_names_free(char **names, size_t n);
/* 1 when name is one of names[0..n). */
int build_names_contain(char *const *names, size_t n, const char *name);
/* The default variants: the required list ∩ what workers can build, else
 * everything workers can build (owned like build_worker_variants'). */
int build_default_variants(char ***names, size_t *n);
/* Enqueue variants of commit for rec; each becomes a BUILD in builds or a
 * {"variant", "reason", "build"} in skipped (either may be NULL). Wakes
 * parked claimers when something was queued. 0 or KHUB_EDB. */
int build_enqueue_all(const struct repo_record *rec, const char *commit, char *const *variants, size_t n, int force,
		      const char *requested_by, const char *source_url, const char *source_revision, json_t *builds,
		      json_t *skipped);

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
int build_environment_variants(struct request *req, json_t *environment, git_repository *src,
			       const char *source_sha, char ***names, size_t *n, json_t **info,
			       enum MHD_Result *result);

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
/* Fetch url's branches and tags on a background thread, as
 * work_queue_run: 1 parked (return *result), 0 done (*fetch_rc: 0 or
 * KHUB_ENOTFOUND when the fetch failed), -1 answered. */
int build_source_fetch(struct request *req, const char *url, int *fetch_rc, enum MHD_Result *result);
/* The git store a job builds from (its repo, or its external source's
 * fetched copy): git_repository_free it. */
int build_open_job_source(const struct db_rows *rows, size_t row, git_repository **out);

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

/* "version = N" in the [general] table of build.toml text (enough to name
 * the branch and to compare with metadata.json; the worker parses the file
 * for real): -1 when it says none (api/build_output.c). */
long build_toml_version(const char *text);
/* 1 when build.toml's text lists sources to compile (a non-empty src array
 * under [torch], [tvm-ffi] or a [kernel.*] table), read line by line like
 * build_toml_version: the worker parses build.toml for real; this is the
 * server's second line against a noarch output of a compiled kernel. */
int build_toml_has_compiled_sources(const char *text);

/* Set while the farm publishes a build's output on this thread: the
 * trigger leaves those commits alone. */
extern __thread int build_publishing;

#endif
