/* benchmark_jobs.c -- queueing benchmark jobs (docs/build-farm.md,
 * "Benchmark jobs"): for a commit with benchmarks/, each variant the farm
 * published of it, on each device model a live benchmark worker
 * registered (or the one asked); one job per (commit, variant, device),
 * ever. By hand (POST …/benchmarks/run) or after a farm publication when
 * the repo's benchmarkAfterPublish is on. */
#include "farm/farm.h"

#include <inttypes.h>
#include <string.h>

/* 1 when commit's tree has a benchmarks/ folder, 0 when not or unknown. */
static int has_benchmarks(git_repository *git, const char *commit)
{
	git_oid oid;
	git_commit *c = NULL;
	git_tree *tree = NULL;
	int found = 0;
	if (git_oid_fromstr(&oid, commit) == 0 && git_commit_lookup(&c, git, &oid) == 0 &&
	    git_commit_tree(&tree, c) == 0) {
		const git_tree_entry *e = git_tree_entry_byname(tree, "benchmarks");
		found = e && git_tree_entry_type(e) == GIT_OBJECT_TREE;
	}
	git_tree_free(tree);
	git_commit_free(c);
	return found;
}

/* Queue target t (source commit, variant, variant commit) on device into jobs. */
static int queue_one(const struct build_request *r, char *const *t, const char *device, json_t *jobs, int *queued)
{
	enum build_enqueue_outcome outcome;
	int64_t id = 0;
	int rc = build_job_enqueue_benchmark(r, t[1], t[2], device, &outcome, &id);
	if (rc < 0)
		return rc;
	*queued += outcome == BUILD_ENQUEUED;
	json_array_append_new(jobs, json_pack("{s:I, s:s, s:s, s:s, s:s, s:b}", "id", (json_int_t)id, "commit", t[0],
					      "variant", t[1], "variant_commit", t[2], "device", device, "queued",
					      outcome == BUILD_ENQUEUED));
	return 0;
}

int benchmark_jobs_queue(const struct repo_record *rec, const struct benchmark_ask *ask, json_t *jobs, char *why,
			 size_t why_size)
{
	struct strvec targets = STRVEC_INIT, devices = STRVEC_INIT;
	git_repository *git = NULL;
	struct build_request r = { .repo_id = rec->id, .max_attempts = (int)farm_settings.max_attempts,
				   .requested_by = ask->requested_by };
	int queued = 0, rc = db_benchmark_targets(rec->id, ask->commit, ask->variant, &targets);
	if (rc == 0 && ask->device)
		strvec_pushf(&devices, "%s", ask->device);
	else if (rc == 0)
		rc = db_worker_benchmark_devices(farm_settings.worker_live_seconds, &devices);
	if (rc < 0)
		goto cleanup;
	rc = FARM_EREFUSED;
	if (!targets.count) {
		snprintf(why, why_size, "the farm published no variant of %s%s%s", ask->commit ? ask->commit : "the repo",
			 ask->variant ? " named " : "", ask->variant ? ask->variant : "");
		goto cleanup;
	}
	if (!devices.count) {
		snprintf(why, why_size, "no live benchmark worker registered a device (a toolchain with \"benchmarks\": true)");
		goto cleanup;
	}
	if ((rc = repo_store_open(farm_settings.repo_root, rec->type, rec->ns, rec->name, &git)) < 0)
		goto cleanup;
	rc = FARM_EREFUSED;
	if (!has_benchmarks(git, targets.items[0])) {
		snprintf(why, why_size, "commit %s has no benchmarks/ folder", targets.items[0]);
		goto cleanup;
	}
	r.commit = targets.items[0];
	rc = 0;
	for (size_t i = 0; i + 2 < targets.count && rc == 0; i += 3)
		for (size_t d = 0; d < devices.count && rc == 0; d++)
			rc = queue_one(&r, targets.items + i, devices.items[d], jobs, &queued);
	if (queued)
		farm_queue_changed();
cleanup:
	git_repository_free(git);
	strvec_release(&targets);
	strvec_release(&devices);
	return rc;
}

void benchmark_jobs_after_publish(const struct repo_record *rec, const char *commit, const char *variant)
{
	struct repo_settings settings;
	char why[256];
	if (db_repo_settings_get(rec->id, &settings) < 0 || !settings.value[REPO_SETTING_BENCHMARK_AFTER_PUBLISH])
		return;
	struct benchmark_ask ask = { .commit = commit, .variant = variant, .requested_by = "benchmarkAfterPublish" };
	json_t *jobs = json_array();
	int rc = benchmark_jobs_queue(rec, &ask, jobs, why, sizeof(why));
	if (rc == 0)
		log_info("benchmarks: %zu job(s) of %s/%s %.12s %s after its publication", json_array_size(jobs), rec->ns,
			 rec->name, commit, variant);
	else if (rc == FARM_EREFUSED)
		log_info("benchmarks: %s/%s %.12s %s not benchmarked after its publication: %s", rec->ns, rec->name,
			 commit, variant, why);
	else
		log_error("benchmarks: queueing the jobs of %s/%s %.12s failed (%d)", rec->ns, rec->name, commit, rc);
	json_decref(jobs);
}
