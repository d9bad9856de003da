/* lfs_verify.c -- a local LFS object's bytes are never served once they
 * changed after their sha256 was verified. What a verification saw (size,
 * inode, mtime and ctime in nanoseconds) is recorded per object, in
 * {root}/verified/ab/cd/{oid} (shared by every node and kept across
 * restarts) and in a bounded in-memory cache; a reader compares one fstat
 * of the open file with it. A file that differs (any write or chmod moves
 * its ctime, which touch -d cannot set back) is re-hashed before its first
 * byte is sent and moved to {root}/../quarantine/lfs when it no longer
 * hashes to its name. Damage that leaves the metadata alone (bit rot) is
 * the background scrub's (lfs_scrub.c). */
#include "storage/lfs/lfs.h"
#include "storage/lfs/lfs_backend.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Records kept in memory at most; past it they are read from their files. */
#define VERIFY_CACHE_MAX 262144
#define HASH_CHUNK ((size_t)1 << 20)

/* What a verification saw of the object's file. */
struct verified {
	uint64_t size, ino;
	int64_t mtime_ns, ctime_ns;
};

struct lfs_verify {
	char *objects_dir, *records_dir, *quarantine_dir;
	pthread_mutex_t lock;
	struct hashmap cache;	/* oid → struct verified */
};

static _Atomic uint64_t rehashed_total, damaged_on_read_total;

struct lfs_verify *lfs_verify_open(const char *root)
{
	struct lfs_verify *v = xcalloc(1, sizeof(*v));
	v->objects_dir = xasprintf("%s/objects", root);
	v->records_dir = xasprintf("%s/verified", root);
	v->quarantine_dir = xasprintf("%s/../quarantine/lfs", root);
	pthread_mutex_init(&v->lock, NULL);
	hashmap_init(&v->cache);
	return v;
}

void lfs_verify_close(struct lfs_verify *v)
{
	if (!v)
		return;
	hashmap_release(&v->cache, free);
	pthread_mutex_destroy(&v->lock);
	free(v->objects_dir);
	free(v->records_dir);
	free(v->quarantine_dir);
	free(v);
}

const char *lfs_verify_objects_dir(const struct lfs_verify *v)
{
	return v->objects_dir;
}

static struct verified from_stat(const struct stat *st)
{
	return (struct verified){
		.size = (uint64_t)st->st_size,
		.ino = (uint64_t)st->st_ino,
		.mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec,
		.ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec,
	};
}

