/* benchmarks.c -- POST /api/kernels/{ns}/{name}/benchmarks takes the body
 * `kernels benchmark` uploads (BenchmarkResult.to_payload() of
 * kernels/cli/benchmark.py), checks it and stores it (the GETs:
 * benchmark_queries.c). Uploads need a write token; runs of users who may
 * write to the repo are "maintainer" runs, others "community" runs; a
 * worker's measurement of a job it holds is a "farm" run. */
#include "api/builds.h"
#include "kernel/kernel.h"
#include "storage/db/webhooks.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define BENCH_BODY_MAX (1024 * 1024)
#define BENCH_RESULTS_MAX 1000
#define BENCH_MS_MAX 86400000.0		/* a day: anything longer is not a kernel timing */
#define BENCH_ITERATIONS_MAX 1000000000

/* ---- reading the upload ---------------------------------------------------- */

/* A string member: 0 with *out (NULL when optional and absent or null), or
 * -1 with err set. */
static int get_text(json_t *obj, const char *key, const char *where, size_t max, int optional,
		    const char **out, struct strbuf *err)
{
	json_t *v = json_object_get(obj, key);
	*out = NULL;
	if (!v || json_is_null(v)) {
		if (optional)
			return 0;
		strbuf_addf(err, "%s%s is required", where, key);
		return -1;
	}
	if (!json_is_string(v)) {
		strbuf_addf(err, "%s%s must be a string", where, key);
		return -1;
	}
	const char *s = json_string_value(v);
	size_t len = json_string_length(v);
	if (len > max) {
		strbuf_addf(err, "%s%s is longer than %zu bytes", where, key, max);
		return -1;
	}
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
			strbuf_addf(err, "%s%s contains a control character", where, key);
			return -1;
		}
	*out = s;
	return 0;
}

static int get_ms(json_t *timing, const char *key, size_t index, double *out, struct strbuf *err)
{
	json_t *v = json_object_get(timing, key);
	if (!json_is_number(v)) {
		strbuf_addf(err, "results[%zu].timingResults.%s %s", index, key, v ? "must be a number" : "is required");
		return -1;
	}
	*out = json_number_value(v);
	if (!isfinite(*out) || *out < 0 || *out > BENCH_MS_MAX) {
		strbuf_addf(err, "results[%zu].timingResults.%s must be between 0 and %.0f ms", index, key, BENCH_MS_MAX);
		return -1;
	}
	return 0;
}

static int get_count(json_t *timing, const char *key, size_t index, int64_t min, int64_t max, int64_t *out,
		     struct strbuf *err)
{
	json_t *v = json_object_get(timing, key);
	if (!json_is_integer(v)) {
		strbuf_addf(err, "results[%zu].timingResults.%s %s", index, key, v ? "must be an integer" : "is required");
		return -1;
	}
	*out = json_integer_value(v);
	if (*out < min || *out > max) {
		strbuf_addf(err, "results[%zu].timingResults.%s must be between %" PRId64 " and %" PRId64, index, key,
			    min, max);
		return -1;
	}
	return 0;
}

/* a <= b, allowing for the rounding of whoever computed them. */
static int not_above(double a, double b)
{
	return a <= b + 1e-4 + fabs(b) * 1e-9;
}

