/* kernel_variants.c -- a kernel revision's build variants from the variant
 * index: GET /api/kernels/{ns}/{name}/variants (with compatible=true: what
 * the kernels loader would load for a given client, best first, and why
 * every other variant is rejected), .../metadata/{variant}, and
 * .../compliance against the required build-variant list (data/). */
#include "api/api.h"
#include "farm/farm.h"
#include "kernel/kernel.h"
#include "storage/db/variant_index.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared with kernels.c ------------------------------------------------ */

/* The revision a request names: revision=, else version=N (branch vN), else
 * main. The string lives as long as the request. */
static const char *requested_revision(struct request *req)
{
	const char *rev = request_query(req, "revision");
	if (rev && rev[0])
		return rev;
	const char *version = request_query(req, "version");
	if (version && version[0])
		return request_own(req, xasprintf("v%s", version));
	return "main";
}

/* Indexing a commit reads every variant's files: a background job. A commit
 * found unindexed was written behind khub's back (git plumbing): the repo's
 * branch heads are recorded again too, so listings see its branches. */
struct index_job {
	int64_t repo_id;
	enum repo_type type;
	char *ns, *name;
	char sha[41];
};

static int index_job_run(void *arg)
{
	struct index_job *j = arg;
	git_repository *git = NULL;
	int rc = repo_store_open(api_ctx.repo_root, j->type, j->ns, j->name, &git);
	if (rc == 0)
		rc = variant_index_update(j->repo_id, git, j->sha);
	git_repository_free(git);
	return rc;
}

static void index_job_free(void *arg)
{
	struct index_job *j = arg;
	free(j->ns);
	free(j->name);
	free(j);
}

int kernel_variants_load(struct request *req, struct repo_handle *h, const char *sha, struct variant_rows *rows,
			 enum MHD_Result *result)
{
	int rc = variant_index_current(h->record.id, h->git, sha);
	if (rc == 0) {
		struct index_job *j = xcalloc(1, sizeof(*j));
		j->repo_id = h->record.id;
		j->type = h->record.type;
		j->ns = xstrdup(h->record.ns);
		j->name = xstrdup(h->record.name);
		snprintf(j->sha, sizeof(j->sha), "%s", sha);
		char key[96];
		snprintf(key, sizeof(key), "index|%lld|%s", (long long)h->record.id, sha);
		int wrc = work_queue_run(req, key, index_job_run, j, index_job_free, &rc, result);
		if (wrc != 0)
			return -1;	/* parked (*result is MHD_YES) or answered */
	}
	if (rc >= 0)
		rc = variant_index_load(h->record.id, sha, rows);
	if (rc < 0) {
		*result = respond_error(req, 503, NULL, "the variant index is unavailable");
		return -1;
	}
	return 0;
}

/* ---- one variant as JSON -------------------------------------------------- */

static json_t *version_text(long major, long minor)
{
	if (major < 0)
		return json_null();
	char buf[48];
	snprintf(buf, sizeof(buf), "%ld.%ld", major, minor);
	return json_string(buf);
}

/* The name's parts: kind, framework, backend, arch, os. */
static void add_name_parts(json_t *obj, const char *name)
{
	struct variant_name v;
	const char *why = NULL;
	if (variant_name_parse(name, &v, &why) < 0) {
		json_object_set_new(obj, "valid", json_false());
		json_object_set_new(obj, "error", json_string(why));
		return;
	}
	json_object_set_new(obj, "valid", json_true());
	int noarch = v.framework == VARIANT_TORCH_NOARCH;
	json_object_set_new(obj, "kind", json_string(noarch ? "noarch" : "arch"));
	json_object_set_new(obj, "framework",
			    json_pack("{s:s, s:o, s:o}", "name", variant_framework_name(v.framework), "version",
				      version_text(v.framework_major, v.framework_minor), "cxxAbi",
				      v.cxx11_abi < 0 ? json_null() : json_string(v.cxx11_abi ? "cxx11" : "cxx98")));
	json_object_set_new(obj, "backend",
			    json_pack("{s:s, s:o, s:s}", "name", v.backend, "version",
				      version_text(v.backend_major, v.backend_minor), "variant", v.backend_tag));
	json_object_set_new(obj, "arch", noarch ? json_null() : json_string(v.arch));
	json_object_set_new(obj, "os", noarch ? json_null() : json_string(v.os));
}

