/* commit_diff.c -- what one commit changed against its first parent (the
 * root commit: against the empty tree), as plain structs for the web UI's
 * commit page: per file its status, how it is shown (lines, an LFS or
 * binary size change), its counts and its hunks with line numbers, all
 * within the caller's limits. */
#include "storage/git/repo.h"
#include "storage/lfs/lfs.h"

#include <stdlib.h>
#include <string.h>

/* Blobs larger than this are not diffed line by line (DIFF_TOO_LARGE). */
#define DIFF_BLOB_MAX (1024 * 1024)
/* Rename detection compares at most this many files. */
#define DIFF_RENAME_LIMIT 200
/* Blob bytes diffed line by line for one commit at most: past this, files
 * are described by their header only (as past the caller's limits). */
#define DIFF_WORK_MAX (32u * 1024 * 1024)

/* What is left of the limits while files are described. */
struct diff_budget {
	size_t lines, bytes;
	uint64_t work;		/* blob bytes that may still be diffed */
};

static int commit_trees(git_repository *repo, const char *sha, git_tree **old_tree, git_tree **new_tree)
{
	git_oid oid;
	git_commit *commit = NULL, *parent = NULL;
	int rc = KHUB_ENOTFOUND;
	*old_tree = *new_tree = NULL;
	if (git_oid_fromstr(&oid, sha) < 0 || git_commit_lookup(&commit, repo, &oid) < 0)
		goto cleanup;
	rc = KHUB_EIO;
	if (git_commit_tree(new_tree, commit) < 0)
		goto cleanup;
	if (git_commit_parentcount(commit) > 0 &&
	    (git_commit_parent(&parent, commit, 0) < 0 || git_commit_tree(old_tree, parent) < 0))
		goto cleanup;
	rc = 0;
cleanup:
	if (rc < 0) {
		git_tree_free(*new_tree);
		*new_tree = NULL;
	}
	git_commit_free(parent);
	git_commit_free(commit);
	return rc;
}

/* One side of a change: its size and, when it is an LFS pointer, the
 * content's oid and size in its place. 1 when LFS, 0 when not, KHUB_EIO. */
static int diff_side(git_odb *odb, const git_diff_file *side, char oid[65], uint64_t *size)
{
	size_t len;
	git_object_t type;
	git_odb_object *obj = NULL;
	struct lfs_pointer ptr;
	oid[0] = '\0';
	*size = 0;
	if (!(side->flags & GIT_DIFF_FLAG_EXISTS) || git_oid_is_zero(&side->id))
		return 0;
	if (git_odb_read_header(&len, &type, odb, &side->id) < 0)
		return KHUB_EIO;
	*size = len;
	if (type != GIT_OBJECT_BLOB || len > LFS_POINTER_MAX)
		return 0;
	if (git_odb_read(&obj, odb, &side->id) < 0)
		return KHUB_EIO;
	int is_lfs = lfs_pointer_parse(git_odb_object_data(obj), git_odb_object_size(obj), &ptr) == 0;
	git_odb_object_free(obj);
	if (is_lfs) {
		memcpy(oid, ptr.oid, 65);
		*size = ptr.size;
	}
	return is_lfs;
}

static enum diff_status status_of(git_delta_t status)
{
	switch (status) {
	case GIT_DELTA_ADDED:
	case GIT_DELTA_COPIED:
		return DIFF_ADDED;
	case GIT_DELTA_DELETED:
		return DIFF_DELETED;
	case GIT_DELTA_RENAMED:
		return DIFF_RENAMED;
	default:
		return DIFF_MODIFIED;
	}
}

static void push_line(struct diff_file *f, size_t *alloc, const git_diff_line *gl, struct diff_budget *b)
{
	if (f->nlines == *alloc) {
		*alloc = *alloc ? *alloc * 2 : 64;
		f->lines = xrealloc(f->lines, *alloc * sizeof(*f->lines));
	}
	struct diff_line *l = &f->lines[f->nlines++];
	memset(l, 0, sizeof(*l));
	switch (gl->origin) {
	case GIT_DIFF_LINE_ADDITION:
	case GIT_DIFF_LINE_DELETION:
	case GIT_DIFF_LINE_CONTEXT:
		l->origin = gl->origin;
		break;
	default:	/* the three "no newline at end of file" markers */
		l->origin = '\\';
		l->text = xstrdup("No newline at end of file");
		return;
	}
	l->old_no = gl->old_lineno > 0 ? gl->old_lineno : 0;
	l->new_no = gl->new_lineno > 0 ? gl->new_lineno : 0;
	size_t len = gl->content_len;
	if (len > 0 && gl->content[len - 1] == '\n')
		len--;
	if (len > 0 && gl->content[len - 1] == '\r')
		len--;
	if (len > DIFF_LINE_MAX)
		len = DIFF_LINE_MAX;
	l->text = xstrndup(gl->content, len);
	b->lines--;
	b->bytes = len < b->bytes ? b->bytes - len : 0;
}

