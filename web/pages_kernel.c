/* pages_kernel.c -- /kernels/{ns}/{name}: one kernel's overview. The README's
 * card (license, tags, backends), usage snippets, versions and branches, the
 * variant matrix grouped by backend with the compliance report (the API's
 * own JSON of both), "Will it load for me?" (a GET form answered on this
 * page by the variants API's own code, so it works without JavaScript;
 * kernel.js asks the variants API instead), the rendered README body,
 * benchmarks and downloads (charts drawn by web/static/charts.js). */
#include "web/web_internal.h"
#include "kernel/kernel.h"

#include <stdlib.h>
#include <string.h>

#define README_LIMIT (1u << 20)

static void repo_path(struct page *pg, const struct repo_record *r, const char *suffix)
{
	page_html(pg, "/kernels/");
	page_text(pg, r->ns);
	page_html(pg, "/");
	page_text(pg, r->name);
	page_text(pg, suffix);
}

/* The revision shown: ?rev= (a branch, tag or sha), else the newest vN
 * branch, else main. *label is what the page calls it (request-owned). */
static int pick_revision(struct request *req, struct repo_handle *h, const struct ref_list *versions, char sha[41],
			 const char **label)
{
	const char *rev = request_query(req, "rev");
	if (!rev || !rev[0])
		rev = versions->count ? versions->items[versions->count - 1].name : "main";
	*label = rev;
	return repo_resolve_revision(h->git, rev, sha);
}

/* A snippet: a full-width block that scrolls sideways inside a box the
 * keyboard reaches (a named region), never cut off; kernel.js puts its Copy
 * button in the corner of the snippet-box. Closed by snippet_end. */
static void snippet_start(struct page *pg, const char *id, const char *label)
{
	page_html(pg, "<div class=\"snippet-box\"><pre class=\"snippet\" tabindex=\"0\" role=\"region\" aria-label=\"");
	page_text(pg, label);
	page_htmlf(pg, "\"><code id=\"%s\">", id);
}

static void snippet_end(struct page *pg)
{
	page_html(pg, "</code></pre></div>");
}

static void usage_section(struct page *pg, struct request *req, const struct repo_record *r,
			  const struct ref_list *versions, const char *sha)
{
	char id[2 * REPO_NAME_MAX + 2];
	snprintf(id, sizeof(id), "%s/%s", r->ns, r->name);
	page_html(pg, "<section aria-labelledby=\"use-h\"><h2 id=\"use-h\">Use it</h2><h3>Python</h3>");
	snippet_start(pg, "snippet-python", "Python snippet");
	page_html(pg, "from kernels import get_kernel\n\nkernel = get_kernel(\"");
	page_text(pg, id);
	if (versions->count)
		page_htmlf(pg, "\", version=%d)", atoi(versions->items[versions->count - 1].name + 1));
	else
		page_html(pg, "\")");
	snippet_end(pg);
	page_html(pg, "<h3><code>kernels.lock</code> entry</h3>");
	snippet_start(pg, "snippet-lock", "kernels.lock entry");
	page_html(pg, "{\n  \"repo_id\": \"");
	page_text(pg, id);
	page_htmlf(pg, "\",\n  \"sha\": \"%s\"\n}", sha);
	snippet_end(pg);
	page_html(pg, "<p class=\"muted\"><code>kernels lock</code> adds the variant hashes.</p><h3>Point the client "
		      "here</h3>");
	snippet_start(pg, "snippet-endpoint", "Endpoint snippet");
	page_html(pg, "export HF_ENDPOINT=");
	page_text(pg, http_ctx.public_url[0] ? http_ctx.public_url : request_base_url(req));
	snippet_end(pg);
	page_html(pg, "</section>");
}

static void versions_section(struct page *pg, struct repo_handle *h, const struct ref_list *versions)
{
	struct ref_list refs;
	page_html(pg, "<section aria-labelledby=\"versions-h\"><h2 id=\"versions-h\">Versions</h2>");
	if (!versions->count)
		page_html(pg, "<p class=\"muted\">No <code>vN</code> version branches yet: clients load <code>main</code>.</p>");
	else
		page_html(pg, SCROLL_REGION("Versions table") "<table id=\"versions\"><thead><tr><th scope=\"col\">Version</th><th scope=\"col\">Head commit</th>"
			      "<th scope=\"col\">Date</th><th scope=\"col\">Title</th></tr></thead><tbody>");
	for (size_t i = versions->count; i-- > 0;) {
		const struct ref_item *v = &versions->items[i];
		struct commit_log log = { 0 };
		char day[32] = "";
		const char *title = "";
		if (repo_log(h->git, v->sha, 0, 1, &log) == 0 && log.count) {
			format_day(log.items[0].time, day);
			title = log.items[0].title;
		}
		page_html(pg, "<tr><td><a href=\"");
		repo_path(pg, &h->record, "");
		page_html(pg, "?rev=");
		page_text(pg, v->name);
		page_html(pg, "\">");
		page_text(pg, v->name);
		page_html(pg, "</a></td><td class=\"mono\"><a href=\"");
		repo_path(pg, &h->record, "/tree/");
		page_htmlf(pg, "%s\">%.10s</a></td><td>%s</td><td>", v->sha, v->sha, day);
		page_text(pg, title);
		page_html(pg, "</td></tr>");
		commit_log_release(&log);
	}
	if (versions->count)
		page_html(pg, "</tbody></table></div>");
	if (repo_list_refs(h->git, &refs) == 0) {
		page_html(pg, "<h3>Branches and tags</h3><ul class=\"refs\">");
		for (size_t i = 0; i < refs.count; i++) {
			if (refs.items[i].kind != REF_BRANCH && refs.items[i].kind != REF_TAG)
				continue;
			page_html(pg, "<li><a href=\"");
			repo_path(pg, &h->record, "/tree/");
			page_text(pg, refs.items[i].name);
			page_html(pg, "\">");
			page_text(pg, refs.items[i].name);
			page_htmlf(pg, "</a> <span class=\"badge\">%s</span> <span class=\"mono muted\">%.10s</span></li>",
				   refs.items[i].kind == REF_TAG ? "tag" : "branch", refs.items[i].sha);
		}
		page_html(pg, "</ul>");
		ref_list_release(&refs);
	}
	page_html(pg, "</section>");
}

