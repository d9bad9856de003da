/* pages_commit.c -- one commit (/kernels/{ns}/{name}/commit/{sha}): its
 * message, author, time, parents and its diff against the first parent
 * (storage's repo_commit_diff, within this page's limits), and the rows of
 * the commit history (pages_repo.c's /commits/ page). */
#include "web/web_internal.h"

#include <stdlib.h>
#include <string.h>

/* What one commit page shows at most (the rest is counted and said). */
static const struct diff_limits page_limits = { .max_files = 300, .max_lines = 5000, .max_bytes = 512 * 1024 };

/* <time datetime="2026-11-28T09:10:12.000Z">2026-11-28 09:10 UTC</time>,
 * the datetime as the API's commit "date" */
static void page_time(struct page *pg, time_t t)
{
	struct tm tm;
	char iso[32], shown[32];
	if (!gmtime_r(&t, &tm)) {
		page_html(pg, "—");
		return;
	}
	format_iso8601(t, iso);
	strftime(shown, sizeof(shown), "%Y-%m-%d %H:%M UTC", &tm);
	page_htmlf(pg, "<time datetime=\"%s\">%s</time>", iso, shown);
}

void commit_history_row(struct page *pg, const struct repo_record *r, const struct commit_info *c)
{
	page_html(pg, "<li class=\"commit-row\"><div class=\"commit-main\"><a class=\"commit-title\" href=\"");
	repo_page_link(pg, r, "commit", c->sha, "");
	page_html(pg, "\">");
	page_text(pg, c->title[0] ? c->title : "(no message)");
	page_html(pg, "</a><div class=\"muted\">");
	page_text(pg, c->author_name);
	page_html(pg, " · ");
	page_time(pg, c->time);
	page_html(pg, "</div>");
	if (c->message[0]) {
		page_html(pg, "<details class=\"commit-body\"><summary>Description</summary><pre>");
		page_text(pg, c->message);
		page_html(pg, "</pre></details>");
	}
	page_html(pg, "</div><div class=\"commit-side\"><a class=\"mono sha\" href=\"");
	repo_page_link(pg, r, "commit", c->sha, "");
	page_htmlf(pg, "\">%.10s</a> <a class=\"browse\" href=\"", c->sha);
	repo_page_link(pg, r, "tree", c->sha, "");
	page_htmlf(pg, "\" aria-label=\"Browse files at %.10s\">browse files</a></div></li>", c->sha);
}

/* A commit named by 7 to 40 hex digits (nothing else: not a branch). */
static int resolve_sha(struct repo_handle *h, const char *rev, char sha[41])
{
	size_t n = strspn(rev, "0123456789abcdef");
	if (n < 7 || n > 40 || rev[n] != '\0')
		return KHUB_ENOTFOUND;
	if (repo_resolve_commitish(h->git, rev, sha) < 0 || strncmp(sha, rev, n) != 0)
		return KHUB_ENOTFOUND;
	return 0;
}

static void commit_header(struct page *pg, const struct repo_record *r, const struct commit_info *c)
{
	page_html(pg, "<h2 id=\"commit-title\" class=\"commit-title\">");
	page_text(pg, c->title[0] ? c->title : "(no message)");
	page_html(pg, "</h2>");
	if (c->message[0]) {
		page_html(pg, "<pre id=\"commit-body\" class=\"commit-body\">");
		page_text(pg, c->message);
		page_html(pg, "</pre>");
	}
	page_html(pg, "<p class=\"muted\" id=\"commit-meta\"><span class=\"author\">");
	page_text(pg, c->author_name);
	page_html(pg, "</span> committed ");
	page_time(pg, c->time);
	page_htmlf(pg, "</p><dl class=\"commit-ids\"><dt>Commit</dt><dd class=\"mono\" id=\"commit-sha\">%s</dd>", c->sha);
	page_html(pg, c->nparents > 1 ? "<dt>Parents</dt><dd id=\"commit-parents\">" : "<dt>Parent</dt><dd id=\"commit-parents\">");
	if (!c->nparents)
		page_html(pg, "none (the first commit)");
	for (size_t i = 0; i < c->nparents; i++) {
		page_html(pg, i ? " <a class=\"mono\" href=\"" : "<a class=\"mono\" href=\"");
		repo_page_link(pg, r, "commit", c->parents[i], "");
		page_htmlf(pg, "\">%.10s</a>", c->parents[i]);
	}
	page_html(pg, "</dd></dl><p><a id=\"browse-files\" href=\"");
	repo_page_link(pg, r, "tree", c->sha, "");
	page_html(pg, "\">Browse files at this commit</a></p>");
}

