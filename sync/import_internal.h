/* import_internal.h -- shared by the parts of a verify or import (internal
 * to sync/): sync/import.c (the entry points, staging, the report),
 * sync/import_stream.c (manifest, signature, entries streamed and hashed),
 * sync/import_flush.c (staged files fsynced behind the stream),
 * sync/import_apply.c (the hub's base state, packs, LFS objects, the refs
 * of repos new here), sync/import_commit.c (the exporter's sequence, the
 * key's scope, the one transaction, the refs of repos here already). */
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
	unsigned char *verified;	/* per entry: staged and verified by a killed run (journal) */
	int journal;			/* fd of <pack_dir>/verified, or -1 */
	unsigned char *fresh;		/* per repo: not registered here when the import began */
	char **quarantined;		/* per repo new here: where a directory found at its place went (trash) */
	int64_t *deleted_id;		/* per deleted repo: its id when it goes (0: it stays) */
	char **deleted_slot;		/* per deleted repo: its directory in the trash, until the import commits */
	int64_t *repo_id;		/* per repo, once registered */
	char **sel_refs;		/* the bundle's ref selection (deletions by current) */
	size_t nsel_refs;
	int64_t *inflight;		/* lfs_inflight rows (khub gc keeps their objects) until the links exist */
	size_t ninflight;
	size_t changes;			/* what the import changed besides refs */
	json_t *plan;			/* --dry-run: the changes it would make */
	struct import_flush *flush;	/* while streaming: staged files fsynced behind */
	char *err;
	size_t errlen;
};

/* sync/import_flush.c: staged files fsynced and closed by a thread while
 * the stream goes on. start takes the journal's fd (-1: none); add takes
 * fd (-1: none), then renames from to to (when from), then appends line to
 * the journal (when line); finish waits for every job and returns the
 * first errno, or 0 (where no thread could be made, jobs run in add). */
struct import_flush;
struct import_flush *import_flush_start(int journal);
int import_flush_add(struct import_flush *f, int fd, const char *from, const char *to, const char *line);
int import_flush_finish(struct import_flush *f);

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
/* Packs into the repos, LFS objects into the store (nothing visible yet),
 * every branch move checked (a fast-forward, or --allow-rewind), then the
 * refs of repos new here set (not visible before they are registered). A
 * repo new here gets a fresh store: a directory found at its place goes to
 * the trash (x->quarantined), never adopted. The caller holds the registry
 * lock until import_register is done, as the API's create does. */
int import_prepare(struct import_run *x);
/* --dry-run, once the packs are indexed into x->pack_dir: what
 * import_prepare would refuse (a ref's commit in neither the repo nor the
 * bundle, a branch moving back or sideways without --allow-rewind). */
int import_check_packs(struct import_run *x);
/* The directories of the repos deleted at the source moved to the trash,
 * then in one database transaction: the bundle recorded as being applied,
 * repos registered (mirrored) with their privacy, org trust and LFS links,
 * the repos deleted at the source unregistered; a directory goes back when
 * the transaction does not commit. The caller holds the registry lock
 * since import_prepare. */
int import_register(struct import_run *x);
/* Move the refs of repos that were here already (compare-and-swap through
 * repo_import_move_ref), delete the refs the source no longer has, run the
 * after-move steps, mark the bundle applied; *moved counts refs moved. */
int import_move_refs(struct import_run *x, size_t *moved);
/* The local refs of r (heads and tags, within the bundle's ref selection)
 * that the source no longer has; caller frees with free_strings. */
void import_gone_refs(struct import_run *x, git_repository *git, const struct sync_repo *r, char ***names,
		      size_t *n);
/* Would this ref move a tag (tags never move here)? */
int import_tag_would_move(const char *name, const char *cur, const char *new_);
/* The signing key's scope (khub sync key-scope) covers every repo the
 * bundle carries or deletes; KHUB_EPERM (with the first one outside) if not. */
int import_check_scope(struct import_run *x);
/* The bundle's exporter id is bound to the signing key, or to no key yet
 * (the import binds it); SYNC_EEXPORTER_KEY (audited by the caller) if not. */
int import_check_exporter_key(struct import_run *x);
/* Bind an unbound exporter id to the signing key (audited as
 * sync.exporter_key); with the bundle's record, so inside its transaction. */
int import_bind_exporter(struct import_run *x);
/* 0: go on (*resume 1 when an earlier run of this bundle was cut short),
 * 1: this bundle was applied, KHUB_EEXIST: an older or replayed bundle. */
int import_check_sequence(struct import_run *x, int *resume);
/* A bundle that changes nothing is recorded (its sequence counts). */
int import_record_unchanged(struct import_run *x);
/* An audit entry of this import (actor sync:<operator>); extra is more
 * JSON members ("" for none). */
void import_audit(struct import_run *x, const char *action, const char *target, const char *extra);
/* A refused, tampered or older bundle in the audit log (sync.refused,
 * sync.stale) with the reason (x->err) and the operator. */
void import_audit_refused(struct import_run *x, const char *file, int rc);
/* KHUB_TEST_CRASH_AT=step: SIGKILL here (tests of a killed import). */
void import_crash_point(const char *step);
int import_crash_at(const char *step);	/* whether KHUB_TEST_CRASH_AT names step */

#endif