static const char *str(json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));
	return s ? s : "";
}

/* Downloads of the last 30 days per variant name. */
static json_t *downloads_by_variant(int64_t repo_id)
{
	struct download_rows rows;
	json_t *by = json_object();
	if (db_downloads_rows(repo_id, 30, &rows) < 0)
		return by;
	for (size_t i = 0; i < rows.count; i++) {
		const char *v = rows.items[i].variant;
		long long n = (long long)rows.items[i].count;
		json_object_set_new(by, v, json_integer(json_integer_value(json_object_get(by, v)) + n));
	}
	download_rows_release(&rows);
	return by;
}

/* The "backend system" labels of the compliance groups that are (or are
 * not) compliant and targeted, joined by ", "; "" when none. */
static void group_labels(struct page *pg, json_t *compliance, int compliant, int targeted, const char *lead)
{
	size_t i, n = 0;
	json_t *g;
	json_array_foreach(json_object_get(compliance, "groups"), i, g) {
		if (json_is_true(json_object_get(g, "compliant")) != compliant ||
		    json_is_true(json_object_get(g, "targeted")) != targeted)
			continue;
		page_html(pg, n++ ? ", " : lead);
		page_text(pg, str(g, "backend"));
		page_html(pg, " ");
		page_text(pg, str(g, "system"));
		if (!compliant && targeted)
			page_htmlf(pg, " (%zu missing, %zu with invalid metadata)",
				   json_array_size(json_object_get(g, "missing")),
				   json_array_size(json_object_get(g, "invalidMetadata")));
	}
}

/* The compliance summary above the matrix, by the one rule of
 * kernel/compliance.c: compliant when every required variant of one
 * system and backend is there with valid metadata, or a Python-only
 * variant is. The rows marked missing are those of the targeted groups
 * that are incomplete, and the summary names the same groups. */
static void compliance_summary(struct page *pg, json_t *compliance)
{
	int compliant = json_is_true(json_object_get(compliance, "compliant"));
	json_t *python = json_object_get(compliance, "pythonOnly"), *v;
	size_t i;
	page_html(pg, "<div id=\"compliance-summary\"><p>");
	page_html(pg, compliant ? "<span class=\"badge ok\">compliant</span>" :
				  "<span class=\"badge bad\">not compliant</span>");
	page_html(pg, " with the required build list");
	group_labels(pg, compliance, 1, 1, " for ");
	if (json_is_true(json_object_get(python, "compliant"))) {
		page_html(pg, " as a Python-only kernel (");
		json_array_foreach(json_object_get(python, "present"), i, v) {
			page_html(pg, i ? ", " : "");
			page_text(pg, json_string_value(v));
		}
		page_html(pg, ", which load everywhere)");
	} else if (!compliant) {
		page_html(pg, ": no system has all of its required variants with valid metadata, and there is no "
			      "Python-only variant (");
		json_array_foreach(json_object_get(python, "accepted"), i, v) {
			page_html(pg, i ? ", " : "");
			page_text(pg, json_string_value(v));
		}
		page_html(pg, ") with valid metadata");
	}
	page_html(pg, ".</p><p class=\"incomplete\">");
	group_labels(pg, compliance, 0, 1, "Incomplete for ");
	page_html(pg, "</p><p class=\"muted\">");
	group_labels(pg, compliance, 0, 0, "Not built for ");
	page_html(pg, "</p></div>");
}

/* Why a variant is not usable: its name's or its metadata.json's problem,
 * in the variants API's own words. */
static void variant_status(struct page *pg, json_t *vj)
{
	json_t *metadata = json_object_get(vj, "metadata");
	const char *status = str(metadata, "status");
	if (!json_is_true(json_object_get(vj, "valid"))) {
		page_html(pg, "<span class=\"badge bad\">invalid name</span> <span class=\"why\">");
		page_text(pg, str(vj, "error"));
		page_html(pg, "</span>");
	} else if (strcmp(status, "ok") != 0) {
		page_html(pg, "<span class=\"badge bad\">metadata ");
		page_text(pg, status);
		page_html(pg, "</span> <span class=\"why metadata-error\">");
		page_text(pg, str(metadata, "error"));
		page_html(pg, "</span>");
	} else {
		page_html(pg, "<span class=\"badge ok\">present</span>");
	}
}

/* The build matrix shown in the variant table (api.h builds_matrices):
 * the newest commit's, writer: the caller gets the forms. */
struct kernel_builds {
	json_t *matrix;		/* NULL: no commit to show, or failed */
	int failed;		/* the builds could not be read */
	int writer;
};