static int same(const struct verified *a, const struct verified *b)
{
	return a->size == b->size && a->ino == b->ino && a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

static char *record_path(const struct lfs_verify *v, const char *oid)
{
	return xasprintf("%s/%.2s/%.2s/%s", v->records_dir, oid, oid + 2, oid);
}

static void cache_put(struct lfs_verify *v, const char *oid, const struct verified *rec)
{
	pthread_mutex_lock(&v->lock);
	struct verified *have = hashmap_get(&v->cache, oid);
	if (have)
		*have = *rec;
	else if (v->cache.count < VERIFY_CACHE_MAX) {
		struct verified *copy = xmalloc(sizeof(*copy));
		*copy = *rec;
		hashmap_put(&v->cache, oid, copy);
	}
	pthread_mutex_unlock(&v->lock);
}

/* The record of oid: 0, or KHUB_ENOTFOUND when there is none (never
 * verified by this version, or its file is unreadable). */
static int record_get(struct lfs_verify *v, const char *oid, struct verified *out)
{
	pthread_mutex_lock(&v->lock);
	struct verified *have = hashmap_get(&v->cache, oid);
	if (have)
		*out = *have;
	pthread_mutex_unlock(&v->lock);
	if (have)
		return 0;
	char *path = record_path(v, oid);
	size_t len;
	char *text = read_file_limited(path, 256, &len);
	free(path);
	unsigned long long size, ino;
	long long mtime_ns, ctime_ns;
	int ok = text && sscanf(text, "khub-lfs-verified 1 %llu %llu %lld %lld", &size, &ino, &mtime_ns, &ctime_ns) == 4;
	free(text);
	if (!ok)
		return KHUB_ENOTFOUND;
	*out = (struct verified){ size, ino, mtime_ns, ctime_ns };
	cache_put(v, oid, out);
	return 0;
}

/* Record what a verification of oid saw. Not fsynced: a record lost in a
 * crash costs one more hash, never a wrong answer. */
static void record_put(struct lfs_verify *v, const char *oid, const struct verified *rec)
{
	char *path = record_path(v, oid), *dir = xasprintf("%s/%.2s/%.2s", v->records_dir, oid, oid + 2);
	char *tmp = xasprintf("%s.%ld.tmp", path, (long)gettid());
	char line[128];
	int n = snprintf(line, sizeof(line), "khub-lfs-verified 1 %llu %llu %lld %lld\n", (unsigned long long)rec->size,
			 (unsigned long long)rec->ino, (long long)rec->mtime_ns, (long long)rec->ctime_ns);
	int fd = mkdir_p(dir, 0755) == 0 ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
	int rc = fd >= 0 && write_all(fd, line, (size_t)n) == 0;
	if (fd >= 0)
		close(fd);
	if (!rc || rename(tmp, path) < 0) {
		log_warn("lfs store: cannot record the verification of %s: %s", oid, strerror(errno));
		unlink(tmp);
	}
	cache_put(v, oid, rec);
	free(tmp);
	free(dir);
	free(path);
}

static void record_forget(struct lfs_verify *v, const char *oid)
{
	pthread_mutex_lock(&v->lock);
	free(hashmap_remove(&v->cache, oid));
	pthread_mutex_unlock(&v->lock);
	char *path = record_path(v, oid);
	unlink(path);
	free(path);
}

void lfs_verify_record(struct lfs_verify *v, const char *oid, int fd)
{
	struct stat st;
	if (fstat(fd, &st) == 0) {
		struct verified rec = from_stat(&st);
		record_put(v, oid, &rec);
	}
}

int lfs_verify_quarantine(struct lfs_verify *v, const char *oid)
{
	char *path = xasprintf("%s/%.2s/%.2s/%s", v->objects_dir, oid, oid + 2, oid);
	char *to = xasprintf("%s/%s.%ld", v->quarantine_dir, oid, (long)time(NULL));
	int rc = mkdir_p(v->quarantine_dir, 0700) == 0 && rename(path, to) == 0 ? 0 : KHUB_EIO;
	if (rc == 0)
		fsync_dir(v->quarantine_dir);
	else
		log_error("lfs store: cannot move %s to %s: %s", path, v->quarantine_dir, strerror(errno));
	record_forget(v, oid);
	free(to);
	free(path);
	return rc;
}

int lfs_hash_fd(int fd, char oid[65], uint64_t *size, const struct lfs_pace *pace)
{
	EVP_MD_CTX *sha = EVP_MD_CTX_new();
	char *buf = xmalloc(HASH_CHUNK);
	ssize_t n;
	int rc = 0;
	EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
	*size = 0;
	while ((n = pread(fd, buf, HASH_CHUNK, (off_t)*size)) > 0) {
		EVP_DigestUpdate(sha, buf, (size_t)n);
		*size += (uint64_t)n;
		if (pace && pace->after(pace->arg, (uint64_t)n)) {
			rc = KHUB_ECONFLICT;
			break;
		}
	}
	if (n < 0)
		rc = KHUB_EIO;
	sha256_final_hex(sha, oid);
	EVP_MD_CTX_free(sha);
	free(buf);
	return rc;
}

int lfs_verify_rehash(struct lfs_verify *v, const char *oid, int fd, const struct lfs_pace *pace, uint64_t *bytes)
{
	struct stat before, after;
	char got[65];
	uint64_t size = 0;
	int rc = fstat(fd, &before) < 0 ? KHUB_EIO : lfs_hash_fd(fd, got, &size, pace);
	if (bytes)
		*bytes = size;
	if (rc < 0)
		return rc;
	struct verified seen = from_stat(&before), now;
	if (fstat(fd, &after) < 0 || (now = from_stat(&after), !same(&seen, &now))) {
		log_warn("lfs store: object %s changed while it was hashed; not served", oid);
		return KHUB_EIO;
	}
	if (strcmp(got, oid) == 0 && size == seen.size) {
		record_put(v, oid, &seen);
		return 0;
	}
	log_error("lfs store: object %s is damaged (its content hashes to %s); moving it to quarantine/lfs", oid, got);
	lfs_verify_quarantine(v, oid);
	return KHUB_EINVAL;
}

int lfs_verify_check(struct lfs_verify *v, const char *oid, int fd)
{
	struct stat st;
	struct verified known;
	if (fstat(fd, &st) < 0)
		return KHUB_EIO;
	struct verified now = from_stat(&st);
	if (record_get(v, oid, &known) == 0 && same(&known, &now))
		return 0;
	atomic_fetch_add(&rehashed_total, 1);
	int rc = lfs_verify_rehash(v, oid, fd, NULL, NULL);
	if (rc == KHUB_EINVAL)
		atomic_fetch_add(&damaged_on_read_total, 1);
	return rc;
}

void lfs_verify_counts(uint64_t *rehashed, uint64_t *damaged_on_read)
{
	*rehashed = atomic_load(&rehashed_total);
	*damaged_on_read = atomic_load(&damaged_on_read_total);
}