/* {"status", "error"?, "id", "name", "version", "license", "backend",
 * "pythonDepends"} from the stored document. */
static json_t *metadata_summary(const struct variant_row *r)
{
	json_t *m = json_pack("{s:s}", "status", variant_metadata_status_name(r->metadata_status));
	if (r->metadata_error)
		json_object_set_new(m, "error", json_string(r->metadata_error));
	json_t *doc = r->metadata ? json_loads(r->metadata, 0, NULL) : NULL;
	if (json_is_object(doc)) {
		static const struct { const char *from, *to; } keys[] = {
			{ "id", "id" }, { "name", "name" }, { "version", "version" }, { "license", "license" },
			{ "backend", "backend" }, { "python-depends", "pythonDepends" },
			{ "python-depends-backends", "pythonDependsBackends" },
		};
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			json_t *v = json_object_get(doc, keys[i].from);
			if (v)
				json_object_set(m, keys[i].to, v);
		}
	}
	json_decref(doc);
	return m;
}

json_t *kernel_variant_json(const struct variant_row *r)
{
	json_t *obj = json_pack("{s:s}", "name", r->name);
	add_name_parts(obj, r->name);
	json_object_set_new(obj, "files", json_integer(r->file_count));
	json_object_set_new(obj, "size", json_integer(r->total_size));
	json_object_set_new(obj, "metadata", metadata_summary(r));
	json_t *warnings = r->warnings ? json_loads(r->warnings, 0, NULL) : NULL;
	json_object_set_new(obj, "warnings", json_is_array(warnings) ? warnings : json_array());
	if (!json_is_array(warnings))
		json_decref(warnings);
	return obj;
}

/* ---- GET /api/kernels/{ns}/{name}/variants ------------------------------- */

static const char *query_value(void *ctx, const char *key)
{
	return request_query(ctx, key);
}

/* The client environment from the query; on failure 400 is queued. */
static int environment_from_query(struct request *req, struct variant_env *env, enum MHD_Result *result)
{
	char why[2048];
	if (kernel_environment_parse(query_value, req, env, why, sizeof(why)) == 0)
		return 0;
	*result = respond_error(req, 400, NULL, "%s", why);
	return -1;
}

static json_t *environment_json(const struct variant_env *env)
{
	char tag[48];
	variant_env_backend_tag(env, tag, sizeof(tag));
	return json_pack("{s:o, s:s, s:o, s:s, s:s, s:s, s:o, s:o, s:o, s:b}",
			 "torch", version_text(env->torch_major, env->torch_minor),
			 "backend", env->backend,
			 "backendVersion", env->backend_major >= 0 ? json_string(env->backend_version_text) : json_null(),
			 "backendVariant", tag,
			 "arch", env->cpu,
			 "os", env->os,
			 "cxx11Abi", env->cxx11_abi < 0 ? json_null() : json_boolean(env->cxx11_abi),
			 "macos", env->macos_major >= 0 ? json_string(env->macos_text) : json_null(),
			 "tvmFfi", version_text(env->tvm_ffi_major, env->tvm_ffi_minor),
			 "freeThreaded", env->free_threaded);
}

/* Accepted variants best first, rejected ones with the loader's reason:
 * the answer of .../variants?compatible=true and of the kernel page's "Will
 * it load for me?" (web/pages_kernel.c). */
