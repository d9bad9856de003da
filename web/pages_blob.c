/* pages_blob.c -- one file of a kernel repo
 * (/kernels/{ns}/{name}/blob/{rev}/{path}): Markdown rendered (the
 * sanitising markdown module), text and source as numbered, linkable lines
 * with syntax classes (web/highlight.c), and a card with the size (and
 * the LFS oid) in place of a file that is stored with LFS, binary, over
 * the preview limit or of too many lines. Nothing of a file is ever rendered as markup: an SVG
 * or HTML file is shown as its escaped source. Raw and download buttons
 * use -/resolve (a sandboxed answer). */
#include "web/web_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* larger files get a card, never a preview */
#define PREVIEW_LIMIT (512u * 1024)
/* a NUL byte in the first bytes means binary (git's rule) */
#define BINARY_SNIFF 8000
/* each line is a row of markup: a file of many short lines gets a card
 * too, so that no page grows past a few MB */
#define PREVIEW_LINES 20000

static int is_markdown(const char *path)
{
	size_t n = strlen(path);
	return (n > 3 && strcasecmp(path + n - 3, ".md") == 0) || (n > 9 && strcasecmp(path + n - 9, ".markdown") == 0);
}

static void file_head(struct page *pg, const struct repo_record *r, const char *sha, const struct tree_entry *e,
		      const char *kind)
{
	char size[32];
	format_size(e->size, size);
	const char *base = strrchr(e->path, '/');
	page_html(pg, "<div class=\"file-head\"><h2 id=\"file-name\" class=\"mono\">");
	page_text(pg, base ? base + 1 : e->path);
	page_htmlf(pg, "</h2><span class=\"muted\">%s · %s</span><span class=\"file-actions\"><a class=\"button\" "
		       "id=\"file-raw\" href=\"", size, kind);
	repo_page_link(pg, r, "-/resolve", sha, e->path);
	page_html(pg, "\">Raw</a><a class=\"button\" id=\"file-download\" download href=\"");
	repo_page_link(pg, r, "-/resolve", sha, e->path);
	page_html(pg, "\">Download</a></span></div>");
}

/* The card shown in place of a preview: why, the size, the LFS oid. */
static void file_card(struct page *pg, const struct tree_entry *e, const char *why)
{
	char size[32];
	format_size(e->size, size);
	page_html(pg, "<div class=\"file-card\" id=\"file-card\"><p>");
	page_text(pg, why);
	page_htmlf(pg, "</p><dl><dt>Size</dt><dd id=\"file-size\">%s (%llu bytes)</dd>", size,
		   (unsigned long long)e->size);
	if (e->is_lfs)
		page_htmlf(pg, "<dt>LFS object</dt><dd class=\"mono\" id=\"file-lfs-oid\">sha256:%s</dd>", e->lfs_oid);
	page_htmlf(pg, "<dt>Git blob</dt><dd class=\"mono\">%s</dd></dl></div>", e->oid);
}

static void file_code(struct page *pg, const struct tree_entry *e, const char *text, size_t len)
{
	const struct highlight_lang *lang = highlight_lang_for(e->path);
	page_htmlf(pg, "<div class=\"code\" id=\"file-code\" tabindex=\"0\" role=\"region\" data-lang=\"%s\" "
		       "aria-label=\"Contents of ", highlight_lang_name(lang));
	page_text(pg, e->path);
	page_html(pg, "\"><table><tbody>");
	highlight_lines(&pg->main, text, len, lang);
	page_html(pg, "</tbody></table></div>");
}

static size_t count_lines(const char *data, size_t len)
{
	size_t n = 1;
	for (const char *p = data; (p = memchr(p, '\n', (size_t)(data + len - p))) != NULL; p++)
		n++;
	return n;
}

/* The body: a card, rendered Markdown or the numbered lines. */
static void file_body(struct page *pg, struct repo_handle *h, const char *ref, const char *sha,
		      const struct tree_entry *e)
{
	char *data = NULL;
	size_t len = 0;
	if (e->is_lfs) {
		file_card(pg, e, "This file is stored with Git LFS.");
		return;
	}
	if (e->size > PREVIEW_LIMIT || repo_read_blob(h->git, e->oid, PREVIEW_LIMIT, &data, &len) < 0) {
		file_card(pg, e, "This file is too large to preview.");
		return;
	}
	if (memchr(data, '\0', len < BINARY_SNIFF ? len : BINARY_SNIFF)) {
		file_card(pg, e, "This is a binary file.");
	} else if (count_lines(data, len) > PREVIEW_LINES) {
		file_card(pg, e, "This file has too many lines to preview.");
	} else if (is_markdown(e->path)) {
		const char *slash = strrchr(e->path, '/');
		char *dir = slash ? xstrndup(e->path, (size_t)(slash - e->path)) : xstrdup("");
		repo_page_markdown(pg, &h->record, ref, sha, dir, data);
		free(dir);
	} else {
		file_code(pg, e, data, len);
	}
	free(data);
}

static const char *file_kind(const struct tree_entry *e)
{
	if (e->is_lfs)
		return "LFS";
	if (is_markdown(e->path))
		return "Markdown";
	return highlight_lang_name(highlight_lang_for(e->path));
}

enum MHD_Result page_blob(struct request *req)
{
	struct repo_handle *h = req->repo;
	const char *path, *why;
	char sha[41], *ref = NULL;
	struct tree_entry e = { 0 };
	enum MHD_Result r;
	if (repo_resolve_rev_path(h->git, req->rev, req->path, &ref, &path, sha) < 0)
		return web_error_page(req, 404, "no such revision");
	if (!path[0] || repo_path_validate(path, &why) < 0 || repo_stat_path(h->git, sha, path, &e) < 0) {
		r = web_error_page(req, 404, "no such file at this revision");
		goto cleanup;
	}
	if (e.is_dir) {	/* a folder: its listing */
		char *url = repo_page_url(&h->record, "tree", ref, path);
		r = web_redirect(req, url, NULL);
		free(url);
		goto cleanup;
	}
	struct page pg;
	page_init(&pg, req, path);
	kernel_page_header_at(&pg, h, "files", ref);
	page_html(&pg, "<div class=\"file-bar\">");
	repo_page_ref_switcher(&pg, h, "blob", ref, path);
	repo_page_crumbs(&pg, &h->record, ref, path);
	page_html(&pg, "</div>");
	file_head(&pg, &h->record, sha, &e, file_kind(&e));
	file_body(&pg, h, ref, sha, &e);
	r = page_send(&pg, 200);
cleanup:
	tree_entry_release(&e);
	free(ref);
	return r;
}
