/* builds_enqueue.c -- POST /api/kernels/{ns}/{name}/builds: the request
 * parsed, the source fetched and its build.toml planned on the work queue
 * (the request waits parked), the variants chosen and queued by the farm
 * (farm/build_variants.c, farm/build_environment.c, farm/build_enqueue.c),
 * the farm's answer turned into the HTTP one. */
#include "api/builds.h"

#include <stdlib.h>
#include <string.h>

/* Room for the farm's reasons, which may quote a source URL. */
#define WHY_MAX 4096

/* A farm failure answered: FARM_EREFUSED is 422, the rest the error
 * table's status, each with why. */
static enum MHD_Result respond_farm(struct request *req, int rc, const char *why)
{
	if (rc == FARM_EREFUSED)
		return respond_error(req, 422, NULL, "%s", why);
	return respond_err(req, rc, "%s", why);
}

/* The answer to a refused enqueue: 429 with Retry-After for a full queue
 * (KHUB_ETOOBIG), 400 for too many variants (KHUB_EINVAL), 503. */
static enum MHD_Result respond_queue_refused(struct request *req, int rc)
{
	const char *refusal = build_queue_refusal() ? build_queue_refusal() : "";
	if (rc == KHUB_ETOOBIG)
		return respond_too_many(req, BUILD_QUEUE_FULL_RETRY_AFTER, "%s", refusal);
	if (rc == KHUB_EINVAL)
		return respond_error(req, 400, NULL, "%s", refusal);
	return respond_db_unavailable(req);
}

int builds_plan(struct request *req, git_repository *git, const char *sha, struct build_plan *out, char *why,
		size_t why_size, enum MHD_Result *result)
{
	char key[FARM_JOB_KEY_MAX];
	struct farm_job job;
	int job_rc = 0, rc = build_plan_lookup(git, sha, out, &job, why, why_size);
	if (rc == 1) {
		memcpy(key, job.key, sizeof(key));
		if (builds_run_job(req, WORK_POOL_PLAN, &job, &job_rc, result) != 0)
			return 1;	/* parked (the handler runs again) or 503 */
		if (job_rc < 0 || build_plan_kept(key, out) < 0) {
			*result = respond_unavailable(req, "the build planner is unavailable; retry later");
			return 1;
		}
	}
	return rc < 0 ? rc : 0;
}

/* The plan of build.toml of sha (planned on the work queue the first time:
 * the request waits parked): 0 with out->doc, or -1 with the answer queued
 * (parked, 422 refused, 500, 503). */
static int plan_for_request(struct request *req, git_repository *git, const char *sha, struct build_plan *out,
			    enum MHD_Result *result)
{
	char why[WHY_MAX];
	int rc = builds_plan(req, git, sha, out, why, sizeof(why), result);
	if (rc == 1)
		return -1;
	if (rc < 0) {
		*result = respond_farm(req, rc, why);
		return -1;
	}
	if (out->refused) {
		*result = respond_error(req, 422, NULL, "%s", out->refused);
		build_plan_release(out);
		return -1;
	}
	return 0;
}

/* The indexed variants of the branch v<N> that the source's build.toml
 * names (none when there is no such branch yet): 0, or -1 with the answer
 * queued (parked while its head is indexed, 503). */
static int version_branch_rows(struct request *req, git_repository *src, const char *sha, struct variant_rows *rows,
			       enum MHD_Result *result)
{
	char head[41];
	memset(rows, 0, sizeof(*rows));
	if (build_version_branch(req->repo->git, src, sha, head) < 0)
		return 0;
	return kernel_variants_load(req, req->repo, head, rows, result) < 0 ? -1 : 0;
}

/* The variant an environment asks for: 0 with *names and *info, or -1 with
 * the answer queued (200 when a published variant already loads there,
 * 400, 422, 503). */
static int environment_variants(struct request *req, json_t *environment, git_repository *src, const char *sha,
				const struct build_plan *plan, char ***names, size_t *n, json_t **info,
				enum MHD_Result *result)
{
	struct build_env_target t;
	struct variant_rows rows;
	char why[WHY_MAX];
	int rc = build_environment_target(environment, plan, &t, why, sizeof(why));
	if (rc < 0) {
		*result = respond_farm(req, rc, why);
		return -1;
	}
	if (version_branch_rows(req, src, sha, &rows, result) < 0)
		return -1;
	rc = build_environment_variants(&t, &rows, names, n, info, why, sizeof(why));
	variant_rows_release(&rows);
	if (rc == 0) {
		*result = respond_json(req, 200, *info);
		*info = NULL;
		return -1;
	}
	if (rc < 0) {
		*result = respond_farm(req, rc, why);
		return -1;
	}
	return 0;
}

