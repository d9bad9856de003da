/* repo_lifecycle.c -- a repo's git directory over its life: created fresh
 * (never adopted: a directory already there goes to the trash first),
 * renamed when the repo moves, and moved to the trash, never removed, when
 * the repo is deleted. The trash is {root}/.trash, inside the repos'
 * folder, so that moving into it is a rename on one filesystem. */
#include "storage/git/repo.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The parent of a path ("/a/b/c" -> "/a/b"); the caller frees. */
static char *parent_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return xstrdup(".");
	if (slash == path)
		return xstrdup("/");
	return xstrndup(path, (size_t)(slash - path));
}

char *repo_store_trash_dir(const char *root)
{
	return xasprintf("%s/.trash", root);
}

/* make (repo_store_create or repo_store_init_empty) at the repo's place,
 * never adopting: a directory already there is moved to the trash first. */
static int make_fresh(int (*make)(const char *, enum repo_type, const char *, const char *), const char *root,
		      enum repo_type type, const char *ns, const char *name, char **quarantined)
{
	int rc;
	if (quarantined)
		*quarantined = NULL;
	rc = make(root, type, ns, name);
	if (rc != KHUB_EEXIST)
		return rc;
	/* Not ours (a crash between the directory and the row, or anything
	 * else left there): its content must not become this repo's, so it
	 * goes aside, kept for trash_keep_days. */
	char *dir = repo_store_git_dir(root, type, ns, name);
	log_warn("moving the unregistered git directory %s to the trash before creating the repo", dir);
	free(dir);
	if ((rc = repo_store_trash_to(root, type, ns, name, quarantined)) < 0 && rc != KHUB_ENOTFOUND)
		return rc;
	return make(root, type, ns, name);
}

int repo_store_create_fresh(const char *root, enum repo_type type, const char *ns, const char *name,
			    char **quarantined)
{
	return make_fresh(repo_store_create, root, type, ns, name, quarantined);
}

int repo_store_init_empty_fresh(const char *root, enum repo_type type, const char *ns, const char *name,
				char **quarantined)
{
	return make_fresh(repo_store_init_empty, root, type, ns, name, quarantined);
}

int repo_store_trash_to(const char *root, enum repo_type type, const char *ns, const char *name, char **slot_out)
{
	char *dir = repo_store_git_dir(root, type, ns, name);
	char *trash = repo_store_trash_dir(root);
	char *trash_parent = xasprintf("%s/%s/%s", trash, repo_type_plural(type), ns);
	char *slot = NULL, *from_parent = NULL;
	struct stat st;
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	int rc = KHUB_EIO;

	if (lstat(dir, &st) < 0) {
		rc = errno == ENOENT ? KHUB_ENOTFOUND : KHUB_EIO;
		goto cleanup;
	}
	if (mkdir_p(trash_parent, 0755) < 0) {
		log_error("cannot create %s: %s", trash_parent, strerror(errno));
		goto cleanup;
	}
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	/* mkdtemp makes the name unique; rename(2) then replaces the empty
	 * directory it made. */
	slot = xasprintf("%s/%s.git.%s.XXXXXX", trash_parent, name, stamp);
	if (!mkdtemp(slot)) {
		log_error("cannot create a trash slot in %s: %s", trash_parent, strerror(errno));
		goto cleanup;
	}
	if (rename(dir, slot) < 0) {
		log_error("cannot move %s to %s: %s", dir, slot, strerror(errno));
		rmdir(slot);
		goto cleanup;
	}
	from_parent = parent_dir(dir);
	fsync_dir(from_parent);
	fsync_dir(trash_parent);
	log_info("moved %s to %s", dir, slot);
	rc = 0;
	if (slot_out) {
		*slot_out = slot;
		slot = NULL;
	}
cleanup:
	free(from_parent);
	free(slot);
	free(trash_parent);
	free(trash);
	free(dir);
	return rc;
}

int repo_store_trash(const char *root, enum repo_type type, const char *ns, const char *name)
{
	return repo_store_trash_to(root, type, ns, name, NULL);
}

int repo_store_untrash(const char *root, enum repo_type type, const char *ns, const char *name, const char *slot)
{
	char *dir = repo_store_git_dir(root, type, ns, name);
	char *dir_parent = parent_dir(dir), *slot_parent = parent_dir(slot);
	int rc = 0;
	struct stat st;
	/* rename(2) would replace an empty directory: never put one back over
	 * anything */
	int exists = lstat(dir, &st) == 0;
	if (exists)
		errno = EEXIST;
	if (exists || rename(slot, dir) < 0) {
		log_error("cannot move %s back to %s: %s", slot, dir, strerror(errno));
		rc = KHUB_EIO;
		goto cleanup;
	}
	fsync_dir(slot_parent);
	fsync_dir(dir_parent);
	log_info("moved %s back to %s", slot, dir);
cleanup:
	free(slot_parent);
	free(dir_parent);
	free(dir);
	return rc;
}

int repo_store_rename(const char *root, enum repo_type type, const char *from_ns, const char *from_name,
		      const char *to_ns, const char *to_name)
{
	char *from = repo_store_git_dir(root, type, from_ns, from_name);
	char *to = repo_store_git_dir(root, type, to_ns, to_name);
	char *from_parent = parent_dir(from), *to_parent = parent_dir(to);
	struct stat st;
	int rc = KHUB_EIO;

	if (lstat(from, &st) < 0) {
		rc = errno == ENOENT ? KHUB_ENOTFOUND : KHUB_EIO;
		goto cleanup;
	}
	if (strcmp(from, to) == 0) {
		rc = 0;
		goto cleanup;
	}
	if (lstat(to, &st) == 0) {
		rc = KHUB_EEXIST;
		goto cleanup;
	}
	if (mkdir_p(to_parent, 0755) < 0) {
		log_error("cannot create %s: %s", to_parent, strerror(errno));
		goto cleanup;
	}
	if (rename(from, to) < 0) {
		log_error("cannot rename %s to %s: %s", from, to, strerror(errno));
		rc = errno == EEXIST || errno == ENOTEMPTY ? KHUB_EEXIST : KHUB_EIO;
		goto cleanup;
	}
	fsync_dir(from_parent);
	fsync_dir(to_parent);
	rc = 0;
cleanup:
	free(to_parent);
	free(from_parent);
	free(to);
	free(from);
	return rc;
}
