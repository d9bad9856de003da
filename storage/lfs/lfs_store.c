/* lfs_store.c -- content-addressed LFS objects: write to a temp file,
 * verify the sha256, then hand it to the backend (local: fsync, rename
 * into place, record what was verified (lfs_verify.c); S3: lfs_s3.c). */
#include "storage/lfs/lfs.h"
#include "storage/lfs/lfs_backend.h"

#include <dirent.h>
#include <sys/file.h>
#include <errno.h>
#include <time.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct lfs_store {
	char *root;
	char *tmp_dir;
	const struct lfs_backend *backend;
	void *priv;		/* the backend's state (local: the store itself) */
	struct lfs_verify *verify;	/* local: what was verified of each object */
};

static const struct lfs_backend local_backend;
static const struct lfs_s3_settings *default_s3;

void lfs_store_set_default(const struct lfs_s3_settings *s3)
{
	default_s3 = s3;
}

struct lfs_writer {
	struct lfs_store *store;
	char *tmp_path;
	int fd;
	EVP_MD_CTX *sha;
	uint64_t size;
	int sealed;		/* hashed: oid is final, nothing more is written */
	char oid[65];
};

struct lfs_store *lfs_store_open(const char *root)
{
	return lfs_store_open_as(root, default_s3);
}

struct lfs_store *lfs_store_open_as(const char *root, const struct lfs_s3_settings *s3)
{
	struct lfs_store *store = xcalloc(1, sizeof(*store));
	store->backend = &local_backend;
	store->priv = store;
	store->root = xstrdup(root);
	store->tmp_dir = xasprintf("%s/tmp", root);
	store->verify = lfs_verify_open(root);
	char *objects = xasprintf("%s/objects", root);
	int rc = mkdir_p(store->tmp_dir, 0755) | mkdir_p(objects, 0755);
	free(objects);
	if (rc < 0) {
		log_error("lfs store: cannot create %s: %s", root, strerror(errno));
		lfs_store_close(store);
		return NULL;
	}
	if (s3) {
		store->backend = &lfs_s3_backend;
		lfs_verify_close(store->verify);
		store->verify = NULL;
		if (!(store->priv = lfs_s3_open(s3, store->tmp_dir))) {
			store->backend = &local_backend;
			lfs_store_close(store);
			return NULL;
		}
	}
	return store;
}

const char *lfs_store_backend(const struct lfs_store *store)
{
	return store->backend->info.name;
}

int lfs_store_remote(const struct lfs_store *store)
{
	return store->backend->info.remote;
}

/* Every backend: the one place a backend's name is compared. */
static const struct lfs_backend *const backends[] = { &local_backend, &lfs_s3_backend };
#define NBACKENDS (sizeof(backends) / sizeof(backends[0]))

const struct lfs_backend_info *lfs_backend_find(const char *name)
{
	for (size_t i = 0; name && i < NBACKENDS; i++)
		if (strcmp(backends[i]->info.name, name) == 0)
			return &backends[i]->info;
	return NULL;
}

const char *lfs_backend_names(void)
{
	static char names[128];
	size_t n = 0;
	for (size_t i = 0; i < NBACKENDS && n < sizeof(names); i++)
		n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s", i == 0 ? "" : i + 1 < NBACKENDS ? ", " : " or ",
				      backends[i]->info.name);
	return names;
}

void lfs_store_close(struct lfs_store *store)
{
	if (!store)
		return;
	if (store->backend->close)
		store->backend->close(store->priv);
	lfs_verify_close(store->verify);
	free(store->root);
	free(store->tmp_dir);
	free(store);
}

static char *object_dir(struct lfs_store *store, const char *oid)
{
	return xasprintf("%s/objects/%.2s/%.2s", store->root, oid, oid + 2);
}

static char *object_path(struct lfs_store *store, const char *oid)
{
	return xasprintf("%s/objects/%.2s/%.2s/%s", store->root, oid, oid + 2, oid);
}

int lfs_store_stat(struct lfs_store *store, const char *oid, uint64_t *size)
{
	if (!is_lower_hex(oid, 64))
		return KHUB_EINVAL;
	return store->backend->stat(store->priv, oid, size, NULL);
}

int lfs_store_open_object(struct lfs_store *store, const char *oid, int *fd, uint64_t *size)
{
	if (!is_lower_hex(oid, 64))
		return KHUB_EINVAL;
	return store->backend->open_object(store->priv, oid, fd, size);
}

struct lfs_verify *lfs_store_verifier(struct lfs_store *store)
{
	return store->verify;
}

int lfs_store_quarantine(struct lfs_store *store, const char *oid)
{
	if (!is_lower_hex(oid, 64))
		return KHUB_EINVAL;
	return store->backend->quarantine(store->priv, oid);
}