/* The matrix's cell of variant, NULL when it has none. */
static json_t *build_cell_of(const struct kernel_builds *b, const char *variant)
{
	json_t *cell;
	size_t i;
	json_array_foreach(b->matrix ? json_object_get(b->matrix, "variants") : NULL, i, cell)
		if (strcmp(json_string_value(json_object_get(cell, "variant")), variant) == 0)
			return cell;
	return NULL;
}

/* A row's build cell: its status (log link, the writer's form), or "not built". */
static void build_cell(struct page *pg, const struct repo_record *r, const struct kernel_builds *b,
		       const char *variant)
{
	json_t *cell = build_cell_of(b, variant);
	char *back = xasprintf("/kernels/%s/%s", r->ns, r->name);
	page_html(pg, "<td class=\"build\">");
	if (cell) {
		build_status_html(pg, cell);
		if (b->writer)
			build_actions_html(pg, r, cell, back);
	} else {
		page_html(pg, b->matrix ? "<span class=\"muted\">not built</span>" : "");
	}
	page_html(pg, "</td>");
	free(back);
}

/* One indexed variant's row: name, torch, backend version, arch, OS, size,
 * downloads and status. */
static void variant_row(struct page *pg, const struct repo_record *r, const struct variant_row *row, json_t *vj,
			json_t *downloads, const struct kernel_builds *b)
{
	json_t *fw = json_object_get(vj, "framework"), *be = json_object_get(vj, "backend");
	char size[32];
	format_size((uint64_t)row->total_size, size);
	page_html(pg, "<tr data-variant=\"");
	page_text(pg, row->name);
	page_html(pg, "\">");
	page_cell(pg, "<th scope=\"row\" class=\"mono\">", row->name);
	page_cell(pg, "<td>", str(fw, "version"));
	page_cell(pg, "<td>", str(be, "version"));
	page_cell(pg, "<td>", str(vj, "arch"));
	page_cell(pg, "<td>", str(vj, "os"));
	page_htmlf(pg, "<td class=\"num\">%s</td><td class=\"num\">%lld</td><td>", size,
		   (long long)json_integer_value(json_object_get(downloads, row->name)));
	variant_status(pg, vj);
	page_html(pg, "</td>");
	build_cell(pg, r, b, row->name);
	page_html(pg, "</tr>");
}

/* The missing rows of one backend: the required variants absent from the
 * targeted groups that are incomplete. Returns how many. */
static size_t missing_rows(struct page *pg, const struct repo_record *r, json_t *compliance, const char *backend,
			   const struct kernel_builds *b)
{
	size_t i, m, n = 0;
	json_t *group, *name;
	json_array_foreach(json_object_get(compliance, "groups"), i, group) {
		if (strcmp(str(group, "backend"), backend) != 0 || !json_is_true(json_object_get(group, "targeted")))
			continue;
		json_array_foreach(json_object_get(group, "missing"), m, name) {
			if (!pg)
				continue;
			page_html(pg, "<tr class=\"missing\" data-missing=\"");
			page_text(pg, json_string_value(name));
			page_html(pg, "\" data-group=\"");
			page_text(pg, str(group, "backend"));
			page_html(pg, " ");
			page_text(pg, str(group, "system"));
			page_html(pg, "\">");
			page_cell(pg, "<th scope=\"row\" class=\"mono\">", json_string_value(name));
			page_html(pg, "<td colspan=\"6\" class=\"muted\">required for ");
			page_text(pg, str(group, "backend"));
			page_html(pg, " ");
			page_text(pg, str(group, "system"));
			page_html(pg, "</td><td><span class=\"badge missing\">missing</span></td>");
			build_cell(pg, r, b, json_string_value(name));
			page_html(pg, "</tr>");
		}
		n += json_array_size(json_object_get(group, "missing"));
	}
	return n;
}

/* The group a variant's row goes in: its backend, "noarch" (Python-only)
 * or "invalid" (a name the loader skips). */
static const char *variant_group(json_t *vj)
{
	if (!json_is_true(json_object_get(vj, "valid")))
		return "invalid";
	if (strcmp(str(vj, "kind"), "noarch") == 0)
		return "noarch";
	return str(json_object_get(vj, "backend"), "name");
}

/* One group of the matrix under <details>, closed: its summary counts
 * what needs a look (variants that cannot load, required ones missing),
 * which variant_problems and compliance_summary name above it. */
