/* builds.h -- what the build farm's handlers in api/ share (builds.c,
 * builds_enqueue.c, builds_worker.c, builds_source.c, builds_output.c):
 * the request's job and lease checks, and handing the farm's slow steps
 * to the work queue; the farm itself is farm/farm.h. Nothing outside api/
 * includes it. */
#ifndef KHUB_API_BUILDS_H
#define KHUB_API_BUILDS_H

#include "api/api.h"
#include "farm/farm.h"

/* Parked claimers wait on this key; an enqueue wakes them. */
#define BUILD_QUEUE_WAKE_KEY "build-queue"

/* Wake the parked claimers (the server sets farm_settings.queue_changed
 * to it). */
void builds_wake_claimers(void);
/* Job id's log or state changed: its parked followers look now
 * (api/builds_follow.c). */
void builds_log_changed(int64_t id);
/* The job named by the route's {arg} into *id; 404 queued when it is no
 * number. */
int build_id_from_request(struct request *req, int64_t *id, enum MHD_Result *result);
/* For the lease-holding worker's routes: 0 when the caller holds the
 * job's lease and its scope covers the job's repo now; else the answer is
 * queued (404 also when out of scope, 409 {"error", "state"} when the lease
 * is not its own or was taken back for its scope, 503). */
int build_require_lease(struct request *req, int64_t id, enum MHD_Result *result);
/* build_require_lease for the routes that answer a lost lease themselves
 * (heartbeat, log, fail, release): only the scope is checked. */
int build_require_scope(struct request *req, int64_t id, enum MHD_Result *result);
/* Run a farm job on pool's work queue for req, as work_pool_run (takes
 * job->arg): 1 parked (return *result), 0 done (*job_rc its result), -1
 * answered (503). */
int builds_run_job(struct request *req, enum work_pool_id pool, const struct farm_job *job, int *job_rc,
		   enum MHD_Result *result);
/* The plan of build.toml of sha in git, planned on the plan pool the
 * first time (the request waits parked: everything before must be safe to
 * repeat): 0 with out->doc or out->refused (release it); 1 with the
 * answer queued (parked, 503); KHUB_EIO or FARM_EREFUSED (no build.toml,
 * in LFS, too large) with why, nothing queued. */
int builds_plan(struct request *req, git_repository *git, const char *sha, struct build_plan *out, char *why,
		size_t why_size, enum MHD_Result *result);
/* GET .../builds?commit=: the matrix of commit (a sha or a revision). */
enum MHD_Result builds_matrix_answer(struct request *req, const char *commit);
/* Add the newest commits' matrices to answer ("matrices",
 * "commits_total", "next_commit_offset"; query commits, commit_offset): 0,
 * or -1 answered (400, 503). */
int builds_matrices_page(struct request *req, json_t *answer, enum MHD_Result *result);

#endif
