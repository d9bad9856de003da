/* pages_builds.c -- a kernel's builds (docs/build-farm.md, "The build
 * matrix"): /kernels/{ns}/{name}/builds (the newest commits' matrices, or
 * one commit's with what no live toolchain builds), a build's log page (the
 * stored log, escaped: the author's build code wrote it; while the build
 * runs, build-log.js appends what its event stream brings), and the writers'
 * forms (build missing, cancel, retry), which call the API's own operations
 * (api.h). The kernel page's build column uses the same cells. */
#include "web/web_internal.h"
#include "farm/farm.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define BUILDS_PAGE_COMMITS 10
#define LOG_PAGE_MAX (4L * 1024 * 1024)

static const char *jstr(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

/* /kernels/ns/name/builds, escaped. */
static void builds_path(struct page *pg, const struct repo_record *r)
{
	page_html(pg, "/kernels/");
	page_text(pg, r->ns);
	page_html(pg, "/");
	page_text(pg, r->name);
	page_html(pg, "/builds");
}

int web_caller_writes(struct request *req)
{
	enum role role = ROLE_NONE;
	return req->repo && repo_role_of(&req->principal, &req->repo->record, &role) == 0 && role >= ROLE_WRITE;
}

/* "1 min 5 s", "42 s", "—" for none. */
static void format_duration(json_t *seconds, char out[32])
{
	long long s = json_integer_value(seconds);
	if (!json_is_integer(seconds))
		snprintf(out, 32, "—");
	else if (s >= 60)
		snprintf(out, 32, "%lld min %lld s", s / 60, s % 60);
	else
		snprintf(out, 32, "%lld s", s);
}

void campaign_pr_html(struct page *pg, const struct db_campaign_kernel *k)
{
	const char *status = build_campaign_pr_status(k);
	if (!status)
		return;
	page_htmlf(pg, " <span class=\"campaign-pr\" data-pr-status=\"%s\">pull request <code>", status);
	page_text(pg, k->pr_ref);
	page_htmlf(pg, "</code> %s", status);
	if (k->superseded_by) {
		page_html(pg, ": superseded by <a class=\"superseded-by\" href=\"/kernels/");
		page_text(pg, k->ns);
		page_html(pg, "/");
		page_text(pg, k->name);
		page_htmlf(pg, "/builds/%" PRId64 "/log\">build #%" PRId64 "</a>", k->superseded_by, k->superseded_by);
	}
	page_html(pg, "</span>");
}

/* A campaign build's pull request (staged: open; superseded: closed, with
 * the newer build). */
static void cell_pr_html(struct page *pg, json_t *cell)
{
	struct db_campaign_kernel k;
	const char *state = jstr(cell, "state");
	if (strcmp(state, "staged") != 0 && strcmp(state, "superseded") != 0)
		return;
	if (db_campaign_of_build((int64_t)json_integer_value(json_object_get(cell, "id")), &k) < 0)
		return;
	campaign_pr_html(pg, &k);
	db_campaign_kernel_release(&k);
}

void build_status_html(struct page *pg, json_t *cell)
{
	const char *status = jstr(cell, "status");
	page_html(pg, "<span class=\"badge build-status\" data-status=\"");
	page_text(pg, status);
	page_html(pg, "\">");
	page_text(pg, status);
	page_html(pg, "</span>");
	cell_pr_html(pg, cell);
	if (json_integer_value(json_object_get(cell, "log_length")) > 0 || strcmp(status, "failed") == 0) {
		page_html(pg, " <a class=\"build-log\" href=\"");
		page_text(pg, jstr(cell, "log_page"));
		page_html(pg, "\">log</a>");
	}
}

void build_kind_html(struct page *pg, int benchmark, const char *device)
{
	if (!benchmark)
		return;
	page_html(pg, "<span class=\"badge build-kind\" data-kind=\"benchmark\">benchmark</span>");
	if (device && device[0]) {
		page_html(pg, " on <span class=\"build-device\">");
		page_text(pg, device);
		page_html(pg, "</span>");
	}
}

/* A hidden field back: where the form's answer returns to. */
static void back_field(struct page *pg, const char *back)
{
	page_html(pg, "<input type=\"hidden\" name=\"back\" value=\"");
	page_text(pg, back);
	page_html(pg, "\">");
}

void campaign_merge_form(struct page *pg, const char *ns, const char *name, int64_t campaign_id, const char *back)
{
	page_html(pg, "<form method=\"post\" class=\"inline campaign-merge\" action=\"/kernels/");
	page_text(pg, ns);
	page_html(pg, "/");
	page_text(pg, name);
	page_htmlf(pg, "/campaigns/%" PRId64 "/merge\">", campaign_id);
	page_csrf_field(pg);
	back_field(pg, back);
	page_html(pg, "<button type=\"submit\" class=\"campaign-merge\">Merge</button></form>");
}

/* A staged build's Merge form (its campaign's pull request). */
static void staged_actions_html(struct page *pg, const struct repo_record *r, json_t *cell, const char *back)
{
	struct db_campaign_kernel k;
	if (db_campaign_of_build((int64_t)json_integer_value(json_object_get(cell, "id")), &k) < 0)
		return;
	if (!k.merged)
		campaign_merge_form(pg, r->ns, r->name, k.campaign_id, back);
	db_campaign_kernel_release(&k);
}

void build_actions_html(struct page *pg, const struct repo_record *r, json_t *cell, const char *back)
{
	const char *state = jstr(cell, "state");
	if (strcmp(state, "staged") == 0) {
		staged_actions_html(pg, r, cell, back);
		return;
	}
	int cancel = strcmp(state, "queued") == 0 || strcmp(state, "running") == 0;
	if (!cancel && strcmp(state, "failed") != 0 && strcmp(state, "canceled") != 0)
		return;
	page_html(pg, "<form method=\"post\" class=\"inline\" action=\"");
	builds_path(pg, r);
	page_htmlf(pg, "/%lld/%s\">", (long long)json_integer_value(json_object_get(cell, "id")), cancel ? "cancel" : "retry");
	page_csrf_field(pg);
	back_field(pg, back);
	page_htmlf(pg, "<button type=\"submit\" class=\"build-%s\">%s</button></form>", cancel ? "cancel" : "retry",
		   cancel ? "Cancel" : "Retry");
}

void build_missing_form(struct page *pg, const struct repo_record *r, const char *commit, const char *back)
{
	page_html(pg, "<form method=\"post\" class=\"inline build-missing\" action=\"");
	builds_path(pg, r);
	page_html(pg, "\">");
	page_csrf_field(pg);
	back_field(pg, back);
	page_html(pg, "<input type=\"hidden\" name=\"commit\" value=\"");
	page_text(pg, commit);
	page_html(pg, "\"><button type=\"submit\">Build missing</button> <span class=\"muted\">queues what live workers "
		      "can build that build.toml allows and this commit lacks</span></form>");
}

/* One variant's row of a matrix table. */
static void matrix_row(struct page *pg, const struct repo_record *r, json_t *cell, int writer, const char *back)
{
	char duration[32], attempt[48];
	format_duration(json_object_get(cell, "duration_seconds"), duration);
	snprintf(attempt, sizeof(attempt), "%lld of %lld", (long long)json_integer_value(json_object_get(cell, "attempt")),
		 (long long)json_integer_value(json_object_get(cell, "max_attempts")));
	page_html(pg, "<tr data-variant=\"");
	page_text(pg, jstr(cell, "variant"));
	page_htmlf(pg, "\" data-build=\"%lld\">", (long long)json_integer_value(json_object_get(cell, "id")));
	page_cell(pg, "<th scope=\"row\" class=\"mono\">", jstr(cell, "variant"));
	page_html(pg, "<td>");
	build_status_html(pg, cell);
	page_html(pg, "</td>");
	page_cell(pg, "<td class=\"num\">", duration);
	page_cell(pg, "<td>", jstr(cell, "worker"));
	page_cell(pg, "<td>", attempt);
	page_cell(pg, "<td class=\"muted\">", jstr(cell, "error"));
	page_html(pg, "<td>");
	if (writer)
		build_actions_html(pg, r, cell, back);
	page_html(pg, "</td></tr>");
}

/* A commit's benchmark jobs (the matrix's "benchmarks"): labelled, with
 * their variant and device, apart from the variants' build states. */
static void benchmark_jobs_table(struct page *pg, json_t *m)
{
	json_t *list = json_object_get(m, "benchmarks"), *cell;
	size_t i;
	char duration[32];
	if (!json_array_size(list))
		return;
	page_htmlf(pg, "<h3>Benchmark jobs</h3><div class=\"table-wrap\" tabindex=\"0\" role=\"region\" "
		       "aria-label=\"Benchmark jobs of %.12s\"><table class=\"benchmark-jobs\"><thead><tr>"
		       "<th scope=\"col\">Variant</th><th scope=\"col\">Kind</th><th scope=\"col\">Status</th>"
		       "<th scope=\"col\" class=\"num\">Duration</th><th scope=\"col\">Worker</th>"
		       "<th scope=\"col\">Error</th></tr></thead><tbody>", jstr(m, "commit"));
	json_array_foreach(list, i, cell) {
		format_duration(json_object_get(cell, "duration_seconds"), duration);
		page_html(pg, "<tr data-kind=\"benchmark\" data-variant=\"");
		page_text(pg, jstr(cell, "variant"));
		page_html(pg, "\" data-device=\"");
		page_text(pg, jstr(cell, "device"));
		page_htmlf(pg, "\" data-build=\"%lld\">", (long long)json_integer_value(json_object_get(cell, "id")));
		page_cell(pg, "<th scope=\"row\" class=\"mono\">", jstr(cell, "variant"));
		page_html(pg, "<td>");
		build_kind_html(pg, 1, jstr(cell, "device"));
		page_html(pg, "</td><td>");
		build_status_html(pg, cell);
		page_html(pg, "</td>");
		page_cell(pg, "<td class=\"num\">", duration);
		page_cell(pg, "<td>", jstr(cell, "worker"));
		page_cell(pg, "<td class=\"muted\">", jstr(cell, "error"));
		page_html(pg, "</tr>");
	}
	page_html(pg, "</tbody></table></div>");
}

/* What build.toml allows that no live toolchain builds, or why there is
 * no plan. */
static void unbuildable_list(struct page *pg, json_t *m)
{
	json_t *list = json_object_get(m, "unbuildable"), *u;
	size_t i;
	if (json_is_string(json_object_get(m, "plan_refused"))) {
		page_html(pg, "<p class=\"muted plan-refused\">No plan: ");
		page_text(pg, jstr(m, "plan_refused"));
		page_html(pg, "</p>");
	}
	if (!json_array_size(list))
		return;
	page_html(pg, "<h3>Allowed by build.toml, built by no live worker</h3><ul class=\"unbuildable\">");
	json_array_foreach(list, i, u) {
		page_html(pg, "<li data-variant=\"");
		page_text(pg, jstr(u, "variant"));
		page_html(pg, "\"><code>");
		page_text(pg, jstr(u, "variant"));
		page_html(pg, "</code>: <span class=\"reason\">");
		page_text(pg, jstr(u, "reason"));
		page_html(pg, "</span></li>");
	}
	page_html(pg, "</ul>");
}

void web_benchmark_regressions(struct page *pg, json_t *list)
{
	json_t *reg;
	size_t i;
	if (!json_array_size(list))
		return;
	page_html(pg, "<h3>Benchmark regressions</h3><ul class=\"bench-regressions\">");
	json_array_foreach(list, i, reg) {
		page_html(pg, "<li class=\"bench-regression\">");
		page_text(pg, jstr(reg, "workload"));
		page_html(pg, " on ");
		page_text(pg, jstr(reg, "device"));
		page_htmlf(pg, " at <code>%.12s</code>: %.1f%% slower than <code>%.12s</code> (median %.4g ms, was %.4g ms)</li>",
			   jstr(reg, "commit"), json_real_value(json_object_get(reg, "slowerPct")), jstr(reg, "previousCommit"),
			   json_real_value(json_object_get(reg, "medianMs")),
			   json_real_value(json_object_get(reg, "previousMedianMs")));
	}
	page_html(pg, "</ul>");
}

/* A commit's matrix (JSON of builds_matrices) as a table. */
static void matrix_table(struct page *pg, const struct repo_record *r, json_t *m, int writer, const char *back)
{
	json_t *cell;
	size_t i;
	page_html(pg, "<section class=\"build-matrix\" data-commit=\"");
	page_text(pg, jstr(m, "commit"));
	page_html(pg, "\"><h2>Commit <a class=\"mono\" href=\"");
	page_text(pg, jstr(m, "url"));
	page_htmlf(pg, "\">%.12s</a></h2>", jstr(m, "commit"));
	if (!json_array_size(json_object_get(m, "variants")))
		page_html(pg, "<p class=\"muted\">No build of this commit.</p>");
	else
		page_htmlf(pg, "<div class=\"table-wrap\" tabindex=\"0\" role=\"region\" aria-label=\"Builds of %.12s\">"
			       "<table><thead><tr><th scope=\"col\">Variant</th>"
			      "<th scope=\"col\">Status</th><th scope=\"col\" class=\"num\">Duration</th>"
			      "<th scope=\"col\">Worker</th><th scope=\"col\">Attempt</th><th scope=\"col\">Error</th>"
			      "<th scope=\"col\"></th></tr></thead><tbody>", jstr(m, "commit"));
	json_array_foreach(json_object_get(m, "variants"), i, cell)
		matrix_row(pg, r, cell, writer, back);
	if (json_array_size(json_object_get(m, "variants")))
		page_html(pg, "</tbody></table></div>");
	benchmark_jobs_table(pg, m);
	unbuildable_list(pg, m);
	web_benchmark_regressions(pg, json_object_get(m, "benchmark_regressions"));
	if (writer && json_is_object(json_object_get(m, "plan")))	/* a commit page with a plan */
		build_missing_form(pg, r, jstr(m, "commit"), back);
	page_html(pg, "</section>");
}

/* The page's own path with its query, for the forms' back field (owned). */
static char *page_back(const struct repo_record *r, const char *commit)
{
	return commit ? xasprintf("/kernels/%s/%s/builds?commit=%s", r->ns, r->name, commit)
		      : xasprintf("/kernels/%s/%s/builds", r->ns, r->name);
}

static enum MHD_Result commit_page(struct request *req, const char *commit)
{
	struct repo_handle *h = req->repo;
	enum MHD_Result result;
	char sha[41], title[2 * REPO_NAME_MAX + 64];
	json_t *m;
	if (builds_matrix_commit_arg(req, commit, sha, &result) < 0 ||
	    builds_matrix_of_commit(req, sha, 1, &m, &result) < 0)
		return result;
	struct page pg;
	char *back = page_back(&h->record, sha);
	snprintf(title, sizeof(title), "Builds of %.12s · %s/%s", sha, h->record.ns, h->record.name);
	page_init(&pg, req, title);
	kernel_page_header(&pg, h, "builds");
	page_html(&pg, "<p><a href=\"");
	builds_path(&pg, &h->record);
	page_html(&pg, "\">All builds</a></p>");
	matrix_table(&pg, &h->record, m, web_caller_writes(req), back);
	free(back);
	json_decref(m);
	return page_send(&pg, 200);
}

enum MHD_Result page_builds(struct request *req)
{
	struct repo_handle *h = req->repo;
	const char *commit = request_query(req, "commit"), *off_arg = request_query(req, "commit_offset");
	long off = off_arg ? atol(off_arg) : 0;
	json_t *list, *m;
	size_t i;
	if (commit)
		return commit_page(req, commit);
	if (off < 0)
		off = 0;
	if (builds_matrices(req, NULL, BUILDS_PAGE_COMMITS, off, &list) < 0)
		return web_db_unavailable(req);
	struct page pg;
	char title[2 * REPO_NAME_MAX + 16], *back = page_back(&h->record, NULL);
	int writer = web_caller_writes(req);
	snprintf(title, sizeof(title), "Builds · %s/%s", h->record.ns, h->record.name);
	page_init(&pg, req, title);
	kernel_page_header(&pg, h, "builds");
	if (!json_array_size(list))
		page_html(&pg, "<p class=\"muted\" id=\"no-builds\">No build yet: a push that changes the kernel's sources "
			       "queues them (docs/build-farm.md).</p>");
	json_array_foreach(list, i, m)
		matrix_table(&pg, &h->record, m, writer, back);
	if (json_array_size(list) == BUILDS_PAGE_COMMITS) {
		page_html(&pg, "<p><a id=\"older-builds\" href=\"");
		builds_path(&pg, &h->record);
		page_htmlf(&pg, "?commit_offset=%ld\">Older commits</a></p>", off + BUILDS_PAGE_COMMITS);
	}
	free(back);
	json_decref(list);
	return page_send(&pg, 200);
}

/* The route's build of req->repo: 0 with its row in b, or -1 answered
 * (404 for no such build or another repo's, 503). */
static int load_build(struct request *req, int64_t *id, struct build_row *b, enum MHD_Result *result)
{
	const char *arg = req->nargs ? req->args[0] : "";
	char *end;
	long long v = strtoll(arg, &end, 10);
	int rc = !arg[0] || *end || v <= 0 ? KHUB_ENOTFOUND : db_build_get(v, b);
	if (rc == 0 && b->repo_id != req->repo->record.id) {
		build_row_release(b);
		rc = KHUB_ENOTFOUND;
	}
	if (rc < 0) {
		*result = rc == KHUB_ENOTFOUND ? web_error_page(req, 404, "No such build of this kernel.")
					       : web_db_unavailable(req);
		return -1;
	}
	*id = v;
	return 0;
}

/* The log page's heading: the build, its variant, commit and status. */
static void log_heading(struct page *pg, const struct repo_record *r, const struct build_row *b, int64_t id)
{
	const char *commit = b->commit;
	const char *status = build_state_status_of_kind(build_state_named(b->state), b->benchmark);
	page_htmlf(pg, "<h2>%s %" PRId64 ": <span class=\"mono\">", b->benchmark ? "Benchmark job" : "Build", id);
	page_text(pg, b->variant);
	page_html(pg, "</span> ");
	build_kind_html(pg, b->benchmark, b->device);
	page_html(pg, "</h2><p>Commit <a class=\"mono\" href=\"");
	builds_path(pg, r);
	page_html(pg, "?commit=");
	page_text(pg, commit);
	page_html(pg, "\">");
	page_text(pg, commit);
	page_html(pg, "</a> · <span class=\"badge build-status\" data-status=\"");
	page_text(pg, status);
	page_html(pg, "\">");
	page_text(pg, status);
	page_html(pg, "</span>");
	if (b->worker) {
		page_html(pg, " · worker ");
		page_text(pg, b->worker);
	}
	page_html(pg, "</p>");
}

enum MHD_Result page_build_log(struct request *req)
{
	struct repo_handle *h = req->repo;
	struct build_row b;
	struct strbuf shown = STRBUF_INIT;
	enum MHD_Result result;
	int64_t id, length = 0, next = 0;
	if (load_build(req, &id, &b, &result) < 0)
		return result;
	if (builds_log_text(req, id, 0, LOG_PAGE_MAX, &shown, &length, &next, &result) < 0) {
		build_row_release(&b);
		return result;
	}
	struct page pg;
	char title[64];
	snprintf(title, sizeof(title), "%s %" PRId64 " log", b.benchmark ? "Benchmark job" : "Build", id);
	page_init(&pg, req, title);
	kernel_page_header(&pg, h, "builds");
	log_heading(&pg, &h->record, &b, id);
	if (next < length)
		page_htmlf(&pg, "<p class=\"muted\">The first %" PRId64 " of %" PRId64 " bytes; GET /api/builds/%" PRId64
			       "/log?offset=%" PRId64 " reads on.</p>", next, length, id, next);
	/* the author's build code wrote every byte: escaped, never markup */
	page_html(&pg, "<pre id=\"build-log\" class=\"build-log\"");
	enum build_state state = build_state_named(b.state);
	if (state == BUILD_QUEUED || state == BUILD_RUNNING) {	/* build-log.js follows it from next */
		page_html(&pg, " data-events=\"");
		builds_path(&pg, &h->record);
		page_htmlf(&pg, "/%" PRId64 "/log/events?offset=%" PRId64 "\"", id, next);
		page_script(&pg, "build-log.js");
	}
	page_html(&pg, ">");
	if (shown.len)
		html_escape_n(&pg.main, shown.buf, shown.len);
	page_html(&pg, "</pre>");
	strbuf_release(&shown);
	build_row_release(&b);
	return page_send(&pg, 200);
}

enum MHD_Result page_build_log_events(struct request *req)
{
	struct build_row b;
	enum MHD_Result result;
	int64_t id;
	if (load_build(req, &id, &b, &result) < 0)
		return result;
	build_row_release(&b);
	/* a reconnecting EventSource sends the last event's id: the offset */
	const char *at = request_header(req, "Last-Event-ID");
	if (!at)
		at = request_query(req, "offset");
	char *end = NULL;
	long long from = at ? strtoll(at, &end, 10) : 0;
	if (at && (end == at || *end || from < 0))
		return web_error_page(req, 400, "offset must be a byte offset");
	return builds_log_follow(req, id, from, 1);
}

/* After a form: back where it came from (a path of this site), else the
 * builds page. */
static enum MHD_Result form_done(struct request *req)
{
	const char *back = form_value(req, "back");
	char *fallback = page_back(&req->repo->record, NULL);
	enum MHD_Result r = web_redirect(req, back && web_local_path_ok(back) ? back : fallback, NULL);
	free(fallback);
	return r;
}

enum MHD_Result page_builds_enqueue(struct request *req)
{
	const char *commit = form_value(req, "commit");
	enum MHD_Result result;
	char sha[41];
	int status = 0;
	json_t *answer = NULL;
	if (!commit || !commit[0])
		return web_error_page(req, 400, "Which commit? The form names none.");
	if (builds_matrix_commit_arg(req, commit, sha, &result) < 0 ||
	    builds_enqueue_default(req, sha, &status, &answer, &result) < 0)
		return result;
	json_decref(answer);
	if (status != 202)
		return web_error_page(req, 422, "Nothing to build: build.toml and the live workers leave no variant of "
					   "this commit (its builds page says why).");
	return form_done(req);
}

/* Cancel or retry the route's build (a writer's form). */
static enum MHD_Result change_form(struct request *req, int retry)
{
	struct build_row b;
	enum MHD_Result result;
	int64_t id;
	json_t *answer = NULL;
	if (load_build(req, &id, &b, &result) < 0)
		return result;
	build_row_release(&b);
	if ((retry ? builds_retry(req, id, &answer, &result) : builds_cancel(req, id, &answer, &result)) < 0)
		return result;
	json_decref(answer);
	return form_done(req);
}

enum MHD_Result page_build_cancel(struct request *req)
{
	return change_form(req, 0);
}

enum MHD_Result page_build_retry(struct request *req)
{
	return change_form(req, 1);
}

enum MHD_Result page_campaign_merge(struct request *req)
{
	const char *arg = req->nargs ? req->args[req->nargs - 1] : "";
	char *end;
	long long id = strtoll(arg, &end, 10);
	enum MHD_Result result;
	json_t *answer;
	if (!arg[0] || *end || id <= 0)
		return web_error_page(req, 404, "No such campaign.");
	if (campaigns_merge(req, id, &answer, &result) < 0)
		return result;
	json_decref(answer);
	return form_done(req);
}