void kernel_compatibility_add(json_t *body, const struct variant_rows *rows, const struct variant_env *env)
{
	size_t n = rows->count, nvalid = 0;
	struct variant_name *parsed = xcalloc(n ? n : 1, sizeof(*parsed));
	const char **names = xcalloc(n ? n : 1, sizeof(*names));
	const struct variant_row **valid_rows = xcalloc(n ? n : 1, sizeof(*valid_rows));
	struct variant_decision *decisions = xcalloc(n ? n : 1, sizeof(*decisions));
	json_t *accepted = json_array(), *rejected = json_array(), *warnings = json_array();

	for (size_t i = 0; i < n; i++) {
		const char *why = NULL;
		if (variant_name_parse(rows->items[i].name, &parsed[nvalid], &why) < 0) {
			char *reason = xasprintf("invalid build variant name (%s): the loader skips it", why);
			json_array_append_new(rejected, json_pack("{s:s, s:s}", "name", rows->items[i].name, "reason",
								  reason));
			free(reason);
			continue;
		}
		names[nvalid] = rows->items[i].name;
		valid_rows[nvalid++] = &rows->items[i];
	}
	variant_resolve(parsed, names, nvalid, env, decisions);
	json_t *invalid = rejected;
	rejected = json_array();
	for (size_t i = 0; i < nvalid; i++) {
		const struct variant_row *r = valid_rows[decisions[i].index];
		if (decisions[i].accepted) {
			json_t *obj = kernel_variant_json(r);
			json_object_set_new(obj, "rank", json_integer((json_int_t)json_array_size(accepted) + 1));
			json_array_append_new(accepted, obj);
		} else {
			json_array_append_new(rejected, json_pack("{s:s, s:s}", "name", r->name, "reason",
								  decisions[i].reason));
		}
	}
	json_array_extend(rejected, invalid);
	json_decref(invalid);
	const struct variant_row *best = nvalid && decisions[0].accepted ? valid_rows[decisions[0].index] : NULL;
	if (best && best->metadata_status != VARIANT_METADATA_OK) {
		char *w = xasprintf("the loader picks %s, whose metadata.json is %s (%s): get_kernel fails for it "
				    "(kernels reads the chosen variant's metadata.json and does not fall back to the next "
				    "one)", best->name, variant_metadata_status_name(best->metadata_status),
				    best->metadata_error ? best->metadata_error : "no reason recorded");
		json_array_append_new(warnings, json_string(w));
		free(w);
	}
	if (best) {
		char canonical[2 * VARIANT_NAME_MAX];
		variant_name_format(&parsed[decisions[0].index], canonical, sizeof(canonical));
		if (strcmp(canonical, best->name) != 0) {
			char *w = xasprintf("the loader picks %s but downloads build/%s/, which this revision does not "
					    "have", best->name, canonical);
			json_array_append_new(warnings, json_string(w));
			free(w);
		}
	}
	json_object_set_new(body, "environment", environment_json(env));
	json_object_set_new(body, "selected", best ? json_string(best->name) : json_null());
	json_object_set_new(body, "variants", accepted);
	json_object_set_new(body, "rejected", rejected);
	json_object_set_new(body, "warnings", warnings);
	free(decisions);
	free(valid_rows);
	free(names);
	free(parsed);
}

/* The request's repo (h) and the indexed variants of rev (resolved to sha):
 * 0, or -1 with the answer queued. */
static int variants_at(struct request *req, const char *rev, struct repo_handle *h, char sha[41],
		       struct variant_rows *rows, enum MHD_Result *result)
{
	*h = *req->repo;
	if (repo_resolve_or_respond(req, h, rev, sha, result) < 0)
		return -1;
	return kernel_variants_load(req, h, sha, rows, result);
}