static const char *status_word(enum diff_status s)
{
	static const char *const words[] = { "added", "deleted", "modified", "renamed" };
	return words[s];
}

/* The one-line description of a change that is not shown as lines. */
static void size_note(struct page *pg, const struct diff_file *f)
{
	char a[32], b[32];
	format_size(f->old_size, a);
	format_size(f->new_size, b);
	page_html(pg, "<p class=\"diff-note\">");
	if (f->kind == DIFF_LFS) {
		if (f->status == DIFF_ADDED)
			page_htmlf(pg, "LFS object added, %s", b);
		else if (f->status == DIFF_DELETED)
			page_htmlf(pg, "LFS object deleted, %s", a);
		else
			page_htmlf(pg, "LFS object %s → %s", a, b);
		page_html(pg, "</p><p class=\"diff-note mono lfs-oids\">");
		page_htmlf(pg, "%s%s%s", f->old_oid[0] ? "sha256:" : "", f->old_oid, f->old_oid[0] && f->new_oid[0] ? " → " : "");
		page_htmlf(pg, "%s%s", f->new_oid[0] ? "sha256:" : "", f->new_oid);
	} else {
		const char *what = f->kind == DIFF_BINARY ? "binary file" : "file too large to show,";
		if (f->status == DIFF_ADDED)
			page_htmlf(pg, "%s added, %llu bytes", what, (unsigned long long)f->new_size);
		else if (f->status == DIFF_DELETED)
			page_htmlf(pg, "%s deleted, %llu bytes", what, (unsigned long long)f->old_size);
		else
			page_htmlf(pg, "%s changed, %llu → %llu bytes", what, (unsigned long long)f->old_size,
				   (unsigned long long)f->new_size);
	}
	page_html(pg, "</p>");
}

static void line_number(struct page *pg, const char *side, int n)
{
	if (n > 0)
		page_htmlf(pg, "<td class=\"ln %s\">%d</td>", side, n);
	else
		page_htmlf(pg, "<td class=\"ln %s\"></td>", side);
}

static void diff_lines(struct page *pg, const struct diff_file *f)
{
	page_html(pg, "<div class=\"diff-scroll\" tabindex=\"0\" role=\"region\" aria-label=\"Changes to ");
	page_text(pg, f->new_path);
	page_html(pg, "\"><table class=\"diff\"><tbody>");
	for (size_t h = 0; h < f->nhunks; h++) {
		const struct diff_hunk *hk = &f->hunks[h];
		page_htmlf(pg, "<tr class=\"hunk\"><td colspan=\"3\">@@ -%d,%d +%d,%d @@</td></tr>", hk->old_start,
			   hk->old_lines, hk->new_start, hk->new_lines);
		for (size_t i = hk->first; i < hk->first + hk->count; i++) {
			const struct diff_line *l = &f->lines[i];
			const char *cls = l->origin == '+' ? "add" : l->origin == '-' ? "del" : l->origin == ' ' ? "ctx" : "eof";
			page_htmlf(pg, "<tr class=\"%s\">", cls);
			line_number(pg, "old", l->old_no);
			line_number(pg, "new", l->new_no);
			page_htmlf(pg, "<td class=\"code\"><span class=\"sign\">%c</span>", l->origin == '\\' ? '\\' : l->origin);
			page_text(pg, l->text);
			page_html(pg, "</td></tr>");
		}
	}
	page_html(pg, "</tbody></table></div>");
}

