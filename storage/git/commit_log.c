/* commit_log.c -- the history of a commit, newest first, one page at a time,
 * with the number of commits reachable (the Hub's X-Total-Count), one
 * commit's description, and the last commit that changed each entry of a
 * folder (bounded walk). */
#include "storage/git/repo.h"

#include <stdlib.h>
#include <string.h>

/* title = the first line; message = what follows the blank line after it,
 * without the one trailing newline commit_builder_write adds. */
static void split_message(const char *raw, char **title, char **message)
{
	const char *nl = strchr(raw, '\n');
	if (!nl) {
		*title = xstrdup(raw);
		*message = xstrdup("");
		return;
	}
	*title = xstrndup(raw, (size_t)(nl - raw));
	const char *rest = nl + 1;
	if (*rest == '\n')
		rest++;
	size_t len = strlen(rest);
	if (len > 0 && rest[len - 1] == '\n')
		len--;
	*message = xstrndup(rest, len);
}

static void fill_info(git_commit *commit, struct commit_info *info)
{
	const git_signature *author = git_commit_author(commit);
	memset(info, 0, sizeof(*info));
	git_oid_tostr(info->sha, sizeof(info->sha), git_commit_id(commit));
	const char *raw = git_commit_message(commit);
	split_message(raw ? raw : "", &info->title, &info->message);
	info->author_name = xstrdup(author && author->name ? author->name : "");
	info->author_email = xstrdup(author && author->email ? author->email : "");
	info->time = (time_t)git_commit_time(commit);
	info->nparents = git_commit_parentcount(commit);
	if (info->nparents) {
		info->parents = xcalloc(info->nparents, sizeof(*info->parents));
		for (unsigned i = 0; i < info->nparents; i++)
			git_oid_tostr(info->parents[i], sizeof(info->parents[i]), git_commit_parent_id(commit, i));
	}
}

int repo_log(git_repository *repo, const char *sha, size_t skip, size_t limit, struct commit_log *out)
{
	git_revwalk *walk = NULL;
	git_oid start, oid;
	size_t alloc = 0;
	int rc = KHUB_EIO;

	memset(out, 0, sizeof(*out));
	if (git_oid_fromstr(&start, sha) < 0)
		return KHUB_EINVAL;
	if (git_revwalk_new(&walk, repo) < 0)
		goto cleanup;
	git_revwalk_sorting(walk, GIT_SORT_TOPOLOGICAL | GIT_SORT_TIME);
	if (git_revwalk_push(walk, &start) < 0) {
		rc = KHUB_ENOTFOUND;
		goto cleanup;
	}
	int grc;
	while ((grc = git_revwalk_next(&oid, walk)) == 0) {
		size_t index = out->total++;
		if (index < skip || index - skip >= limit)
			continue;
		git_commit *commit = NULL;
		if (git_commit_lookup(&commit, repo, &oid) < 0)
			goto cleanup;
		if (out->count == alloc) {
			alloc = alloc ? alloc * 2 : 16;
			out->items = xrealloc(out->items, alloc * sizeof(*out->items));
		}
		fill_info(commit, &out->items[out->count++]);
		git_commit_free(commit);
	}
	if (grc != GIT_ITEROVER)
		goto cleanup;
	rc = 0;
cleanup:
	if (rc < 0) {
		log_git_error("commit log of %s", sha);
		commit_log_release(out);
	}
	git_revwalk_free(walk);
	return rc;
}

int repo_commit_info(git_repository *repo, const char *sha, struct commit_info *out)
{
	git_oid oid;
	git_commit *commit = NULL;
	memset(out, 0, sizeof(*out));
	if (git_oid_fromstr(&oid, sha) < 0)
		return KHUB_EINVAL;
	if (git_commit_lookup(&commit, repo, &oid) < 0)
		return KHUB_ENOTFOUND;
	fill_info(commit, out);
	git_commit_free(commit);
	return 0;
}

void commit_info_release(struct commit_info *c)
{
	if (!c)
		return;
	free(c->title);
	free(c->message);
	free(c->author_name);
	free(c->author_email);
	free(c->parents);
	memset(c, 0, sizeof(*c));
}

void commit_log_release(struct commit_log *log)
{
	if (!log)
		return;
	for (size_t i = 0; i < log->count; i++)
		commit_info_release(&log->items[i]);
	free(log->items);
	memset(log, 0, sizeof(*log));
}

/* The folder dir of a commit's tree ("": the root); NULL when it is absent
 * or not a folder. The caller frees. */
static git_tree *folder_at(git_repository *repo, git_commit *commit, const char *dir)
{
	git_tree *root = NULL, *tree = NULL;
	git_tree_entry *te = NULL;
	if (git_commit_tree(&root, commit) < 0)
		return NULL;
	if (!dir[0])
		return root;
	if (git_tree_entry_bypath(&te, root, dir) == 0 && git_tree_entry_type(te) == GIT_OBJECT_TREE)
		git_tree_lookup(&tree, repo, git_tree_entry_id(te));
	git_tree_entry_free(te);
	git_tree_free(root);
	return tree;
}

/* Whether entry name differs between two folders (NULL: absent). */
static int entry_changed(const git_tree *now, const git_tree *before, const char *name)
{
	const git_tree_entry *a = now ? git_tree_entry_byname(now, name) : NULL;
	const git_tree_entry *b = before ? git_tree_entry_byname(before, name) : NULL;
	if (!a || !b)
		return a != b;
	return !git_oid_equal(git_tree_entry_id(a), git_tree_entry_id(b)) ||
	       git_tree_entry_filemode(a) != git_tree_entry_filemode(b);
}

/* Attribute to commit each unresolved entry it changed against its first
 * parent (*parent, looked up here; NULL for a root commit). Returns how
 * many entries remain unresolved. */
static size_t attribute_commit(git_repository *repo, git_commit *commit, const char *dir, const char *const *names,
			       size_t n, struct commit_info *out, git_commit **parent)
{
	size_t left = 0;
	*parent = NULL;
	if (git_commit_parentcount(commit) > 0 && git_commit_parent(parent, commit, 0) < 0)
		*parent = NULL;
	git_tree *now = folder_at(repo, commit, dir), *before = *parent ? folder_at(repo, *parent, dir) : NULL;
	int same = now && before && git_oid_equal(git_tree_id(now), git_tree_id(before));
	for (size_t i = 0; i < n; i++) {
		if (out[i].sha[0])
			continue;
		if (!same && (!*parent || entry_changed(now, before, names[i])))
			fill_info(commit, &out[i]);
		else
			left++;
	}
	git_tree_free(now);
	git_tree_free(before);
	return left;
}

int repo_last_commits(git_repository *repo, const char *sha, const char *dir, const char *const *names, size_t n,
		      size_t max_walk, struct commit_info *out, int *complete)
{
	git_oid oid;
	git_commit *commit = NULL;
	size_t left = n;
	memset(out, 0, n * sizeof(*out));
	*complete = 1;
	if (git_oid_fromstr(&oid, sha) < 0)
		return KHUB_EINVAL;
	if (git_commit_lookup(&commit, repo, &oid) < 0)
		return KHUB_ENOTFOUND;
	for (size_t walked = 0; commit && left && walked < max_walk; walked++) {
		git_commit *parent;
		left = attribute_commit(repo, commit, dir, names, n, out, &parent);
		git_commit_free(commit);
		commit = parent;
	}
	*complete = left == 0 || !commit;
	git_commit_free(commit);
	return 0;
}
