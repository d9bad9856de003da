/* lfs_backend.h -- storage-internal: the table each LFS store backend
 * fills (local files in lfs_store.c, S3 in lfs_s3.c). */
#ifndef KHUB_STORAGE_LFS_BACKEND_H
#define KHUB_STORAGE_LFS_BACKEND_H

#include "storage/lfs/lfs.h"

struct lfs_backend {
	struct lfs_backend_info info;	/* its name and what it can do (lfs.h) */
	/* 0 and *size, *mtime (either may be NULL) when the object is there,
	 * KHUB_ENOTFOUND, KHUB_EIO. */
	int (*stat)(void *priv, const char *oid, uint64_t *size, int64_t *mtime);
	/* A readable fd positioned at 0 holding the verified content. */
	int (*open_object)(void *priv, const char *oid, int *fd, uint64_t *size);
	/* Make the verified temp file tmp_path (open as fd) the object oid;
	 * on success tmp_path is gone (renamed or uploaded and removed). */
	int (*install)(void *priv, int fd, const char *tmp_path, const char *oid);
	/* NULL, or install for n objects at once (each file made durable
	 * before it is named, each directory synced once after): 0, or the
	 * first failure with *done the objects installed before it. */
	int (*install_many)(void *priv, const int *fds, char *const *tmp_paths, const char *const *oids, size_t n,
			    size_t *done);
	/* NULL when the backend cannot hand out URLs. */
	int (*presign)(void *priv, const char *oid, long ttl, char **url);
	/* Every entry under objects/ (see lfs_store_list). */
	int (*list)(void *priv, int (*fn)(const struct lfs_listed *o, void *arg), void *arg);
	/* sha256 of the object's bytes as stored (see lfs_store_hash). */
	int (*hash)(void *priv, const char *oid, char got[65], uint64_t *size);
	/* Delete the object; 0 when gone. */
	int (*remove)(void *priv, const char *oid);
	/* Move it out of objects/ for a person to look at. */
	int (*quarantine)(void *priv, const char *oid);
	/* NULL when reads go through open_object only (lfs_store_stream_open). */
	int (*stream)(void *priv, const char *oid, uint64_t size, uint64_t from, uint64_t count,
		      struct lfs_stream **out);
	void (*close)(void *priv);
};

/* The S3 backend's state for a store whose temp files live in tmp_dir;
 * NULL (logged) when the settings or credentials are unusable. */
void *lfs_s3_open(const struct lfs_s3_settings *s3, const char *tmp_dir);
extern const struct lfs_backend lfs_s3_backend;
/* S3 objects streamed that did not hash to their oid (this process). */
uint64_t lfs_s3_damaged_count(void);

/* ---- the producer's side of a stream (lfs_stream.c) -------------------------- */

/* A stream of a count-byte body through a buffer of cap bytes (verified:
 * its last byte is held back until lfs_stream_finish's verdict), held by
 * two: the producer (ends with lfs_stream_finish) and the consumer (ends
 * with lfs_stream_close); the last to let go frees it and gives back its
 * slot. 0 with *out; KHUB_EBUSY (counted) when max streams (0: no bound)
 * of this process are alive already; KHUB_EIO. */
int lfs_stream_new(uint64_t count, size_t cap, long max, int verified, struct lfs_stream **out);
/* The store answered: 0 (bytes follow) or a negative khub_err. */
void lfs_stream_answer(struct lfs_stream *s, int state);
/* Append, blocking while the buffer is full: 0, or -1 when the consumer
 * is gone (stop fetching). */
int lfs_stream_put(struct lfs_stream *s, const char *data, size_t len);
/* 1 once the consumer let go. */
int lfs_stream_consumer_gone(struct lfs_stream *s);
/* The producer is done: 0 (every byte put, verified where it hashes) or a
 * negative khub_err; drops the producer's hold. */
void lfs_stream_finish(struct lfs_stream *s, int verdict);

/* ---- what a local store verified (lfs_verify.c) ---------------------------- */

struct lfs_verify;
/* The sha256 of fd's content, read with pread (its offset stays put);
 * pace (may be NULL) is told of every chunk and stops the hash by
 * answering non-zero. 0, KHUB_EIO, or KHUB_ECONFLICT when stopped. */
int lfs_hash_fd(int fd, char oid[65], uint64_t *size, const struct lfs_pace *pace);
/* The records of the local store under root; lfs_verify_close frees. */
struct lfs_verify *lfs_verify_open(const char *root);
void lfs_verify_close(struct lfs_verify *v);	/* accepts NULL */
/* {root}/objects */
const char *lfs_verify_objects_dir(const struct lfs_verify *v);
/* Record the object oid just installed (open as fd) as verified. */
void lfs_verify_record(struct lfs_verify *v, const char *oid, int fd);
/* Before serving fd (the object oid): 0 when its file is as verified or
 * re-hashes to oid (then recorded again); KHUB_EINVAL when it does not
 * (moved to quarantine, logged, counted); KHUB_EIO when it cannot be read
 * or changed while hashed. */
int lfs_verify_check(struct lfs_verify *v, const char *oid, int fd);
/* Re-hash fd (the object oid) whatever its record says, paced by pace
 * (may be NULL); *bytes (may be NULL): what was read. 0, KHUB_EINVAL
 * (damaged: quarantined), KHUB_EIO, KHUB_ECONFLICT (pace stopped it). */
int lfs_verify_rehash(struct lfs_verify *v, const char *oid, int fd, const struct lfs_pace *pace, uint64_t *bytes);
/* Move the object oid to quarantine/lfs and drop its record. */
int lfs_verify_quarantine(struct lfs_verify *v, const char *oid);
/* Process-wide: objects re-hashed before serving, found damaged so. */
void lfs_verify_counts(uint64_t *rehashed, uint64_t *damaged_on_read);
/* The local store's records; NULL for another backend. */
struct lfs_verify *lfs_store_verifier(struct lfs_store *store);

#endif
