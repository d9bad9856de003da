/* pages_kernels.c -- /kernels: the kernel listing (search, filters, sort,
 * pages), answered by GET /api/kernels's own query (kernel_listing_query);
 * and the header and tabs every page of one kernel shares. */
#include "web/web_internal.h"
#include "kernel/kernel.h"

#include <stdlib.h>
#include <string.h>

enum MHD_Result page_home(struct request *req)
{
	return web_redirect(req, "/kernels", NULL);
}

/* The query arguments the listing form has, in the order links repeat them. */
static const char *const listing_keys[] = { "search", "backend", "backend_version", "torch", "arch", "os",
					    "trusted", "sort", "workload", "device", "limit" };

static void option(struct page *pg, const char *value, const char *label, const char *current)
{
	page_html(pg, "<option value=\"");
	page_text(pg, value);
	page_html(pg, current && strcmp(current, value) == 0 ? "\" selected>" : "\">");
	page_text(pg, label);
	page_html(pg, "</option>");
}

static void text_field(struct page *pg, const char *name, const char *label, const char *placeholder,
		       const char *current, const char *type)
{
	page_htmlf(pg, "<div><label for=\"f-%s\">", name);
	page_text(pg, label);
	page_htmlf(pg, "</label><input id=\"f-%s\" name=\"%s\" type=\"%s\" value=\"", name, name, type);
	page_text(pg, current ? current : "");
	page_html(pg, "\" placeholder=\"");
	page_text(pg, placeholder);
	page_html(pg, "\"></div>");
}

static void listing_form(struct page *pg, struct request *req)
{
	const char *backend = request_query(req, "backend"), *arch = request_query(req, "arch");
	const char *os = request_query(req, "os"), *sort = request_query(req, "sort");
	page_html(pg, "<form class=\"filters\" method=\"get\" action=\"/kernels\" role=\"search\" "
		      "aria-label=\"Filter kernels\">");
	text_field(pg, "search", "Search", "name, description, tags, README", request_query(req, "search"), "search");
	page_html(pg, "<div><label for=\"f-backend\">Backend</label><select id=\"f-backend\" name=\"backend\">");
	option(pg, "", "any", backend);
	for (const struct kernel_backend *b = kernel_backends; b->name; b++)
		option(pg, b->name, b->title, backend);
	option(pg, "npu", "NPU", backend);
	page_html(pg, "</select></div>");
	text_field(pg, "torch", "Torch", "2.8", request_query(req, "torch"), "text");
	text_field(pg, "backend_version", "CUDA/ROCm version", "12.8", request_query(req, "backend_version"), "text");
	page_html(pg, "<div><label for=\"f-arch\">Arch</label><select id=\"f-arch\" name=\"arch\">");
	option(pg, "", "any", arch);
	option(pg, "x86_64", "x86_64", arch);
	option(pg, "aarch64", "aarch64", arch);
	page_html(pg, "</select></div><div><label for=\"f-os\">OS</label><select id=\"f-os\" name=\"os\">");
	option(pg, "", "any", os);
	option(pg, "linux", "Linux", os);
	option(pg, "darwin", "macOS", os);
	option(pg, "windows", "Windows", os);
	page_html(pg, "</select></div><div><label for=\"f-sort\">Sort by</label><select id=\"f-sort\" name=\"sort\">");
	option(pg, "lastModified", "recently updated", sort);
	option(pg, "downloads", "downloads", sort);
	option(pg, "trending", "trending", sort);
	option(pg, "id", "name", sort);
	option(pg, "bench", "farm benchmark, fastest first", sort);
	page_html(pg, "</select></div>");
	text_field(pg, "workload", "Benchmark workload", "Relu.big", request_query(req, "workload"), "text");
	text_field(pg, "device", "Benchmark device", "H100", request_query(req, "device"), "text");
	page_html(pg, "<div><label><input type=\"checkbox\" name=\"trusted\" value=\"true\"");
	if (request_query_bool(req, "trusted", 0))
		page_html(pg, " checked");
	page_html(pg, "> Trusted publishers only</label></div><div><button type=\"submit\">Filter</button></div></form>");
}

