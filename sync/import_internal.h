/* import_internal.h -- shared by the parts of a verify or import (internal
 * to sync/): sync/import.c (the entry points, staging, the report),
 * sync/import_stream.c (manifest, signature, entries streamed and hashed),
 * sync/import_apply.c (the hub's base state, packs, LFS objects, refs). */
#ifndef KHUB_SYNC_IMPORT_INTERNAL_H
#define KHUB_SYNC_IMPORT_INTERNAL_H

#include "sync/sync.h"

#define CHUNK (1u << 20)

struct import_run {
	const struct sync_import_opts *o;
	int apply;			/* 0: verify only */
	struct sync_manifest m;
	char key_id[SYNC_KEY_ID_LEN + 1];
	char *pack_dir, *lfs_dir;	/* staging */
	char **staged_pack;		/* per entry index: the staged pack's base path (no .pack/.idx) */
	unsigned char *seen;		/* per entry */
	char *err;
	size_t errlen;
};

/* Set x->err from fmt; returns rc. */
int import_fail(struct import_run *x, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The position of a manifest entry, or -1. */
long import_entry_index(struct import_run *x, const char *name);

/* Open the bundle, read manifest.json and manifest.sig, check the
 * signature against o->trusted and parse the manifest into x->m. *in is
 * the open stream (the caller closes it, also on failure). */
int import_open_checked(struct import_run *x, const char *bundle, struct sync_in **in);
/* Every other entry, hashed as it streams; staged when x->apply. */
int import_stream_all(struct import_run *x, struct sync_in *in);

/* The hub has the bundle's base state; *pending counts what is still to do. */
int import_check_base(struct import_run *x, size_t *pending);
/* Register, fill and move the refs of one repo; *moved counts refs moved. */
int import_apply_repo(struct import_run *x, const struct sync_repo *r, size_t *moved);

#endif
