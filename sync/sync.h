/* sync.h -- air-gap bundles: a connected khub writes signed, incremental
 * bundles (tar + zstd through libarchive, optionally split into volumes)
 * and an air-gapped khub verifies and imports them with identical commit
 * SHAs. The manifest comes first in the stream, then its signature, then
 * git packs (libgit2 packbuilder: only objects the base state lacks) and
 * LFS objects named by sha256; the manifest lists the sha256 and size of
 * every other entry, and its own sha256 is signed with Ed25519. Import
 * verifies as it streams (constant memory), stages, and moves refs only
 * through storage's importer (repo_import_*, storage/publish/publish.h). See
 * docs/sync.md. Functions return 0 or a negative enum khub_err unless
 * they say otherwise; err gets a message. */
#ifndef KHUB_SYNC_H
#define KHUB_SYNC_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "storage/git/repo.h"
#include "storage/lfs/lfs.h"
#include "storage/publish/publish.h"

#define SYNC_FORMAT 2		/* bundles: 2 adds exporter, sequence, current refs, deletions */
#define SYNC_STATE_FORMAT 2	/* states: 2 adds the LFS objects a hub has; 1 is read too */
#define SYNC_MANIFEST_MAX (64u << 20)	/* largest manifest.json read */
#define SYNC_SIG_MAX 4096		/* largest manifest.sig read */
#define SYNC_KEY_ID_LEN ED25519_KEY_ID_LEN	/* hex characters of a key id */

/* ---- manifest and state (sync/manifest.c) ---------------------------------- */

struct sync_ref {
	char *name;		/* refs/heads/v1, refs/tags/x, refs/khub-sync/lock/<sha> */
	char old[41];		/* the base the ref moves from; "" = no requirement */
	char new_[41];		/* where it moves; "" = deleted */
};

struct sync_lfs {
	char oid[65];
	uint64_t size;
};

struct sync_repo {
	enum repo_type type;
	char ns[REPO_NAME_MAX + 1];
	char name[REPO_NAME_MAX + 1];
	int private_;
	int org_trusted;
	struct sync_ref *refs;
	size_t nrefs;
	char (*base)[41];	/* commits the pack assumes the importer has */
	size_t nbase;
	char *pack;		/* entry name ("git/3.pack") or NULL */
	struct sync_lfs *lfs;	/* LFS objects to link to this repo */
	size_t nlfs;
	/* every ref of the selection at the source (new_ only), so a ref gone
	 * there goes here; has_current 0 (a --lock bundle): none deleted */
	struct sync_ref *current;
	size_t ncurrent;
	int has_current;
	/* states: the LFS objects the hub has for the repo; has_have 0 (an
	 * older state): those of the refs' commits */
	char (*have)[65];
	size_t nhave;
	int has_have;
};

struct sync_entry {
	char *name;		/* "git/N.pack" or "lfs/<oid>" */
	char sha256[65];
	uint64_t size;
};

/* A manifest (format, bundle id, ...) or a state (bundle: the export that
 * wrote it or NULL; repos with refs' new_ only). */
struct sync_manifest {
	int format;
	char bundle[37];	/* random uuid; "" in a state from `khub sync state` */
	char *hub;
	char *created;
	char *since_bundle;	/* the bundle whose state this one builds on, or NULL */
	char exporter[37];	/* the exporting hub's stable id (uuid) */
	int64_t sequence;	/* its bundles' sequence: only grows */
	struct sync_repo *deleted;	/* repos deleted at the source (type, ns, name only) */
	size_t ndeleted;
	json_t *selection;	/* as given (owned) */
	struct sync_repo *repos;
	size_t nrepos;
	struct sync_entry *entries;
	size_t nentries;
	struct hashmap *index;	/* entry name → position + 1, built on lookup */
};

/* Parse and validate a manifest (is_state 0) or a state file (is_state 1):
 * names, shas, entry names ("git/N.pack", "lfs/<sha256>" only) and sizes
 * are checked, so nothing taken from it can name a path outside the
 * staging area. KHUB_EINVAL with err on anything else. Release out either way. */
int sync_manifest_parse(const char *text, size_t len, int is_state, struct sync_manifest *out, char *err,
			size_t errlen);
/* The JSON text (caller frees). */
char *sync_manifest_format(const struct sync_manifest *m, int is_state);
void sync_manifest_release(struct sync_manifest *m);	/* accepts zeroed */
const struct sync_entry *sync_manifest_entry(const struct sync_manifest *m, const char *name);
struct sync_repo *sync_manifest_repo(const struct sync_manifest *m, enum repo_type type, const char *ns,
				     const char *name);