/* The listing's link to another page of the same query. */
static void page_link(struct page *pg, struct request *req, long cursor, const char *rel, const char *label)
{
	struct strbuf q = STRBUF_INIT;
	strbuf_adds(&q, "/kernels?");
	for (size_t i = 0; i < sizeof(listing_keys) / sizeof(listing_keys[0]); i++) {
		const char *v = request_query(req, listing_keys[i]);
		if (!v || !v[0])
			continue;
		strbuf_addf(&q, "%s=", listing_keys[i]);
		strbuf_add_urlencoded(&q, v, 0);
		strbuf_adds(&q, "&");
	}
	strbuf_addf(&q, "cursor=%ld", cursor);
	page_htmlf(pg, "<a rel=\"%s\" href=\"", rel);
	page_text(pg, q.buf);
	page_html(pg, "\">");
	page_text(pg, label);
	page_html(pg, "</a>");
	strbuf_release(&q);
}

static void badges(struct page *pg, json_t *array, const char *cls)
{
	size_t i;
	json_t *v;
	json_array_foreach(array, i, v) {
		page_htmlf(pg, "<span class=\"badge %s\">", cls);
		page_text(pg, json_string_value(v));
		page_html(pg, "</span> ");
	}
}

#define SPARK_DAYS 14

/* Downloads of the last SPARK_DAYS days per listed repo, oldest first. */
struct sparks {
	int64_t *ids;
	long (*counts)[SPARK_DAYS];
	size_t n;
};

static void sparks_load(struct sparks *sp, json_t *items)
{
	struct download_day *rows;
	size_t nrows;
	sp->n = json_array_size(items);
	sp->ids = xcalloc(sp->n + 1, sizeof(*sp->ids));
	sp->counts = xcalloc(sp->n + 1, sizeof(*sp->counts));
	for (size_t i = 0; i < sp->n; i++)
		sp->ids[i] = strtoll(json_string_value(json_object_get(json_array_get(items, i), "_id")), NULL, 10);
	if (!sp->n || db_downloads_daily(sp->ids, sp->n, SPARK_DAYS, &rows, &nrows) < 0)
		return;	/* no sparkline is no reason to fail the listing */
	for (size_t r = 0; r < nrows; r++) {
		int64_t id = rows[r].repo_id;
		long ago = rows[r].days_ago;
		for (size_t i = 0; i < sp->n && ago >= 0 && ago < SPARK_DAYS; i++)
			if (sp->ids[i] == id)
				sp->counts[i][SPARK_DAYS - 1 - ago] = rows[r].count;
	}
	free(rows);
}

static void sparks_release(struct sparks *sp)
{
	free(sp->ids);
	free(sp->counts);
}

/* An inline SVG line of daily downloads (no script, no style attribute). */
static void sparkline(struct page *pg, const long counts[SPARK_DAYS])
{
	long max = 1;
	for (int d = 0; d < SPARK_DAYS; d++)
		if (counts[d] > max)
			max = counts[d];
	page_htmlf(pg, "<svg class=\"spark\" width=\"70\" height=\"18\" viewBox=\"0 0 %d 18\" role=\"img\" "
		       "aria-label=\"downloads per day, last %d days\"><polyline points=\"", (SPARK_DAYS - 1) * 5, SPARK_DAYS);
	for (int d = 0; d < SPARK_DAYS; d++)
		page_htmlf(pg, "%s%d,%ld", d ? " " : "", d * 5, 16 - counts[d] * 15 / max);
	page_html(pg, "\"/></svg>");
}

/* Under the name: the README's first paragraph, its license and tags (the
 * listing API's description, license and tags). */
static void listing_card(struct page *pg, json_t *item)
{
	const char *description = json_string_value(json_object_get(item, "description"));
	const char *license = json_string_value(json_object_get(item, "license"));
	size_t i;
	json_t *tag;
	if (description && description[0]) {
		page_html(pg, "<p class=\"description\">");
		page_text(pg, description);
		page_html(pg, "</p>");
	}
	page_html(pg, "<p class=\"card-tags\">");
	if (license) {
		page_html(pg, "<span class=\"badge license\" title=\"license\">");
		page_text(pg, license);
		page_html(pg, "</span> ");
	}
	json_array_foreach(json_object_get(item, "tags"), i, tag) {
		const char *t = json_string_value(tag);
		if (!t || strncmp(t, "license:", 8) == 0)
			continue;	/* shown as the license */
		page_html(pg, "<span class=\"badge tag\">");
		page_text(pg, t);
		page_html(pg, "</span> ");
	}
	page_html(pg, "</p>");
}

