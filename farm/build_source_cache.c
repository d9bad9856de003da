/* build_source_cache.c -- the source tars of build jobs: made on the work
 * queue (one per repo and commit however many workers ask), written to a
 * temp name and renamed into data_dir/build-source-cache, served from
 * there, and trimmed to build_source_cache_mb, least recently served first. */
#include "farm/farm.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TMP_PREFIX ".tmp-"
/* A tar some of whose LFS pointers stayed pointers (object not stored or
 * not linked yet): served to the requests that waited for it, made again
 * for the next one. */
#define PARTIAL_SUFFIX ".partial.tar"

static uint64_t tars_made, cache_hits;	/* __atomic */
static pthread_mutex_t trim_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- the tar of one commit -------------------------------------------------- */

struct tar_walk {
	git_repository *git;
	struct archive *ar;
	int64_t repo_id;	/* the job's repo: only objects linked to it leave the store */
	int rc;
	size_t lfs_missing;
	int64_t mtime;		/* every member's: the commit's time, as git archive does (the
				 * worker's SOURCE_DATE_EPOCH) */
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
		if (!linked || lfs_store_open_object(farm_settings.lfs, ptr.oid, &fd, &size) < 0) {
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
	archive_entry_set_mtime(e, (time_t)w->mtime, 0);
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
	archive_entry_set_mtime(e, (time_t)w->mtime, 0);
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
	struct tar_walk w = { git, archive_write_new(), repo_id, 0, 0, 0 };
	int rc = KHUB_EIO;
	archive_write_set_format_pax_restricted(w.ar);
	if (archive_write_open_fd(w.ar, fd) != ARCHIVE_OK)
		goto cleanup;
	if (git_oid_fromstr(&oid, sha) < 0 || git_commit_lookup(&commit, git, &oid) < 0 ||
	    git_commit_tree(&tree, commit) < 0) {
		rc = KHUB_ENOTFOUND;
		goto cleanup;
	}
	w.mtime = git_commit_time(commit) > 0 ? (int64_t)git_commit_time(commit) : 0;
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

/* ---- the cache folder ------------------------------------------------------- */

/* {cache}/<repo id>-<sha><suffix> (the caller frees). */
static char *cache_path(int64_t repo_id, const char *sha, const char *suffix)
{
	return xasprintf("%s/%" PRId64 "-%s%s", farm_settings.source_cache_dir, repo_id, sha, suffix);
}

struct cached {
	char *name;
	off_t size;
	time_t mtime;
};

static int by_mtime(const void *a, const void *b)
{
	const struct cached *x = a, *y = b;
	return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

/* Remove the least recently served tars until the folder holds at most its
 * bound (keep: a name never removed, the tar just made; NULL for none);
 * with drop_tmp, temp files too (at start: nothing is being written). A
 * tar removed while it is served stays readable to its open descriptors. */
static void cache_trim(const char *keep, int drop_tmp)
{
	const char *dir = farm_settings.source_cache_dir;
	pthread_mutex_lock(&trim_lock);
	DIR *d = opendir(dir);
	struct cached *items = NULL;
	size_t n = 0, cap = 0;
	long long total = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.' && strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) != 0)
			continue;
		char *path = xasprintf("%s/%s", dir, de->d_name);
		struct stat st;
		if (strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0) {
			if (drop_tmp && unlink(path) == 0)
				log_info("build source cache: removed %s, left by an earlier run", de->d_name);
		} else if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			total += st.st_size;
			if (!keep || strcmp(de->d_name, keep) != 0) {
				if (n == cap)
					items = xrealloc(items, (cap = cap ? 2 * cap : 32) * sizeof(*items));
				items[n++] = (struct cached){ xstrdup(de->d_name), st.st_size, st.st_mtime };
			}
		}
		free(path);
	}
	if (d)
		closedir(d);
	if (n)
		qsort(items, n, sizeof(*items), by_mtime);
	for (size_t i = 0; i < n; i++) {
		if (total > farm_settings.source_cache_bytes) {
			char *path = xasprintf("%s/%s", dir, items[i].name);
			if (unlink(path) == 0)
				total -= items[i].size;
			free(path);
		}
		free(items[i].name);
	}
	free(items);
	pthread_mutex_unlock(&trim_lock);
}

void build_source_cache_init(void)
{
	if (mkdir_p(farm_settings.source_cache_dir, 0700) < 0)
		fatal("cannot create %s: %s", farm_settings.source_cache_dir, strerror(errno));
	cache_trim(NULL, 1);
}

int build_source_cache_open(int64_t repo_id, const char *sha, int complete_only, int *fd, uint64_t *size)
{
	char *paths[2] = { cache_path(repo_id, sha, ".tar"), complete_only ? NULL : cache_path(repo_id, sha, PARTIAL_SUFFIX) };
	int rc = KHUB_ENOTFOUND;
	for (size_t i = 0; i < 2 && rc == KHUB_ENOTFOUND && paths[i]; i++) {
		struct stat st;
		int f = open(paths[i], O_RDONLY | O_CLOEXEC);
		if (f < 0)
			continue;
		if (fstat(f, &st) < 0) {
			close(f);
			continue;
		}
		futimens(f, NULL);	/* served now: trimmed last */
		*fd = f;
		*size = (uint64_t)st.st_size;
		rc = 0;
	}
	free(paths[0]);
	free(paths[1]);
	if (rc == 0 && complete_only)
		__atomic_add_fetch(&cache_hits, 1, __ATOMIC_RELAXED);
	return rc;
}

void build_source_stats(uint64_t *made, uint64_t *hits)
{
	*made = __atomic_load_n(&tars_made, __ATOMIC_RELAXED);
	*hits = __atomic_load_n(&cache_hits, __ATOMIC_RELAXED);
}

/* ---- the job on the work queue ------------------------------------------------ */

struct source_job {
	int64_t build_id, repo_id;
	char sha[41];
	char *ns, *name, *source_url;
};

static void source_job_free(void *arg)
{
	struct source_job *job = arg;
	free(job->ns);
	free(job->name);
	free(job->source_url);
	free(job);
}

static int source_job_run(void *arg)
{
	struct source_job *job = arg;
	git_repository *git = NULL;
	char *tmp = xasprintf("%s/" TMP_PREFIX "%" PRId64 "-%s-XXXXXX", farm_settings.source_cache_dir, job->repo_id,
			      job->sha);
	char *final = NULL, *partial = NULL;
	size_t lfs_missing = 0;
	uint64_t started = monotonic_usec();
	int fd = -1;
	int rc = job->source_url ? build_source_open(job->source_url, &git)
				 : repo_store_open(farm_settings.repo_root, REPO_KERNEL, job->ns, job->name, &git);
	if (rc < 0) {
		rc = KHUB_EIO;
		goto cleanup;
	}
	if ((fd = mkstemp(tmp)) < 0) {
		rc = khub_err_from_errno(errno);
		goto cleanup;
	}
	if ((rc = write_tar(git, job->sha, job->repo_id, fd, &lfs_missing)) < 0)
		goto cleanup;
	/* on disk before its name says it is whole: a crash leaves a temp
	 * file (removed at the next start), never a half tar under the name */
	if (fsync(fd) < 0) {
		rc = khub_err_from_errno(errno);
		goto cleanup;
	}
	final = cache_path(job->repo_id, job->sha, ".tar");
	partial = cache_path(job->repo_id, job->sha, PARTIAL_SUFFIX);
	if (rename(tmp, lfs_missing ? partial : final) < 0) {
		rc = khub_err_from_errno(errno);
		goto cleanup;
	}
	if (!lfs_missing)
		unlink(partial);	/* an older, partial one */
	__atomic_add_fetch(&tars_made, 1, __ATOMIC_RELAXED);
	log_info("build %" PRId64 ": source tar of %s made in %" PRIu64 " ms", job->build_id, job->sha,
		 (monotonic_usec() - started) / 1000u);
	if (lfs_missing)
		log_warn("build %" PRId64 ": %zu LFS objects of %s are not stored or not linked to the repo; sent as pointers",
			 job->build_id, lfs_missing, job->sha);
	cache_trim(strrchr(lfs_missing ? partial : final, '/') + 1, 0);
cleanup:
	if (fd >= 0)
		close(fd);
	if (rc < 0 && fd >= 0)
		unlink(tmp);
	git_repository_free(git);
	free(tmp);
	free(final);
	free(partial);
	return rc;
}

void build_source_make_job(const struct build_row *b, struct farm_job *job)
{
	struct source_job *arg = xcalloc(1, sizeof(*arg));
	arg->build_id = b->id;
	arg->repo_id = b->repo_id;
	snprintf(arg->sha, sizeof(arg->sha), "%s", b->commit);
	arg->ns = xstrdup(b->ns);
	arg->name = xstrdup(b->name);
	if (b->source_url)
		arg->source_url = xstrdup(b->source_url);
	/* one job per repo and commit: the tar depends on nothing else (the
	 * sha fixes the tree; the repo, which LFS objects may come) */
	snprintf(job->key, sizeof(job->key), "build-source-tar/%" PRId64 "/%s", arg->repo_id, arg->sha);
	job->run = source_job_run;
	job->free_arg = source_job_free;
	job->arg = arg;
}
