/* pages_bench_compare.c -- the kernel page's "Compare on the farm" section:
 * two versions (or two variants) per device and workload from the farm's
 * runs, as a server-rendered form and table (benchmark_compare, the API's
 * GET …/benchmarks/compare). */
#include "web/web_internal.h"

#include <string.h>

static int given(const char *s)
{
	return s && *s;
}

static void option(struct page *pg, const char *value, const char *label, const char *current, int *seen)
{
	int selected = current && strcmp(current, value) == 0;
	page_html(pg, "<option value=\"");
	page_text(pg, value);
	page_html(pg, selected ? "\" selected>" : "\">");
	page_text(pg, label);
	page_html(pg, "</option>");
	if (selected)
		*seen = 1;
}

/* A select of the versions and main (and current, when it is another
 * revision, so the form shows what was compared). */
static void revision_select(struct page *pg, const char *id, const char *name, const char *label,
			    const struct ref_list *versions, const char *current)
{
	int seen = 0;
	page_htmlf(pg, "<div><label for=\"%s\">%s</label><select id=\"%s\" name=\"%s\">", id, label, id, name);
	for (size_t i = versions->count; i-- > 0;)
		option(pg, versions->items[i].name, versions->items[i].name, current, &seen);
	option(pg, "main", "main", current, &seen);
	if (given(current) && !seen)
		option(pg, current, current, current, &seen);
	page_html(pg, "</select></div>");
}

static void variant_select(struct page *pg, const char *id, const char *name, const char *label,
			   const struct variant_rows *rows, const char *current)
{
	int seen = 0;
	page_htmlf(pg, "<div><label for=\"%s\">%s</label><select id=\"%s\" name=\"%s\">", id, label, id, name);
	option(pg, "", "any", given(current) ? current : "", &seen);
	for (size_t i = 0; i < rows->count; i++)
		if (rows->items[i].name_valid)
			option(pg, rows->items[i].name, rows->items[i].name, current, &seen);
	if (given(current) && !seen)
		option(pg, current, current, current, &seen);
	page_html(pg, "</select></div>");
}

/* "1.01 ms" cells: the median, then min–max and q1–q3 of the runs' means. */
static void stats_cells(struct page *pg, const struct benchmark_stats *s)
{
	if (!s->runs) {
		page_html(pg, "<td class=\"num\">—</td><td class=\"num\">—</td>");
		return;
	}
	page_htmlf(pg, "<td class=\"num\">%.4g</td><td class=\"num\" title=\"q1–q3 %.4g–%.4g ms, %d run%s\">"
		       "%.4g–%.4g</td>", s->median, s->p25, s->p75, s->runs, s->runs == 1 ? "" : "s", s->min, s->max);
}

static void change_cell(struct page *pg, const struct benchmark_compare_row *c)
{
	const char *word = benchmark_change_word(c);
	if (!word) {
		page_html(pg, "<td>—</td>");
		return;
	}
	page_htmlf(pg, "<td class=\"bench-change bench-%s%s\">%+.1f%% %s", word, c->regression ? " bench-regression" : "",
		   c->change_pct, word);
	if (c->regression)
		page_html(pg, " <strong>(regression)</strong>");
	page_html(pg, "</td>");
}

static json_t *stats_bar(const struct benchmark_stats *s)
{
	return s->runs ? json_pack("{s:f, s:f, s:f}", "median", s->median, "min", s->min, "max", s->max) : json_null();
}

/* What charts.js draws as grouped bars above the table (the numbers are
 * the table's): {"base", "head", "rows": [{"group", "base", "head"}]}. */
static void compare_chart(struct page *pg, const struct benchmark_compare_rows *res, const char *base,
			  const char *head)
{
	json_t *rows = json_array();
	for (size_t i = 0; i < res->count; i++) {
		const struct benchmark_compare_row *c = &res->items[i];
		char *group = xasprintf("%s · %s", c->gpu, c->workload);
		json_array_append_new(rows, json_pack("{s:s, s:o, s:o}", "group", group, "base", stats_bar(&c->base),
						      "head", stats_bar(&c->head)));
		free(group);
	}
	json_t *doc = json_pack("{s:s, s:s, s:o}", "base", base, "head", head, "rows", rows);
	char *text = json_dumps(doc, JSON_COMPACT);
	page_html(pg, "<div class=\"chart\" id=\"chart-farm-compare\" data-compare=\"");
	page_text(pg, text ? text : "");
	page_html(pg, "\"></div>");
	free(text);
	json_decref(doc);
}

/* base and head: the sides' names in the caption; columns: in the headers */
struct compare_names {
	const char *base, *head, *base_column, *head_column;
};

