/* builds_worker.c -- the worker side of the build farm (docs/build-farm.md):
 * register, claim (waiting parked, without a thread), heartbeat, log
 * chunks, fail and release. Every route needs a worker token; those about
 * a job need its lease and the worker's scope to cover the job's repo now
 * (storage/db/db_builds.c: WORKER_MAY_BUILD). */
#include "api/builds.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CLAIM_VARIANTS 1000
#define MAX_CLAIM_WAIT_SECONDS 30

static enum MHD_Result respond_lease_lost(struct request *req, int64_t id)
{
	enum MHD_Result result;
	if (build_require_lease(req, id, &result) == 0)	/* held after all: a passing failure */
		return respond_unavailable(req, "build %" PRId64 " could not be updated; retry", id);
	return result;
}

static enum MHD_Result handle_register(struct request *req)
{
	json_t *doc = req->json;
	const char *version = NULL;
	json_t *toolchains = json_object_get(doc, "toolchains"), *conc = json_object_get(doc, "concurrency");
	long concurrency = json_is_integer(conc) ? (long)json_integer_value(conc) : 1;
	if (json_optional_string(doc, "version", &version) < 0 || !json_is_array(toolchains) ||
	    (conc && !json_is_integer(conc)) || concurrency < 1 || concurrency > 1024) {
		return respond_error(req, 400, NULL, "expected {\"name\", \"version\", \"concurrency\": 1-1024, "
					   "\"toolchains\": [{\"name\", \"variants\": [..], ...}]}");
	}
	char why[200];
	size_t count = 0;
	int rc = build_worker_register(req->principal.worker_id, version ? version : "", concurrency, toolchains, &count,
				       why, sizeof(why));
	if (rc == KHUB_EINVAL)
		return respond_error(req, 400, NULL, "%s", why);
	if (rc == KHUB_ENOTFOUND)
		return respond_error(req, 403, NULL, "this worker was removed");
	if (rc < 0)
		return respond_db_unavailable(req);
	log_info("worker %s registered (%zu variants)", req->principal.name, count);
	return respond_json(req, 200, json_pack("{s:s, s:I, s:I}", "worker", req->principal.name, "heartbeat_seconds",
						(json_int_t)farm_settings.heartbeat_seconds, "lease_seconds",
						(json_int_t)farm_settings.lease_seconds));
}

static enum MHD_Result handle_claim(struct request *req)
{
	json_t *doc = req->json;
	json_t *list = json_object_get(doc, "variants"), *wait = json_object_get(doc, "wait_seconds");
	long wait_seconds = json_is_integer(wait) ? (long)json_integer_value(wait) : wait ? -1 : 0;
	size_t n = 0, bad = 0;
	char **names = json_is_array(list) && json_array_size(list) <= MAX_CLAIM_VARIANTS
			       ? build_variant_list(list, &n, &bad) : NULL;
	if (!names || wait_seconds < 0 || wait_seconds > MAX_CLAIM_WAIT_SECONDS) {
		build_names_free(names, n);
		return respond_error(req, 400, NULL, "expected {\"variants\": [build variant names], \"wait_seconds\": 0-30}");
	}
	struct build_row b;
	int64_t head_left = -1;
	int rc = build_job_claim(req->principal.worker_id, (const char *const *)names, n, &b, &head_left);
	build_names_free(names, n);
	if (rc < 0)
		return respond_db_unavailable(req);
	if (rc == 0) {
		req->wait_started_usec = 0;
		json_t *job = build_job_json(&b);
		if (head_left >= 0)	/* the log's cap: the head left, the tail the worker holds */
			json_object_set_new(job, "log_cap", json_pack("{s:I, s:I}", "head", (json_int_t)head_left, "tail",
					    (json_int_t)(farm_settings.log_max_bytes - farm_settings.log_max_bytes / 2)));
		log_info("worker %s claimed build %" PRId64 " (%s)", req->principal.name, b.id, b.variant);
		build_row_release(&b);
		return respond_json(req, 200, json_pack("{s:o}", "build", job));
	}
	/* nothing ready, or the worker runs as many jobs as it registered
	 * (rc 2: answered as an empty queue): wait parked (woken by an enqueue
	 * here; other processes' enqueues and ended jobs are seen at the next
	 * poll, within a second) */
	uint64_t now = monotonic_usec(), limit = (uint64_t)wait_seconds * 1000000u;
	if (!req->wait_started_usec)
		req->wait_started_usec = now;
	uint64_t waited = now - req->wait_started_usec;
	if (waited < limit && !request_park_closing()) {
		uint64_t left_ms = (limit - waited) / 1000u;
		request_park(req, BUILD_QUEUE_WAKE_KEY, (unsigned)(left_ms < 1000 ? left_ms + 1 : 1000));
		return MHD_YES;
	}
	req->wait_started_usec = 0;
	struct answer a;
	answer_init(&a, 204);
	return answer_send(req, &a);
}

static enum MHD_Result handle_heartbeat(struct request *req)
{
	enum MHD_Result result;
	int64_t id;
	if (build_id_from_request(req, &id, &result) < 0 || build_require_scope(req, id, &result) < 0)
		return result;
	char expires[40];
	int cancel = 0;
	int rc = build_job_heartbeat(id, req->principal.worker_id, expires, &cancel);
	if (rc == KHUB_ECONFLICT)
		return respond_lease_lost(req, id);
	if (rc < 0)
		return respond_db_unavailable(req);
	return respond_json(req, 200, json_pack("{s:s, s:b}", "lease_expires_at", expires, "cancel", cancel));
}

