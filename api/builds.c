/* builds.c -- build jobs as users see them: GET /api/builds/{id}, its log,
 * its signed provenance and the hub's public signing key, cancel and retry,
 * a repo's list, and GET /api/admin/workers; plus what
 * every build handler shares (api/builds.h). */
#include "api/builds.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void builds_wake_claimers(void)
{
	request_wake(BUILD_QUEUE_WAKE_KEY);
}

int builds_run_job(struct request *req, enum work_pool_id pool, const struct farm_job *job, int *job_rc,
		   enum MHD_Result *result)
{
	return work_pool_run(pool, req, job->key, job->run, job->arg, job->free_arg, job_rc, result);
}

int build_id_from_request(struct request *req, int64_t *id, enum MHD_Result *result)
{
	const char *arg = req->nargs ? req->args[0] : "";
	char *end;
	long long v = strtoll(arg, &end, 10);
	if (!arg[0] || *end || v <= 0) {
		*result = respond_error(req, 404, NULL, "no build %s", arg);
		return -1;
	}
	*id = v;
	return 0;
}

/* The answer to a worker whose check of job id gave rc (not 0). */
static enum MHD_Result respond_not_held(struct request *req, int64_t id, int rc, const char *state)
{
	if (rc == KHUB_ENOTFOUND)	/* out of scope: as if there were none */
		return respond_error(req, 404, NULL, "no build %" PRId64, id);
	if (rc == KHUB_EPERM)	/* 409: a worker stops the build as for a lost lease */
		return respond_json(req, 409, json_pack("{s:s, s:s}", "error", "this worker's scope no longer covers the "
							"build's repository: the job was taken back", "state", state));
	if (rc == KHUB_ECONFLICT)
		return respond_json(req, 409, json_pack("{s:s, s:s}", "error", "this worker does not hold the build's lease",
							"state", state));
	return respond_db_unavailable(req);
}

int build_require_lease(struct request *req, int64_t id, enum MHD_Result *result)
{
	char state[16];
	int rc = build_job_lease(id, req->principal.worker_id, state);
	if (rc == 0)
		return 0;
	*result = respond_not_held(req, id, rc, state);
	return -1;
}

int build_require_scope(struct request *req, int64_t id, enum MHD_Result *result)
{
	char state[16];
	int rc = build_job_lease(id, req->principal.worker_id, state);
	if (rc == 0 || rc == KHUB_ECONFLICT)
		return 0;
	*result = respond_not_held(req, id, rc, state);
	return -1;
}

/* The job of the route's {arg}, with the caller's access to its repo
 * checked (needed: ROLE_READ or ROLE_WRITE); b holds it on success. */
static int load_for_user(struct request *req, enum role needed, int64_t *id, struct build_row *b,
			 enum MHD_Result *result)
{
	if (build_id_from_request(req, id, result) < 0)
		return -1;
	int rc = db_build_get(*id, b);
	if (rc < 0) {
		*result = rc == KHUB_ENOTFOUND ? respond_error(req, 404, NULL, "no build %" PRId64, *id)
					       : respond_db_unavailable(req);
		return -1;
	}
	/* the repo's access decides, as its own routes would */
	req->type = REPO_KERNEL;
	req->ns = request_own(req, xstrdup(b->ns));
	req->name = request_own(req, xstrdup(b->name));
	struct repo_handle *h = &req->repo_storage;
	rc = needed >= ROLE_WRITE ? repo_open_named(req, REPO_KERNEL, req->ns, req->name, needed, h, result)
				  : repo_open_for_read(req, h, result);
	if (rc < 0) {
		build_row_release(b);
		return -1;
	}
	req->repo = h;
	return 0;
}

static enum MHD_Result handle_get(struct request *req)
{
	struct build_row b;
	int64_t id;
	enum MHD_Result result;
	if (load_for_user(req, ROLE_READ, &id, &b, &result) < 0)
		return result;
	json_t *body = build_json(&b);
	build_row_release(&b);
	return respond_json(req, 200, body);
}

