/* pages_kernel.c -- /kernels/{ns}/{name}: one kernel's overview. Usage
 * snippets, versions and branches, the variant matrix with the compliance
 * report (the API's own JSON of both), "Will it load for me?" (answered by
 * the variants API, through the page's same-origin JSON path), the rendered
 * README, benchmarks and downloads (charts drawn by web/static/charts.js). */
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

static void usage_section(struct page *pg, struct request *req, const struct repo_record *r,
			  const struct ref_list *versions, const char *sha)
{
	char id[2 * REPO_NAME_MAX + 2];
	snprintf(id, sizeof(id), "%s/%s", r->ns, r->name);
	page_html(pg, "<section aria-labelledby=\"use-h\"><h2 id=\"use-h\">Use it</h2><div class=\"cols\"><div>"
		      "<h3>Python</h3>" SCROLL_PRE("Python snippet") "<code id=\"snippet-python\">from kernels import get_kernel\n\nkernel = get_kernel(\"");
	page_text(pg, id);
	if (versions->count)
		page_htmlf(pg, "\", version=%d)", atoi(versions->items[versions->count - 1].name + 1));
	else
		page_html(pg, "\")");
	page_html(pg, "</code></pre></div><div><h3><code>kernels.lock</code> entry</h3>" SCROLL_PRE("kernels.lock entry") "<code id=\"snippet-lock\">"
		      "{\n  \"repo_id\": \"");
	page_text(pg, id);
	page_htmlf(pg, "\",\n  \"sha\": \"%s\"\n}</code></pre><p class=\"muted\">"
		       "<code>kernels lock</code> adds the variant hashes.</p></div><div><h3>Point the client here</h3>"
		       SCROLL_PRE("HF_ENDPOINT snippet") "<code id=\"snippet-endpoint\">export HF_ENDPOINT=", sha);
	page_text(pg, http_ctx.public_url[0] ? http_ctx.public_url : request_base_url(req));
	page_html(pg, "</code></pre></div></div></section>");
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
	struct db_rows rows;
	json_t *by = json_object();
	if (db_downloads_rows(repo_id, 30, &rows) < 0)
		return by;
	for (size_t i = 0; i < rows.count; i++) {
		const char *v = db_rows_get(&rows, i, DOWNLOAD_COL_VARIANT);
		long long n = strtoll(db_rows_get(&rows, i, DOWNLOAD_COL_COUNT), NULL, 10);
		json_object_set_new(by, v, json_integer(json_integer_value(json_object_get(by, v)) + n));
	}
	db_rows_release(&rows);
	return by;
}

/* Why a revision is not compliant: the required list per system, or a
 * Python-only variant, each with valid metadata (a variant's own reason is
 * in its row). */
static void noncompliance_reason(struct page *pg, json_t *compliance)
{
	json_t *accepted = json_object_get(json_object_get(compliance, "pythonOnly"), "accepted"), *v;
	size_t i;
	page_html(pg, ": no system has all of its required variants with valid metadata, and there is no "
		      "Python-only variant (");
	json_array_foreach(accepted, i, v) {
		page_html(pg, i ? ", " : "");
		page_text(pg, json_string_value(v));
	}
	page_html(pg, ") with valid metadata");
}

/* The compliance summary above the matrix. */
static void compliance_summary(struct page *pg, json_t *compliance)
{
	int compliant = json_is_true(json_object_get(compliance, "compliant"));
	int python_only = json_is_true(json_object_get(json_object_get(compliance, "pythonOnly"), "compliant"));
	json_t *with = json_object_get(compliance, "compliantWith"), *v;
	size_t i;
	page_html(pg, "<p id=\"compliance-summary\">");
	page_html(pg, compliant ? "<span class=\"badge ok\">compliant</span> with the required build list" :
				  "<span class=\"badge bad\">not compliant</span> with the required build list");
	if (json_array_size(with)) {
		page_html(pg, compliant ? " (" : "; compliant for ");
		json_array_foreach(with, i, v) {
			page_html(pg, i ? ", " : "");
			page_text(pg, json_string_value(v));
		}
		page_html(pg, compliant ? ")" : "");
	} else if (python_only) {
		page_html(pg, " (Python-only variants, which load everywhere)");
	} else if (!compliant) {
		noncompliance_reason(pg, compliance);
	}
	page_html(pg, ".</p>");
}

/* One indexed variant's row: name, backend, torch, backend version, arch,
 * OS, size, downloads and status. */