static int read_result(json_t *item, size_t i, struct benchmark_result *r, struct strbuf *err)
{
	char where[48];
	const char *workload;
	snprintf(where, sizeof(where), "results[%zu].", i);
	if (!json_is_object(item)) {
		strbuf_addf(err, "results[%zu] must be an object", i);
		return -1;
	}
	if (get_text(item, "workload", where, BENCHMARK_TEXT_MAX, 0, &workload, err) < 0)
		return -1;
	if (!workload[0]) {
		strbuf_addf(err, "results[%zu].workload is empty", i);
		return -1;
	}
	snprintf(r->workload, sizeof(r->workload), "%s", workload);
	json_t *t = json_object_get(item, "timingResults");
	if (!json_is_object(t)) {
		strbuf_addf(err, "results[%zu].timingResults %s", i, t ? "must be an object" : "is required");
		return -1;
	}
	if (get_ms(t, "mean_ms", i, &r->mean_ms, err) < 0 || get_ms(t, "std_ms", i, &r->std_ms, err) < 0 ||
	    get_ms(t, "min_ms", i, &r->min_ms, err) < 0 || get_ms(t, "max_ms", i, &r->max_ms, err) < 0 ||
	    get_ms(t, "q1_ms", i, &r->q1_ms, err) < 0 || get_ms(t, "q3_ms", i, &r->q3_ms, err) < 0 ||
	    get_ms(t, "iqr_ms", i, &r->iqr_ms, err) < 0 ||
	    get_count(t, "iterations", i, 1, BENCH_ITERATIONS_MAX, &r->iterations, err) < 0 ||
	    get_count(t, "outliers", i, 0, r->iterations, &r->outliers, err) < 0)
		return -1;
	/* kernels checks min <= max itself; the quartiles may be left at the
	 * dataclass default of 0 by a producer that does not compute them. */
	int have_quartiles = r->q1_ms != 0 || r->q3_ms != 0;
	if (!not_above(r->min_ms, r->max_ms) || !not_above(r->min_ms, r->mean_ms) ||
	    !not_above(r->mean_ms, r->max_ms) || !not_above(r->q1_ms, r->q3_ms) ||
	    (have_quartiles && (!not_above(r->min_ms, r->q1_ms) || !not_above(r->q3_ms, r->max_ms)))) {
		strbuf_addf(err, "results[%zu].timingResults must have min_ms <= q1_ms <= q3_ms <= max_ms and"
			    " min_ms <= mean_ms <= max_ms", i);
		return -1;
	}
	json_t *verified = json_object_get(item, "verified");
	if (verified && !json_is_null(verified) && !json_is_boolean(verified)) {
		strbuf_addf(err, "results[%zu].verified must be a boolean", i);
		return -1;
	}
	r->verified = json_is_boolean(verified) ? json_is_true(verified) : -1;
	return 0;
}

/* Lowercase copy of s up to the first space, at most size-1 bytes. */
static void first_word_lower(const char *s, char *out, size_t size)
{
	size_t n = 0;
	for (; s[n] && s[n] != ' ' && n + 1 < size; n++)
		out[n] = (char)tolower((unsigned char)s[n]);
	out[n] = '\0';
}

/* "12.8" -> "128", "6.3.42131-fa1d" -> "63"; "" when not MAJOR.MINOR. */
static void major_minor(const char *v, char *out, size_t size)
{
	char *end;
	out[0] = '\0';
	if (!v || !isdigit((unsigned char)*v))
		return;
	long major = strtol(v, &end, 10);
	if (*end != '.' || !isdigit((unsigned char)end[1]))
		return;
	long minor = strtol(end + 1, NULL, 10);
	snprintf(out, size, "%ld%ld", major, minor);
}

/* What the filters compare: machineInfo.backend ("CUDA 12.8", "ROCm 6.3",
 * "XPU", "MPS", "NPU", "CPU") as a family and a variant-style key, the torch
 * minor as "torch211", the OS as linux/darwin/windows. */
struct machine_keys {
	char backend_family[32], backend_key[48], torch_key[32], os_family[16];
};

static void derive_machine_keys(const char *backend, const char *pytorch, const char *os, struct machine_keys *k)
{
	char word[32], version[16];
	first_word_lower(backend, word, sizeof(word));
	snprintf(k->backend_family, sizeof(k->backend_family), "%s", word);
	snprintf(k->backend_key, sizeof(k->backend_key), "%s", word);
	const struct kernel_backend *b = kernel_backend_by_machine_word(word);
	if (b) {
		snprintf(k->backend_family, sizeof(k->backend_family), "%s", b->name);
		snprintf(k->backend_key, sizeof(k->backend_key), "%s", b->name);
		const char *space = strchr(backend, ' ');
		major_minor(space ? space + 1 : NULL, version, sizeof(version));
		if (b->benchmark_keyed && version[0])
			snprintf(k->backend_key, sizeof(k->backend_key), "%s%s", b->variant_prefix, version);
	}
	major_minor(pytorch, version, sizeof(version));
	snprintf(k->torch_key, sizeof(k->torch_key), "%s%s", version[0] ? "torch" : "", version);
	static const char *const systems[] = { "linux", "darwin", "windows" };
	first_word_lower(os, word, sizeof(word));
	k->os_family[0] = '\0';
	for (size_t i = 0; i < sizeof(systems) / sizeof(systems[0]); i++)
		if (strcmp(word, systems[i]) == 0)
			snprintf(k->os_family, sizeof(k->os_family), "%s", systems[i]);
}

