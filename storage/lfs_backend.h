/* lfs_backend.h -- storage-internal: the table each LFS store backend
 * fills (local files in lfs_store.c, S3 in lfs_s3.c). */
#ifndef KHUB_STORAGE_LFS_BACKEND_H
#define KHUB_STORAGE_LFS_BACKEND_H

#include "storage/lfs.h"

struct lfs_backend {
	const char *name;
	/* 0 and *size when the object is there, KHUB_ENOTFOUND, KHUB_EIO. */
	int (*stat)(void *priv, const char *oid, uint64_t *size);
	/* A readable fd positioned at 0 holding the verified content. */
	int (*open_object)(void *priv, const char *oid, int *fd, uint64_t *size);
	/* Make the verified temp file tmp_path (open as fd) the object oid;
	 * on success tmp_path is gone (renamed or uploaded and removed). */
	int (*install)(void *priv, int fd, const char *tmp_path, const char *oid);
	/* NULL when the backend cannot hand out URLs. */
	int (*presign)(void *priv, const char *oid, long ttl, char **url);
	void (*close)(void *priv);
};

/* The S3 backend's state for a store whose temp files live in tmp_dir;
 * NULL (logged) when the settings or credentials are unusable. */
void *lfs_s3_open(const struct lfs_s3_settings *s3, const char *tmp_dir);
extern const struct lfs_backend lfs_s3_backend;

#endif
