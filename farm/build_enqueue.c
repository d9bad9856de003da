/* build_enqueue.c -- which variants a build request means (the required
 * list, what live workers can build, what a revision misses; judged
 * against build.toml by api/build_plan.c) and POST
 * /api/kernels/{ns}/{name}/builds. */
#include "api/builds.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- the required list ---------------------------------------------------------- */

static struct required_variants configured_list;
static int configured_ok;
static pthread_once_t configured_once = PTHREAD_ONCE_INIT;

static void load_configured_list(void)
{
	const char *path = api_ctx.builds.variants_file;
	char why[200];
	if (!path || !path[0])
		return;
	size_t len = 0;
	char *text = read_file_limited(path, 4 * 1024 * 1024, &len);
	if (!text)
		log_error("build_variants %s: cannot read it; the official list is used", path);
	else if (required_variants_parse(text, len, &configured_list, why, sizeof(why)) < 0)
		log_error("build_variants %s: %s; the official list is used", path, why);
	else
		configured_ok = 1;
	free(text);
}

const struct required_variants *build_required_list(void)
{
	pthread_once(&configured_once, load_configured_list);
	return configured_ok ? &configured_list : kernel_required_variants();
}

void build_names_free(char **names, size_t n)
{
	free_strings(names, n);
}

int build_worker_offers(char ***live, size_t *nlive, char ***stale, size_t *nstale)
{
	struct db_rows rows;
	*live = *stale = NULL;
	*nlive = *nstale = 0;
	if (db_worker_variants(api_ctx.builds.worker_live_seconds, &rows) < 0)
		return KHUB_EDB;
	*live = xcalloc(rows.count + 1, sizeof(char *));
	*stale = xcalloc(rows.count + 1, sizeof(char *));
	for (size_t i = 0; i < rows.count; i++) {
		if (db_rows_get(&rows, i, 1)[0] == 't')
			(*live)[(*nlive)++] = xstrdup(db_rows_get(&rows, i, 0));
		else
			(*stale)[(*nstale)++] = xstrdup(db_rows_get(&rows, i, 0));
	}
	db_rows_release(&rows);
	return 0;
}

int build_worker_variants(char ***names, size_t *n)
{
	char **stale;
	size_t nstale;
	int rc = build_worker_offers(names, n, &stale, &nstale);
	build_names_free(stale, nstale);
	return rc;
}

int build_names_contain(char *const *names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return 1;
	return 0;
}

int build_default_variants(const struct build_plan *plan, char ***names, size_t *n, json_t *skipped)
{
	char **live, **stale;
	size_t nlive, nstale;
	if (build_worker_offers(&live, &nlive, &stale, &nstale) < 0)
		return KHUB_EDB;
	build_plan_default(plan, live, nlive, stale, nstale, build_required_list(), names, n, skipped);
	build_names_free(live, nlive);
	build_names_free(stale, nstale);
	return 0;
}

int build_enqueue_all(const struct repo_record *rec, const char *commit, char *const *variants, size_t n, int force,
		      const char *requested_by, const char *source_url, const char *source_revision, json_t *builds,
		      json_t *skipped)
{
	struct build_request r = { rec->id, commit, force, (int)api_ctx.builds.max_attempts, requested_by, source_url,
				   source_revision };
	int queued = 0, rc = build_queue_begin(n);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		enum build_enqueue_outcome outcome;
		int64_t id = 0;
		if ((rc = db_build_enqueue(&r, variants[i], &outcome, &id)) < 0)
			break;
		if (outcome == BUILD_ENQUEUED) {
			queued++;
			struct db_rows rows;
			if (builds && db_build_get(id, &rows) == 0) {
				json_array_append_new(builds, build_json(&rows, 0));
				db_rows_release(&rows);
			}
		} else if (skipped) {
			json_array_append_new(skipped, json_pack("{s:s, s:s, s:I}", "variant", variants[i], "reason",
								 outcome == BUILD_SKIP_ACTIVE ? "already queued or running"
								 : "already built (force to rebuild)", "build", (json_int_t)id));
		}
	}
	if ((rc = build_queue_end(rec, requested_by, rc)) == 0 && queued)
		request_wake(BUILD_QUEUE_WAKE_KEY);
	return rc;
}