/* The required variants the version branch lacks: 0, or -1 answered. */
static int missing_variants(struct request *req, git_repository *src, const char *sha, char ***names, size_t *n,
			    enum MHD_Result *result)
{
	struct variant_rows rows;
	if (version_branch_rows(req, src, sha, &rows, result) < 0)
		return -1;
	build_missing_variants(&rows, names, n);
	variant_rows_release(&rows);
	return 0;
}

/* What the request asks to build, judged against the plan: *names (owned)
 * and what was left out in skipped; -1 when an answer was queued. */
static int requested_variants(struct request *req, json_t *doc, git_repository *src, const char *sha,
			      const struct build_plan *plan, char ***names, size_t *n, json_t **target,
			      json_t *skipped, enum MHD_Result *result)
{
	json_t *variants = json_object_get(doc, "variants"), *environment = json_object_get(doc, "environment");
	char why[WHY_MAX];
	int rc = 0;
	if (environment)
		return environment_variants(req, environment, src, sha, plan, names, n, target, result);
	if (json_is_array(variants)) {
		if ((rc = build_named_variants(variants, names, n, why, sizeof(why))) < 0)
			*result = respond_farm(req, rc, why);
	} else if (json_is_string(variants)) {
		rc = missing_variants(req, src, sha, names, n, result);
	} else if (build_default_variants(plan, names, n, skipped) < 0) {
		*result = respond_db_unavailable(req);
		return -1;
	} else {
		return 0;
	}
	if (rc == 0)
		build_plan_filter(plan, *names, n, skipped);
	return rc < 0 ? -1 : 0;
}

/* The commit of an external source: fetched on the fetch pool (the request
 * waits parked; everything before must be safe to repeat), resolved, with
 * build.toml: 0, or -1 answered (422, 404 RevisionNotFound, 503). */
static int external_commit(struct request *req, const char *url, const char *rev, char sha[41],
			   enum MHD_Result *result)
{
	char why[WHY_MAX];
	struct farm_job job;
	int fetch_rc = 0;
	build_source_fetch_job(url, &job);
	if (builds_run_job(req, WORK_POOL_FETCH, &job, &fetch_rc, result) != 0)
		return -1;
	int rc = build_source_commit(url, rev, fetch_rc, sha, why, sizeof(why));
	if (rc == KHUB_ENOTFOUND)
		*result = respond_error(req, 404, "RevisionNotFound", "%s", why);
	else if (rc < 0)
		*result = respond_farm(req, rc, why);
	return rc < 0 ? -1 : 0;
}

/* The 202 answer {"commit", "builds", "queued", "skipped",
 * "capabilities_left_out", "plan"} (plus where to watch an environment's
 * build), audited; takes builds, skipped, left_out and target. */
static json_t *enqueue_answer(struct request *req, const char *sha, json_t *builds, json_t *skipped,
			      json_t *left_out, const struct build_plan *plan, json_t *target)
{
	char *details = xasprintf("{\"commit\":\"%s\",\"queued\":%zu}", sha, json_array_size(builds));
	api_audit(req, "build.enqueue", repo_audit_target(req, REPO_KERNEL, req->repo->record.ns, req->repo->record.name),
		  details);
	free(details);
	json_t *queued = json_array(), *b;
	size_t i;
	json_array_foreach(builds, i, b)
		json_array_append(queued, json_object_get(b, "variant"));
	json_t *answer = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o}", "commit", sha, "builds", builds, "queued", queued,
				   "skipped", skipped, "capabilities_left_out", left_out, "plan", build_plan_json(plan));
	if (target) {	/* where to watch the build the environment asked for */
		json_t *first = json_array_size(builds) ? json_array_get(builds, 0) : json_array_get(skipped, 0);
		json_int_t id = json_integer_value(json_object_get(first, json_array_size(builds) ? "id" : "build"));
		json_object_update(answer, target);
		json_decref(target);
		if (id > 0) {
			json_object_set_new(answer, "watch", json_sprintf("/api/builds/%lld", (long long)id));
			json_object_set_new(answer, "log", json_sprintf("/api/builds/%lld/log", (long long)id));
		}
	}
	return answer;
}

/* Plan, choose and queue the variants of commit sha (in src): 0 with
 * *status (202 queued, 422 nothing to build) and *answer (owned), or -1
 * with the answer queued (parked, 4xx, 503). */