static enum MHD_Result handle_variants(struct request *req)
{
	struct repo_handle h;
	struct variant_rows rows;
	struct variant_env env;
	enum MHD_Result result;
	char sha[41], id[2 * REPO_NAME_MAX + 2];
	int compatible = request_query_bool(req, "compatible", 0);
	if (compatible && environment_from_query(req, &env, &result) < 0)
		return result;
	const char *rev = requested_revision(req);
	if (variants_at(req, rev, &h, sha, &rows, &result) < 0)
		return result;
	snprintf(id, sizeof(id), "%s/%s", h.record.ns, h.record.name);
	json_t *body = json_pack("{s:s, s:s, s:s}", "id", id, "revision", rev, "sha", sha);
	if (compatible) {
		kernel_compatibility_add(body, &rows, &env);
	} else {
		json_t *list = json_array();
		for (size_t i = 0; i < rows.count; i++)
			json_array_append_new(list, kernel_variant_json(&rows.items[i]));
		json_object_set_new(body, "variants", list);
	}
	variant_rows_release(&rows);
	return respond_json(req, 200, body);
}

/* ---- GET /api/kernels/{ns}/{name}/metadata/{variant} ---------------------- */

static enum MHD_Result handle_metadata(struct request *req)
{
	struct repo_handle h;
	struct variant_rows rows;
	enum MHD_Result result;
	char sha[41];
	const char *variant = req->args[0];
	const char *rev = requested_revision(req);
	if (variants_at(req, rev, &h, sha, &rows, &result) < 0)
		return result;
	const struct variant_row *r = NULL;
	for (size_t i = 0; i < rows.count && !r; i++)
		if (strcmp(rows.items[i].name, variant) == 0)
			r = &rows.items[i];
	if (!r) {
		char *path = xasprintf("build/%s", variant);
		result = respond_entry_not_found(req, sha, path);
		free(path);
		variant_rows_release(&rows);
		return result;
	}
	json_t *body = json_pack("{s:s, s:s, s:s}", "variant", r->name, "revision", rev, "sha", sha);
	add_name_parts(body, r->name);
	json_object_set_new(body, "status", json_string(variant_metadata_status_name(r->metadata_status)));
	json_object_set_new(body, "error", r->metadata_error ? json_string(r->metadata_error) : json_null());
	json_t *doc = r->metadata ? json_loads(r->metadata, 0, NULL) : NULL;
	json_object_set_new(body, "metadata", doc ? doc : json_null());
	json_t *summary = metadata_summary(r);
	json_object_del(summary, "status");
	json_object_del(summary, "error");
	json_object_set_new(body, "parsed", r->metadata_status == VARIANT_METADATA_OK ? summary : json_null());
	if (r->metadata_status != VARIANT_METADATA_OK)
		json_decref(summary);
	json_t *warnings = r->warnings ? json_loads(r->warnings, 0, NULL) : NULL;
	json_object_set_new(body, "warnings", warnings ? warnings : json_array());
	json_object_set_new(body, "files", json_integer(r->file_count));
	json_object_set_new(body, "size", json_integer(r->total_size));
	variant_rows_release(&rows);
	return respond_json(req, 200, body);
}

/* ---- GET /api/kernels/{ns}/{name}/compliance ------------------------------ */

static json_t *string_array(const char *const *items, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(items[i]));
	return a;
}

/* One revision against the list (kernel/compliance.c), as JSON. */
json_t *kernel_compliance_json(const struct variant_rows *rows)
{
	struct compliance c;
	struct variant_presence *have = xcalloc(rows->count ? rows->count : 1, sizeof(*have));
	for (size_t i = 0; i < rows->count; i++) {
		have[i].name = rows->items[i].name;
		have[i].metadata_ok = rows->items[i].metadata_status == VARIANT_METADATA_OK;
	}
	compliance_compute(kernel_required_variants(), have, rows->count, &c);
	json_t *groups = json_array(), *compliant_with = json_array();
	for (size_t i = 0; i < c.ngroups; i++) {
		const struct compliance_group *g = &c.groups[i];
		json_array_append_new(groups, json_pack("{s:s, s:s, s:I, s:o, s:o, s:o, s:b, s:b}", "system", g->system,
							"backend", g->backend, "required", (json_int_t)g->required,
							"present", string_array(g->present, g->npresent), "missing",
							string_array(g->missing, g->nmissing), "invalidMetadata",
							string_array(g->invalid_metadata, g->ninvalid), "compliant",
							g->compliant, "targeted", g->targeted));
		if (g->compliant) {
			char *label = xasprintf("%s %s", g->backend, g->system);
			json_array_append_new(compliant_with, json_string(label));
			free(label);
		}
	}
	json_t *body = json_pack("{s:b, s:o, s:o, s:{s:o, s:o, s:b}}", "compliant", c.compliant, "compliantWith",
				 compliant_with, "groups", groups, "pythonOnly", "accepted",
				 string_array((const char *const *)c.python_accepted, c.npython_accepted), "present",
				 string_array(c.python_present, c.npython_present), "compliant", c.python_compliant);
	compliance_release(&c);
	free(have);
	return body;
}

