/* test_commit_diff.c -- repo_commit_diff (storage/git/commit_diff.c) on a
 * temporary bare repo: statuses (renamed included), line numbers, the
 * "no newline at end of file" marker, LFS pointers shown as sizes and oids,
 * the limits on files, lines and bytes, a line cut at DIFF_LINE_MAX, a file
 * over 1 MiB not read, the root commit against the empty tree, an unknown
 * commit. The page itself is t0254's. */
#include "storage/git/repo.h"
#include "storage/lfs/lfs.h"
#include "tap.h"

#include <stdlib.h>
#include <unistd.h>

static char root[64];
static const struct diff_limits roomy = { 100, 10000, 1 << 20 };

/* A commit on parent (NULL: a root) putting files (path, content pairs;
 * content NULL deletes the path), n pairs. */
static void commit_files(git_repository *git, const char *parent, const char *const *files, size_t n, char sha[41])
{
	struct commit_builder *cb = commit_builder_new(git, parent);
	for (size_t i = 0; cb && i < n; i++) {
		if (files[2 * i + 1])
			commit_builder_put_bytes(cb, files[2 * i], files[2 * i + 1], strlen(files[2 * i + 1]), 0100644);
		else
			commit_builder_delete_file(cb, files[2 * i]);
	}
	if (!cb || commit_builder_write(cb, "t", "t@example.com", "s", "", sha) < 0)
		sha[0] = '\0';
	commit_builder_free(cb);
}

/* "line 1\n" .. "line n\n" (the caller frees) */
static char *numbered(int n)
{
	struct strbuf sb = STRBUF_INIT;
	for (int i = 1; i <= n; i++)
		strbuf_addf(&sb, "line %d\n", i);
	return strbuf_detach(&sb, NULL);
}

static void test_rename_and_lines(git_repository *git)
{
	char a[41], b[41];
	char *v1 = xstrdup("one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n");
	char *v2 = xstrdup("one\ntwo\nthree\nfour\nFIVE\nsix\nseven\neight\nnine\nten\n");
	const char *f1[] = { "a.txt", v1, "gone.txt", "x\ny" };
	commit_files(git, NULL, f1, 2, a);
	const char *f2[] = { "a.txt", NULL, "b.txt", v2, "gone.txt", NULL };
	commit_files(git, a, f2, 3, b);
	struct commit_diff d;
	ok(repo_commit_diff(git, b, &roomy, &d) == 0 && d.count == 2 && d.files_total == 2, "two files changed");
	const struct diff_file *r = d.count == 2 ? &d.files[0] : NULL, *g = d.count == 2 ? &d.files[1] : NULL;
	ok(r && r->status == DIFF_RENAMED && r->kind == DIFF_TEXT, "a.txt -> b.txt is a rename");
	is_str(r ? r->old_path : NULL, "a.txt", "its old path");
	is_str(r ? r->new_path : NULL, "b.txt", "its new path");
	ok(r && r->additions == 1 && r->deletions == 1 && r->nhunks == 1, "+1 -1, one hunk");
	ok(r && r->hunks[0].old_start == 2 && r->hunks[0].old_lines == 7 && r->hunks[0].new_start == 2,
	   "the hunk: @@ -2,7 +2,7 @@");
	ok(r && r->nlines == 8 && r->lines[3].origin == '-' && r->lines[3].old_no == 5 && r->lines[3].new_no == 0 &&
	   r->lines[4].origin == '+' && r->lines[4].new_no == 5 && r->lines[4].old_no == 0, "the changed line, numbered");
	is_str(r && r->nlines == 8 ? r->lines[4].text : NULL, "FIVE", "its text, without the newline");
	ok(g && g->status == DIFF_DELETED && g->deletions == 2 && g->nlines == 3 && g->lines[2].origin == '\\',
	   "gone.txt deleted, its missing final newline marked");
	commit_diff_release(&d);
	ok(repo_commit_diff(git, a, &roomy, &d) == 0 && d.count == 2 && d.files[0].status == DIFF_ADDED &&
	   d.files[0].hunks[0].old_start == 0 && d.files[0].lines[9].new_no == 10, "the root commit: added against the empty tree");
	commit_diff_release(&d);
	free(v1);
	free(v2);
}