int lfs_store_stat_at(struct lfs_store *store, const char *oid, uint64_t *size, int64_t *mtime)
{
	if (!is_lower_hex(oid, 64))
		return KHUB_EINVAL;
	return store->backend->stat(store->priv, oid, size, mtime);
}

int lfs_store_list(struct lfs_store *store, int (*fn)(const struct lfs_listed *o, void *arg), void *arg)
{
	return store->backend->list(store->priv, fn, arg);
}

int lfs_store_hash(struct lfs_store *store, const char *oid, char got[65], uint64_t *size)
{
	if (!is_lower_hex(oid, 64))
		return KHUB_EINVAL;
	return store->backend->hash(store->priv, oid, got, size);
}

int lfs_store_remove(struct lfs_store *store, const char *oid)
{
	if (!is_lower_hex(oid, 64))
		return KHUB_EINVAL;
	return store->backend->remove(store->priv, oid);
}

int lfs_store_presign(struct lfs_store *store, const char *oid, long ttl, char **url)
{
	if (!is_lower_hex(oid, 64) || !store->backend->presign)
		return KHUB_EINVAL;
	return store->backend->presign(store->priv, oid, ttl, url);
}

int lfs_store_stream_open(struct lfs_store *store, const char *oid, uint64_t size, uint64_t from, uint64_t count,
			  struct lfs_stream **out)
{
	if (!is_lower_hex(oid, 64) || !store->backend->stream)
		return KHUB_EINVAL;
	return store->backend->stream(store->priv, oid, size, from, count, out);
}

static int local_stat(void *priv, const char *oid, uint64_t *size, int64_t *mtime)
{
	struct lfs_store *store = priv;
	char *path = object_path(store, oid);
	struct stat st;
	int rc = stat(path, &st);
	free(path);
	if (rc < 0)
		return KHUB_ENOTFOUND;
	if (size)
		*size = (uint64_t)st.st_size;
	if (mtime)
		*mtime = (int64_t)st.st_mtime;
	return 0;
}

struct local_walk {
	int (*fn)(const struct lfs_listed *o, void *arg);
	void *arg;
};

/* objects/ab/cd/{oid}: rel "ab/cd/{oid}" with the prefixes of name. */
static int well_placed(const char *rel, const char *name)
{
	return is_lower_hex(name, 64) && strlen(rel) == 6 + 64 && strncmp(rel, name, 2) == 0 && rel[2] == '/' &&
	       strncmp(rel + 3, name + 2, 2) == 0 && rel[5] == '/';
}

static int local_list_entry(const char *rel, const char *path, const char *name, void *ctx)
{
	struct local_walk *w = ctx;
	struct stat st;
	if (lstat(path, &st) < 0)
		return 0;	/* removed meanwhile (gc) */
	if (S_ISDIR(st.st_mode))
		return DIR_WALK_ENTER;
	struct lfs_listed o = { .name = name, .where = path, .well_placed = well_placed(rel, name),
				.size = (uint64_t)st.st_size, .mtime = (int64_t)st.st_mtime };
	int rc = w->fn(&o, w->arg);
	return rc < 0 ? rc : 0;
}

static int local_list(void *priv, int (*fn)(const struct lfs_listed *o, void *arg), void *arg)
{
	struct lfs_store *store = priv;
	struct local_walk w = { fn, arg };
	char *objects = xasprintf("%s/objects", store->root);
	int rc = dir_walk(objects, local_list_entry, &w);
	free(objects);
	return rc;
}

static int local_hash(void *priv, const char *oid, char got[65], uint64_t *size)
{
	struct lfs_store *store = priv;
	char *path = object_path(store, oid);
	uint64_t n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return errno == ENOENT ? KHUB_ENOTFOUND : KHUB_EIO;
	int rc = lfs_hash_fd(fd, got, &n, NULL);
	close(fd);
	if (size)
		*size = n;
	return rc;
}

static int local_remove(void *priv, const char *oid)
{
	struct lfs_store *store = priv;
	char *path = object_path(store, oid);
	int rc = unlink(path) == 0 || errno == ENOENT ? 0 : KHUB_EIO;
	free(path);
	return rc;
}

static int local_quarantine(void *priv, const char *oid)
{
	struct lfs_store *store = priv;
	return lfs_verify_quarantine(store->verify, oid);
}

/* The object's file, checked against what was verified of it (a changed
 * one is re-hashed first; a damaged one is quarantined and KHUB_EIO). */