/* ---- POST /api/kernels/{ns}/{name}/builds ------------------------------------------ */

/* The required variants that the branch v<N> the source's build.toml
 * names lacks (compliance of its head; all of them when there is no such
 * branch yet). src is the git store of the source commit. */
int build_version_branch_variants(struct request *req, git_repository *src, const char *source_sha,
				  struct variant_rows *rows, enum MHD_Result *result)
{
	char *toml = repo_read_text_file(src, source_sha, "build.toml", 1024 * 1024);
	long version = toml ? build_toml_version(toml) : -1;
	free(toml);
	char branch[32], head[41];
	memset(rows, 0, sizeof(*rows));
	snprintf(branch, sizeof(branch), "refs/heads/v%ld", version < 1 ? 1 : version);
	if (repo_ref_read(req->repo->git, branch, head) == 0 &&
	    kernel_variants_load(req, req->repo, head, rows, result) < 0)
		return -1;
	return 0;
}

static int missing_variants(struct request *req, git_repository *src, const char *source_sha, char ***names,
			    size_t *n, enum MHD_Result *result)
{
	struct variant_rows rows;
	if (build_version_branch_variants(req, src, source_sha, &rows, result) < 0)
		return -1;
	struct variant_presence *have = xcalloc(rows.count + 1, sizeof(*have));
	for (size_t i = 0; i < rows.count; i++) {
		have[i].name = rows.items[i].name;
		have[i].metadata_ok = rows.items[i].metadata_status == VARIANT_METADATA_OK;
	}
	struct compliance c;
	compliance_compute(build_required_list(), have, rows.count, &c);
	size_t cap = 0;
	for (size_t g = 0; g < c.ngroups; g++)
		cap += c.groups[g].nmissing + c.groups[g].ninvalid;
	*names = xcalloc(cap + 1, sizeof(char *));
	*n = 0;
	for (size_t g = 0; g < c.ngroups; g++) {
		const struct compliance_group *grp = &c.groups[g];
		for (size_t k = 0; k < grp->nmissing + grp->ninvalid; k++) {
			const char *name = k < grp->nmissing ? grp->missing[k] : grp->invalid_metadata[k - grp->nmissing];
			if (!build_names_contain(*names, *n, name))
				(*names)[(*n)++] = xstrdup(name);
		}
	}
	compliance_release(&c);
	free(have);
	variant_rows_release(&rows);
	return 0;
}

static int commit_has_build_toml(git_repository *git, const char *sha)
{
	struct tree_entry st;
	memset(&st, 0, sizeof(st));
	int rc = repo_stat_path(git, sha, "build.toml", &st);
	int found = rc == 0 && !st.is_dir;
	if (rc == 0)
		tree_entry_release(&st);
	return found;
}

/* The commit of an external source: fetched (the request waits parked;
 * everything before must be safe to repeat), resolved, with build.toml. */
static int external_commit(struct request *req, const char *url, const char *rev, char sha[41],
			   enum MHD_Result *result)
{
	int fetch_rc = 0, rc = build_source_fetch(req, url, &fetch_rc, result);
	if (rc != 0)
		return -1;
	git_repository *git = NULL;
	if (fetch_rc < 0 || build_source_open(url, &git) < 0) {
		char why[300];
		build_source_fetch_error(url, why, sizeof(why));
		*result = respond_error(req, 422, NULL, "cannot fetch %s%s%s", url, why[0] ? ": " : "", why);
		return -1;
	}
	rc = build_source_resolve(git, rev, sha);
	int has_toml = rc == 0 && commit_has_build_toml(git, sha);
	git_repository_free(git);
	if (rc < 0) {
		*result = respond_error(req, 404, "RevisionNotFound", "%s has no branch, tag or commit %s", url, rev);
		return -1;
	}
	if (!has_toml) {
		*result = respond_error(req, 422, NULL, "%s at %s has no build.toml at its root: nothing to build", url, rev);
		return -1;
	}
	return 0;
}

/* The variants named in the request, checked as names: 0, or -1 with a 400
 * queued. */