static void matrix_group(struct page *pg, const struct repo_record *r, const char *key, const char *title, json_t **vjs,
			 const struct variant_rows *rows, json_t *downloads, json_t *compliance, const struct kernel_builds *b)
{
	size_t count = 0, bad = 0, missing = missing_rows(NULL, r, compliance, key, b);
	for (size_t k = 0; k < rows->count; k++) {
		if (strcmp(variant_group(vjs[k]), key) != 0)
			continue;
		count++;
		bad += !json_is_true(json_object_get(vjs[k], "valid")) ||
		       strcmp(str(json_object_get(vjs[k], "metadata"), "status"), "ok") != 0;
	}
	if (!count && !missing)
		return;
	page_html(pg, "<details class=\"variant-group\" data-group=\"");
	page_text(pg, key);
	page_html(pg, "\"><summary>");
	page_text(pg, title);
	page_htmlf(pg, " <span class=\"status\">%zu variant%s", count, count == 1 ? "" : "s");
	if (missing)
		page_htmlf(pg, ", %zu missing", missing);
	if (bad)
		page_htmlf(pg, ", %zu that cannot load", bad);
	page_html(pg, "</span></summary><div class=\"table-wrap\" tabindex=\"0\" role=\"region\" aria-label=\"Variants: ");
	page_text(pg, title);
	page_html(pg, "\"><table><thead><tr><th scope=\"col\">Variant</th>"
		      "<th scope=\"col\">Torch</th><th scope=\"col\">Backend version</th><th scope=\"col\">Arch</th>"
		      "<th scope=\"col\">OS</th><th scope=\"col\" class=\"num\">Size</th><th scope=\"col\" "
		      "class=\"num\">Downloads (30 d)</th><th scope=\"col\">Status</th><th scope=\"col\">Build</th></tr>"
		      "</thead><tbody>");
	for (size_t k = 0; k < rows->count; k++)
		if (strcmp(variant_group(vjs[k]), key) == 0)
			variant_row(pg, r, &rows->items[k], vjs[k], downloads, b);
	missing_rows(pg, r, compliance, key, b);
	page_html(pg, "</tbody></table></div></details>");
}

/* The variants that cannot load, each with why (the variants API's words),
 * above the folded groups: a reason is never hidden in a closed one. */
static void variant_problems(struct page *pg, json_t **vjs, size_t n)
{
	size_t shown = 0;
	for (size_t k = 0; k < n; k++) {
		json_t *vj = vjs[k];
		if (json_is_true(json_object_get(vj, "valid")) &&
		    strcmp(str(json_object_get(vj, "metadata"), "status"), "ok") == 0)
			continue;
		page_html(pg, shown++ ? "<li>" : "<ul id=\"variant-problems\" aria-label=\"Variants that cannot load\"><li>");
		page_html(pg, "<code>");
		page_text(pg, str(vj, "name"));
		page_html(pg, "</code> ");
		variant_status(pg, vj);
		page_html(pg, "</li>");
	}
	if (shown)
		page_html(pg, "</ul>");
}

/* 1 when the table has a row of variant: indexed, or required and
 * missing in a targeted group (missing_rows' rule). */
static int table_has(const struct variant_rows *rows, json_t *compliance, const char *variant)
{
	size_t i, m;
	json_t *group, *name;
	for (i = 0; i < rows->count; i++)
		if (strcmp(rows->items[i].name, variant) == 0)
			return 1;
	json_array_foreach(json_object_get(compliance, "groups"), i, group) {
		if (!json_is_true(json_object_get(group, "targeted")))
			continue;
		json_array_foreach(json_object_get(group, "missing"), m, name)
			if (strcmp(json_string_value(name), variant) == 0)
				return 1;
	}
	return 0;
}

/* The variants built (or building) that the table has no row of, in a
 * group of their own. */
static void build_only_group(struct page *pg, const struct repo_record *r, const struct variant_rows *rows,
			     json_t *compliance, const struct kernel_builds *b, const char *label)
{
	json_t *cells = b->matrix ? json_object_get(b->matrix, "variants") : NULL, *cell;
	size_t i, n = 0;
	json_array_foreach(cells, i, cell)
		n += !table_has(rows, compliance, json_string_value(json_object_get(cell, "variant")));
	if (!n)
		return;
	page_html(pg, "<details class=\"variant-group\" data-group=\"build-only\" open><summary>Built by the farm, not in ");
	page_text(pg, label);
	page_htmlf(pg, " <span class=\"status\">%zu variant%s</span></summary>" SCROLL_REGION("Variants built by the farm") "<table><thead>"
		       "<tr><th scope=\"col\">Variant</th><th scope=\"col\">Build</th></tr></thead><tbody>", n, n == 1 ? "" : "s");
	json_array_foreach(cells, i, cell) {
		const char *variant = json_string_value(json_object_get(cell, "variant"));
		if (table_has(rows, compliance, variant))
			continue;
		page_html(pg, "<tr class=\"build-only\" data-build-only=\"");
		page_text(pg, variant);
		page_html(pg, "\">");
		page_cell(pg, "<th scope=\"row\" class=\"mono\">", variant);
		build_cell(pg, r, b, variant);
		page_html(pg, "</tr>");
	}
	page_html(pg, "</tbody></table></div></details>");
}

/* Which commit the build column shows, with the writer's "Build missing". */
static void build_column_note(struct page *pg, const struct repo_record *r, const struct kernel_builds *b)
{
	const char *commit = json_string_value(json_object_get(b->matrix, "commit"));
	char *back = xasprintf("/kernels/%s/%s", r->ns, r->name);
	if (!b->matrix) {
		if (b->failed)
			page_db_problem(pg);
		free(back);
		return;
	}
	page_html(pg, "<p id=\"build-column\" data-commit=\"");
	page_text(pg, commit);
	page_html(pg, "\">Build: the newest commit's builds, <a class=\"mono\" href=\"");
	page_text(pg, json_string_value(json_object_get(b->matrix, "url")));
	page_htmlf(pg, "\">%.12s</a> · <a href=\"", commit);
	page_text(pg, back);
	page_html(pg, "/builds\">all builds</a></p>");
	if (b->writer)
		build_missing_form(pg, r, commit, back);
	free(back);
}