static void compare_table(struct page *pg, const struct benchmark_compare_rows *res, const struct compare_names *n)
{
	if (!res->count) {
		page_html(pg, "<p class=\"muted\" id=\"bench-compare-none\">The farm has no runs of these two sides.</p>");
		return;
	}
	page_htmlf(pg, "<p class=\"muted\">The median of the farm runs' mean latency (ms) and their min–max; the "
		       "change from base to head; a regression is more than %ld%% slower by more than both sides' "
		       "spread.</p>", api_ctx.benchmark_regression_pct);
	compare_chart(pg, res, n->base, n->head);
	page_html(pg, "<div class=\"table-wrap\" tabindex=\"0\" role=\"region\" aria-label=\"Farm comparison\">"
		      "<table class=\"bench-compare-farm\"><caption>");
	page_text(pg, n->base);
	page_html(pg, " against ");
	page_text(pg, n->head);
	page_html(pg, "</caption><thead><tr><th>Device</th><th>Workload</th><th>Change</th><th>");
	page_text(pg, n->base_column);
	page_html(pg, " median</th><th>");
	page_text(pg, n->base_column);
	page_html(pg, " min–max</th><th>");
	page_text(pg, n->head_column);
	page_html(pg, " median</th><th>");
	page_text(pg, n->head_column);
	page_html(pg, " min–max</th></tr></thead><tbody>");
	for (size_t i = 0; i < res->count; i++) {
		const struct benchmark_compare_row *c = &res->items[i];
		page_html(pg, c->regression ? "<tr class=\"regressed\">" : "<tr>");
		page_cell(pg, "<td>", c->gpu);
		page_cell(pg, "<td>", c->workload);
		change_cell(pg, c);
		stats_cells(pg, &c->base);
		stats_cells(pg, &c->head);
		page_html(pg, "</tr>");
	}
	page_html(pg, "</tbody></table></div>");
}

/* "v1 (torch211-…)" when a side names a variant. */
static char *side_label(const char *rev, const char *variant)
{
	return given(variant) ? xasprintf("%s (%s)", rev, variant) : xstrdup(rev);
}

static void compare_result(struct page *pg, struct request *req, struct repo_handle *h,
			   const struct benchmark_compare_ask *ask)
{
	char base_sha[41], head_sha[41];
	struct benchmark_compare_rows res;
	const char *bad;
	int rc = benchmark_compare(req, h, ask, base_sha, head_sha, &res, &bad);
	if (rc == KHUB_ENOTFOUND || rc == KHUB_EINVAL) {
		page_html(pg, "<p class=\"problem\" role=\"alert\">");
		page_text(pg, bad);
		page_html(pg, rc == KHUB_ENOTFOUND ? " names no revision.</p>" : " is no variant name.</p>");
		return;
	}
	if (rc < 0) {
		page_db_problem(pg);
		return;
	}
	char *base = side_label(ask->base, ask->base_variant);
	char *head = side_label(ask->head, ask->head_variant);
	/* the versions name the columns, unless the variants differ */
	int variants = strcmp(given(ask->base_variant) ? ask->base_variant : "",
			      given(ask->head_variant) ? ask->head_variant : "") != 0;
	struct compare_names names = { base, head, variants ? "Base" : ask->base, variants ? "Head" : ask->head };
	compare_table(pg, &res, &names);
	free(base);
	free(head);
	benchmark_compare_rows_release(&res);
}

void web_benchmark_compare_section(struct page *pg, struct request *req, struct repo_handle *h,
				   const struct ref_list *versions, const struct variant_rows *rows)
{
	struct benchmark_compare_ask ask = {
		.base = request_query(req, "base"), .head = request_query(req, "head"),
		.base_variant = request_query(req, "baseVariant"), .head_variant = request_query(req, "headVariant"),
	};
	/* By default the newest version against the one before it. */
	if (!given(ask.base) && versions->count > 1)
		ask.base = versions->items[versions->count - 2].name;
	if (!given(ask.head))
		ask.head = versions->count ? versions->items[versions->count - 1].name : ask.base;
	page_html(pg, "<section aria-labelledby=\"cmp-h\" id=\"compare\"><h2 id=\"cmp-h\">Compare on the farm</h2>"
		      "<p class=\"muted\">Two versions, or one version's two variants, on each device the hub "
		      "measured them on.</p><form class=\"env\" method=\"get\" action=\"#compare\">");
	revision_select(pg, "cmp-base", "base", "Base", versions, ask.base);
	revision_select(pg, "cmp-head", "head", "Head", versions, ask.head);
	variant_select(pg, "cmp-bv", "baseVariant", "Base variant", rows, ask.base_variant);
	variant_select(pg, "cmp-hv", "headVariant", "Head variant", rows, ask.head_variant);
	page_html(pg, "<div><button type=\"submit\">Compare</button></div></form>");
	if (given(ask.base) && given(ask.head))
		compare_result(pg, req, h, &ask);
	page_html(pg, "</section>");
}