static void test_lfs(git_repository *git)
{
	char a[41], b[41], p1[LFS_POINTER_MAX], p2[LFS_POINTER_MAX];
	struct lfs_pointer x = { .size = 1200000 }, y = { .size = 1300000 };
	memset(x.oid, 'a', 64);
	memset(y.oid, 'b', 64);
	lfs_pointer_format(&x, p1);
	lfs_pointer_format(&y, p2);
	const char *f1[] = { "w.bin", p1 }, *f2[] = { "w.bin", p2 };
	commit_files(git, NULL, f1, 1, a);
	commit_files(git, a, f2, 1, b);
	struct commit_diff d;
	ok(repo_commit_diff(git, b, &roomy, &d) == 0 && d.count == 1, "an LFS file changed");
	const struct diff_file *f = d.count ? &d.files[0] : NULL;
	ok(f && f->kind == DIFF_LFS && f->status == DIFF_MODIFIED && f->nlines == 0, "shown as LFS, no lines");
	ok(f && f->old_size == 1200000 && f->new_size == 1300000, "the content's sizes");
	ok(f && f->old_oid[0] == 'a' && f->new_oid[63] == 'b' && strlen(f->new_oid) == 64, "the content's oids");
	commit_diff_release(&d);
}

static void test_limits(git_repository *git)
{
	char a[41];
	char *ten = numbered(10), *long_line = xcalloc(1, DIFF_LINE_MAX + 100);
	memset(long_line, 'x', DIFF_LINE_MAX + 99);
	const char *f[] = { "1.txt", ten, "2.txt", ten, "3.txt", ten, "4.txt", ten, "5.txt", long_line };
	commit_files(git, NULL, f, 5, a);
	struct commit_diff d;
	struct diff_limits files3 = { 3, 10000, 1 << 20 }, lines15 = { 100, 15, 1 << 20 }, bytes = { 100, 1000, 30 };
	ok(repo_commit_diff(git, a, &files3, &d) == 0 && d.count == 3 && d.files_total == 5, "at most 3 files described");
	commit_diff_release(&d);
	ok(repo_commit_diff(git, a, &lines15, &d) == 0 && d.count == 5, "a limit of 15 lines: all files described");
	ok(d.count == 5 && d.files[0].nlines == 10 && d.files[1].nlines == 5 && d.files[1].lines_left_out == 5 &&
	   d.files[1].additions == 10, "the second file cut after 5 lines, its counts whole");
	ok(d.count == 5 && !d.files[2].shown && d.files_not_shown == 3 && d.lines_left_out == 5,
	   "the rest only as headers, counted");
	commit_diff_release(&d);
	ok(repo_commit_diff(git, a, &bytes, &d) == 0 && d.count == 5 && d.files[0].nlines == 5 && d.lines_left_out == 5,
	   "a limit of 30 bytes: 5 lines of 6 bytes");
	commit_diff_release(&d);
	ok(repo_commit_diff(git, a, &roomy, &d) == 0 && d.count == 5 && strlen(d.files[4].lines[0].text) == DIFF_LINE_MAX,
	   "a long line is cut at DIFF_LINE_MAX bytes");
	commit_diff_release(&d);
	char big[41];
	char *mib = xcalloc(1, 1100 * 1024 + 1);
	memset(mib, 'y', 1100 * 1024);
	const char *fb[] = { "big.txt", mib };
	commit_files(git, a, fb, 1, big);
	ok(repo_commit_diff(git, big, &roomy, &d) == 0 && d.count == 1 && d.files[0].kind == DIFF_TOO_LARGE &&
	   d.files[0].new_size == 1100 * 1024 && d.files[0].nlines == 0, "a file over 1 MiB: too large, its size");
	commit_diff_release(&d);
	free(mib);
	ok(repo_commit_diff(git, "0123456789012345678901234567890123456789", &roomy, &d) == KHUB_ENOTFOUND && d.count == 0,
	   "an unknown commit: KHUB_ENOTFOUND");
	free(ten);
	free(long_line);
}

int main(void)
{
	repo_store_global_init();
	snprintf(root, sizeof(root), "/tmp/khub-test-diff-XXXXXX");
	if (!mkdtemp(root))
		return 1;
	git_repository *git = NULL;
	ok(repo_store_create(root, REPO_KERNEL, "ns", "k") == 0 && repo_store_open(root, REPO_KERNEL, "ns", "k", &git) == 0,
	   "a bare repo");
	test_rename_and_lines(git);
	test_lfs(git);
	test_limits(git);
	git_repository_free(git);
	char *rm = xasprintf("rm -rf '%s'", root);
	if (system(rm) != 0)
		printf("# cannot remove %s\n", root);
	free(rm);
	git_libgit2_shutdown();
	return done_testing();
}