/* Sorted by a farm result: the kernel's (the listing API's "benchmark"). */
static void listing_bench(struct page *pg, json_t *item)
{
	json_t *bench = json_object_get(item, "benchmark");
	if (!bench)
		return;
	json_t *median = json_object_get(bench, "medianMs");
	page_html(pg, "<p class=\"bench-result\">");
	page_text(pg, json_string_value(json_object_get(bench, "workload")));
	if (json_is_number(median))
		page_htmlf(pg, ": <strong>%.4g ms</strong> median on the farm", json_number_value(median));
	else
		page_html(pg, ": no farm result");
	page_html(pg, "</p>");
}

static void listing_row(struct page *pg, json_t *item, const long spark[SPARK_DAYS])
{
	const char *id = json_string_value(json_object_get(item, "id"));
	const char *author = json_string_value(json_object_get(item, "author"));
	const char *slash = id ? strchr(id, '/') : NULL;
	if (!id || !author || !slash)
		return;
	page_html(pg, "<tr data-id=\"");
	page_text(pg, id);
	page_html(pg, "\"><td><a href=\"/");
	page_text(pg, author);
	page_html(pg, "\">");
	page_text(pg, author);
	page_html(pg, "</a> / <a class=\"kernel-link\" href=\"/kernels/");
	page_text(pg, id);
	page_html(pg, "\"><strong>");
	page_text(pg, slash + 1);
	page_html(pg, "</strong></a> ");
	if (json_is_true(json_object_get(item, "trustedPublisher")))
		page_html(pg, "<span class=\"badge trusted\" title=\"published by a trusted kernel publisher\">trusted</span> ");
	if (json_is_true(json_object_get(item, "private")))
		page_html(pg, "<span class=\"badge private\">private</span>");
	listing_card(pg, item);
	listing_bench(pg, item);
	page_html(pg, "</td><td>");
	badges(pg, json_object_get(item, "versions"), "");
	page_html(pg, "</td><td>");
	badges(pg, json_object_get(item, "supportedDriverFamilies"), "");
	page_htmlf(pg, "</td><td class=\"num\">%lld</td><td class=\"num\">%lld ",
		   (long long)json_integer_value(json_object_get(item, "downloads")),
		   (long long)json_integer_value(json_object_get(item, "trendingScore")));
	sparkline(pg, spark);
	page_html(pg, "</td><td>");
	/* "2026-11-23T10:29:33.000Z" shown as "2026-11-23 10:29", the full time on hover */
	const char *modified = json_string_value(json_object_get(item, "lastModified"));
	if (modified && strlen(modified) >= 16) {
		page_html(pg, "<time datetime=\"");
		page_text(pg, modified);
		page_html(pg, "\">");
		html_escape_n(&pg->main, modified, 10);
		page_html(pg, " ");
		html_escape_n(&pg->main, modified + 11, 5);
		page_html(pg, "</time>");
	}
	page_html(pg, "</td></tr>");
}