static int is_hex_string(const char *s, size_t min, size_t max)
{
	size_t n = strlen(s);
	if (n < min || n > max)
		return 0;
	for (; *s; s++)
		if (!isxdigit((unsigned char)*s))
			return 0;
	return 1;
}

/* machineInfo and the upload's other fields into run (its strings point
 * into doc) with the keys the filters compare (in keys): 0, or -1 with
 * err. */
static int read_upload_fields(json_t *doc, struct benchmark_run *run, struct machine_keys *keys, struct strbuf *err)
{
	json_t *machine = json_object_get(doc, "machineInfo");
	if (!json_is_object(machine)) {
		strbuf_addf(err, "machineInfo %s", machine ? "must be an object" : "is required");
		return -1;
	}
	if (get_text(machine, "gpu", "machineInfo.", BENCHMARK_TEXT_MAX, 0, &run->gpu, err) < 0 ||
	    get_text(machine, "backend", "machineInfo.", BENCHMARK_TEXT_MAX, 0, &run->backend, err) < 0 ||
	    get_text(machine, "pytorchVersion", "machineInfo.", BENCHMARK_TEXT_MAX, 0, &run->pytorch_version, err) < 0 ||
	    get_text(machine, "os", "machineInfo.", BENCHMARK_TEXT_MAX, 0, &run->os, err) < 0 ||
	    get_text(machine, "cpu", "machineInfo.", BENCHMARK_TEXT_MAX, 0, &run->cpu, err) < 0 ||
	    get_text(doc, "kernelCommitSha", "", 64, 0, &run->kernel_commit_sha, err) < 0 ||
	    get_text(doc, "benchmarkScriptPath", "", REPO_PATH_MAX, 0, &run->benchmark_script_path, err) < 0 ||
	    get_text(doc, "benchmarkScriptSha", "", BENCHMARK_TEXT_MAX, 1, &run->benchmark_script_sha, err) < 0)
		return -1;
	run->gpu_cores = -1;
	json_t *cores = json_object_get(machine, "gpuCores");
	if (cores && !json_is_null(cores)) {
		if (!json_is_integer(cores) || json_integer_value(cores) < 0 || json_integer_value(cores) > 1000000) {
			strbuf_adds(err, "machineInfo.gpuCores must be an integer from 0 to 1000000");
			return -1;
		}
		run->gpu_cores = json_integer_value(cores);
	}
	derive_machine_keys(run->backend, run->pytorch_version, run->os, keys);
	run->backend_family = keys->backend_family;
	run->backend_key = keys->backend_key;
	run->torch_key = keys->torch_key;
	run->os_family = keys->os_family;
	return 0;
}

/* Every workload of list (already an array of the right size), each
 * named once, into results (n of them, zeroed): 0, or -1 with err. */
static int read_results(json_t *list, struct benchmark_result *results, size_t n, struct strbuf *err)
{
	for (size_t i = 0; i < n; i++) {
		if (read_result(json_array_get(list, i), i, &results[i], err) < 0)
			return -1;
		for (size_t j = 0; j < i; j++)
			if (strcmp(results[j].workload, results[i].workload) == 0) {
				strbuf_addf(err, "workload %s appears twice", results[i].workload);
				return -1;
			}
	}
	return 0;
}

/* The commit measured must be one of this repo's (kernels sends the short
 * sha of the build; a full sha works too): 0 with sha, or -1 with err. */
