/* commit_log.c -- the history of a commit, newest first, one page at a time,
 * with the number of commits reachable (the Hub's X-Total-Count), and one
 * commit's description. */
#include "storage/repo.h"

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