enum MHD_Result page_kernels(struct request *req)
{
	struct kernel_listing_page lp;
	const char *error = NULL;
	int rc = kernel_listing_query(req, NULL, 0, &lp, &error);
	if (rc == 1)
		return MHD_YES;	/* parked: the index catches up first */
	if (rc < 0 && rc != KHUB_EINVAL)
		return web_db_unavailable(req);
	struct page pg;
	page_init(&pg, req, "Kernels");
	page_html(&pg, "<h1>Kernels</h1>");
	listing_form(&pg, req);
	if (rc == KHUB_EINVAL) {
		page_html(&pg, "<p class=\"problem\" role=\"alert\">");
		page_text(&pg, error);
		page_html(&pg, "</p>");
		return page_send(&pg, 400);
	}
	page_htmlf(&pg, "<p class=\"muted\" id=\"result-count\" aria-live=\"polite\">%ld kernel%s</p>", lp.total,
		   lp.total == 1 ? "" : "s");
	page_html(&pg, SCROLL_REGION("Kernels table") "<table id=\"kernels\"><caption class=\"muted\">Kernels matching the "
		       "filters</caption><thead><tr><th scope=\"col\">Kernel</th><th scope=\"col\">Versions</th>"
		       "<th scope=\"col\">Backends</th><th scope=\"col\" class=\"num\">Downloads</th>"
		       "<th scope=\"col\" class=\"num\">Last 7 days, 14-day trend</th><th scope=\"col\">Updated</th></tr></thead><tbody>");
	struct sparks sp = { 0 };
	sparks_load(&sp, lp.items);
	size_t i;
	json_t *item;
	json_array_foreach(lp.items, i, item)
		listing_row(&pg, item, sp.counts[i]);
	sparks_release(&sp);
	page_html(&pg, "</tbody></table></div><nav class=\"pager\" aria-label=\"Pages\">");
	if (lp.cursor > 0)
		page_link(&pg, req, lp.cursor > lp.limit ? lp.cursor - lp.limit : 0, "prev", "← Previous");
	if (lp.rows > 0 && lp.cursor + lp.rows < lp.total)
		page_link(&pg, req, lp.cursor + lp.rows, "next", "Next →");
	page_html(&pg, "</nav>");
	json_decref(lp.items);
	return page_send(&pg, 200);
}

void kernel_page_header(struct page *pg, struct repo_handle *h, const char *tab)
{
	kernel_page_header_at(pg, h, tab, NULL);
}

void kernel_page_header_at(struct page *pg, struct repo_handle *h, const char *tab, const char *rev)
{
	const struct repo_record *r = &h->record;
	struct account owner;
	int trusted = db_account_get(r->ns, &owner) == 0 && owner.trusted_kernel_publisher;
	page_html(pg, "<div class=\"repo-title\"><h1><a href=\"/");
	page_text(pg, r->ns);
	page_html(pg, "\">");
	page_text(pg, r->ns);
	page_html(pg, "</a> / <a href=\"/kernels/");
	page_text(pg, r->ns);
	page_html(pg, "/");
	page_text(pg, r->name);
	page_html(pg, "\">");
	page_text(pg, r->name);
	page_html(pg, "</a></h1>");
	if (trusted)
		page_html(pg, "<span class=\"badge trusted\">trusted publisher</span>");
	if (r->private)
		page_html(pg, "<span class=\"badge private\">private</span>");
	if (r->mirrored)
		page_html(pg, "<span class=\"badge\">mirror</span>");
	page_htmlf(pg, "<span class=\"muted\">%lld downloads</span></div>", (long long)r->downloads);
	static const struct { const char *tab, *label, *what, *suffix; int writers; } tabs[] = {
		{ "overview", "Overview", NULL, "", 0 }, { "files", "Files", "tree", NULL, 0 },
		{ "commits", "Commits", "commits", NULL, 0 }, { "builds", "Builds", NULL, "/builds", 0 },
		{ "settings", "Settings", NULL, "/settings", 1 },	/* the settings form's own rule */
	};
	int writer = web_caller_writes(pg->req);
	page_html(pg, "<nav class=\"tabs\" aria-label=\"Kernel\">");
	for (size_t i = 0; i < sizeof(tabs) / sizeof(tabs[0]); i++) {
		if (tabs[i].writers && !writer)
			continue;
		page_html(pg, "<a href=\"");
		if (tabs[i].what) {	/* Files and Commits stay on the ref being viewed */
			repo_page_link(pg, r, tabs[i].what, rev ? rev : "main", "");
		} else {
			page_html(pg, "/kernels/");
			page_text(pg, r->ns);
			page_html(pg, "/");
			page_text(pg, r->name);
			page_html(pg, tabs[i].suffix);
		}
		page_html(pg, strcmp(tab, tabs[i].tab) == 0 ? "\" aria-current=\"page\">" : "\">");
		page_html(pg, tabs[i].label);
		page_html(pg, "</a>");
	}
	page_html(pg, "</nav>");
}