static int measured_commit(const struct repo_handle *h, const char *kernel_sha, char sha[41], struct strbuf *err)
{
	char lower_sha[41];
	snprintf(lower_sha, sizeof(lower_sha), "%s", kernel_sha);
	for (char *p = lower_sha; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if (!is_hex_string(lower_sha, 7, 40) || repo_resolve_commitish(h->git, lower_sha, sha) < 0) {
		strbuf_addf(err, "kernelCommitSha %s is not a commit of %s/%s", kernel_sha, h->record.ns, h->record.name);
		return -1;
	}
	return 0;
}

/* The stored run audited and answered: 200, not 201 (kernels'
 * submit_benchmark reports anything else as an error). */
static enum MHD_Result respond_uploaded(struct request *req, const char *ns, const char *name,
				       const struct benchmark_run *run, int64_t id)
{
	char target[2 * REPO_NAME_MAX + 2], details[96];
	snprintf(target, sizeof(target), "%s/%s", ns, name);
	snprintf(details, sizeof(details), "{\"id\":%" PRId64 ",\"results\":%zu}", id, run->nresults);
	api_audit(req, "benchmark.upload", target, details);
	char *url = xasprintf("%s/api/kernels/%s/%s/benchmarks?id=%" PRId64, request_base_url(req), ns, name, id);
	enum MHD_Result r = respond_json(req, 200, json_pack("{s:I, s:s, s:s, s:I, s:s}", "id", (json_int_t)id,
							      "url", url, "commit", run->commit_sha, "results",
							      (json_int_t)run->nresults, "source", run->source));
	free(url);
	return r;
}

/* What both uploads share: the body parsed and checked into run (its
 * strings point into *doc; *results the caller frees, *doc it decrefs).
 * 0; -1 with err (a 400); -2 with *result queued. */
static int read_upload(struct request *req, json_t **doc, struct benchmark_run *run, struct benchmark_result **results,
		       struct machine_keys *keys, struct strbuf *err, enum MHD_Result *result)
{
	if (req->body_too_large || req->body.len > BENCH_BODY_MAX) {
		*result = respond_error(req, 413, NULL, "a benchmark upload is at most %d bytes", BENCH_BODY_MAX);
		return -2;
	}
	if (!(*doc = request_json_body(req, result)))
		return -2;
	json_t *list = json_object_get(*doc, "results");
	size_t n = json_array_size(list);
	if (!json_is_array(list) || n == 0 || n > BENCH_RESULTS_MAX) {
		strbuf_addf(err, "results must be an array of 1 to %d workloads", BENCH_RESULTS_MAX);
		return -1;
	}
	run->nresults = n;
	run->results = *results = xcalloc(n, sizeof(**results));
	if (read_upload_fields(*doc, run, keys, err) < 0 || read_results(list, *results, n, err) < 0)
		return -1;
	return 0;
}

/* Store run (its payload is doc) and answer; *id the new run's (0 when
 * it was not stored). */
static enum MHD_Result store_run(struct request *req, const char *ns, const char *name, json_t *doc,
				 struct benchmark_run *run, int64_t *stored)
{
	int64_t id = 0;
	*stored = 0;
	char *payload = json_dumps(doc, JSON_COMPACT);
	run->payload = payload;
	int rc = payload ? db_benchmark_insert(run, &id) : KHUB_EIO;
	free(payload);
	if (rc == 0)
		*stored = id;
	return rc < 0 ? respond_err(req, rc, "cannot store the benchmark") : respond_uploaded(req, ns, name, run, id);
}

static enum MHD_Result handle_upload(struct request *req)
{
	enum MHD_Result result;
	struct strbuf err = STRBUF_INIT;
	struct benchmark_result *results = NULL;
	struct machine_keys keys;
	json_t *doc = NULL;
	char sha[41];

	/* The route asks for a signed-in caller who sees the repo, with a
	 * write token (an upload is a write). Who may write to the repo
	 * submits maintainer results; anyone else community ones, which
	 * listings show only when asked. Farm runs come from the hub's own
	 * workers (handle_farm_upload), never from a user's token. */
	enum role role;
	if (repo_role_of(&req->principal, &req->repo->record, &role) < 0)
		return respond_db_unavailable(req);
	struct benchmark_run run = {
		.repo_id = req->repo->record.id, .commit_sha = sha, .submitter_id = req->principal.user_id,
		.submitter_name = req->principal.name, .source = role >= ROLE_WRITE ? "maintainer" : "community",
	};
	int rc = read_upload(req, &doc, &run, &results, &keys, &err, &result);
	if (rc == -2)
		goto cleanup;
	json_t *claimed = json_object_get(doc, "source");
	if (json_is_string(claimed) && strcmp(json_string_value(claimed), "farm") == 0) {
		result = respond_error(req, 403, NULL, "farm runs are measured by the hub's benchmark workers: "
					   "only a worker's token submits one");
		goto cleanup;
	}
	if (rc < 0 || measured_commit(req->repo, run.kernel_commit_sha, sha, &err) < 0)
		goto invalid;
	int64_t id;
	result = store_run(req, req->repo->record.ns, req->repo->record.name, doc, &run, &id);
	goto cleanup;
invalid:
	result = respond_error(req, 400, NULL, "invalid benchmark: %s", err.buf);
cleanup:
	free(results);
	json_decref(doc);
	strbuf_release(&err);
	return result;
}

/* A farm run stored: when its commit is now slower than the version
 * before on some device and workload, the repo's repo.benchmark hooks
 * hear it (the API and pages compute the same rows when read). */
static void announce_regressions(int64_t repo_id, const char *sha, int64_t run_id)
{
	json_t *list = NULL;
	if (benchmark_regressions_json(repo_id, sha, &list) < 0)
		log_error("benchmarks: run %" PRId64 ": cannot look for regressions (database)", run_id);
	else if (json_array_size(list))
		webhook_event_benchmark(repo_id, sha, run_id, list);
	json_decref(list);
}

/* POST /api/builds/{id}/benchmark: the worker holding job id's lease sends
 * what it measured (the same payload) as a farm run of the job's commit;
 * kernelCommitSha must name that commit (a prefix of it). */
static enum MHD_Result handle_farm_upload(struct request *req)
{
	enum MHD_Result result;
	struct strbuf err = STRBUF_INIT;
	struct benchmark_result *results = NULL;
	struct machine_keys keys;
	struct build_row job;
	json_t *doc = NULL;
	int64_t id, run_id = 0;

	if (build_id_from_request(req, &id, &result) < 0 || build_require_lease(req, id, &result) < 0)
		return result;
	if (db_build_get(id, &job) < 0)
		return respond_db_unavailable(req);
	const char *sha = job.commit;
	struct benchmark_run run = {
		.repo_id = job.repo_id, .commit_sha = sha,
		.submitter_name = req->principal.name, .source = "farm", .worker_id = req->principal.worker_id,
		.build_id = id,
	};
	int rc = read_upload(req, &doc, &run, &results, &keys, &err, &result);
	if (rc == -2)
		goto cleanup;
	if (rc == 0 && (strlen(run.kernel_commit_sha) < 7 ||
			strncasecmp(sha, run.kernel_commit_sha, strlen(run.kernel_commit_sha)) != 0)) {
		strbuf_addf(&err, "kernelCommitSha %s is not build %" PRId64 "'s commit %s", run.kernel_commit_sha, id, sha);
		rc = -1;
	}
	if (rc < 0)
		result = respond_error(req, 400, NULL, "invalid benchmark: %s", err.buf);
	else
		result = store_run(req, job.ns, job.name, doc, &run, &run_id);
	if (run_id)
		announce_regressions(run.repo_id, sha, run_id);
cleanup:
	build_row_release(&job);
	free(results);
	json_decref(doc);
	strbuf_release(&err);
	return result;
}

/* An upload needs a signed-in caller who sees the repo, with a write token;
 * the handler decides by role whether the run is a maintainer's (who may
 * write to the repo) or a community one. */
const struct route benchmarks_routes[] = {
	{ METHOD_POST, "/api/kernels/{ns}/{name}/benchmarks", handle_upload, ROUTE_BODY | ROUTE_HANDLER_ACCESS,
	  REPO_KERNEL, NULL, ACCESS_REPO_CONTRIBUTE },
	{ METHOD_POST, "/api/builds/{arg}/benchmark", handle_farm_upload, ROUTE_BODY, 0, NULL, ACCESS_WORKER },
	{ 0, NULL, NULL, 0, 0 },
};