static void matrix_section(struct page *pg, struct repo_handle *h, const struct variant_rows *rows, const char *label,
			   json_t *compliance, const struct kernel_builds *b)
{
	json_t *downloads = downloads_by_variant(h->record.id);
	json_t **vjs = xcalloc(rows->count + 1, sizeof(*vjs));
	for (size_t k = 0; k < rows->count; k++)
		vjs[k] = kernel_variant_json(&rows->items[k]);
	page_html(pg, "<section aria-labelledby=\"variants-h\"><h2 id=\"variants-h\">Variants of ");
	page_text(pg, label);
	page_html(pg, "</h2>");
	compliance_summary(pg, compliance);
	variant_problems(pg, vjs, rows->count);
	page_html(pg, "<div id=\"variant-matrix\">");
	for (const struct kernel_backend *be = kernel_backends; be->name; be++)
		matrix_group(pg, &h->record, be->name, be->title, vjs, rows, downloads, compliance, b);
	matrix_group(pg, &h->record, "noarch", "Python-only (noarch)", vjs, rows, downloads, compliance, b);
	matrix_group(pg, &h->record, "invalid", "Names the loader skips", vjs, rows, downloads, compliance, b);
	build_only_group(pg, &h->record, rows, compliance, b, label);
	if (!rows->count)
		page_html(pg, "<p class=\"muted\">This revision has no build variants.</p>");
	page_html(pg, "</div>");
	build_column_note(pg, &h->record, b);
	page_html(pg, "</section>");
	for (size_t k = 0; k < rows->count; k++)
		json_decref(vjs[k]);
	free(vjs);
	json_decref(downloads);
}

/* The environment the "Will it load for me?" form gives (its query), as the
 * variants API's keys: the version field goes to the chosen backend's key
 * (cuda=12.8), macos= only with os=darwin; empty fields are not given. */
static const char *wil_query(void *ctx, const char *key)
{
	struct request *req = ctx;
	const char *backend = request_query(req, "backend"), *os = request_query(req, "os"), *v;
	const struct kernel_backend *b = kernel_backend_find(key);
	if (b && b->variant_prefix)
		v = backend && strcmp(backend, key) == 0 ? request_query(req, "backend_version") : NULL;
	else if (strcmp(key, "macos") == 0)
		v = os && strcmp(os, "darwin") == 0 ? request_query(req, "macos") : NULL;
	else
		v = request_query(req, key);
	return v && v[0] ? v : NULL;
}

static void wil_table(struct page *pg, json_t *list, const char *id, const char *caption, int accepted)
{
	size_t i;
	json_t *v;
	if (!json_array_size(list))
		return;
	page_htmlf(pg, "<div class=\"table-wrap\" tabindex=\"0\" role=\"region\" aria-label=\"%s\"><table id=\"%s\"><caption class=\"muted\">%s</caption><thead><tr>"
		       "<th scope=\"col\">Variant</th><th scope=\"col\">%s</th></tr></thead><tbody>", caption, id, caption,
		   accepted ? "Rank" : "Reason");
	json_array_foreach(list, i, v) {
		page_html(pg, "<tr>");
		page_cell(pg, "<th scope=\"row\" class=\"mono\">", str(v, "name"));
		if (accepted)
			page_htmlf(pg, "<td>%lld</td>", (long long)json_integer_value(json_object_get(v, "rank")));
		else
			page_cell(pg, "<td>", str(v, "reason"));
		page_html(pg, "</tr>");
	}
	page_html(pg, "</tbody></table></div>");
}

/* The loader's answer for the form's environment, rendered here (the same
 * answer as GET .../variants?compatible=true): works without JavaScript.
 * 0, or KHUB_EINVAL when the environment is not one (the reason shown). */
static int wil_answer(struct page *pg, struct request *req, const struct variant_rows *rows)
{
	struct variant_env env;
	char why[2048];
	size_t i;
	json_t *w;
	if (kernel_environment_parse(wil_query, req, &env, why, sizeof(why)) < 0) {
		page_html(pg, "<p class=\"problem\" role=\"alert\">");
		page_text(pg, why);
		page_html(pg, "</p>");
		return KHUB_EINVAL;
	}
	json_t *answer = json_object();
	kernel_compatibility_add(answer, rows, &env);
	const char *selected = json_string_value(json_object_get(answer, "selected"));
	page_html(pg, "<p id=\"wil-selected\" data-selected=\"");
	page_text(pg, selected ? selected : "");
	page_html(pg, selected ? "\">get_kernel would load: <strong class=\"mono\">" :
				 "\">No variant of this revision loads in that environment.");
	if (selected) {
		page_text(pg, selected);
		page_html(pg, "</strong>");
	}
	page_html(pg, "</p>");
	json_array_foreach(json_object_get(answer, "warnings"), i, w) {
		page_html(pg, "<p class=\"notice\">");
		page_text(pg, json_string_value(w));
		page_html(pg, "</p>");
	}
	wil_table(pg, json_object_get(answer, "variants"), "wil-accepted", "Variants that would load, best first", 1);
	wil_table(pg, json_object_get(answer, "rejected"), "wil-rejected", "Variants the loader rejects, and why", 0);
	json_decref(answer);
	return 0;
}

/* A text field of the form, refilled from the query. */
static void wil_field(struct page *pg, struct request *req, const char *name, const char *label, const char *hint)
{
	const char *v = request_query(req, name);
	page_htmlf(pg, "<div><label for=\"wil-%s\">%s</label><input id=\"wil-%s\" name=\"%s\" size=\"7\" "
		       "placeholder=\"%s\" value=\"", name, label, name, name, hint);
	page_text(pg, v ? v : "");
	page_html(pg, "\"></div>");
}

