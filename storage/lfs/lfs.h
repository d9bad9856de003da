/* lfs.h -- storage: LFS pointer files and the content-addressed LFS
 * object store. Every function returns 0 or a negative enum khub_err
 * unless it says otherwise. */
#ifndef KHUB_STORAGE_LFS_H
#define KHUB_STORAGE_LFS_H

#include <stdint.h>
#include <sys/types.h>

#include "common/common.h"

/* ---- LFS pointers (storage/lfs/lfs_pointer.c) ------------------------------- */

#define LFS_POINTER_MAX 200

struct lfs_pointer {
	char oid[65];		/* sha256 of the content, lowercase hex */
	uint64_t size;		/* content size in bytes */
};

/* Parse a pointer file (spec v1); 0 or KHUB_EINVAL when data is anything else. */
int lfs_pointer_parse(const char *data, size_t len, struct lfs_pointer *out);
/* Write the canonical pointer text into buf; returns its length. */
size_t lfs_pointer_format(const struct lfs_pointer *ptr, char buf[LFS_POINTER_MAX]);

/* ---- LFS object store (storage/lfs/lfs_store.c) ------------------------------ */

/* Objects live at {root}/objects/ab/cd/{oid}; partial uploads in {root}/tmp.
 * An object is visible only after its sha256 was verified, the file fsynced
 * and renamed into place. */
struct lfs_store;

/* Where verified objects go: the local filesystem (NULL settings) or an
 * S3-compatible object store (storage/lfs/lfs_s3.c). Either way uploads are
 * spooled and hashed under {root}/tmp, and an object reaches its final
 * place (file or key) only after its sha256 matched. */
struct lfs_s3_settings {
	const char *endpoint;		/* http(s)://host[:port] */
	const char *bucket;
	const char *region;
	int path_style;			/* 1: endpoint/bucket/key, 0: bucket.host/key */
	const char *credentials_file;	/* AWS ini; "" = AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY */
	long part_bytes;		/* larger objects go up as multipart uploads */
	long streams_max;		/* streamed reads alive at once in this process (0: no bound) */
};

/* ---- the backends, by name (the table in storage/lfs/lfs_store.c) ------------- */

/* What the rest of khub may know of an LFS store backend. The name is
 * looked up once (lfs_backend_find, when the configuration is loaded);
 * after that callers ask these fields, never compare the name: adding a
 * backend is adding a row. */
struct lfs_backend_info {
	const char *name;	/* local, s3: the lfs_backend setting */
	/* Objects are not files under data_dir/lfs but in an object store set
	 * by the lfs_s3_* settings: lfs_store_open needs them, a backup reads
	 * the objects repos link through the store, a restore writes through
	 * it, and git's hooks are handed the settings. */
	int remote;
	int presigns;		/* hands out URLs (lfs_store_presign; lfs_s3_redirect) */
};
/* The backend called name; NULL when there is none. */
const struct lfs_backend_info *lfs_backend_find(const char *name);
/* Every backend's name, "local or s3", for messages; static. */
const char *lfs_backend_names(void);

/* The backend lfs_store_open uses from now on (NULL: local). The settings'
 * strings must outlive every store (the configuration's do). */
void lfs_store_set_default(const struct lfs_s3_settings *s3);
struct lfs_store *lfs_store_open(const char *root);	/* NULL on failure */
/* Open with an explicit backend (NULL s3: local), whatever the default. */
struct lfs_store *lfs_store_open_as(const char *root, const struct lfs_s3_settings *s3);
/* Its backend's name (struct lfs_backend_info), for messages. */
const char *lfs_store_backend(const struct lfs_store *store);
/* 1 when its backend is remote (struct lfs_backend_info): a KHUB_EIO from
 * it means the object store could not be reached or failed (a passing
 * outage, 503), not a damaged object. */
int lfs_store_remote(const struct lfs_store *store);
/* A URL that GETs the object without credentials for ttl seconds (the
 * caller frees *url); KHUB_EINVAL when the backend has none (local). */
int lfs_store_presign(struct lfs_store *store, const char *oid, long ttl, char **url);
void lfs_store_close(struct lfs_store *store);		/* accepts NULL */
/* 0 and *size when present, KHUB_ENOTFOUND otherwise. size may be NULL. */
int lfs_store_stat(struct lfs_store *store, const char *oid, uint64_t *size);
/* Open for reading; the caller closes *fd. */
int lfs_store_open_object(struct lfs_store *store, const char *oid, int *fd, uint64_t *size);