/* Add an empty repo (fields copied by the caller) and return it. */
struct sync_repo *sync_manifest_add_repo(struct sync_manifest *m);
void sync_repo_add_ref(struct sync_repo *r, const char *name, const char *old, const char *new_);
void sync_repo_add_current(struct sync_repo *r, const char *name, const char *sha);
void sync_repo_add_have(struct sync_repo *r, const char *oid);
/* The sha of name in r's current refs, or NULL. */
const char *sync_repo_current(const struct sync_repo *r, const char *name);
/* The ref's entry in r, or NULL. */
const struct sync_ref *sync_repo_ref(const struct sync_repo *r, const char *name);
void sync_repo_clear(struct sync_repo *r);
/* A random uuid (version 4). */
void sync_uuid(char out[37]);
/* Read a whole (small) file; NULL with err. */
char *sync_read_file(const char *path, size_t max, size_t *len, char *err, size_t errlen);

/* ---- keys and signatures (sync/sign.c) ------------------------------------ */

/* Keys are made by ed25519_keygen (common/common.h): khub sync keygen. */
/* manifest.sig for the manifest's sha256 (digest), signed with a private
 * key file. Caller frees *sig_json. */
int sync_sign(const char *key_path, const unsigned char digest[32], char **sig_json, char key_id[SYNC_KEY_ID_LEN + 1],
	      char *err, size_t errlen);

/* The key id of a public key file (PEM, Ed25519). */
int sync_key_id_file(const char *path, char key_id[SYNC_KEY_ID_LEN + 1], char *err, size_t errlen);
/* Whether a namespace is within a key's scope (orgs: comma-separated names
 * or globs, case-insensitive). */
int sync_scope_allows(const char *orgs, const char *ns);
struct sync_keyring;
/* Public keys from a comma-separated list of files and directories (every
 * *.pub within). KHUB_EINVAL with err when one cannot be read. */
int sync_keyring_load(const char *list, struct sync_keyring **out, char *err, size_t errlen);
void sync_keyring_free(struct sync_keyring *ring);
size_t sync_keyring_count(const struct sync_keyring *ring);
/* 0 when sig_text is a valid signature of digest by a key of the ring
 * (fills key_id); KHUB_EPERM (untrusted key or bad signature) or
 * KHUB_EINVAL (malformed) with err. */
int sync_signature_check(const struct sync_keyring *ring, const char *sig_text, size_t len,
			 const unsigned char digest[32], char key_id[SYNC_KEY_ID_LEN + 1], char *err, size_t errlen);

/* ---- bundle streams and volumes (sync/volume.c) ---------------------------- */

enum { SYNC_PROGRESS_OFF = 0, SYNC_PROGRESS_BAR = 1, SYNC_PROGRESS_LINES = 2 };
struct sync_progress {
	int on;			/* SYNC_PROGRESS_*: on stderr, a bar (a terminal) or a line per tenth (a log) */
	const char *what;
	uint64_t total, done, last_us;
	int step;		/* lines: the tenths printed */
};
void sync_progress_add(struct sync_progress *p, uint64_t n);
void sync_progress_end(struct sync_progress *p);

struct sync_out;
/* A tar stream, compressed as compression says ("none", "zstd" or
 * "zstd:LEVEL"; NULL: zstd at level 3), into path (written as
 * path.partial, renamed by sync_out_close), or into path.001, path.002, ...
 * of at most volume_size bytes each plus path.index, written last. A
 * writer thread writes (and hashes and fsyncs the volumes) while the
 * caller reads and compresses. NULL with err on a bad compression. */
struct sync_out *sync_out_open(const char *path, uint64_t volume_size, const char *compression, char *err,
			       size_t errlen);
/* 0 when compression is one sync_out_open takes, else KHUB_EINVAL. */
int sync_compression_check(const char *compression);
int sync_out_bytes(struct sync_out *o, const char *name, const void *data, size_t len);
/* An entry of size bytes read from fd (from its current offset). */
int sync_out_fd(struct sync_out *o, const char *name, int fd, uint64_t size, struct sync_progress *p);
/* Finish the stream; *volumes (may be NULL) gets how many files. Frees o. */
int sync_out_close(struct sync_out *o, unsigned *volumes, char *err, size_t errlen);
void sync_out_abort(struct sync_out *o);

struct sync_in;
/* Open a bundle: the file path, or (when path ends in .001, or no file of
 * that name exists) the volumes path.001, path.002, ...; with path.index
 * every volume is checked to be there (size, and sha256 as it is read). */