static void wil_select(struct page *pg, struct request *req, const char *name, const char *label,
		       const char *const *values)
{
	const char *v = request_query(req, name);
	page_htmlf(pg, "<div><label for=\"wil-%s\">%s</label><select id=\"wil-%s\" name=\"%s\">", name, label, name, name);
	for (size_t i = 0; values[i]; i += 2)
		page_htmlf(pg, "<option value=\"%s\"%s>%s</option>", values[i],
			   v && strcmp(v, values[i]) == 0 ? " selected" : "", values[i + 1]);
	page_html(pg, "</select></div>");
}

/* What the page's python -c prints: the backend the loader would detect
 * (CUDA, ROCm, XPU with its oneAPI version, Metal when MPS is there, else
 * CPU), and on macOS its version (Metal variants need macOS 26). */
static const char env_snippet[] =
	"python -c \"import torch,platform as p;v=torch.version;x=getattr(v,'xpu',None) or '';"
	"print('torch='+torch.__version__.split('+')[0],('cuda='+v.cuda) if v.cuda else ('rocm='+v.hip) "
	"if getattr(v,'hip',None) else ('xpu='+(x[:4]+'.'+str(int(x[4:6])) if len(x)==8 and x.isdigit() else x)) "
	"if x else 'backend=metal' if torch.backends.mps.is_available() else 'backend=cpu',"
	"'os='+p.system().lower(),'arch='+p.machine(),*(['macos='+p.mac_ver()[0]] if p.system()=='Darwin' else []))\"";

static int will_it_load_section(struct page *pg, struct request *req, const struct repo_record *r, const char *label,
				const char *sha, const struct variant_rows *rows)
{
	static const char *const oses[] = { "linux", "Linux", "darwin", "macOS", "windows", "Windows", NULL };
	static const char *const arches[] = { "x86_64", "x86_64", "aarch64", "aarch64 (arm64)", NULL };
	const char *backends[2 * 16 + 1];
	size_t n = 0;
	for (const struct kernel_backend *b = kernel_backends; b->name && n < 2 * 16; b++) {
		backends[n++] = b->name;
		backends[n++] = b->title;
	}
	backends[n] = NULL;
	page_html(pg, "<section aria-labelledby=\"wil-h\" id=\"will-it-load\"><h2 id=\"wil-h\">Will it load for me?</h2>"
		      "<p>Run this where you use torch and paste its one line below, or fill in the fields:</p>");
	snippet_start(pg, "env-snippet", "Environment snippet");
	page_text(pg, env_snippet);
	snippet_end(pg);
	page_html(pg, "<form class=\"env\" id=\"wil-form\" method=\"get\" action=\"");
	repo_path(pg, r, "#will-it-load");
	page_html(pg, "\" data-endpoint=\"");
	repo_path(pg, r, "/-/variants");
	page_htmlf(pg, "\" data-revision=\"%s\"><input type=\"hidden\" name=\"rev\" value=\"", sha);
	page_text(pg, label);
	page_html(pg, "\"><input type=\"hidden\" name=\"wil\" value=\"1\"><div class=\"grow\" id=\"wil-paste-box\" hidden><label "
		      "for=\"wil-paste\">Paste</label><input id=\"wil-paste\" type=\"text\" size=\"40\" placeholder=\"torch=2.11.0 "
		      "cuda=12.8 os=linux arch=x86_64\" spellcheck=\"false\"></div>");
	wil_field(pg, req, "torch", "Torch", "2.11");
	wil_select(pg, req, "backend", "Backend", backends);
	wil_field(pg, req, "backend_version", "Backend version", "12.8");
	wil_select(pg, req, "os", "OS", oses);
	wil_field(pg, req, "macos", "macOS version", "26.0");
	wil_select(pg, req, "arch", "Arch", arches);
	page_html(pg, "<div><button type=\"submit\">Check</button></div></form>"
		      "<p class=\"muted\">The backend version is the CUDA, ROCm, XPU (oneAPI) or CANN version; "
		      "Metal needs the macOS version.</p><div id=\"wil-result\" aria-live=\"polite\">");
	int rc = request_query(req, "wil") ? wil_answer(pg, req, rows) : 0;
	page_html(pg, "</div></section>");
	return rc;
}

/* The card of the README shown (kernel/card.c): its first paragraph,
 * license and tags from the front matter, and the backends the
 * revision's variants build for. */