static void variant_row(struct page *pg, const struct variant_row *row, json_t *downloads)
{
	json_t *vj = kernel_variant_json(row);
	json_t *fw = json_object_get(vj, "framework"), *be = json_object_get(vj, "backend");
	const char *metadata = str(json_object_get(vj, "metadata"), "status");
	char size[32];
	format_size((uint64_t)row->total_size, size);
	page_html(pg, "<tr data-variant=\"");
	page_text(pg, row->name);
	page_html(pg, "\">");
	page_cell(pg, "<th scope=\"row\" class=\"mono\">", row->name);
	page_cell(pg, "<td>", str(be, "name"));
	page_cell(pg, "<td>", str(fw, "version"));
	page_cell(pg, "<td>", str(be, "version"));
	page_cell(pg, "<td>", str(vj, "arch"));
	page_cell(pg, "<td>", str(vj, "os"));
	page_htmlf(pg, "<td class=\"num\">%s</td><td class=\"num\">%lld</td><td>", size,
		   (long long)json_integer_value(json_object_get(downloads, row->name)));
	if (!json_is_true(json_object_get(vj, "valid"))) {
		page_html(pg, "<span class=\"badge bad\">invalid name</span>");
	} else if (strcmp(metadata, "ok") != 0) {
		page_html(pg, "<span class=\"badge bad\">metadata ");
		page_text(pg, metadata);
		page_html(pg, "</span> <span class=\"muted metadata-error\">");
		page_text(pg, str(json_object_get(vj, "metadata"), "error"));
		page_html(pg, "</span>");
	} else {
		page_html(pg, "<span class=\"badge ok\">present</span>");
	}
	page_html(pg, "</td></tr>");
	json_decref(vj);
}

/* The rows of required variants that are absent, per group. */
static void missing_rows(struct page *pg, json_t *compliance)
{
	size_t i, m;
	json_t *group, *name;
	json_array_foreach(json_object_get(compliance, "groups"), i, group) {
		json_array_foreach(json_object_get(group, "missing"), m, name) {
			page_html(pg, "<tr class=\"missing\" data-missing=\"");
			page_text(pg, json_string_value(name));
			page_html(pg, "\">");
			page_cell(pg, "<th scope=\"row\" class=\"mono\">", json_string_value(name));
			page_cell(pg, "<td>", str(group, "backend"));
			page_html(pg, "<td colspan=\"6\" class=\"muted\">required for ");
			page_text(pg, str(group, "system"));
			page_html(pg, "</td><td><span class=\"badge missing\">missing</span></td></tr>");
		}
	}
}

static void matrix_section(struct page *pg, struct repo_handle *h, const struct variant_rows *rows, const char *label)
{
	json_t *compliance = kernel_compliance_json(rows), *downloads = downloads_by_variant(h->record.id);
	page_html(pg, "<section aria-labelledby=\"variants-h\"><h2 id=\"variants-h\">Variants of ");
	page_text(pg, label);
	page_html(pg, "</h2>");
	compliance_summary(pg, compliance);
	page_html(pg, SCROLL_REGION("Variant matrix table") "<table id=\"variant-matrix\"><caption class=\"muted\">Build "
		      "variants; rows marked missing are required but absent</caption><thead><tr>"
		      "<th scope=\"col\">Variant</th><th scope=\"col\">Backend</th><th scope=\"col\">Torch</th>"
		      "<th scope=\"col\">CUDA/ROCm</th><th scope=\"col\">Arch</th><th scope=\"col\">OS</th>"
		      "<th scope=\"col\" class=\"num\">Size</th><th scope=\"col\" class=\"num\">Downloads (30 d)</th>"
		      "<th scope=\"col\">Status</th></tr></thead><tbody>");
	for (size_t k = 0; k < rows->count; k++)
		variant_row(pg, &rows->items[k], downloads);
	missing_rows(pg, compliance);
	page_html(pg, "</tbody></table></div></section>");
	json_decref(compliance);
	json_decref(downloads);
}

static void will_it_load_section(struct page *pg, const struct repo_record *r, const char *sha)
{
	page_html(pg, "<section aria-labelledby=\"wil-h\" id=\"will-it-load\"><h2 id=\"wil-h\">Will it load for me?</h2>"
		      "<p>Run this where you use torch and paste its one line below, or fill in the fields:</p>"
		      SCROLL_PRE("Environment snippet") "<code id=\"env-snippet\">python -c \"import torch,platform;v=torch.version;"
		      "print('torch='+torch.__version__.split('+')[0],('cuda='+v.cuda) if v.cuda else "
		      "('rocm='+v.hip) if getattr(v,'hip',None) else 'backend=cpu','os='+platform.system().lower(),"
		      "'arch='+platform.machine())\"</code></pre>"
		      "<form class=\"env\" id=\"wil-form\" method=\"get\" action=\"");
	repo_path(pg, r, "/-/variants");
	page_htmlf(pg, "\"><input type=\"hidden\" name=\"compatible\" value=\"true\">"
		       "<input type=\"hidden\" name=\"revision\" value=\"%s\">"
		       "<div class=\"grow\"><label for=\"wil-paste\">Paste</label><input id=\"wil-paste\" type=\"text\" "
		       "size=\"40\" placeholder=\"torch=2.8.0 cuda=12.8 os=linux arch=x86_64\" spellcheck=\"false\"></div>"
		       "<div><label for=\"wil-torch\">Torch</label><input id=\"wil-torch\" name=\"torch\" size=\"6\" "
		       "placeholder=\"2.8\" required></div>"
		       "<div><label for=\"wil-backend\">Backend</label><select id=\"wil-backend\" name=\"backend\">", sha);
	for (const struct kernel_backend *b = kernel_backends; b->name; b++)
		page_htmlf(pg, "<option value=\"%s\">%s</option>", b->name, b->title);
	page_html(pg, "</select></div><div><label for=\"wil-bver\">Backend version</label><input id=\"wil-bver\" "
		      "size=\"6\" placeholder=\"12.8\"></div>"
		      "<div><label for=\"wil-os\">OS</label><select id=\"wil-os\" name=\"os\"><option>linux</option>"
		      "<option>darwin</option><option>windows</option></select></div>"
		      "<div><label for=\"wil-arch\">Arch</label><select id=\"wil-arch\" name=\"arch\"><option>x86_64</option>"
		      "<option>aarch64</option></select></div>"
		      "<div><button type=\"submit\">Check</button></div></form>"
		      "<div id=\"wil-result\" aria-live=\"polite\"></div></section>");
}