struct sync_in *sync_in_open(const char *path, char *err, size_t errlen);
/* The next entry: 1 (name valid until the next call), 0 at the end,
 * KHUB_EIO with sync_in_error() on a truncated or corrupt stream. */
int sync_in_next(struct sync_in *in, const char **name, uint64_t *size);
/* Read from the current entry: bytes, 0 at its end, negative on error. */
long sync_in_read(struct sync_in *in, void *buf, size_t len);
/* The next bytes of the current entry without a copy: *data points into
 * the reader's buffer until the next call; their count, 0 at the entry's
 * end, or a negative error (sync_in_error says which). */
long sync_in_block(struct sync_in *in, const void **data);
/* Pass over the rest of the current entry, seeking where the bundle is not
 * compressed (a volume read partly is then checked by size only). */
int sync_in_skip(struct sync_in *in);
const char *sync_in_error(struct sync_in *in);
void sync_in_close(struct sync_in *in);

/* ---- export (sync/export.c) ---------------------------------------------- */

struct sync_export_opts {
	const char *repo_root;
	struct lfs_store *lfs;
	const char *key_path;
	const char *out;
	const char *hub;		/* this hub's name in the manifest */
	enum repo_type type;
	char **repos;			/* "ns/name" globs */
	size_t nrepos;
	char **refs;			/* select_ref globs */
	size_t nrefs;
	char **variants;		/* variant globs for LFS content */
	size_t nvariants;
	char **locks;			/* kernels.lock files (instead of repos/refs/variants) */
	size_t nlocks;
	const char *since;		/* a state file, or NULL */
	const char *state_out;		/* or NULL */
	uint64_t volume_size;		/* 0: one file */
	const char *compression;	/* none, zstd or zstd:LEVEL; NULL: zstd */
	int progress;
	FILE *report;			/* a summary line goes here */
};
int sync_export(const struct sync_export_opts *o, char *err, size_t errlen);

/* ---- inputs of an export (sync/state.c) ----------------------------------- */

/* One entry of a kernels.lock: a repo at a commit, with its locked variants. */
struct sync_lock_pin {
	char ns[REPO_NAME_MAX + 1], name[REPO_NAME_MAX + 1];
	char sha[41];
	char **variants;
	size_t nvariants;
};
/* Append the entries of a kernels.lock ([{repo_id, sha, variants}]) to
 * *pins; KHUB_EINVAL with err when it is anything else. */
int sync_lock_load(const char *path, struct sync_lock_pin **pins, size_t *npins, char *err, size_t errlen);
void sync_lock_release(struct sync_lock_pin *pins, size_t n);	/* accepts NULL */
/* The hub's state (every repo of type: its branches, tags and lock refs,
 * and the LFS objects linked to it and in the store) as JSON text (caller
 * frees), for `export --since`. */
char *sync_state_collect(const char *repo_root, struct lfs_store *lfs, enum repo_type type, const char *hub, char *err,
			 size_t errlen);

/* ---- verify and import (sync/import.c) -------------------------------------- */

struct sync_import_opts {
	const char *repo_root;		/* import only */
	struct lfs_store *lfs;		/* import only */
	const char *trusted;		/* key list (sync_keyring_load) */
	int progress;
	FILE *report;			/* what changes / changed */
	int allow_rewind;		/* import: a branch may move back (audited) */
	int dry_run;			/* import: verify and say what would change (json: as JSON) */
	int json;
	const char *operator_;		/* import: who runs it (audit, history) */
};
/* Check signature, every entry's sha256 and size, print the changes;
 * imports nothing, needs no database. */
int sync_verify(const struct sync_import_opts *o, const char *bundle, char *err, size_t errlen);
/* sync_import's refusal of a bundle whose exporter id is bound to another
 * key than the one that signed it (khub sync key-scope --exporter): not an
 * enum khub_err, so the CLI can say it apart (exit 5). */
#define SYNC_EEXPORTER_KEY (-100)
/* Verify and import one bundle (see the header comment). KHUB_ECONFLICT
 * when the hub lacks the bundle's base state; KHUB_EEXIST (with err) when
 * the hub applied this exporter's bundle of the same or a higher sequence
 * (a replayed or older bundle: nothing moves); SYNC_EEXPORTER_KEY when the
 * signing key may not sign for the bundle's exporter id; nothing changes on
 * any refusal. With o->dry_run, every check of the import (also the packs
 * indexed and every branch move checked) and the same return, nothing
 * changed. A killed import is finished by running it again. */
int sync_import(const struct sync_import_opts *o, const char *bundle, char *err, size_t errlen);

#endif
