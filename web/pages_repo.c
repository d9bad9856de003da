/* pages_repo.c -- the file browser (/kernels/{ns}/{name}/tree/{rev}/{path})
 * with sizes, LFS badges and download links, the commit history
 * (/kernels/{ns}/{name}/commits/{rev}), the same-origin JSON paths under
 * /kernels/{ns}/{name}/-/ that answer with the API's own handlers for the
 * session's caller, and -/resolve/{rev}/{path}: a file for the session
 * (README images, download links), never counted as a download. */
#include "web/web_internal.h"

#include <stdlib.h>
#include <string.h>

#define COMMITS_PER_PAGE 50

static void repo_link(struct page *pg, const struct repo_record *r, const char *what, const char *rev,
		      const char *path)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_adds(&sb, "/kernels/");
	strbuf_add_urlencoded(&sb, r->ns, 0);
	strbuf_adds(&sb, "/");
	strbuf_add_urlencoded(&sb, r->name, 0);
	strbuf_addf(&sb, "/%s/", what);
	strbuf_add_urlencoded(&sb, rev, 0);
	if (path && path[0]) {
		strbuf_adds(&sb, "/");
		strbuf_add_urlencoded(&sb, path, 1);
	}
	page_text(pg, sb.buf);
	strbuf_release(&sb);
}

static void breadcrumbs(struct page *pg, const struct repo_record *r, const char *rev, const char *path)
{
	page_html(pg, "<nav aria-label=\"Path\" class=\"crumbs\"><a href=\"");
	repo_link(pg, r, "tree", rev, "");
	page_html(pg, "\">");
	page_text(pg, rev);
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
			repo_link(pg, r, "tree", rev, copy);
			page_html(pg, "\">");
			page_text(pg, last ? last + 1 : copy);
			page_html(pg, "</a>");
		}
		copy[i] = saved;
	}
	free(copy);
	page_html(pg, "</nav>");
}

static void file_row(struct page *pg, const struct repo_record *r, const char *sha, const struct tree_entry *e)
{
	const char *base = strrchr(e->path, '/');
	base = base ? base + 1 : e->path;
	page_html(pg, "<tr><th scope=\"row\"><a href=\"");
	if (e->is_dir)
		repo_link(pg, r, "tree", sha, e->path);
	else
		repo_link(pg, r, "-/resolve", sha, e->path);
	page_html(pg, e->is_dir ? "\">" : "\" download>");
	page_text(pg, base);
	page_html(pg, e->is_dir ? "/</a>" : "</a>");
	if (e->is_lfs)
		page_html(pg, " <span class=\"badge lfs\" title=\"stored with Git LFS\">LFS</span>");
	page_html(pg, "</th><td class=\"num\">");
	if (!e->is_dir) {
		char size[32];
		format_size(e->size, size);
		page_text(pg, size);
	}
	page_html(pg, "</td></tr>");
}

enum MHD_Result page_tree(struct request *req)
{
	struct repo_handle *h = req->repo;
	const char *path = req->path ? req->path : "", *why;
	char sha[41];
	if (path[0] && repo_path_validate(path, &why) < 0)
		return web_error_page(req, 404, "no such path");
	if (repo_resolve_revision(h->git, req->rev, sha) < 0)
		return web_error_page(req, 404, "no such revision");
	struct tree_listing listing = { 0 };
	struct tree_entry file = { 0 };
	int rc = repo_list_tree(h->git, sha, path, 0, &listing);
	if (rc == KHUB_ENOTDIR)
		rc = repo_stat_path(h->git, sha, path, &file);
	if (rc < 0)
		return web_error_page(req, 404, "no such path at this revision");
	struct page pg;
	page_init(&pg, req, path[0] ? path : "Files");
	kernel_page_header(&pg, h, "files");
	breadcrumbs(&pg, &h->record, req->rev, path);
	page_htmlf(&pg, "<p class=\"muted\">Commit <span class=\"mono\">%s</span></p>", sha);
	page_html(&pg, SCROLL_REGION("Files table") "<table id=\"files\"><thead><tr><th scope=\"col\">Name</th><th scope=\"col\" class=\"num\">Size"
		       "</th></tr></thead><tbody>");
	if (file.path)
		file_row(&pg, &h->record, sha, &file);
	for (size_t i = 0; i < listing.count; i++)
		file_row(&pg, &h->record, sha, &listing.entries[i]);
	page_html(&pg, "</tbody></table></div>");
	tree_listing_release(&listing);
	tree_entry_release(&file);
	return page_send(&pg, 200);
}

enum MHD_Result page_commits(struct request *req)
{
	struct repo_handle *h = req->repo;
	char sha[41];
	long p = 0;
	const char *arg = request_query(req, "p");
	if (arg)
		p = strtol(arg, NULL, 10);
	if (p < 0 || p > 100000)
		p = 0;
	if (repo_resolve_revision(h->git, req->rev, sha) < 0)
		return web_error_page(req, 404, "no such revision");
	struct commit_log log = { 0 };
	if (repo_log(h->git, sha, (size_t)p * COMMITS_PER_PAGE, COMMITS_PER_PAGE, &log) < 0)
		return web_error_page(req, 500, "cannot read the history");
	struct page pg;
	page_init(&pg, req, "Commits");
	kernel_page_header(&pg, h, "commits");
	page_html(&pg, "<h2>History of ");
	page_text(&pg, req->rev);
	page_htmlf(&pg, " <span class=\"muted\">(%zu commits)</span></h2><ol id=\"commits\" class=\"commits\">", log.total);
	for (size_t i = 0; i < log.count; i++) {
		const struct commit_info *c = &log.items[i];
		char day[32];
		format_day(c->time, day);
		page_html(&pg, "<li><strong>");
		page_text(&pg, c->title);
		page_html(&pg, "</strong><br><span class=\"muted\">");
		page_text(&pg, c->author_name);
		page_htmlf(&pg, " · %s · </span><a class=\"mono\" href=\"", day);
		repo_link(&pg, &h->record, "tree", c->sha, "");
		page_htmlf(&pg, "\">%.10s</a></li>", c->sha);
	}
	page_html(&pg, "</ol><nav class=\"pager\" aria-label=\"Pages\">");
	if (p > 0) {
		page_html(&pg, "<a rel=\"prev\" href=\"");
		repo_link(&pg, &h->record, "commits", req->rev, "");
		page_htmlf(&pg, "?p=%ld\">← Newer</a>", p - 1);
	}
	if ((size_t)(p + 1) * COMMITS_PER_PAGE < log.total) {
		page_html(&pg, "<a rel=\"next\" href=\"");
		repo_link(&pg, &h->record, "commits", req->rev, "");
		page_htmlf(&pg, "?p=%ld\">Older →</a>", p + 1);
	}
	page_html(&pg, "</nav>");
	commit_log_release(&log);
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