static int local_open_object(void *priv, const char *oid, int *fd, uint64_t *size)
{
	struct lfs_store *store = priv;
	char *path = object_path(store, oid);
	int f = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (f < 0)
		return errno == ENOENT ? KHUB_ENOTFOUND : KHUB_EIO;
	struct stat st;
	if (lfs_verify_check(store->verify, oid, f) < 0 || fstat(f, &st) < 0) {
		close(f);
		return KHUB_EIO;
	}
	*fd = f;
	if (size)
		*size = (uint64_t)st.st_size;
	return 0;
}

struct lfs_writer *lfs_writer_begin(struct lfs_store *store)
{
	struct lfs_writer *w = xcalloc(1, sizeof(*w));
	w->store = store;
	w->tmp_path = xasprintf("%s/upload-XXXXXX", store->tmp_dir);
	w->fd = mkostemp(w->tmp_path, O_CLOEXEC);
	if (w->fd < 0) {
		log_error("lfs store: cannot create temp file: %s", strerror(errno));
		free(w->tmp_path);
		free(w);
		return NULL;
	}
	/* held until the writer ends: lfs_store_clean_tmp leaves it alone */
	flock(w->fd, LOCK_EX);
	w->sha = EVP_MD_CTX_new();
	EVP_DigestInit_ex(w->sha, EVP_sha256(), NULL);
	return w;
}

const char *lfs_writer_temp_path(const struct lfs_writer *w)
{
	return w->tmp_path;
}

int lfs_writer_write(struct lfs_writer *w, const void *data, size_t len)
{
	EVP_DigestUpdate(w->sha, data, len);
	w->size += len;
	if (write_all(w->fd, data, len) < 0) {
		int err = errno;
		log_error("lfs store: write failed: %s", strerror(err));
		return khub_err_from_errno(err);
	}
	return 0;
}

static void writer_free(struct lfs_writer *w)
{
	if (w->fd >= 0)
		close(w->fd);
	EVP_MD_CTX_free(w->sha);
	free(w->tmp_path);
	free(w);
}

void lfs_writer_abort(struct lfs_writer *w)
{
	if (!w)
		return;
	unlink(w->tmp_path);
	writer_free(w);
}

/* Make a verified temp file (open as fd) the object oid: fsync, rename
 * into place; its directory into *dir (the caller fsyncs and frees it).
 * 0, KHUB_ENOSPC or KHUB_EIO (errno set). */
static int local_place(struct lfs_store *store, int fd, const char *tmp_path, const char *oid, char **dir)
{
	char *final = object_path(store, oid);
	int rc = 0;
	*dir = object_dir(store, oid);
	if (fsync(fd) == 0 && mkdir_p(*dir, 0755) == 0 && fchmod(fd, 0644) == 0 && rename(tmp_path, final) == 0)
		lfs_verify_record(store->verify, oid, fd);	/* after the rename: it moves the ctime */
	else
		rc = khub_err_from_errno(errno);
	free(final);
	return rc;
}

/* local_place, then fsync the directory. */
static int local_install(void *priv, int fd, const char *tmp_path, const char *oid)
{
	char *dir = NULL;
	int rc = local_place(priv, fd, tmp_path, oid, &dir);
	if (rc == 0)
		fsync_dir(dir);
	free(dir);
	return rc;
}

static int compare_dirs(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	return strcmp(x ? x : "", y ? y : "");
}

/* n objects: each file fsynced and renamed, then each directory fsynced
 * once. Stops at the first failure: *done objects were placed. */
static int local_install_many(void *priv, const int *fds, char *const *tmp_paths, const char *const *oids, size_t n,
			      size_t *done)
{
	char **dirs = xcalloc(n ? n : 1, sizeof(*dirs));
	int rc = 0;
	for (*done = 0; rc == 0 && *done < n; (*done)++)
		if ((rc = local_place(priv, fds[*done], tmp_paths[*done], oids[*done], &dirs[*done])) < 0)
			break;
	size_t placed = *done;
	qsort(dirs, placed, sizeof(*dirs), compare_dirs);
	for (size_t i = 0; i < placed; i++)
		if (i == 0 || strcmp(dirs[i], dirs[i - 1]) != 0)
			fsync_dir(dirs[i]);
	free_strings(dirs, n);
	return rc;
}

static const struct lfs_backend local_backend = {
	.info = { .name = "local" },
	.stat = local_stat,
	.open_object = local_open_object,
	.install = local_install,
	.install_many = local_install_many,
	.list = local_list,
	.hash = local_hash,
	.remove = local_remove,
	.quarantine = local_quarantine,
};

static int install_object(struct lfs_store *store, int fd, const char *tmp_path, const char *oid)
{
	return store->backend->install(store->priv, fd, tmp_path, oid);
}

