/* commit_build.c -- build a commit on top of a parent through an in-memory
 * index, then move a ref with compare-and-swap. Nothing is visible until the
 * ref moves; a crash before that leaves only unreachable objects. */
#include "storage/git/repo.h"

#include <errno.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

struct commit_builder {
	git_repository *repo;
	git_index *index;
	git_oid parent;
	int has_parent;
};

struct commit_builder *commit_builder_new(git_repository *repo, const char *parent_sha)
{
	struct commit_builder *cb = xcalloc(1, sizeof(*cb));
	git_commit *commit = NULL;
	git_tree *tree = NULL;
	cb->repo = repo;
	if (git_index_new(&cb->index) < 0)
		goto fail;
	if (parent_sha && parent_sha[0]) {
		if (git_oid_fromstr(&cb->parent, parent_sha) < 0 ||
		    git_commit_lookup(&commit, repo, &cb->parent) < 0 ||
		    git_commit_tree(&tree, commit) < 0 || git_index_read_tree(cb->index, tree) < 0)
			goto fail;
		cb->has_parent = 1;
	}
	git_tree_free(tree);
	git_commit_free(commit);
	return cb;
fail:
	log_git_error("commit builder");
	git_tree_free(tree);
	git_commit_free(commit);
	commit_builder_free(cb);
	return NULL;
}

void commit_builder_free(struct commit_builder *cb)
{
	if (!cb)
		return;
	git_index_free(cb->index);
	free(cb);
}

int commit_builder_put_blob(struct commit_builder *cb, const char *path, const char *blob_sha,
			    unsigned mode)
{
	git_index_entry entry;
	memset(&entry, 0, sizeof(entry));
	entry.path = path;
	entry.mode = mode == 0100755 ? GIT_FILEMODE_BLOB_EXECUTABLE : GIT_FILEMODE_BLOB;
	if (git_oid_fromstr(&entry.id, blob_sha) < 0)
		return KHUB_EINVAL;
	/* A file where a staged directory is (or the reverse) replaces it, as
	 * the Hub does; git_index_add would refuse the collision. */
	git_index_remove_directory(cb->index, path, 0);
	for (char *p = strchr(path, '/'); p; p = strchr(p + 1, '/')) {
		char *prefix = xstrndup(path, (size_t)(p - path));
		git_index_remove(cb->index, prefix, 0);
		free(prefix);
	}
	if (git_index_add(cb->index, &entry) < 0) {
		log_git_error("stage file");
		return KHUB_EINVAL;
	}
	return 0;
}

int commit_builder_put_bytes(struct commit_builder *cb, const char *path, const void *data,
			     size_t len, unsigned mode)
{
	git_oid oid;
	char hex[41];
	if (git_blob_create_from_buffer(&oid, cb->repo, data, len) < 0) {
		int err = errno;	/* libgit2 leaves the failed write's errno */
		log_git_error("write blob");
		return khub_err_from_errno(err);
	}
	git_oid_tostr(hex, sizeof(hex), &oid);
	return commit_builder_put_blob(cb, path, hex, mode);
}

int commit_builder_delete_file(struct commit_builder *cb, const char *path)
{
	if (git_index_get_bypath(cb->index, path, 0) == NULL)
		return KHUB_ENOTFOUND;
	return git_index_remove(cb->index, path, 0) < 0 ? KHUB_EIO : 0;
}

int commit_builder_delete_folder(struct commit_builder *cb, const char *path)
{
	size_t before = git_index_entrycount(cb->index);
	char *dir = xstrdup(path);
	size_t len = strlen(dir);
	while (len > 0 && dir[len - 1] == '/')
		dir[--len] = '\0';
	int rc = git_index_remove_directory(cb->index, dir, 0) < 0 ? KHUB_EIO : 0;
	free(dir);
	if (rc == 0 && git_index_entrycount(cb->index) == before)
		return KHUB_ENOTFOUND;
	return rc;
}

int commit_builder_has_file(struct commit_builder *cb, const char *path)
{
	return git_index_get_bypath(cb->index, path, 0) != NULL;
}

void commit_builder_clear(struct commit_builder *cb)
{
	git_index_clear(cb->index);
}

int commit_builder_unchanged(struct commit_builder *cb)
{
	git_oid tree_oid;
	git_commit *parent = NULL;
	int same = 0;
	if (!cb->has_parent || git_index_write_tree_to(&tree_oid, cb->index, cb->repo) < 0)
		return 0;
	if (git_commit_lookup(&parent, cb->repo, &cb->parent) == 0)
		same = git_oid_equal(&tree_oid, git_commit_tree_id(parent));
	git_commit_free(parent);
	return same;
}

