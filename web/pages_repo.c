/* pages_repo.c -- the file browser (/kernels/{ns}/{name}/tree/{rev}/{path})
 * with sizes, LFS badges, the last commit of each entry and the folder's
 * README, the commit history (/kernels/{ns}/{name}/commits/{rev}), the
 * branch and tag switcher of both and of the file page, the same-origin
 * JSON paths under /kernels/{ns}/{name}/-/ that answer with the API's own
 * handlers for the session's caller, and -/resolve/{rev}/{path}: a file
 * for the session (README images, download links), never counted as a
 * download. A branch or tag name with '/' may be written plainly
 * (/tree/release/v1.2/src): repo_resolve_rev_path splits it. */
#include "web/web_internal.h"

#include <stdlib.h>
#include <string.h>

#define COMMITS_PER_PAGE 50
#define README_LIMIT (1u << 20)
/* the last-commit column walks at most this many commits per listing */
#define LAST_COMMIT_WALK 200

char *repo_page_url(const struct repo_record *r, const char *what, const char *rev, const char *path)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_adds(&sb, "/kernels/");
	strbuf_add_urlencoded(&sb, r->ns, 0);
	strbuf_adds(&sb, "/");
	strbuf_add_urlencoded(&sb, r->name, 0);
	strbuf_addf(&sb, "/%s/", what);
	strbuf_add_urlencoded(&sb, rev, 1);
	if (path && path[0]) {
		strbuf_adds(&sb, "/");
		strbuf_add_urlencoded(&sb, path, 1);
	}
	return strbuf_detach(&sb, NULL);
}

void repo_page_link(struct page *pg, const struct repo_record *r, const char *what, const char *rev, const char *path)
{
	char *url = repo_page_url(r, what, rev, path);
	page_text(pg, url);
	free(url);
}

void repo_page_crumbs(struct page *pg, const struct repo_record *r, const char *rev, const char *path)
{
	page_html(pg, "<nav aria-label=\"Path\" class=\"crumbs\"><a href=\"");
	repo_page_link(pg, r, "tree", rev, "");
	page_html(pg, "\">");
	page_text(pg, r->name);
	page_html(pg, "</a>");
	char *copy = xstrdup(path);
	size_t len = strlen(copy);
	for (size_t i = 0; i <= len; i++) {
		if (copy[i] != '/' && copy[i] != '\0')
			continue;
		char saved = copy[i];
		copy[i] = '\0';
		const char *last = strrchr(copy, '/');
		if (copy[0]) {
			page_html(pg, " / <a href=\"");
			repo_page_link(pg, r, saved ? "tree" : "blob", rev, copy);
			page_html(pg, "\">");
			page_text(pg, last ? last + 1 : copy);
			page_html(pg, "</a>");
		}
		copy[i] = saved;
	}
	free(copy);
	page_html(pg, "</nav>");
}

/* What the switcher's button calls the current revision. */
static const char *ref_kind_label(const struct ref_list *refs, const char *current)
{
	for (size_t i = 0; i < refs->count; i++) {
		const struct ref_item *it = &refs->items[i];
		if (strcmp(it->name, current) == 0 && (it->kind == REF_BRANCH || it->kind == REF_TAG))
			return it->kind == REF_TAG ? "Tag" : "Branch";
	}
	return is_lower_hex(current, 40) ? "Commit" : "Revision";
}

void repo_page_ref_switcher(struct page *pg, struct repo_handle *h, const char *what, const char *current,
			    const char *path)
{
	struct ref_list refs = { 0 };
	if (repo_list_refs(h->git, &refs) < 0)
		refs.count = 0;
	page_htmlf(pg, "<details class=\"ref-switcher\" id=\"ref-switcher\"><summary>%s <strong>",
		   ref_kind_label(&refs, current));
	page_text(pg, current);
	page_html(pg, "</strong></summary><ul aria-label=\"Branches and tags\">");
	for (size_t i = 0; i < refs.count; i++) {
		const struct ref_item *it = &refs.items[i];
		if (it->kind != REF_BRANCH && it->kind != REF_TAG)
			continue;
		page_html(pg, "<li><a href=\"");
		repo_page_link(pg, &h->record, what, it->name, path);
		page_html(pg, strcmp(it->name, current) == 0 ? "\" aria-current=\"true\">" : "\">");
		page_text(pg, it->name);
		page_htmlf(pg, "</a> <span class=\"badge\">%s</span></li>", it->kind == REF_TAG ? "tag" : "branch");
	}
	ref_list_release(&refs);
	page_html(pg, "</ul></details>");
}