#define LOG_READ_MAX (4L * 1024 * 1024)	/* one answer; read on from the next offset */

int builds_log_text(struct request *req, int64_t id, int64_t from, size_t max, struct strbuf *shown,
		    int64_t *length, int64_t *next, enum MHD_Result *result)
{
	struct strbuf text = STRBUF_INIT;
	int rc = db_build_log_read(id, from, max, &text, length, next);
	if (rc < 0) {
		strbuf_release(&text);
		*result = rc == KHUB_ENOTFOUND ? respond_error(req, 404, NULL, "no build %" PRId64, id)
					       : respond_db_unavailable(req);
		return -1;
	}
	/* build code wrote it: nothing in it may drive the reader's terminal */
	terminal_text_sanitize(text.buf ? text.buf : "", text.len, shown);
	strbuf_release(&text);
	return 0;
}

static enum MHD_Result handle_log_read(struct request *req)
{
	struct build_row b;
	int64_t id, length = 0;
	enum MHD_Result result;
	const char *offset_arg = request_query(req, "offset");
	char *end = NULL;
	long long from = offset_arg ? strtoll(offset_arg, &end, 10) : 0;
	if (offset_arg && (*end || from < 0))
		return respond_error(req, 400, NULL, "offset must be a byte offset");
	if (load_for_user(req, ROLE_READ, &id, &b, &result) < 0)
		return result;
	if (req->method == METHOD_GET && request_query_bool(req, "follow", 0)) {
		build_row_release(&b);
		return builds_log_follow(req, id, from, 0);
	}
	char state[16];
	snprintf(state, sizeof(state), "%s", b.state);
	build_row_release(&b);
	struct strbuf shown = STRBUF_INIT;
	int64_t next = 0;
	if (builds_log_text(req, id, from, LOG_READ_MAX, &shown, &length, &next, &result) < 0)
		return result;
	struct answer a;
	answer_init(&a, 200);
	answer_header(&a, "Content-Type", "text/plain; charset=utf-8");
	answer_headerf(&a, "X-Log-Length", "%" PRId64, length);
	answer_headerf(&a, "X-Log-Next-Offset", "%" PRId64, next);
	answer_headerf(&a, "X-Build-State", "%s", state);
	answer_header(&a, "Cache-Control", "no-store");
	answer_identity(&a);	/* read in pieces by offset: bytes as stored */
	size_t len;
	char *text = strbuf_detach(&shown, &len);
	answer_body_take(&a, text, len);
	return answer_send(req, &a);
}

/* GET /api/builds/{id}/provenance: the signed provenance of a build the
 * farm published (docs/build-farm.md, "Provenance"), byte for byte what
 * the publishing commit's trailer names by sha256. */
static enum MHD_Result handle_provenance(struct request *req)
{
	struct build_row b;
	int64_t id;
	enum MHD_Result result;
	if (load_for_user(req, ROLE_READ, &id, &b, &result) < 0)
		return result;
	build_row_release(&b);
	char *envelope = NULL, sha[65];
	int rc = db_build_provenance_get(id, &envelope, sha);
	if (rc == KHUB_ENOTFOUND)
		return respond_error(req, 404, NULL, "build %" PRId64 " has no provenance (the farm has not published it)",
				     id);
	if (rc < 0)
		return respond_db_unavailable(req);
	struct answer a;
	answer_init(&a, 200);
	answer_header(&a, "Content-Type", "application/json");
	answer_headerf(&a, "X-Provenance-Sha256", "%s", sha);
	answer_header(&a, "Cache-Control", "no-store");
	answer_body_take(&a, envelope, strlen(envelope));
	return answer_send(req, &a);
}

/* GET /api/signing-key: the public half of the hub's signing key (PEM),
 * which build provenance verifies under (khub verify-build --key). */
