/* repo_lifecycle.c -- a repo's git directory over its life: created (or
 * adopted after a crash), renamed when the repo moves, and moved to the
 * trash, never removed, when the repo is deleted. */
#include "storage/repo.h"

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

/* Give an adopted repo its initial commit when the crash came before it. */
static int adopt_existing(const char *dir)
{
	git_repository *repo = NULL;
	if (git_repository_open_bare(&repo, dir) < 0)
		return KHUB_ENOTFOUND;	/* not a repository: the caller trashes it */
	int rc = repo_store_initial_commit(repo);
	git_repository_free(repo);
	return rc;
}

int repo_store_create_or_adopt(const char *root, enum repo_type type, const char *ns, const char *name,
			       int *adopted)
{
	char *dir = repo_store_git_dir(root, type, ns, name);
	int rc;
	if (adopted)
		*adopted = 0;
	rc = repo_store_create(root, type, ns, name);
	if (rc != KHUB_EEXIST)
		goto cleanup;
	rc = adopt_existing(dir);
	if (rc == 0) {
		log_warn("adopted the unregistered git directory %s", dir);
		if (adopted)
			*adopted = 1;
		goto cleanup;
	}
	if (rc != KHUB_ENOTFOUND)
		goto cleanup;
	/* Half-initialised and unusable: keep it aside and start afresh. */
	log_warn("moving the unusable git directory %s to the trash", dir);
	if ((rc = repo_store_trash(root, type, ns, name)) < 0)
		goto cleanup;
	rc = repo_store_create(root, type, ns, name);
cleanup:
	free(dir);
	return rc;
}

int repo_store_trash(const char *root, enum repo_type type, const char *ns, const char *name)
{
	char *dir = repo_store_git_dir(root, type, ns, name);
	char *data_dir = parent_dir(root);
	char *trash_parent = xasprintf("%s/trash/%s/%s", data_dir, repo_type_plural(type), ns);
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
cleanup:
	free(from_parent);
	free(slot);
	free(trash_parent);
	free(data_dir);
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