static int enqueue_commit(struct request *req, json_t *doc, git_repository *src, const char *sha, const char *src_url,
			  const char *src_rev, int *status, json_t **answer, enum MHD_Result *result)
{
	struct build_plan plan;
	char **names = NULL;
	size_t n = 0;
	int force = 0, rc = -1;
	json_t *target = NULL, *skipped = json_array(), *builds = json_array();
	memset(&plan, 0, sizeof(plan));
	json_optional_bool(doc, "force", &force);
	if (plan_for_request(req, src, sha, &plan, result) < 0 ||
	    requested_variants(req, doc, src, sha, &plan, &names, &n, &target, skipped, result) < 0)
		goto cleanup;
	rc = 0;
	if (n == 0 && !json_is_string(json_object_get(doc, "variants"))) {
		*status = 422;
		*answer = json_pack("{s:s, s:O, s:o}", "error", "no variant to build: build.toml and the live workers "
				    "leave none (see skipped)", "skipped", skipped, "plan", build_plan_json(&plan));
		goto cleanup;
	}
	rc = build_enqueue_all(&req->repo->record, sha, names, n, force, req->principal.name, src_url,
			       src_url ? (src_rev ? src_rev : "main") : NULL, builds, skipped);
	if (rc < 0) {
		*result = respond_queue_refused(req, rc);
		rc = -1;
		goto cleanup;
	}
	*status = 202;
	*answer = enqueue_answer(req, sha, builds, skipped, build_plan_left_out(&plan, names, n), &plan, target);
	builds = skipped = target = NULL;
cleanup:
	build_names_free(names, n);
	build_plan_release(&plan);
	json_decref(builds);
	json_decref(skipped);
	json_decref(target);
	return rc;
}

static enum MHD_Result enqueue_planned(struct request *req, json_t *doc, git_repository *src, const char *sha,
				       const char *src_url, const char *src_rev)
{
	enum MHD_Result result;
	json_t *answer = NULL;
	int status = 0;
	if (enqueue_commit(req, doc, src, sha, src_url, src_rev, &status, &answer, &result) < 0)
		return result;
	return respond_json(req, status, answer);
}

int builds_enqueue_default(struct request *req, const char *sha, int *status, json_t **answer,
			   enum MHD_Result *result)
{
	json_t *doc = json_object();
	int rc = enqueue_commit(req, doc, req->repo->git, sha, NULL, NULL, status, answer, result);
	json_decref(doc);
	return rc;
}

static enum MHD_Result handle_enqueue(struct request *req)
{
	enum MHD_Result result;
	json_t *doc = req->json;
	const char *revision = NULL;
	int force = 0;
	json_t *variants = json_object_get(doc, "variants");
	if (json_optional_string(doc, "revision", &revision) < 0 || json_optional_bool(doc, "force", &force) < 0 ||
	    (variants && !json_is_null(variants) && !json_is_array(variants) &&
	     !(json_is_string(variants) && strcmp(json_string_value(variants), "missing") == 0))) {
		return respond_error(req, 400, NULL, "expected {\"revision\": string, \"variants\": [names] | \"missing\", "
					   "\"force\": bool}");
	}
	if (json_object_get(doc, "environment") && variants && !json_is_null(variants))
		return respond_error(req, 400, NULL, "give variants or environment, not both");
	char sha[41];
	const char *src_url = NULL, *src_rev = NULL;
	json_t *source = json_object_get(doc, "source");
	if (source && json_is_object(source) && json_optional_string(source, "url", &src_url) == 0 &&
	    build_source_url_has_userinfo(src_url))
		return respond_error(req, 400, NULL, "source.url must not hold credentials (user:password@ before the "
					   "host): they would be shown to whoever reads the build; a host that needs "
					   "credentials gets the server's (build_source_credentials, docs/build-farm.md)");
	if (source && (!json_is_object(source) || json_optional_string(source, "url", &src_url) < 0 ||
		       json_optional_string(source, "revision", &src_rev) < 0 || !build_source_url_valid(src_url) ||
		       (src_rev && !build_source_revision_valid(src_rev)))) {
		return respond_error(req, 400, NULL, "source must be {\"url\": an http, https or git URL, \"revision\": "
					   "a branch, tag or commit sha}");
	}
	if (!source)
		return repo_resolve_or_respond(req, req->repo, revision ? revision : "main", sha, &result) < 0
			       ? result : enqueue_planned(req, doc, req->repo->git, sha, NULL, NULL);
	if (external_commit(req, src_url, src_rev ? src_rev : "main", sha, &result) < 0)
		return result;
	git_repository *src = NULL;
	if (build_source_open(src_url, &src) < 0)
		return respond_error(req, 500, NULL, "the fetched source is gone");
	result = enqueue_planned(req, doc, src, sha, src_url, src_rev);
	git_repository_free(src);
	return result;
}

const struct route build_enqueue_routes[] = {
	{ METHOD_POST, "/api/kernels/{ns}/{name}/builds", handle_enqueue, ROUTE_JSON, REPO_KERNEL, NULL,
	  ACCESS_REPO_WRITE },
	{ 0, NULL, NULL, 0, 0 },
};