static enum MHD_Result handle_log_append(struct request *req)
{
	enum MHD_Result result;
	int64_t id, length = 0;
	if (build_id_from_request(req, &id, &result) < 0 || build_require_scope(req, id, &result) < 0)
		return result;
	if (req->body_too_large)
		return respond_error(req, 413, NULL, "a log chunk is at most %ld bytes", api_ctx.max_body_bytes);
	const char *offset_arg = request_query(req, "offset");
	char *end = NULL;
	long long at = offset_arg ? strtoll(offset_arg, &end, 10) : -1;
	if (!offset_arg || *end || at < 0)
		return respond_error(req, 400, NULL, "offset=N (the byte this chunk starts at) is required");
	/* attempt=N (optional): a chunk of an earlier attempt is refused as a lost lease */
	const char *attempt_arg = request_query(req, "attempt");
	long attempt = attempt_arg ? strtol(attempt_arg, &end, 10) : -1;
	if (attempt_arg && (*end || end == attempt_arg || attempt < 0 || attempt > INT_MAX))
		return respond_error(req, 400, NULL, "attempt=N: the attempt this chunk is from (the claim's \"attempt\")");
	/* tail=1: the log's last bytes, which the worker held past the head */
	const char *tail_arg = request_query(req, "tail");
	int tail = tail_arg && !strcmp(tail_arg, "1");
	if (tail_arg && !tail && strcmp(tail_arg, "0"))
		return respond_error(req, 400, NULL, "tail=1: this chunk is the log's last bytes");
	int rc = build_job_log_append(id, req->principal.worker_id, (int)attempt, at, req->body.buf ? req->body.buf : "",
				      req->body.len, tail, &length);
	if (rc == KHUB_ECONFLICT)
		return respond_lease_lost(req, id);
	if (rc < 0)
		return respond_db_unavailable(req);
	if (rc == 2)
		return respond_error(req, 409, NULL, "build %" PRId64 " is no longer at attempt %ld: this chunk is not "
				     "its log", id, attempt);
	if (rc == 3)
		return respond_error(req, 413, NULL, "a log's tail is at most %lld bytes an attempt",
				     farm_settings.log_max_bytes - farm_settings.log_max_bytes / 2);
	builds_log_changed(id);
	return respond_json(req, rc == 1 ? 409 : 200, json_pack("{s:I}", "length", (json_int_t)length));
}

static enum MHD_Result handle_fail(struct request *req)
{
	enum MHD_Result result;
	int64_t id;
	if (build_id_from_request(req, &id, &result) < 0 || build_require_scope(req, id, &result) < 0)
		return result;
	json_t *doc = request_json_body(req, &result);
	if (!doc)
		return result;
	const char *error = NULL;
	int retry = 0;
	json_t *report = json_object_get(doc, "abi_report");
	if (json_optional_string(doc, "error", &error) < 0 || json_optional_bool(doc, "retry", &retry) < 0 ||
	    (report && !json_is_object(report) && !json_is_null(report))) {
		json_decref(doc);
		return respond_error(req, 400, NULL, "expected {\"error\": string, \"retry\": bool, \"abi_report\": {...} | null}");
	}
	char *report_text = json_is_object(report) ? json_dumps(report, JSON_COMPACT) : NULL;
	char state[16] = "";
	int rc = build_job_fail(id, req->principal.worker_id, error ? error : "the worker gave no reason", retry,
				report_text, state);
	free(report_text);
	json_decref(doc);
	if (rc == KHUB_ECONFLICT)
		return respond_lease_lost(req, id);
	if (rc < 0)
		return respond_db_unavailable(req);
	log_info("worker %s: build %" PRId64 " failed (%s)", req->principal.name, id, state);
	builds_log_changed(id);
	return respond_json(req, 200, json_pack("{s:s}", "state", state));
}

static enum MHD_Result handle_release(struct request *req)
{
	enum MHD_Result result;
	int64_t id;
	if (build_id_from_request(req, &id, &result) < 0 || build_require_scope(req, id, &result) < 0)
		return result;
	int rc = build_job_release(id, req->principal.worker_id);
	if (rc == KHUB_ECONFLICT)
		return respond_lease_lost(req, id);
	if (rc < 0)
		return respond_db_unavailable(req);
	builds_log_changed(id);
	return respond_json(req, 200, json_pack("{s:s}", "state", "queued"));
}

const struct route build_worker_routes[] = {
	{ METHOD_POST, "/api/workers/register", handle_register, ROUTE_JSON, 0, NULL, ACCESS_WORKER },
	{ METHOD_POST, "/api/workers/claim", handle_claim, ROUTE_JSON, 0, NULL, ACCESS_WORKER },
	{ METHOD_POST, "/api/builds/{arg}/heartbeat", handle_heartbeat, ROUTE_BODY, 0, NULL, ACCESS_WORKER },
	{ METHOD_POST, "/api/builds/{arg}/log", handle_log_append, ROUTE_BODY, 0, NULL, ACCESS_WORKER },
	{ METHOD_POST, "/api/builds/{arg}/fail", handle_fail, ROUTE_BODY, 0, NULL, ACCESS_WORKER },
	{ METHOD_POST, "/api/builds/{arg}/release", handle_release, ROUTE_BODY, 0, NULL, ACCESS_WORKER },
	{ 0, NULL, NULL, 0, 0 },
};