/* The repo's path prefix for what ("tree" or "-/resolve") at sha. */
static char *repo_base(const struct repo_record *r, const char *what, const char *sha)
{
	struct strbuf base = STRBUF_INIT;
	strbuf_adds(&base, "/kernels/");
	strbuf_add_urlencoded(&base, r->ns, 0);
	strbuf_adds(&base, "/");
	strbuf_add_urlencoded(&base, r->name, 0);
	strbuf_addf(&base, "/%s/%s/", what, sha);
	return strbuf_detach(&base, NULL);
}

/* Relative links open the file browser; relative images come from the page
 * route that reads the repo for the visitor's session (the API's resolve
 * ignores the cookie: a private repo's images would be refused) and never
 * counts a download. */
static void readme_section(struct page *pg, struct repo_handle *h, const char *sha)
{
	char *text = repo_read_text_file(h->git, sha, "README.md", README_LIMIT);
	if (!text)
		return;
	struct strbuf html = STRBUF_INIT;
	char *links = repo_base(&h->record, "tree", sha), *images = repo_base(&h->record, "-/resolve", sha);
	struct markdown_bases bases = { links, images };
	page_html(pg, "<section aria-labelledby=\"readme-h\"><h2 id=\"readme-h\">README</h2><article class=\"readme\">");
	if (markdown_render_safe(text, strlen(text), &bases, &html) == 0 && html.buf)
		page_html(pg, html.buf);
	else
		page_html(pg, "<p class=\"problem\">This README could not be rendered.</p>");
	page_html(pg, "</article></section>");
	free(links);
	free(images);
	strbuf_release(&html);
	free(text);
}

static void charts_section(struct page *pg, const struct repo_record *r)
{
	page_html(pg, "<section aria-labelledby=\"bench-h\" id=\"benchmarks\" data-endpoint=\"");
	repo_path(pg, r, "/-/benchmarks");
	page_html(pg, "\"><h2 id=\"bench-h\">Benchmarks</h2><p><a id=\"bench-csv\" href=\"");
	repo_path(pg, r, "/-/benchmarks/aggregate?format=csv");
	page_html(pg, "\" download>Download the comparison as CSV</a> · <a href=\"");
	repo_path(pg, r, "/-/benchmarks?format=csv");
	page_html(pg, "\" download>every run as CSV</a></p>"
		      "<p class=\"muted js-only\" id=\"bench-status\">Charts need JavaScript.</p>"
		      "<h3>Latency by GPU and backend (latest run per workload, ms)</h3><div class=\"chart\" id=\"chart-latency\"></div>"
		      "<h3>Speedup against the reference</h3><div class=\"table-wrap\" tabindex=\"0\" role=\"region\" aria-label=\"Speedup\" id=\"bench-speedup\"></div>"
		      "<h3>History over revisions (mean ms)</h3><div class=\"chart\" id=\"chart-history\"></div>"
		      "<h3>Compare two revisions</h3><form class=\"env\" id=\"bench-compare\"><div><label for=\"cmp-a\">"
		      "Revision A</label><select id=\"cmp-a\"></select></div><div><label for=\"cmp-b\">Revision B</label>"
		      "<select id=\"cmp-b\"></select></div></form><div class=\"table-wrap\" tabindex=\"0\" role=\"region\" aria-label=\"Revision comparison\" id=\"bench-compare-table\"></div>"
		      "</section><section aria-labelledby=\"dl-h\" id=\"downloads\" data-endpoint=\"");
	repo_path(pg, r, "/-/downloads");
	page_html(pg, "\"><h2 id=\"dl-h\">Downloads per variant per day</h2><div class=\"chart\" id=\"chart-downloads\"></div>"
		      "</section>");
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
	kernel_page_header(&pg, h, "overview");
	usage_section(&pg, req, &h->record, &versions, sha);
	matrix_section(&pg, h, &rows, label);
	will_it_load_section(&pg, &h->record, sha);
	versions_section(&pg, h, &versions);
	readme_section(&pg, h, sha);
	charts_section(&pg, &h->record);
	variant_rows_release(&rows);
	ref_list_release(&versions);
	return page_send(&pg, 200);
}
