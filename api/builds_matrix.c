/* builds_matrix.c -- build matrices (docs/build-farm.md, "The build
 * matrix"): a commit's newest job per variant, with what build.toml allows
 * that no live toolchain builds, and the newest commits' matrices. GET
 * /api/kernels/{ns}/{name}/builds answers them, and the web UI's builds
 * pages and kernel page render the same JSON (api.h: one implementation). */
#include "api/builds.h"

#include <stdlib.h>
#include <string.h>

#define MATRIX_WHY_MAX 4096
#define MATRIX_COMMITS_DEFAULT 10
#define MATRIX_COMMITS_MAX 100

/* One variant's cell: BUILD (without its ABI report: GET /api/builds/{id}
 * has it) with "status", "duration_seconds", "log" and "log_page". */
static json_t *matrix_cell(const struct repo_record *r, const struct build_row *b)
{
	json_t *c = build_json(b);
	long long id = (long long)b->id;
	json_object_del(c, "abi_report");
	json_object_set_new(c, "status", json_string(build_state_status_of_kind(build_state_named(b->state), b->benchmark)));
	json_object_set_new(c, "duration_seconds", b->has_duration ? json_integer((json_int_t)b->duration)
				: json_null());
	json_object_set_new(c, "log", json_sprintf("/api/builds/%lld/log", id));
	json_object_set_new(c, "log_page", json_sprintf("/kernels/%s/%s/builds/%lld/log", r->ns, r->name, id));
	return c;
}

/* {"commit", "url" (its builds page), "variants": [], "benchmarks": []} */
static json_t *matrix_empty(const struct repo_record *r, const char *commit)
{
	return json_pack("{s:s, s:o, s:[], s:[]}", "commit", commit, "url",
			 json_sprintf("/kernels/%s/%s/builds?commit=%s", r->ns, r->name, commit), "variants",
			 "benchmarks");
}

/* Each matrix of list gets its commit's benchmark jobs in "benchmarks"
 * (kind "benchmark", with "device"): they are no variant's build state. */
static int attach_benchmark_jobs(const struct repo_record *r, const char *commit, long limit, long offset,
				 json_t *list)
{
	struct build_rows rows;
	json_t *m;
	size_t i;
	if (db_build_matrix_benchmarks(r->id, commit, limit, offset, &rows) < 0)
		return KHUB_EDB;
	json_array_foreach(list, i, m) {
		const char *c = json_string_value(json_object_get(m, "commit"));
		for (size_t k = 0; k < rows.count; k++)
			if (strcmp(rows.items[k].commit, c) == 0)
				json_array_append_new(json_object_get(m, "benchmarks"), matrix_cell(r, &rows.items[k]));
	}
	build_rows_release(&rows);
	return 0;
}

/* Each matrix of list whose commit a farm benchmark run found slower than
 * the version before gets "benchmark_regressions" (the rows of
 * benchmark_regressions_json); none: the key is left out. */
static int attach_regressions(const struct repo_record *r, const char *commit, json_t *list)
{
	json_t *regs, *m, *reg;
	size_t i, k;
	if (benchmark_regressions_json(r->id, commit, &regs) < 0)
		return KHUB_EDB;
	json_array_foreach(list, i, m) {
		json_t *mine = json_array();
		json_array_foreach(regs, k, reg)
			if (strcmp(json_string_value(json_object_get(reg, "commit")),
				   json_string_value(json_object_get(m, "commit"))) == 0)
				json_array_append(mine, reg);
		if (json_array_size(mine))
			json_object_set(m, "benchmark_regressions", mine);
		json_decref(mine);
	}
	json_decref(regs);
	return 0;
}

int builds_matrices(struct request *req, const char *commit, long limit, long offset, json_t **out)
{
	struct build_rows rows;
	const struct repo_record *r = &req->repo->record;
	json_t *m = NULL;
	const char *at = "";
	if (db_build_matrices(r->id, commit, limit, offset, &rows) < 0)
		return KHUB_EDB;
	*out = json_array();
	for (size_t i = 0; i < rows.count; i++) {
		const char *c = rows.items[i].commit;
		if (!m || strcmp(c, at) != 0) {	/* rows come grouped by commit */
			m = matrix_empty(r, c);
			json_array_append_new(*out, m);
			at = c;
		}
		json_array_append_new(json_object_get(m, "variants"), matrix_cell(r, &rows.items[i]));
	}
	build_rows_release(&rows);
	if (json_array_size(*out) &&
	    (attach_benchmark_jobs(r, commit, limit, offset, *out) < 0 || attach_regressions(r, commit, *out) < 0)) {
		json_decref(*out);
		*out = NULL;
		return KHUB_EDB;
	}
	return 0;
}