static enum MHD_Result handle_signing_key(struct request *req)
{
	char id[ED25519_KEY_ID_LEN + 1], err[512];
	char *pem = farm_settings.signing_key ? ed25519_public_pem(farm_settings.signing_key, id, err, sizeof(err))
					      : NULL;
	if (!pem) {
		log_error("the hub's signing key: %s", farm_settings.signing_key ? err : "none configured");
		return respond_error(req, 500, NULL, "the hub's signing key cannot be read");
	}
	struct answer a;
	answer_init(&a, 200);
	answer_header(&a, "Content-Type", "application/x-pem-file");
	answer_headerf(&a, "X-Key-Id", "%s", id);
	answer_body_take(&a, pem, strlen(pem));
	return answer_send(req, &a);
}

/* A change to the route's job: its id, with the caller's write access to
 * its repo checked. */
static int load_for_change(struct request *req, int64_t *id, enum MHD_Result *result)
{
	struct build_row b;
	if (load_for_user(req, ROLE_WRITE, id, &b, result) < 0)
		return -1;
	build_row_release(&b);
	return 0;
}

/* The audit log entry of action (build.cancel...) done to job id. */
static void audit_change(struct request *req, const char *action, int64_t id)
{
	char *details = xasprintf("{\"build\":%" PRId64 "}", id);
	api_audit(req, action, repo_audit_target(req, REPO_KERNEL, req->ns, req->name), details);
	free(details);
}

/* Cancel or retry (event) job id of req->repo, whose writer the caller
 * was checked to be: 0 with the answer's JSON, or -1 answered (404 another
 * repo's job, 409, 503). */
static int owner_change(struct request *req, int64_t id, enum build_event event, json_t **answer,
			enum MHD_Result *result)
{
	struct build_row b;
	char state[16] = "";
	int rc = db_build_get(id, &b);
	if (rc == 0 && b.repo_id != req->repo->record.id) {
		build_row_release(&b);
		rc = KHUB_ENOTFOUND;	/* another repo's job: as if there were none */
	}
	if (rc == 0) {
		build_row_release(&b);
		rc = event == BUILD_EV_CANCEL ? build_job_cancel(id, state) : build_job_retry(id);
	}
	if (rc == 0 && event == BUILD_EV_RETRY && db_build_get(id, &b) < 0)
		rc = KHUB_EDB;
	if (rc == KHUB_ENOTFOUND)
		*result = respond_error(req, 404, NULL, "no build %" PRId64, id);
	else if (rc == KHUB_ECONFLICT)
		*result = respond_error(req, 409, NULL, event == BUILD_EV_CANCEL ? "build %" PRId64 " has already ended"
					: "build %" PRId64 " is not failed or canceled, or the same commit and variant is "
					  "queued again", id);
	else if (rc < 0)
		*result = respond_db_unavailable(req);
	if (rc < 0)
		return -1;
	audit_change(req, event == BUILD_EV_CANCEL ? "build.cancel" : "build.retry", id);
	builds_log_changed(id);
	if (event == BUILD_EV_CANCEL) {
		*answer = json_pack("{s:I, s:s}", "id", (json_int_t)id, "state", state);
	} else {
		*answer = build_json(&b);
		build_row_release(&b);
	}
	return 0;
}

int builds_cancel(struct request *req, int64_t id, json_t **answer, enum MHD_Result *result)
{
	return owner_change(req, id, BUILD_EV_CANCEL, answer, result);
}

int builds_retry(struct request *req, int64_t id, json_t **answer, enum MHD_Result *result)
{
	return owner_change(req, id, BUILD_EV_RETRY, answer, result);
}

/* POST /api/builds/{id}/cancel and /retry: the job's repo opened for its
 * writer, then the change every caller makes. */
static enum MHD_Result handle_change(struct request *req, enum build_event event)
{
	int64_t id;
	enum MHD_Result result;
	json_t *answer;
	if (load_for_change(req, &id, &result) < 0 ||
	    owner_change(req, id, event, &answer, &result) < 0)
		return result;
	return respond_json(req, 200, answer);
}