/* Reads that need not wait on the store before the first byte (S3): the
 * backend fetches on a thread of its own into a bounded buffer (memory
 * stays flat; a slow reader slows the fetch), and the reader waits for
 * its waker instead of blocking. A read of the whole object is hashed
 * as it goes; when it does not hash to the oid the read fails before its
 * last byte (the object is moved to quarantine/, logged and counted). A
 * range is served as the store holds it (objects are verified on write),
 * complete with its last byte (no verdict to wait for).
 * 0 with *out (the caller ends it with lfs_stream_close), KHUB_EINVAL when
 * the backend has no streamed reads (local: lfs_store_open_object). */
struct lfs_stream;
int lfs_store_stream_open(struct lfs_store *store, const char *oid, uint64_t size, uint64_t from, uint64_t count,
			  struct lfs_stream **out);
/* The consumer's waker: wake(arg) is called, from the producer's thread,
 * once after each lfs_stream_arm that answered 0, when there is something
 * worth a look (the state changed, the fetch ended, or a good part of the
 * buffer filled). The stream owns arg (freed with free() with the stream),
 * so a late call after lfs_stream_close is harmless. Set it before the
 * first wait. */
void lfs_stream_on_ready(struct lfs_stream *s, void (*wake)(void *arg), void *arg);
/* About to wait (after lfs_stream_state said 1, or lfs_stream_read 0):
 * 1 when there is something to look at already (do not wait), 0 when the
 * waker will be called. Arm after whatever the waker releases is in place
 * (a lost wake-up is impossible: arming and waking share a lock). */
int lfs_stream_arm(struct lfs_stream *s);
/* 1 while the store's answer is awaited, 0 when the bytes flow,
 * KHUB_ENOTFOUND (no such object, or not khub's, or another size), KHUB_EIO. */
int lfs_stream_state(struct lfs_stream *s);
#define LFS_STREAM_END (-1000)
/* Once flowing: up to max bytes (> 0), 0 when none yet (arm and wait),
 * LFS_STREAM_END when every byte was handed out (and, for the whole
 * object, verified), KHUB_EINVAL (damaged) or KHUB_EIO: abort the transfer. */
ssize_t lfs_stream_read(struct lfs_stream *s, char *buf, size_t max);
void lfs_stream_close(struct lfs_stream *s);	/* accepts NULL; stops the fetch */
/* lfs_store_stream_open answers KHUB_EBUSY, at once, while the backend's
 * bound of streams (S3: lfs_s3_settings.streams_max) are alive in this
 * process: a stream holds its slot until its fetch ended and its reader
 * closed it. For /metrics: streams alive now, and those refused so. */
void lfs_stream_counts(long *alive, uint64_t *refused);

struct lfs_writer;
/* Start a new object; NULL on failure. Write with lfs_writer_write, then
 * either commit or abort (both free the writer). */
struct lfs_writer *lfs_writer_begin(struct lfs_store *store);
/* 0, KHUB_ENOSPC when the disk is full, or KHUB_EIO. */
int lfs_writer_write(struct lfs_writer *w, const void *data, size_t len);
/* Verify (when expected_oid is not NULL the sha256 must match, else
 * KHUB_EINVAL), fsync and rename into place. Fills oid and size. A full
 * disk is KHUB_ENOSPC, other failures KHUB_EIO. Also takes a sealed
 * writer (lfs_writer_seal: the hash was looked at first). Frees w. */
int lfs_writer_commit(struct lfs_writer *w, const char *expected_oid, char oid[65], uint64_t *size);
void lfs_writer_abort(struct lfs_writer *w);
/* Finish the hash (fills oid and size) without storing anything yet: the
 * temp file stays (locked) until lfs_writer_install (fsync, rename into
 * place, frees the writer) or lfs_writer_abort. Lets a commit keep the LFS
 * content it received out of the store until it is accepted. */
int lfs_writer_seal(struct lfs_writer *w, char oid[65], uint64_t *size);
int lfs_writer_install(struct lfs_writer *w);
/* lfs_writer_install for n sealed writers of one store at once (a local
 * store syncs each directory once, after every file of the batch): 0 or
 * the first failure (the writers after it are aborted). Frees them all. */
int lfs_writers_install(struct lfs_writer **w, size_t n);
/* The sha256 of a sealed writer's content. */
const char *lfs_writer_oid(const struct lfs_writer *w);
/* The temp file a writer is filling (valid until commit or abort). */
const char *lfs_writer_temp_path(const struct lfs_writer *w);
/* Remove partial uploads and git pushes' plan files left by a crash (no
 * live writer holds their lock; not resumable mirror downloads) at least
 * max_age seconds old;
 * returns how many. */