void repo_page_markdown(struct page *pg, const struct repo_record *r, const char *ref, const char *sha,
			const char *dir, const char *text)
{
	struct strbuf html = STRBUF_INIT;
	char *links = repo_page_url(r, "blob", ref, dir), *images = repo_page_url(r, "-/resolve", sha, dir);
	char *link_base = xasprintf("%s/", links), *image_base = xasprintf("%s/", images);
	struct markdown_bases bases = { link_base, image_base };
	page_html(pg, "<article class=\"readme\">");
	if (markdown_render_safe(text, strlen(text), &bases, &html) == 0 && html.buf)
		page_html(pg, html.buf);
	else
		page_html(pg, "<p class=\"problem\">This file could not be rendered.</p>");
	page_html(pg, "</article>");
	free(links);
	free(images);
	free(link_base);
	free(image_base);
	strbuf_release(&html);
}

static const char *base_name(const char *path)
{
	const char *base = strrchr(path, '/');
	return base ? base + 1 : path;
}

/* The last-commit cell: title, short sha (to that commit's tree), day; "…"
 * when the bounded walk did not reach it. */
static void last_commit_cell(struct page *pg, const struct repo_record *r, const struct commit_info *c)
{
	page_html(pg, "<td class=\"last-commit\">");
	if (!c || !c->sha[0]) {
		page_htmlf(pg, "<span class=\"muted\" title=\"older than the last %d commits\">…</span></td>",
			   LAST_COMMIT_WALK);
		return;
	}
	char day[32];
	format_day(c->time, day);
	page_text(pg, c->title);
	page_html(pg, " <a class=\"mono\" href=\"");
	repo_page_link(pg, r, "tree", c->sha, "");
	page_htmlf(pg, "\">%.7s</a> <span class=\"muted\">%s</span></td>", c->sha, day);
}

static void file_row(struct page *pg, const struct repo_record *r, const char *ref, const struct tree_entry *e,
		     const struct commit_info *last)
{
	page_html(pg, "<tr><th scope=\"row\"><a href=\"");
	repo_page_link(pg, r, e->is_dir ? "tree" : "blob", ref, e->path);
	page_html(pg, "\">");
	page_text(pg, base_name(e->path));
	page_html(pg, e->is_dir ? "/</a>" : "</a>");
	if (e->is_lfs)
		page_html(pg, " <span class=\"badge lfs\" title=\"stored with Git LFS\">LFS</span>");
	page_html(pg, "</th><td class=\"num\">");
	if (!e->is_dir) {
		char size[32];
		format_size(e->size, size);
		page_text(pg, size);
	}
	page_html(pg, "</td>");
	last_commit_cell(pg, r, last);
	page_html(pg, "</tr>");
}

/* The listing's table with the last commit of each entry. */
static void listing_table(struct page *pg, struct repo_handle *h, const char *ref, const char *sha, const char *dir,
			  const struct tree_listing *listing)
{
	size_t n = listing->count;
	const char **names = xcalloc(n ? n : 1, sizeof(*names));
	struct commit_info *last = xcalloc(n ? n : 1, sizeof(*last));
	int complete = 1;
	for (size_t i = 0; i < n; i++)
		names[i] = base_name(listing->entries[i].path);
	if (n && repo_last_commits(h->git, sha, dir, names, n, LAST_COMMIT_WALK, last, &complete) < 0)
		memset(last, 0, n * sizeof(*last));
	page_html(pg, SCROLL_REGION("Files table") "<table id=\"files\"><thead><tr><th scope=\"col\">Name</th>"
		      "<th scope=\"col\" class=\"num\">Size</th><th scope=\"col\">Last commit</th></tr></thead><tbody>");
	for (size_t i = 0; i < n; i++)
		file_row(pg, &h->record, ref, &listing->entries[i], &last[i]);
	page_html(pg, "</tbody></table></div>");
	for (size_t i = 0; i < n; i++)
		commit_info_release(&last[i]);
	free(last);
	free(names);
}

/* README.md of the folder, rendered under its listing. */
static void folder_readme(struct page *pg, struct repo_handle *h, const char *ref, const char *sha, const char *dir)
{
	char *path = dir[0] ? xasprintf("%s/README.md", dir) : xstrdup("README.md");
	char *text = repo_read_text_file(h->git, sha, path, README_LIMIT);
	if (text) {
		page_html(pg, "<section aria-labelledby=\"readme-h\" id=\"folder-readme\"><h2 id=\"readme-h\">README.md</h2>");
		repo_page_markdown(pg, &h->record, ref, sha, dir, text);
		page_html(pg, "</section>");
	}
	free(text);
	free(path);
}