static int named_variants(struct request *req, json_t *variants, char ***names, size_t *n, enum MHD_Result *result)
{
	size_t i;
	json_t *v;
	*names = xcalloc(json_array_size(variants) + 1, sizeof(char *));
	*n = 0;
	json_array_foreach(variants, i, v) {
		struct variant_name parsed;
		const char *why = NULL;
		if (!json_is_string(v) || variant_name_parse(json_string_value(v), &parsed, &why) < 0) {
			build_names_free(*names, *n);
			*names = NULL;
			*n = 0;
			*result = respond_error(req, 400, NULL, "variants[%zu] is not a build variant name%s%s", i,
						why ? ": " : "", why ? why : "");
			return -1;
		}
		if (!build_names_contain(*names, *n, json_string_value(v)))
			(*names)[(*n)++] = xstrdup(json_string_value(v));
	}
	return 0;
}

/* What the request asks to build, judged against the plan: *names (owned)
 * and what was left out in skipped; -1 when an answer was queued. */
static int requested_variants(struct request *req, json_t *doc, git_repository *src, const char *sha,
			      const struct build_plan *plan, char ***names, size_t *n, json_t **target,
			      json_t *skipped, enum MHD_Result *result)
{
	json_t *variants = json_object_get(doc, "variants"), *environment = json_object_get(doc, "environment");
	int rc = 0;
	if (environment)
		return build_environment_variants(req, environment, src, sha, plan, names, n, target, result) < 0 ? -1 : 0;
	if (json_is_array(variants))
		rc = named_variants(req, variants, names, n, result);
	else if (json_is_string(variants))
		rc = missing_variants(req, src, sha, names, n, result);
	else if (build_default_variants(plan, names, n, skipped) < 0) {
		*result = respond_db_unavailable(req);
		return -1;
	} else
		return 0;
	if (rc == 0)
		build_plan_filter(plan, *names, n, skipped);
	return rc;
}

/* 202 {"commit", "builds", "queued", "skipped", "plan"} (plus where to
 * watch an environment's build). */
static enum MHD_Result enqueue_answer(struct request *req, const char *sha, json_t *builds, json_t *skipped,
				      const struct build_plan *plan, json_t *target)
{
	char *details = xasprintf("{\"commit\":\"%s\",\"queued\":%zu}", sha, json_array_size(builds));
	api_audit(req, "build.enqueue", repo_audit_target(req, REPO_KERNEL, req->repo->record.ns, req->repo->record.name),
		  details);
	free(details);
	json_t *queued = json_array(), *b;
	size_t i;
	json_array_foreach(builds, i, b)
		json_array_append(queued, json_object_get(b, "variant"));
	json_t *answer = json_pack("{s:s, s:o, s:o, s:o, s:o}", "commit", sha, "builds", builds, "queued", queued,
				   "skipped", skipped, "plan", build_plan_json(plan));
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
	return respond_json(req, 202, answer);
}

/* Plan, choose and queue the variants of commit sha (in src). */
static enum MHD_Result enqueue_planned(struct request *req, json_t *doc, git_repository *src, const char *sha,
				       const char *src_url, const char *src_rev)
{
	enum MHD_Result result;
	struct build_plan plan;
	char **names = NULL;
	size_t n = 0;
	int force = 0;
	json_t *target = NULL, *skipped = json_array(), *builds = json_array();
	json_optional_bool(doc, "force", &force);
	if (build_plan_load(req, src, sha, &plan, &result) < 0 ||
	    requested_variants(req, doc, src, sha, &plan, &names, &n, &target, skipped, &result) < 0)
		goto cleanup;
	if (n == 0 && !json_is_string(json_object_get(doc, "variants"))) {
		json_t *answer = json_pack("{s:s, s:O, s:o}", "error", "no variant to build: build.toml and the live "
					   "workers leave none (see skipped)", "skipped", skipped, "plan", build_plan_json(&plan));
		result = respond_json(req, 422, answer);
		goto cleanup;
	}
	int rc = build_enqueue_all(&req->repo->record, sha, names, n, force, req->principal.name, src_url,
				   src_url ? (src_rev ? src_rev : "main") : NULL, builds, skipped);
	if (rc < 0) {
		result = build_queue_respond_refused(req, rc);
		goto cleanup;
	}
	result = enqueue_answer(req, sha, builds, skipped, &plan, target);
	builds = skipped = target = NULL;
cleanup:
	build_names_free(names, n);
	build_plan_release(&plan);
	json_decref(builds);
	json_decref(skipped);
	json_decref(target);
	return result;
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