int lfs_writer_seal(struct lfs_writer *w, char oid[65], uint64_t *size)
{
	if (w->sealed)
		return KHUB_EINVAL;
	sha256_final_hex(w->sha, w->oid);
	w->sealed = 1;
	memcpy(oid, w->oid, 65);
	if (size)
		*size = w->size;
	return 0;
}

const char *lfs_writer_oid(const struct lfs_writer *w)
{
	return w->oid;
}

int lfs_writer_install(struct lfs_writer *w)
{
	int rc = install_object(w->store, w->fd, w->tmp_path, w->oid);
	if (rc < 0) {
		log_error("lfs store: cannot store object %s: %s", w->oid, strerror(errno));
		unlink(w->tmp_path);
	}
	writer_free(w);
	return rc;
}

int lfs_writers_install(struct lfs_writer **w, size_t n)
{
	if (!n)
		return 0;
	struct lfs_store *store = w[0]->store;
	if (!store->backend->install_many) {
		int rc = 0;
		for (size_t i = 0; i < n; i++) {
			if (rc < 0)
				lfs_writer_abort(w[i]);
			else
				rc = lfs_writer_install(w[i]);
		}
		return rc;
	}
	int *fds = xcalloc(n, sizeof(*fds));
	char **tmp_paths = xcalloc(n, sizeof(*tmp_paths));
	const char **oids = xcalloc(n, sizeof(*oids));
	for (size_t i = 0; i < n; i++) {
		fds[i] = w[i]->fd;
		tmp_paths[i] = w[i]->tmp_path;
		oids[i] = w[i]->oid;
	}
	size_t done = 0;
	int rc = store->backend->install_many(store->priv, fds, tmp_paths, oids, n, &done);
	if (rc < 0)
		log_error("lfs store: cannot store object %s: %s", oids[done], strerror(errno));
	for (size_t i = 0; i < n; i++) {
		if (i >= done)
			unlink(w[i]->tmp_path);
		writer_free(w[i]);
	}
	free(fds);
	free(tmp_paths);
	free(oids);
	return rc;
}

int lfs_writer_commit(struct lfs_writer *w, const char *expected_oid, char oid[65], uint64_t *size)
{
	int rc;

	if (w->sealed)	/* its hash was finished by lfs_writer_seal */
		memcpy(oid, w->oid, 65);
	else
		sha256_final_hex(w->sha, oid);
	if (size)
		*size = w->size;
	if (expected_oid && strcmp(expected_oid, oid) != 0)
		rc = KHUB_EINVAL;
	else if ((rc = install_object(w->store, w->fd, w->tmp_path, oid)) < 0)
		log_error("lfs store: cannot store object %s: %s", oid, strerror(errno));
	if (rc != 0)
		unlink(w->tmp_path);
	writer_free(w);
	return rc;
}

int lfs_store_put_file(struct lfs_store *store, const char *path, char oid[65], uint64_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return KHUB_EIO;
	struct lfs_writer *w = lfs_writer_begin(store);
	if (!w) {
		close(fd);
		return KHUB_EIO;
	}
	char *buf = xmalloc(1 << 20);
	ssize_t n;
	int rc = 0;
	while ((n = read(fd, buf, 1 << 20)) > 0)
		if ((rc = lfs_writer_write(w, buf, (size_t)n)) < 0)
			break;
	free(buf);
	close(fd);
	if (n < 0 || rc < 0) {
		lfs_writer_abort(w);
		return KHUB_EIO;
	}
	return lfs_writer_commit(w, NULL, oid, size);
}

const char *lfs_store_tmp_dir(const struct lfs_store *store)
{
	return store->tmp_dir;
}

int lfs_store_clean_tmp(struct lfs_store *store, long max_age)
{
	DIR *d = opendir(store->tmp_dir);
	struct dirent *de;
	int removed = 0;
	time_t now = time(NULL);
	while (d && (de = readdir(d))) {
		/* uploads, and a git push's plans (api/git_http.c) */
		if (strncmp(de->d_name, "upload-", 7) != 0 && strncmp(de->d_name, "push-plans-", 11) != 0)
			continue;
		char *path = xasprintf("%s/%s", store->tmp_dir, de->d_name);
		struct stat st;
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		/* a writer alive in any khub process holds the lock */
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &st) == 0 &&
		    now - st.st_mtime >= max_age && unlink(path) == 0)
			removed++;
		if (fd >= 0)
			close(fd);
		free(path);
	}
	if (d)
		closedir(d);
	return removed;
}

int lfs_store_adopt_hashed(struct lfs_store *store, const char *path, const char *oid)
{
	if (!is_lower_hex(oid, 64))
		return KHUB_EINVAL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return KHUB_EIO;
	int rc = install_object(store, fd, path, oid);
	close(fd);
	return rc;
}