static void card_section(struct page *pg, const struct kernel_card *card, const struct variant_rows *rows)
{
	page_html(pg, "<section id=\"kernel-card\" class=\"card\" aria-label=\"About this kernel\">");
	if (card->description) {
		page_html(pg, "<p class=\"description\">");
		page_text(pg, card->description);
		page_html(pg, "</p>");
	}
	page_html(pg, "<dl><div><dt>License</dt><dd id=\"card-license\">");
	page_text(pg, card->license ? card->license : "not given");
	page_html(pg, "</dd></div><div><dt>Tags</dt><dd id=\"card-tags\">");
	for (size_t i = 0; i < card->tags.count; i++) {
		struct strbuf q = STRBUF_INIT;
		strbuf_adds(&q, "/kernels?search=");
		strbuf_add_urlencoded(&q, card->tags.items[i], 0);
		page_html(pg, "<a class=\"badge tag\" href=\"");
		page_text(pg, q.buf);
		page_html(pg, "\">");
		page_text(pg, card->tags.items[i]);
		page_html(pg, "</a> ");
		strbuf_release(&q);
	}
	page_html(pg, card->tags.count ? "" : "none");
	page_html(pg, "</dd></div><div><dt>Backends</dt><dd id=\"card-backends\">");
	size_t shown = 0;
	for (const struct kernel_backend *be = kernel_backends; be->name; be++) {
		int has = 0;
		for (size_t k = 0; k < rows->count && !has; k++) {
			struct variant_name v;
			has = variant_name_parse(rows->items[k].name, &v, NULL) == 0 &&
			      (strcmp(v.backend, be->name) == 0 || strcmp(v.backend, be->noarch) == 0);
		}
		if (has)
			page_htmlf(pg, "%s<span class=\"badge\">%s</span>", shown++ ? " " : "", be->title);
	}
	page_html(pg, shown ? "" : "none in this revision");
	page_html(pg, "</dd></div></dl></section>");
}

/* Relative links open the file pages; relative images come from the page
 * route that reads the repo for the visitor's session (the API's resolve
 * ignores the cookie: a private repo's images would be refused) and never
 * counts a download (repo_page_markdown). The front matter is the card's. */
static void readme_section(struct page *pg, struct repo_handle *h, const char *sha, const char *text,
			   const struct kernel_card *card)
{
	if (!text)
		return;
	page_html(pg, "<section aria-labelledby=\"readme-h\"><h2 id=\"readme-h\">README</h2>");
	repo_page_markdown(pg, &h->record, sha, sha, "", text + card->body_offset);
	page_html(pg, "</section>");
}

/* The version branches as [{"name": "v1", "sha": …}], what charts.js
 * names revisions by (the Versions table's names; a sha otherwise). */
static void versions_attribute(struct page *pg, const struct ref_list *versions)
{
	json_t *list = json_array();
	for (size_t i = 0; i < versions->count; i++)
		json_array_append_new(list, json_pack("{s:s, s:s}", "name", versions->items[i].name,
						      "sha", versions->items[i].sha));
	char *text = json_dumps(list, JSON_COMPACT);
	page_html(pg, "\" data-versions=\"");
	page_text(pg, text ? text : "[]");
	free(text);
	json_decref(list);
}

static void charts_section(struct page *pg, const struct repo_record *r, const struct ref_list *versions)
{
	page_html(pg, "<section aria-labelledby=\"bench-h\" id=\"benchmarks\" data-endpoint=\"");
	repo_path(pg, r, "/-/benchmarks");
	versions_attribute(pg, versions);
	page_html(pg, "\"><h2 id=\"bench-h\">Benchmarks</h2><p><a id=\"bench-csv\" href=\"");
	repo_path(pg, r, "/-/benchmarks/aggregate?format=csv");
	page_html(pg, "\" download>Download the comparison as CSV</a> · <a href=\"");
	repo_path(pg, r, "/-/benchmarks?format=csv");
	page_html(pg, "\" download>every run as CSV</a></p>"
		      "<p class=\"muted js-only\" id=\"bench-status\">Charts need JavaScript.</p>"
		      "<h3>Latency by workload and GPU (ms)</h3><p class=\"muted\" id=\"latency-note\"></p>"
		      "<div class=\"chart\" id=\"chart-latency\"></div>"
		      "<h3>Speedup against the reference</h3><div class=\"table-wrap\" tabindex=\"0\" role=\"region\" "
		      "aria-label=\"Speedup\" id=\"bench-speedup\"></div>"
		      "<h3>History over versions (ms)</h3><div class=\"chart\" id=\"chart-history\"></div>"
		      "<h3>Compare two revisions</h3><form class=\"env\" id=\"bench-compare\"><div><label for=\"cmp-a\">"
		      "Revision A</label><select id=\"cmp-a\"></select></div><div><label for=\"cmp-b\">Revision B</label>"
		      "<select id=\"cmp-b\"></select></div></form><div class=\"table-wrap\" tabindex=\"0\" role=\"region\" aria-label=\"Revision comparison\" id=\"bench-compare-table\"></div>"
		      "</section><section aria-labelledby=\"dl-h\" id=\"downloads\" data-endpoint=\"");
	repo_path(pg, r, "/-/downloads");
	page_html(pg, "\"><h2 id=\"dl-h\">Downloads per variant per day</h2><form class=\"env\" id=\"dl-form\"><div>"
		      "<label for=\"dl-days\">Range</label><select id=\"dl-days\"><option value=\"1\">today</option>"
		      "<option value=\"7\">7 days</option><option value=\"30\" selected>30 days</option>"
		      "<option value=\"90\">90 days</option><option value=\"365\">365 days</option></select></div></form>"
		      "<div class=\"chart\" id=\"chart-downloads\"></div></section>");
}

/* The hub's own measurements (farm runs: source "farm"), newest first,
 * apart from the users' runs the charts draw. */