/* Add to m what the plan of sha's build.toml says: "plan" and
 * "unbuildable" (or "plan_refused" with why): 0, or -1 answered (parked,
 * 503). */
static int matrix_plan(struct request *req, const char *sha, json_t *m, enum MHD_Result *result)
{
	struct build_plan plan;
	char why[MATRIX_WHY_MAX];
	json_t *unbuildable = json_array();
	memset(&plan, 0, sizeof(plan));
	int rc = builds_plan(req, req->repo->git, sha, &plan, why, sizeof(why), result);
	if (rc == 1) {
		json_decref(unbuildable);
		return -1;
	}
	if (rc == 0 && plan.doc && build_unbuildable_variants(&plan, unbuildable) < 0) {
		build_plan_release(&plan);
		json_decref(unbuildable);
		*result = respond_db_unavailable(req);
		return -1;
	}
	/* no plan (no build.toml, an external source's commit) is no error here */
	json_object_set_new(m, "plan", plan.doc ? build_plan_json(&plan) : json_null());
	if (!plan.doc)
		json_object_set_new(m, "plan_refused", json_string(rc < 0 ? why : plan.refused));
	json_object_set_new(m, "unbuildable", unbuildable);
	build_plan_release(&plan);
	return 0;
}

int builds_matrix_of_commit(struct request *req, const char *sha, int with_plan, json_t **out,
			    enum MHD_Result *result)
{
	json_t *list;
	if (builds_matrices(req, sha, 1, 0, &list) < 0) {
		*result = respond_db_unavailable(req);
		return -1;
	}
	*out = json_array_size(list) ? json_incref(json_array_get(list, 0)) : matrix_empty(&req->repo->record, sha);
	json_decref(list);
	if (with_plan && matrix_plan(req, sha, *out, result) < 0) {
		json_decref(*out);
		*out = NULL;
		return -1;
	}
	return 0;
}

int builds_matrix_commit_arg(struct request *req, const char *commit, char sha[41], enum MHD_Result *result)
{
	if (is_lower_hex(commit, 40)) {	/* an external source's commit is in no branch here */
		memcpy(sha, commit, 41);
		return 0;
	}
	return repo_resolve_or_respond(req, req->repo, commit, sha, result);
}

enum MHD_Result builds_matrix_answer(struct request *req, const char *commit)
{
	enum MHD_Result result;
	char sha[41];
	json_t *m;
	if (builds_matrix_commit_arg(req, commit, sha, &result) < 0 ||
	    builds_matrix_of_commit(req, sha, 1, &m, &result) < 0)
		return result;
	return respond_json(req, 200, m);
}

int builds_matrices_page(struct request *req, json_t *answer, enum MHD_Result *result)
{
	const char *n_arg = request_query(req, "commits"), *off_arg = request_query(req, "commit_offset");
	long n = n_arg ? atol(n_arg) : MATRIX_COMMITS_DEFAULT, off = off_arg ? atol(off_arg) : 0, total = 0;
	json_t *list;
	if (n < 1 || n > MATRIX_COMMITS_MAX || off < 0) {
		*result = respond_error(req, 400, NULL, "commits must be 1 to %d; commit_offset from 0", MATRIX_COMMITS_MAX);
		return -1;
	}
	if (db_build_matrix_count(req->repo->record.id, &total) < 0 ||
	    builds_matrices(req, NULL, n, off, &list) < 0) {
		*result = respond_db_unavailable(req);
		return -1;
	}
	json_object_set_new(answer, "matrices", list);
	json_object_set_new(answer, "commits_total", json_integer(total));
	json_object_set_new(answer, "next_commit_offset", off + n < total ? json_integer(off + n) : json_null());
	return 0;
}