int commit_builder_write(struct commit_builder *cb, const char *author_name, const char *author_email,
			 const char *summary, const char *description, char commit_sha[41])
{
	git_oid tree_oid, commit_oid;
	git_tree *tree = NULL;
	git_commit *parent = NULL;
	git_signature *sig = NULL;
	struct strbuf msg = STRBUF_INIT;
	int rc = KHUB_EIO;

	if (git_index_write_tree_to(&tree_oid, cb->index, cb->repo) < 0) {
		rc = khub_err_from_errno(errno);	/* libgit2 leaves the failed write's errno */
		log_git_error("write tree");
		goto cleanup;
	}
	if (git_tree_lookup(&tree, cb->repo, &tree_oid) < 0)
		goto cleanup;
	if (cb->has_parent && git_commit_lookup(&parent, cb->repo, &cb->parent) < 0)
		goto cleanup;
	if (git_signature_now(&sig, author_name, author_email) < 0) {
		log_git_error("signature");
		goto cleanup;
	}
	strbuf_adds(&msg, summary && summary[0] ? summary : "Update");
	strbuf_adds(&msg, "\n");
	if (description && description[0]) {
		strbuf_addf(&msg, "\n%s", description);
		if (description[strlen(description) - 1] != '\n')
			strbuf_adds(&msg, "\n");
	}
	const git_commit *parents[1] = { parent };
	if (git_commit_create(&commit_oid, cb->repo, NULL, sig, sig, NULL, msg.buf, tree,
			      parent ? 1 : 0, parents) < 0) {
		rc = khub_err_from_errno(errno);
		log_git_error("write commit");
		goto cleanup;
	}
	git_oid_tostr(commit_sha, 41, &commit_oid);
	rc = 0;
cleanup:
	strbuf_release(&msg);
	git_signature_free(sig);
	git_commit_free(parent);
	git_tree_free(tree);
	return rc;
}

/* libgit2's move of the ref (its result in *git_rc), as the owner of the
 * repo's ref updates: a .lock file found on the ref is removed at once when
 * its writer is dead, and the move tried again. 0, or KHUB_EBUSY while a
 * live writer holds it (see ref_owner_clear_stale), KHUB_EIO. */
static int update_ref_owned(git_repository *repo, const char *ref_name, const git_oid *old_oid,
			    const git_oid *new_oid, const char *log_message, int *git_rc)
{
	struct ref_owner owner;
	git_reference *ref = NULL;
	int rc = ref_owner_take(repo, ref_name, &owner);
	*git_rc = GIT_ELOCKED;
	for (int attempt = 0; rc == 0 && attempt < 3 && *git_rc == GIT_ELOCKED; attempt++) {
		if (old_oid)
			*git_rc = git_reference_create_matching(&ref, repo, ref_name, new_oid, 1, old_oid, log_message);
		else
			*git_rc = git_reference_create(&ref, repo, ref_name, new_oid, 0, log_message);
		git_reference_free(ref);
		ref = NULL;
		if (*git_rc == GIT_ELOCKED)
			rc = ref_owner_clear_stale(&owner);
	}
	int err = errno;
	ref_owner_release(&owner);
	errno = err;
	return rc;
}

int repo_update_ref(git_repository *repo, const char *ref_name, const char *expected_old,
		    const char *new_sha, const char *log_message)
{
	git_oid new_oid, old_oid;
	int have_old = expected_old && expected_old[0], grc;
	if (git_oid_fromstr(&new_oid, new_sha) < 0)
		return KHUB_EINVAL;
	if (have_old && git_oid_fromstr(&old_oid, expected_old) < 0)
		return KHUB_EINVAL;
	int rc = update_ref_owned(repo, ref_name, have_old ? &old_oid : NULL, &new_oid, log_message, &grc);
	if (rc < 0 || grc == GIT_ELOCKED) {
		log_error("update ref %s: its .lock file is held%s", ref_name, rc == KHUB_EBUSY ? " by a live writer" : "");
		return rc == KHUB_EBUSY ? KHUB_EBUSY : KHUB_EIO;
	}
	if (grc == GIT_EMODIFIED || grc == GIT_EEXISTS)
		return KHUB_ECONFLICT;
	if (grc < 0) {
		int err = errno;
		log_git_error("update ref");
		return grc == GIT_EINVALIDSPEC ? KHUB_EINVAL : khub_err_from_errno(err);
	}
	return 0;
}

int gitattributes_match_lfs(const char *gitattributes, const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	int lfs = 0;
	const char *line = gitattributes;
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t n = nl ? (size_t)(nl - line) : strlen(line);
		char *copy = xstrndup(line, n);
		char *save = NULL, *pattern = strtok_r(copy, " \t\r", &save);
		if (pattern && pattern[0] != '#') {
			int has_lfs = -1;
			for (char *attr; (attr = strtok_r(NULL, " \t\r", &save));) {
				if (strcmp(attr, "filter=lfs") == 0)
					has_lfs = 1;
				else if (strcmp(attr, "-filter") == 0 || strcmp(attr, "!filter") == 0)
					has_lfs = 0;
			}
			int match = strchr(pattern, '/') ? fnmatch(pattern, path, 0) == 0
							  : fnmatch(pattern, base, 0) == 0;
			if (match && has_lfs >= 0)
				lfs = has_lfs;	/* later lines win, as in git */
		}
		free(copy);
		line = nl ? nl + 1 : NULL;
	}
	return lfs;
}

int lfs_should_store(const char *gitattributes, const char *path, const void *head,
		     size_t head_len, uint64_t size)
{
	if (size == 0)
		return 0;
	if (size > LFS_SIZE_THRESHOLD)
		return 1;
	if (gitattributes && gitattributes_match_lfs(gitattributes, path))
		return 1;
	size_t probe = head_len < 8000 ? head_len : 8000;
	return memchr(head, '\0', probe) != NULL;
}

int repo_next_pr_number(git_repository *repo)
{
	git_reference_iterator *it = NULL;
	git_reference *ref;
	int highest = 0;
	if (git_reference_iterator_glob_new(&it, repo, "refs/pr/*") < 0)
		return 1;
	while (git_reference_next(&ref, it) == 0) {
		const char *n = git_reference_name(ref) + strlen("refs/pr/");
		char *end;
		long v = strtol(n, &end, 10);
		if (!*end && v > highest && v < 1000000000)
			highest = (int)v;
		git_reference_free(ref);
	}
	git_reference_iterator_free(it);
	return highest + 1;
}