/* The hunks and lines of a text change, as many lines as the budget has. */
static int collect_lines(git_patch *patch, struct diff_budget *b, struct diff_file *f)
{
	size_t nh = git_patch_num_hunks(patch), alloc = 0;
	size_t adds = 0, dels = 0;
	if (git_patch_line_stats(NULL, &adds, &dels, patch) < 0)
		return KHUB_EIO;
	f->additions = adds;
	f->deletions = dels;
	f->hunks = nh ? xcalloc(nh, sizeof(*f->hunks)) : NULL;
	for (size_t h = 0; h < nh; h++) {
		const git_diff_hunk *gh;
		size_t nl;
		if (git_patch_get_hunk(&gh, &nl, patch, h) < 0)
			return KHUB_EIO;
		struct diff_hunk *hunk = &f->hunks[f->nhunks];
		*hunk = (struct diff_hunk){ gh->old_start, gh->old_lines, gh->new_start, gh->new_lines, f->nlines, 0 };
		for (size_t i = 0; i < nl; i++) {
			const git_diff_line *gl;
			if (git_patch_get_line_in_hunk(&gl, patch, h, i) < 0)
				return KHUB_EIO;
			if (b->lines == 0 || b->bytes == 0)
				f->lines_left_out++;
			else
				push_line(f, &alloc, gl, b);
		}
		hunk->count = f->nlines - hunk->first;
		if (hunk->count)
			f->nhunks++;
	}
	return 0;
}

/* Describe the change of delta i into f (zeroed by the caller). */
static int describe_file(git_diff *diff, size_t i, git_odb *odb, struct diff_budget *b, struct diff_file *f)
{
	const git_diff_delta *d = git_diff_get_delta(diff, i);
	git_patch *patch = NULL;
	f->old_path = xstrdup(d->old_file.path ? d->old_file.path : d->new_file.path);
	f->new_path = xstrdup(d->new_file.path ? d->new_file.path : d->old_file.path);
	f->status = status_of(d->status);
	int old_lfs = diff_side(odb, &d->old_file, f->old_oid, &f->old_size);
	int new_lfs = diff_side(odb, &d->new_file, f->new_oid, &f->new_size);
	if (old_lfs < 0 || new_lfs < 0)
		return KHUB_EIO;
	f->shown = 1;
	if (old_lfs || new_lfs) {
		f->kind = DIFF_LFS;
		return 0;
	}
	if (f->old_size > DIFF_BLOB_MAX || f->new_size > DIFF_BLOB_MAX) {
		f->kind = DIFF_TOO_LARGE;	/* never read: not diffed whatever it holds */
		return 0;
	}
	uint64_t work = f->old_size + f->new_size;
	if (b->lines == 0 || b->bytes == 0 || work > b->work) {
		f->shown = 0;
		return 0;
	}
	b->work -= work;
	if (git_patch_from_diff(&patch, diff, i) < 0)
		return KHUB_EIO;
	int rc = 0;
	if (git_patch_get_delta(patch)->flags & GIT_DIFF_FLAG_BINARY)
		f->kind = DIFF_BINARY;
	else
		rc = collect_lines(patch, b, f);
	git_patch_free(patch);
	return rc;
}

static int describe_files(git_repository *repo, git_diff *diff, const struct diff_limits *lim, struct commit_diff *out)
{
	git_odb *odb = NULL;
	struct diff_budget b = { lim->max_lines, lim->max_bytes, DIFF_WORK_MAX };
	if (git_repository_odb(&odb, repo) < 0)
		return KHUB_EIO;
	out->files_total = git_diff_num_deltas(diff);
	size_t n = out->files_total < lim->max_files ? out->files_total : lim->max_files;
	out->files = n ? xcalloc(n, sizeof(*out->files)) : NULL;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct diff_file *f = &out->files[out->count++];
		rc = describe_file(diff, i, odb, &b, f);
		out->lines_left_out += f->lines_left_out;
		out->files_not_shown += !f->shown;
	}
	git_odb_free(odb);
	return rc;
}

int repo_commit_diff(git_repository *repo, const char *sha, const struct diff_limits *lim, struct commit_diff *out)
{
	git_tree *old_tree = NULL, *new_tree = NULL;
	git_diff *diff = NULL;
	git_diff_options opts = GIT_DIFF_OPTIONS_INIT;
	git_diff_find_options find = GIT_DIFF_FIND_OPTIONS_INIT;
	memset(out, 0, sizeof(*out));
	int rc = commit_trees(repo, sha, &old_tree, &new_tree);
	if (rc < 0)
		return rc;
	rc = KHUB_EIO;
	opts.max_size = DIFF_BLOB_MAX;
	opts.context_lines = 3;
	if (git_diff_tree_to_tree(&diff, repo, old_tree, new_tree, &opts) < 0)
		goto cleanup;
	find.flags = GIT_DIFF_FIND_RENAMES;
	find.rename_limit = DIFF_RENAME_LIMIT;
	if (git_diff_find_similar(diff, &find) < 0)
		goto cleanup;
	rc = describe_files(repo, diff, lim, out);
cleanup:
	if (rc < 0) {
		log_git_error("diff of commit %s", sha);
		commit_diff_release(out);
	}
	git_diff_free(diff);
	git_tree_free(old_tree);
	git_tree_free(new_tree);
	return rc;
}

void commit_diff_release(struct commit_diff *diff)
{
	if (!diff)
		return;
	for (size_t i = 0; i < diff->count; i++) {
		struct diff_file *f = &diff->files[i];
		for (size_t j = 0; j < f->nlines; j++)
			free(f->lines[j].text);
		free(f->lines);
		free(f->hunks);
		free(f->old_path);
		free(f->new_path);
	}
	free(diff->files);
	memset(diff, 0, sizeof(*diff));
}