enum MHD_Result page_tree(struct request *req)
{
	struct repo_handle *h = req->repo;
	const char *path, *why;
	char sha[41], *ref = NULL;
	if (repo_resolve_rev_path(h->git, req->rev, req->path, &ref, &path, sha) < 0)
		return web_error_page(req, 404, "no such revision");
	struct tree_listing listing = { 0 };
	int rc = path[0] && repo_path_validate(path, &why) < 0 ? KHUB_ENOTFOUND :
		 repo_list_tree(h->git, sha, path, 0, &listing);
	if (rc == KHUB_ENOTDIR) {	/* a file: its page */
		char *url = repo_page_url(&h->record, "blob", ref, path);
		enum MHD_Result r = web_redirect(req, url, NULL);
		free(url);
		free(ref);
		return r;
	}
	if (rc < 0) {
		free(ref);
		return web_error_page(req, 404, "no such path at this revision");
	}
	struct page pg;
	page_init(&pg, req, path[0] ? path : "Files");
	kernel_page_header_at(&pg, h, "files", ref);
	page_html(&pg, "<div class=\"file-bar\">");
	repo_page_ref_switcher(&pg, h, "tree", ref, path);
	repo_page_crumbs(&pg, &h->record, ref, path);
	page_html(&pg, "</div>");
	page_htmlf(&pg, "<p class=\"muted\">Commit <span class=\"mono\">%s</span></p>", sha);
	listing_table(&pg, h, ref, sha, path, &listing);
	folder_readme(&pg, h, ref, sha, path);
	tree_listing_release(&listing);
	free(ref);
	return page_send(&pg, 200);
}

static void commits_pager(struct page *pg, const struct repo_record *r, const char *ref, long p, size_t total)
{
	page_html(pg, "</ol><nav class=\"pager\" aria-label=\"Pages\">");
	if (p > 0) {
		page_html(pg, "<a rel=\"prev\" href=\"");
		repo_page_link(pg, r, "commits", ref, "");
		page_htmlf(pg, "?p=%ld\">← Newer</a>", p - 1);
	}
	if ((size_t)(p + 1) * COMMITS_PER_PAGE < total) {
		page_html(pg, "<a rel=\"next\" href=\"");
		repo_page_link(pg, r, "commits", ref, "");
		page_htmlf(pg, "?p=%ld\">Older →</a>", p + 1);
	}
	page_html(pg, "</nav>");
}

enum MHD_Result page_commits(struct request *req)
{
	struct repo_handle *h = req->repo;
	char sha[41], *ref = NULL;
	const char *rest;
	long p = 0;
	const char *arg = request_query(req, "p");
	if (arg)
		p = strtol(arg, NULL, 10);
	if (p < 0 || p > 100000)
		p = 0;
	if (repo_resolve_rev_path(h->git, req->rev, req->path, &ref, &rest, sha) < 0 || rest[0]) {
		free(ref);
		return web_error_page(req, 404, "no such revision");
	}
	struct commit_log log = { 0 };
	if (repo_log(h->git, sha, (size_t)p * COMMITS_PER_PAGE, COMMITS_PER_PAGE, &log) < 0) {
		free(ref);
		return web_error_page(req, 500, "cannot read the history");
	}
	struct page pg;
	page_init(&pg, req, "Commits");
	kernel_page_header_at(&pg, h, "commits", ref);
	repo_page_ref_switcher(&pg, h, "commits", ref, "");
	page_html(&pg, "<h2>History of ");
	page_text(&pg, ref);
	page_htmlf(&pg, " <span class=\"muted\">(%zu commits)</span></h2><ol id=\"commits\" class=\"commits\">", log.total);
	for (size_t i = 0; i < log.count; i++)
		commit_history_row(&pg, &h->record, &log.items[i]);
	commits_pager(&pg, &h->record, ref, p, log.total);
	commit_log_release(&log);
	free(ref);
	return page_send(&pg, 200);
}

enum MHD_Result page_file(struct request *req)
{
	return resolve_for_page(req);
}

/* Each same-origin JSON path and the API row whose handler answers it. */
static const struct {
	const char *suffix;		/* after /kernels/{ns}/{name}/-/ */
	const struct route *table;
	const char *api_pattern;
} aliases[] = {
	{ "variants", kernel_variants_routes, "/api/kernels/{ns}/{name}/variants" },
	{ "benchmarks", benchmark_queries_routes, "/api/kernels/{ns}/{name}/benchmarks" },
	{ "benchmarks/aggregate", benchmark_queries_routes, "/api/kernels/{ns}/{name}/benchmarks/aggregate" },
	{ "downloads", downloads_routes, "/api/kernels/{ns}/{name}/downloads" },
};

enum MHD_Result page_json_alias(struct request *req)
{
	const char *pattern = req->route->pattern;
	const char *dash = strstr(pattern, "/-/");
	if (!dash)
		return web_error_page(req, 404, "no such path");
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
		size_t n = strlen(aliases[i].suffix);
		if (strncmp(dash + 3, aliases[i].suffix, n) != 0 || (dash[3 + n] != '\0' && dash[3 + n] != '/'))
			continue;
		if (dash[3 + n] == '/')
			continue;
		for (const struct route *r = aliases[i].table; r->pattern; r++)
			if (strcmp(r->pattern, aliases[i].api_pattern) == 0 && (r->methods & req->method))
				return r->handler(req);
	}
	return web_error_page(req, 404, "no such path");
}
