/* build_source.c -- GET /api/builds/{id}/source: the tree of the job's
 * commit as a tar (libarchive, spooled to a temporary file), LFS pointers
 * replaced by their stored content, for the worker holding the lease. */
#include "api/builds.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct tar_walk {
	git_repository *git;
	struct archive *ar;
	int64_t repo_id;	/* the job's repo: only objects linked to it leave the store */
	int rc;
	size_t lfs_missing;
};

/* One regular file: bytes from memory or, for an LFS pointer whose object
 * is stored and linked to the job's repo (the rule every read path keeps:
 * an external source's pointer may name any object of the shared store),
 * from the store. */
static int add_file(struct tar_walk *w, const char *path, const git_blob *blob, unsigned mode)
{
	const void *data = git_blob_rawcontent(blob);
	size_t len = (size_t)git_blob_rawsize(blob);
	struct lfs_pointer ptr;
	int fd = -1;
	uint64_t size = len;
	if (len <= LFS_POINTER_MAX && lfs_pointer_parse(data, len, &ptr) == 0) {
		int linked = db_lfs_linked(w->repo_id, ptr.oid);
		if (linked < 0)
			return KHUB_EDB;
		if (!linked || lfs_store_open_object(api_ctx.lfs, ptr.oid, &fd, &size) < 0) {
			w->lfs_missing++;	/* sent as the pointer: the build will say what is missing */
			fd = -1;
			size = len;
		}
	}
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, path);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, mode == 0100755 ? 0755 : 0644);
	archive_entry_set_size(e, (la_int64_t)size);
	archive_entry_set_mtime(e, 0, 0);
	int rc = archive_write_header(w->ar, e) == ARCHIVE_OK ? 0 : KHUB_EIO;
	if (rc == 0 && fd < 0 && len && archive_write_data(w->ar, data, len) < 0)
		rc = KHUB_EIO;
	if (rc == 0 && fd >= 0) {
		char buf[65536];
		ssize_t n;
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			if (archive_write_data(w->ar, buf, (size_t)n) < 0) {
				rc = KHUB_EIO;
				break;
			}
		if (n < 0)
			rc = KHUB_EIO;
	}
	if (fd >= 0)
		close(fd);
	archive_entry_free(e);
	return rc;
}

static int add_symlink(struct tar_walk *w, const char *path, const git_blob *blob)
{
	char *target = xstrndup(git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob));
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, path);
	archive_entry_set_filetype(e, AE_IFLNK);
	archive_entry_set_perm(e, 0777);
	archive_entry_set_symlink(e, target);
	int rc = archive_write_header(w->ar, e) == ARCHIVE_OK ? 0 : KHUB_EIO;
	archive_entry_free(e);
	free(target);
	return rc;
}

static int walk_entry(const char *root, const git_tree_entry *entry, void *arg)
{
	struct tar_walk *w = arg;
	git_filemode_t mode = git_tree_entry_filemode(entry);
	if (mode != GIT_FILEMODE_BLOB && mode != GIT_FILEMODE_BLOB_EXECUTABLE && mode != GIT_FILEMODE_LINK)
		return 0;	/* trees are walked into; submodules are not sources here */
	git_blob *blob = NULL;
	if (git_blob_lookup(&blob, w->git, git_tree_entry_id(entry)) < 0) {
		w->rc = KHUB_EIO;
		return -1;
	}
	char *path = xasprintf("%s%s", root, git_tree_entry_name(entry));
	w->rc = mode == GIT_FILEMODE_LINK ? add_symlink(w, path, blob) : add_file(w, path, blob, (unsigned)mode);
	free(path);
	git_blob_free(blob);
	return w->rc < 0 ? -1 : 0;
}

/* Write the tree of sha as a tar to fd, LFS content of objects linked to
 * repo_id. */
static int write_tar(git_repository *git, const char *sha, int64_t repo_id, int fd, size_t *lfs_missing)
{
	git_oid oid;
	git_commit *commit = NULL;
	git_tree *tree = NULL;
	struct tar_walk w = { git, archive_write_new(), repo_id, 0, 0 };
	int rc = KHUB_EIO;
	archive_write_set_format_pax_restricted(w.ar);
	if (archive_write_open_fd(w.ar, fd) != ARCHIVE_OK)
		goto cleanup;
	if (git_oid_fromstr(&oid, sha) < 0 || git_commit_lookup(&commit, git, &oid) < 0 ||
	    git_commit_tree(&tree, commit) < 0) {
		rc = KHUB_ENOTFOUND;
		goto cleanup;
	}
	if (git_tree_walk(tree, GIT_TREEWALK_PRE, walk_entry, &w) < 0) {
		rc = w.rc < 0 ? w.rc : KHUB_EIO;
		goto cleanup;
	}
	rc = archive_write_close(w.ar) == ARCHIVE_OK ? 0 : KHUB_EIO;
	*lfs_missing = w.lfs_missing;
cleanup:
	archive_write_free(w.ar);
	git_tree_free(tree);
	git_commit_free(commit);
	return rc;
}

static enum MHD_Result handle_source(struct request *req)
{
	enum MHD_Result result;
	int64_t id;
	struct db_rows rows;
	if (build_id_from_request(req, &id, &result) < 0 || build_require_lease(req, id, &result) < 0)
		return result;
	if (db_build_get(id, &rows) < 0)
		return respond_db_unavailable(req);
	git_repository *git = NULL;
	char sha[41];
	snprintf(sha, sizeof(sha), "%s", db_rows_get(&rows, 0, BUILD_COL_COMMIT));
	int64_t repo_id = strtoll(db_rows_get(&rows, 0, BUILD_COL_REPO_ID), NULL, 10);
	int rc = build_open_job_source(&rows, 0, &git);
	db_rows_release(&rows);
	if (rc < 0)
		return respond_error(req, 500, NULL, "the job's repository cannot be opened");
	char *tmp = xasprintf("%s/source-%" PRId64 "-XXXXXX", api_ctx.builds.tmp_dir, id);
	int fd = mkstemp(tmp);
	size_t lfs_missing = 0;
	if (fd < 0) {
		rc = khub_err_from_errno(errno);
	} else {
		unlink(tmp);	/* the descriptor keeps it until the answer is sent */
		rc = write_tar(git, sha, repo_id, fd, &lfs_missing);
	}
	free(tmp);
	git_repository_free(git);
	if (rc < 0) {
		if (fd >= 0)
			close(fd);
		if (rc == KHUB_ENOSPC)
			return respond_storage_full(req, "the build's source");
		if (rc == KHUB_EDB)
			return respond_db_unavailable(req);
		return respond_error(req, rc == KHUB_ENOTFOUND ? 404 : 500, NULL, "cannot make the source of build %" PRId64, id);
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return respond_error(req, 500, NULL, "cannot make the source of build %" PRId64, id);
	}
	if (lfs_missing)
		log_warn("build %" PRId64 ": %zu LFS objects of %s are not stored or not linked to the repo; sent as pointers", id, lfs_missing, sha);
	struct MHD_Response *resp = MHD_create_response_from_fd64((uint64_t)st.st_size, fd);
	MHD_add_response_header(resp, "Content-Type", "application/x-tar");
	MHD_add_response_header(resp, "X-Source-Commit", sha);
	return respond(req, 200, resp);
}

const struct route build_source_routes[] = {
	{ METHOD_GET, "/api/builds/{arg}/source", handle_source, 0, 0, NULL, ACCESS_WORKER },
	{ 0, NULL, NULL, 0, 0 },
};
