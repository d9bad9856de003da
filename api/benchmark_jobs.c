/* benchmark_jobs.c -- the farm's benchmark jobs over HTTP (docs/build-farm.md,
 * "Benchmark jobs"): POST /api/kernels/{ns}/{name}/benchmarks/run queues
 * them by hand (farm/benchmark_jobs.c decides what), POST
 * /api/builds/{id}/measured ends one after its worker submitted its farm
 * runs (POST /api/builds/{id}/benchmark). */
#include "api/builds.h"

#include <inttypes.h>
#include <string.h>

#define ASK_FIELD_MAX 255

/* An optional string field of at most ASK_FIELD_MAX printable bytes:
 * 0 (absent: *out NULL), -1 invalid. */
static int ask_field(json_t *doc, const char *key, const char **out)
{
	if (json_optional_string(doc, key, out) < 0)
		return -1;
	if (!*out)
		return 0;
	size_t len = strlen(*out);
	if (len == 0 || len > ASK_FIELD_MAX)
		return -1;
	for (const unsigned char *p = (const unsigned char *)*out; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return -1;
	return 0;
}

static enum MHD_Result handle_run(struct request *req)
{
	enum MHD_Result result;
	const char *commit = NULL, *variant = NULL, *device = NULL;
	char sha[41], why[512];
	if (ask_field(req->json, "commit", &commit) < 0 || ask_field(req->json, "variant", &variant) < 0 ||
	    ask_field(req->json, "device", &device) < 0)
		return respond_error(req, 400, NULL, "expected {\"commit\": a revision, \"variant\": a variant name, "
					   "\"device\": a device model}, each optional");
	if (commit && repo_resolve_or_respond(req, req->repo, commit, sha, &result) < 0)
		return result;
	struct benchmark_ask ask = { .commit = commit ? sha : NULL, .variant = variant, .device = device,
				     .requested_by = req->principal.name };
	json_t *jobs = json_array();
	int rc = benchmark_jobs_queue(&req->repo->record, &ask, jobs, why, sizeof(why));
	if (rc == FARM_EREFUSED) {
		json_decref(jobs);
		return respond_error(req, 422, NULL, "%s", why);
	}
	if (rc < 0) {
		json_decref(jobs);
		return rc == KHUB_EDB ? respond_db_unavailable(req) : respond_err(req, rc, "cannot queue the benchmarks");
	}
	log_info("benchmarks: %s asked for %zu job(s) of %s/%s", req->principal.name, json_array_size(jobs),
		 req->repo->record.ns, req->repo->record.name);
	return respond_json(req, 200, json_pack("{s:o}", "jobs", jobs));
}

static enum MHD_Result handle_measured(struct request *req)
{
	enum MHD_Result result;
	int64_t id;
	struct build_row b;
	if (build_id_from_request(req, &id, &result) < 0 || build_require_lease(req, id, &result) < 0)
		return result;
	json_t *runs = json_object_get(req->json, "runs");
	if (runs && !json_is_integer(runs))
		return respond_error(req, 400, NULL, "expected {\"runs\": the farm runs submitted}");
	int rc = db_build_get(id, &b);
	if (rc < 0)
		return respond_db_unavailable(req);
	int benchmark = b.benchmark;
	build_row_release(&b);
	if (!benchmark)
		return respond_error(req, 409, NULL, "build %" PRId64 " is no benchmark job: its output is published "
				     "(PUT /api/builds/%" PRId64 "/output)", id, id);
	char note[64];
	snprintf(note, sizeof(note), "%lld farm run(s) submitted", runs ? (long long)json_integer_value(runs) : 0LL);
	rc = build_job_measured(id, req->principal.worker_id, note);
	if (rc == KHUB_ECONFLICT)
		return respond_error(req, 409, NULL, "build %" PRId64 " is no longer this worker's", id);
	if (rc < 0)
		return respond_db_unavailable(req);
	builds_log_changed(id);
	return respond_json(req, 200, json_pack("{s:s}", "state", "succeeded"));
}

const struct route benchmark_jobs_routes[] = {
	{ METHOD_POST, "/api/kernels/{ns}/{name}/benchmarks/run", handle_run, ROUTE_JSON, REPO_KERNEL, NULL,
	  ACCESS_REPO_WRITE },
	{ METHOD_POST, "/api/builds/{arg}/measured", handle_measured, ROUTE_JSON, 0, NULL, ACCESS_WORKER },
	{ 0, NULL, NULL, 0, 0 },
};