static void diff_file_section(struct page *pg, const struct diff_file *f, size_t index)
{
	page_htmlf(pg, "<section class=\"diff-file\" id=\"file-%zu\" data-status=\"%s\"><h3 class=\"diff-head\">", index + 1,
		   status_word(f->status));
	page_htmlf(pg, "<span class=\"badge diff-%s\">%s</span> <span class=\"mono path\">", status_word(f->status),
		   status_word(f->status));
	if (f->status == DIFF_RENAMED) {
		page_text(pg, f->old_path);
		page_html(pg, " → ");
	}
	page_text(pg, f->new_path);
	page_html(pg, "</span>");
	if (f->kind == DIFF_TEXT && f->shown)
		page_htmlf(pg, " <span class=\"diff-stat\"><span class=\"plus\">+%zu</span> <span class=\"minus\">−%zu</span>"
			       "</span>", f->additions, f->deletions);
	page_html(pg, "</h3>");
	if (!f->shown)
		page_html(pg, "<p class=\"diff-note\">not shown: this page's limits were reached</p>");
	else if (f->kind != DIFF_TEXT)
		size_note(pg, f);
	else if (f->nhunks)
		diff_lines(pg, f);
	else if (!f->lines_left_out)
		page_html(pg, "<p class=\"diff-note\">no change in content (empty file or mode only)</p>");
	if (f->shown && f->lines_left_out)
		page_htmlf(pg, "<p class=\"diff-note left-out\">%zu more lines of this file not shown</p>", f->lines_left_out);
	page_html(pg, "</section>");
}

static void diff_summary(struct page *pg, const struct commit_diff *d)
{
	size_t adds = 0, dels = 0, texts = 0;
	for (size_t i = 0; i < d->count; i++) {
		adds += d->files[i].additions, dels += d->files[i].deletions;
		texts += d->files[i].kind == DIFF_TEXT && d->files[i].shown;
	}
	page_htmlf(pg, "<p id=\"diff-summary\">%zu file%s changed", d->files_total, d->files_total == 1 ? "" : "s");
	if (texts)	/* lines of text only: an LFS or binary change has none */
		page_htmlf(pg, ", <span class=\"plus\">+%zu</span> <span class=\"minus\">−%zu</span>", adds, dels);
	page_html(pg, "</p>");
	if (d->files_total > d->count || d->lines_left_out || d->files_not_shown) {
		page_html(pg, "<p class=\"notice\" id=\"diff-left-out\">Left out to keep this page small:");
		if (d->files_total > d->count)
			page_htmlf(pg, " %zu files (only the first %zu are listed);", d->files_total - d->count, d->count);
		if (d->files_not_shown)
			page_htmlf(pg, " the changes of %zu files;", d->files_not_shown);
		if (d->lines_left_out)
			page_htmlf(pg, " %zu lines;", d->lines_left_out);
		page_html(pg, " browse the files at this commit for the rest.</p>");
	}
}

enum MHD_Result page_commit(struct request *req)
{
	struct repo_handle *h = req->repo;
	char sha[41];
	if (resolve_sha(h, req->rev, sha) < 0)
		return web_error_page(req, 404, "no such commit");
	struct commit_info c;
	struct commit_diff d;
	if (repo_commit_info(h->git, sha, &c) < 0)
		return web_error_page(req, 404, "no such commit");
	if (repo_commit_diff(h->git, sha, &page_limits, &d) < 0) {
		commit_info_release(&c);
		return web_error_page(req, 500, "cannot read this commit's changes");
	}
	struct page pg;
	char title[64];
	snprintf(title, sizeof(title), "Commit %.10s", sha);
	page_init(&pg, req, title);
	kernel_page_header(&pg, h, "commits");
	commit_header(&pg, &h->record, &c);
	diff_summary(&pg, &d);
	for (size_t i = 0; i < d.count; i++)
		diff_file_section(&pg, &d.files[i], i);
	commit_diff_release(&d);
	commit_info_release(&c);
	return page_send(&pg, 200);
}