int lfs_store_clean_tmp(struct lfs_store *store, long max_age);
/* Move a finished download whose sha256 the caller computed as it was
 * written (and found equal to oid) into the store: fsync, rename. Outside
 * storage/ through repo_import_add_lfs. */
int lfs_store_adopt_hashed(struct lfs_store *store, const char *path, const char *oid);
/* {root}/tmp, where partial files live. */
const char *lfs_store_tmp_dir(const struct lfs_store *store);
/* Copy a local file into the store. */
int lfs_store_put_file(struct lfs_store *store, const char *path, char oid[65], uint64_t *size);

/* ---- walking the store (khub fsck, khub gc, /metrics) ---------------------- */

/* One entry of the store's objects/ (local: a file; s3: a key), as listed. */
struct lfs_listed {
	const char *name;	/* its last path part: an oid when well named */
	const char *where;	/* its path or bucket key, for messages */
	int well_placed;	/* named by a sha256 and at objects/ab/cd/{oid} */
	uint64_t size;
	int64_t mtime;		/* last written (s3: LastModified), unix time */
};
/* Call fn for every entry (s3: ListObjectsV2, 1000 a page); fn returns 0
 * to go on, or a negative KHUB_E* that ends the walk and is returned.
 * 0, KHUB_EIO. */
int lfs_store_list(struct lfs_store *store, int (*fn)(const struct lfs_listed *o, void *arg), void *arg);
/* Like lfs_store_stat, with when the object was last written. */
int lfs_store_stat_at(struct lfs_store *store, const char *oid, uint64_t *size, int64_t *mtime);
/* Stream the object through sha256 (s3: a GET hashed as it arrives,
 * nothing kept): its hash in got, what was read in *size (may be NULL).
 * 0, KHUB_ENOTFOUND, KHUB_EIO. */
int lfs_store_hash(struct lfs_store *store, const char *oid, char got[65], uint64_t *size);
/* Delete the object (khub gc, under its database lock). 0 (also when
 * already gone), KHUB_EIO. */
int lfs_store_remove(struct lfs_store *store, const char *oid);

/* ---- integrity of local objects (storage/lfs/lfs_verify.c, lfs_scrub.c) ---- */

/* The local backend records what it verified of each object (size, inode,
 * mtime, ctime); lfs_store_open_object re-hashes an object whose file
 * changed since before handing it out, and one that no longer hashes to
 * its name is moved to {root}/../quarantine/lfs/{oid}.{time} and answered
 * KHUB_EIO. The S3 backend re-verifies what it reads. */

/* Told of every chunk a paced hash reads; non-zero stops the hash. */
struct lfs_pace {
	int (*after)(void *arg, uint64_t bytes);
	void *arg;
};

/* Move a damaged object aside for a person to look at (khub fsck
 * --repair): local: to data_dir/quarantine/lfs/{oid}.{time}; s3: copied to
 * the key quarantine/lfs/{oid}.{time} of the bucket, then deleted. 0,
 * KHUB_EIO. */
int lfs_store_quarantine(struct lfs_store *store, const char *oid);

/* This process's figures, for /metrics. */
struct lfs_integrity_stats {
	uint64_t rehashed;		/* objects re-hashed before serving (changed, or no record) */
	uint64_t damaged_on_read;	/* of those, found damaged and quarantined */
	uint64_t s3_damaged_on_read;	/* S3 objects streamed that did not hash to their oid */
	uint64_t scrub_objects, scrub_bytes, scrub_damaged;	/* re-hashed by the scrub */
	int64_t scrub_completed_at;	/* when the last complete pass ended; 0: none */
};
void lfs_integrity_stats(struct lfs_integrity_stats *out);

/* The scrub: re-hash every object of the local store at mb_per_s MiB/s
 * at most; damaged objects are quarantined, logged and counted. When its
 * passes run is the scheduler's business (server/jobs.c, schedule_scrub,
 * one node at a time under DB_JOB_LFS_SCRUB). lfs_scrub_start: 1 when
 * passes can run; 0 for mb_per_s 0 or a store that is not local (the
 * latter logged). The store must outlive lfs_scrub_stop. */
int lfs_scrub_start(struct lfs_store *store, long mb_per_s);
/* One pass now, on this thread: 0 complete, KHUB_ECONFLICT ended by
 * lfs_scrub_stop, KHUB_EIO the walk failed, KHUB_EINVAL scrubbing is off. */
int lfs_scrub_pass(void);
void lfs_scrub_stop(void);	/* ends a pass under way */

#endif