static void farm_section(struct page *pg, const struct repo_record *r)
{
	struct benchmark_filter f = { .source = "farm", .limit = 20 };
	struct benchmark_rows res;
	page_html(pg, "<section aria-labelledby=\"farm-h\" id=\"farm-benchmarks\"><h2 id=\"farm-h\">Farm benchmarks</h2>");
	if (db_benchmark_rows(r->id, &f, &res) < 0) {
		page_db_problem(pg);
		page_html(pg, "</section>");
		return;
	}
	if (res.count == 0) {
		page_html(pg, "<p class=\"muted\">The hub has not measured this kernel yet.</p></section>");
		benchmark_rows_release(&res);
		return;
	}
	json_t *regs = NULL;
	if (benchmark_regressions_json(r->id, NULL, &regs) == 0)
		web_benchmark_regressions(pg, regs);
	json_decref(regs);
	page_html(pg, "<p class=\"muted\">Measured by the hub's benchmark workers on known devices.</p>"
		      "<div class=\"table-wrap\"><table class=\"farm-runs\"><thead><tr><th>Device</th><th>Commit</th>"
		      "<th>Workload</th><th>Mean (ms)</th><th>Std (ms)</th><th>Worker</th></tr></thead><tbody>");
	for (size_t i = 0; i < res.count; i++) {
		const struct benchmark_row *b = &res.items[i];
		char commit[13];
		snprintf(commit, sizeof(commit), "%s", b->commit);
		page_html(pg, "<tr>");
		page_cell(pg, "<td class=\"farm-device\">", b->gpu);
		page_html(pg, "<td><code>");
		page_text(pg, commit);
		page_html(pg, "</code></td>");
		page_cell(pg, "<td>", b->workload);
		page_cell(pg, "<td>", b->mean);
		page_cell(pg, "<td>", b->std);
		page_cell(pg, "<td>", b->submitter);
		page_html(pg, "</tr>");
	}
	page_html(pg, "</tbody></table></div></section>");
	benchmark_rows_release(&res);
}

/* The build column's matrix: of main's head, else of the newest commit
 * with builds (none: no main and no builds). */
static struct kernel_builds newest_builds(struct request *req, struct repo_handle *h)
{
	struct kernel_builds b = { NULL, 0, web_caller_writes(req) };
	char sha[41];
	int head = repo_resolve_revision(h->git, "main", sha) == 0;
	json_t *list = NULL;
	if (builds_matrices(req, head ? sha : NULL, 1, 0, &list) < 0) {
		b.failed = 1;
		return b;
	}
	if (json_array_size(list))
		b.matrix = json_incref(json_array_get(list, 0));
	else if (head)
		b.matrix = json_pack("{s:s, s:o, s:[]}", "commit", sha, "url",
				     json_sprintf("/kernels/%s/%s/builds?commit=%s", h->record.ns, h->record.name, sha),
				     "variants");
	json_decref(list);
	return b;
}

/* The overview's sections, in order; 400 when the "Will it load" form
 * was given an environment that is none. */
static int kernel_sections(struct page *pg, struct request *req, struct repo_handle *h,
			   const struct ref_list *versions, const char *sha, const char *label,
			   const struct variant_rows *rows)
{
	char *readme = repo_read_text_file(h->git, sha, "README.md", README_LIMIT);
	struct kernel_card card;
	kernel_card_parse(readme ? readme : "", readme ? strlen(readme) : 0, &card);
	json_t *compliance = kernel_compliance_json(rows);
	const char *asked = request_query(req, "rev");
	kernel_page_header_at(pg, h, "overview", asked && asked[0] ? label : NULL);
	card_section(pg, &card, rows);
	usage_section(pg, req, &h->record, versions, sha);
	struct kernel_builds builds = newest_builds(req, h);
	matrix_section(pg, h, rows, label, compliance, &builds);
	json_decref(builds.matrix);
	int rc = will_it_load_section(pg, req, &h->record, label, sha, rows);
	versions_section(pg, h, versions);
	readme_section(pg, h, sha, readme, &card);
	charts_section(pg, &h->record, versions);
	farm_section(pg, &h->record);
	web_benchmark_compare_section(pg, req, h, versions, rows);
	json_decref(compliance);
	kernel_card_release(&card);
	free(readme);
	return rc < 0 ? 400 : 200;
}

enum MHD_Result page_kernel(struct request *req)
{
	struct repo_handle *h = req->repo;
	struct ref_list versions = { 0 };
	struct variant_rows rows = { 0 };
	enum MHD_Result result;
	char sha[41];
	const char *label;
	if (kernel_version_branches(h->git, &versions) < 0)
		return web_error_page(req, 500, "cannot read the branches");
	if (pick_revision(req, h, &versions, sha, &label) < 0) {
		ref_list_release(&versions);
		return web_error_page(req, 404, "no such revision");
	}
	/* indexing an unindexed commit runs in the background: parked */
	if (kernel_variants_load(req, h, sha, &rows, &result) < 0) {
		ref_list_release(&versions);
		return result;
	}
	struct page pg;
	char title[2 * REPO_NAME_MAX + 2];
	snprintf(title, sizeof(title), "%s/%s", h->record.ns, h->record.name);
	page_init(&pg, req, title);
	page_style(&pg, "vendor/uPlot.min.css");
	const char *uplot = web_static_url("vendor/uPlot.iife.min.js");
	strbuf_addf(&pg.head, "<script src=\"%s\" defer></script>\n", uplot ? uplot : "/-/static/vendor/uPlot.iife.min.js");
	page_script(&pg, "kernel.js");
	page_script(&pg, "charts.js");
	int status = kernel_sections(&pg, req, h, &versions, sha, label, &rows);
	variant_rows_release(&rows);
	ref_list_release(&versions);
	return page_send(&pg, status);
}