static enum MHD_Result handle_cancel(struct request *req)
{
	return handle_change(req, BUILD_EV_CANCEL);
}

static enum MHD_Result handle_retry(struct request *req)
{
	return handle_change(req, BUILD_EV_RETRY);
}

/* The repo's jobs, newest first (state, limit, offset), with the newest
 * commits' matrices (commits, commit_offset); ?commit=: that commit's
 * matrix (api/builds_matrix.c). */
static enum MHD_Result handle_list(struct request *req)
{
	const char *state = request_query(req, "state"), *commit = request_query(req, "commit");
	const char *limit_arg = request_query(req, "limit"), *offset_arg = request_query(req, "offset");
	long limit = limit_arg ? atol(limit_arg) : 50, offset = offset_arg ? atol(offset_arg) : 0;
	enum MHD_Result result;
	if (commit)
		return builds_matrix_answer(req, commit);
	enum build_state named = build_state_named(state);	/* the state machine's names */
	int known = !state || (named != BUILD_STATE_COUNT && named != BUILD_NONE);
	if (!known || limit < 1 || limit > 1000 || offset < 0)
		return respond_error(req, 400, NULL, "state must be queued, running, succeeded, failed, canceled, staged or "
					   "superseded; limit 1 to 1000; offset from 0");
	struct build_rows rows;
	if (db_build_list(req->repo->record.id, state, limit, offset, &rows) < 0)
		return respond_db_unavailable(req);
	json_t *list = json_array();
	for (size_t i = 0; i < rows.count; i++)
		json_array_append_new(list, build_json(&rows.items[i]));
	build_rows_release(&rows);
	json_t *answer = json_pack("{s:o}", "builds", list);
	if (builds_matrices_page(req, answer, &result) < 0) {
		json_decref(answer);
		return result;
	}
	return respond_json(req, 200, answer);
}

static enum MHD_Result handle_workers(struct request *req)
{
	struct worker_row *rows;
	size_t n;
	if (db_worker_list(&rows, &n) < 0)
		return respond_db_unavailable(req);
	json_t *list = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(list, build_worker_json(&rows[i]));
	worker_rows_release(rows, n);
	return respond_json(req, 200, json_pack("{s:o}", "workers", list));
}

/* /api/builds/{id}: routes whose handler checks the job's repo like the
 * repo's own routes (read; write for cancel and retry, anonymous callers
 * answered as repo writes answer them); t0056 has their cells. */
const struct route builds_routes[] = {
	{ METHOD_GET | METHOD_HEAD, "/api/builds/{arg}", handle_get, ROUTE_HANDLER_ACCESS, 0, NULL, ACCESS_PUBLIC },
	{ METHOD_GET | METHOD_HEAD, "/api/builds/{arg}/log", handle_log_read, ROUTE_HANDLER_ACCESS, 0, NULL,
	  ACCESS_PUBLIC },
	{ METHOD_GET | METHOD_HEAD, "/api/builds/{arg}/provenance", handle_provenance, ROUTE_HANDLER_ACCESS, 0, NULL,
	  ACCESS_PUBLIC },
	{ METHOD_GET | METHOD_HEAD, "/api/signing-key", handle_signing_key, 0, 0, NULL, ACCESS_PUBLIC },
	{ METHOD_POST, "/api/builds/{arg}/cancel", handle_cancel, ROUTE_BODY | ROUTE_HANDLER_ACCESS, 0, NULL,
	  ACCESS_PUBLIC },
	{ METHOD_POST, "/api/builds/{arg}/retry", handle_retry, ROUTE_BODY | ROUTE_HANDLER_ACCESS, 0, NULL,
	  ACCESS_PUBLIC },
	{ METHOD_GET | METHOD_HEAD, "/api/kernels/{ns}/{name}/builds", handle_list, 0, REPO_KERNEL, NULL,
	  ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/api/admin/workers", handle_workers, 0, 0, NULL, ACCESS_SITE_ADMIN },
	{ 0, NULL, NULL, 0, 0 },
};