static int version_number(const char *branch)
{
	if (branch[0] != 'v' || !branch[1] || strspn(branch + 1, "0123456789") != strlen(branch + 1) ||
	    strlen(branch) > 10)
		return -1;
	return atoi(branch + 1);
}

static int compare_version_refs(const void *a, const void *b)
{
	return version_number(((const struct ref_item *)a)->name) - version_number(((const struct ref_item *)b)->name);
}

int kernel_version_branches(git_repository *git, struct ref_list *out)
{
	int rc = repo_list_refs(git, out);
	if (rc < 0)
		return rc;
	size_t kept = 0;
	for (size_t i = 0; i < out->count; i++) {
		struct ref_item *r = &out->items[i];
		if (r->kind == REF_BRANCH && version_number(r->name) >= 0) {
			out->items[kept++] = *r;
		} else {
			free(r->name);
			free(r->ref);
		}
	}
	out->count = kept;
	qsort(out->items, out->count, sizeof(*out->items), compare_version_refs);
	return 0;
}

static enum MHD_Result handle_compliance(struct request *req)
{
	struct repo_handle h;
	struct ref_list refs = { 0 };
	enum MHD_Result result;
	char id[2 * REPO_NAME_MAX + 2];
	const char *only = request_query(req, "revision");
	h = *req->repo;
	if (only) {
		char sha[41];
		if (repo_resolve_or_respond(req, &h, only, sha, &result) < 0)
			return result;
		refs.items = xcalloc(1, sizeof(*refs.items));
		refs.items[0].name = xstrdup(only);
		refs.items[0].ref = xstrdup(only);
		memcpy(refs.items[0].sha, sha, 41);
		refs.count = 1;
	} else if (kernel_version_branches(h.git, &refs) < 0) {
		return respond_error(req, 500, NULL, "cannot read refs");
	}
	json_t *versions = json_array();
	for (size_t i = 0; i < refs.count; i++) {
		struct variant_rows rows;
		if (kernel_variants_load(req, &h, refs.items[i].sha, &rows, &result) < 0) {
			json_decref(versions);
			ref_list_release(&refs);
			return result;
		}
		json_t *c = kernel_compliance_json(&rows);
		json_object_set_new(c, "revision", json_string(refs.items[i].name));
		json_object_set_new(c, "sha", json_string(refs.items[i].sha));
		json_array_append_new(versions, c);
		variant_rows_release(&rows);
	}
	ref_list_release(&refs);
	snprintf(id, sizeof(id), "%s/%s", h.record.ns, h.record.name);
	return respond_json(req, 200, json_pack("{s:s, s:o}", "id", id, "versions", versions));
}

const struct route kernel_variants_routes[] = {
	{ METHOD_GET | METHOD_HEAD, "/api/kernels/{ns}/{name}/variants", handle_variants, 0, REPO_KERNEL,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/api/kernels/{ns}/{name}/metadata/{arg}", handle_metadata, 0, REPO_KERNEL,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/api/kernels/{ns}/{name}/compliance", handle_compliance, 0, REPO_KERNEL,
	  NULL, ACCESS_REPO_READ },
	{ 0, NULL, NULL, 0, 0 },
};
