/* import.c -- verify and import a bundle: the manifest and its signature
 * first (a trusted key, or nothing happens), then the hub's base state
 * (refused before anything changes when the hub lacks it), then every
 * entry streamed and hashed as it arrives (constant memory: packs through
 * libgit2's indexer into a staging directory, LFS objects into staging
 * files), and only when every entry verified: packs moved into the repos,
 * LFS objects into the store and linked, refs moved through
 * publish_import_ref. A killed import leaves staging only; a re-run starts
 * the stream again and completes. */
#include "sync/sync.h"
#include "storage/db.h"
#include "storage/publish.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>

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

static int ifail(struct import_run *x, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int ifail(struct import_run *x, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->err, x->errlen, fmt, ap);
	va_end(ap);
	return rc;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void remove_tree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- the manifest and its signature ----------------------------------------------- */

static int read_small_entry(struct sync_in *in, const char *want, size_t max, char **out, size_t *len,
			    struct import_run *x)
{
	const char *name;
	uint64_t size;
	int rc = sync_in_next(in, &name, &size);
	if (rc <= 0)
		return ifail(x, KHUB_EINVAL, "not a bundle: %s", rc == 0 ? "it is empty" : sync_in_error(in));
	if (strcmp(name, want) != 0)
		return ifail(x, KHUB_EINVAL, "not a bundle: %s must come %s", want,
			     strcmp(want, "manifest.json") == 0 ? "first" : "second");
	if (size > max)
		return ifail(x, KHUB_EINVAL, "%s is larger than %zu bytes", want, max);
	char *buf = xmalloc((size_t)size + 1);
	size_t n = 0;
	while (n < size) {
		long r = sync_in_read(in, buf + n, (size_t)size - n);
		if (r <= 0) {
			free(buf);
			return ifail(x, KHUB_EINVAL, "%s: %s", want, r == 0 ? "truncated" : sync_in_error(in));
		}
		n += (size_t)r;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

static int open_checked(struct import_run *x, const char *bundle, struct sync_in **in)
{
	struct sync_keyring *ring = NULL;
	char *manifest = NULL, *sig = NULL;
	size_t mlen = 0, slen = 0;
	int rc;
	if ((rc = sync_keyring_load(x->o->trusted, &ring, x->err, x->errlen)) < 0)
		return rc;
	if (sync_keyring_count(ring) == 0) {
		sync_keyring_free(ring);
		return ifail(x, KHUB_EPERM, "no trusted keys: set sync_trusted_keys (or give --key PUB to verify)");
	}
	*in = sync_in_open(bundle, x->err, x->errlen);
	if (!*in) {
		sync_keyring_free(ring);
		return KHUB_EINVAL;
	}
	if ((rc = read_small_entry(*in, "manifest.json", SYNC_MANIFEST_MAX, &manifest, &mlen, x)) < 0 ||
	    (rc = read_small_entry(*in, "manifest.sig", SYNC_SIG_MAX, &sig, &slen, x)) < 0)
		goto cleanup;
	unsigned char digest[32];
	EVP_Digest(manifest, mlen, digest, NULL, EVP_sha256(), NULL);
	if ((rc = sync_signature_check(ring, sig, slen, digest, x->key_id, x->err, x->errlen)) < 0)
		goto cleanup;
	char perr[300];
	if ((rc = sync_manifest_parse(manifest, mlen, 0, &x->m, perr, sizeof(perr))) < 0)
		ifail(x, rc, "the signed manifest is invalid: %s", perr);
cleanup:
	sync_keyring_free(ring);
	free(manifest);
	free(sig);
	return rc;
}

/* ---- streaming the entries ---------------------------------------------------------- */

static long entry_index(struct import_run *x, const char *name)
{
	const struct sync_entry *e = sync_manifest_entry(&x->m, name);
	return e ? (long)(e - x->m.entries) : -1;
}

/* Read one entry to its end, hashing it; into the indexer or a file when
 * given. */
static int stream_entry(struct import_run *x, struct sync_in *in, const struct sync_entry *e, git_indexer *idx,
			git_indexer_progress *stats, int fd, struct sync_progress *prog, char *buf)
{
	EVP_MD_CTX *sha = EVP_MD_CTX_new();
	EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
	uint64_t total = 0;
	int rc = 0;
	for (;;) {
		long n = sync_in_read(in, buf, CHUNK);
		if (n < 0) {
			rc = ifail(x, KHUB_EINVAL, "%s: %s", e->name, sync_in_error(in));
			break;
		}
		if (n == 0)
			break;
		total += (uint64_t)n;
		if (total > e->size) {
			rc = ifail(x, KHUB_EINVAL, "%s is larger than the manifest says", e->name);
			break;
		}
		EVP_DigestUpdate(sha, buf, (size_t)n);
		if (idx && git_indexer_append(idx, buf, (size_t)n, stats) < 0) {
			const git_error *ge = git_error_last();
			rc = ifail(x, KHUB_EINVAL, "%s is not a valid git pack: %s", e->name, ge ? ge->message : "?");
			break;
		}
		if (fd >= 0) {
			const char *p = buf;
			size_t left = (size_t)n;
			while (left > 0) {
				ssize_t w = write(fd, p, left);
				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0) {
					rc = ifail(x, KHUB_EIO, "cannot stage %s: %s", e->name, strerror(errno));
					break;
				}
				p += w;
				left -= (size_t)w;
			}
			if (rc < 0)
				break;
		}
		sync_progress_add(prog, (uint64_t)n);
	}
	unsigned char d[32];
	unsigned int dl;
	char hex[65];
	EVP_DigestFinal_ex(sha, d, &dl);
	EVP_MD_CTX_free(sha);
	hex_encode(d, 32, hex);
	if (rc == 0 && (total != e->size || strcmp(hex, e->sha256) != 0))
		rc = ifail(x, KHUB_EINVAL, "%s fails verification (%s differs from the signed manifest): the bundle was "
			   "altered or damaged", e->name, total != e->size ? "size" : "sha256");
	return rc;
}

static int stage_pack(struct import_run *x, struct sync_in *in, long i, struct sync_progress *prog, char *buf)
{
	const struct sync_entry *e = &x->m.entries[i];
	git_indexer *idx = NULL;
	if (!x->apply)
		return stream_entry(x, in, e, NULL, NULL, -1, prog, buf);
	char *dir = xasprintf("%s/%ld", x->pack_dir, i);
	int rc = 0;
	git_indexer_options opts = GIT_INDEXER_OPTIONS_INIT;
	if (mkdir_p(dir, 0755) < 0 || git_indexer_new(&idx, dir, 0444, NULL, &opts) < 0) {
		rc = ifail(x, KHUB_EIO, "cannot stage %s", e->name);
		goto cleanup;
	}
	git_indexer_progress stats = { 0 };
	if ((rc = stream_entry(x, in, e, idx, &stats, -1, prog, buf)) < 0)
		goto cleanup;
	if (git_indexer_commit(idx, &stats) < 0) {
		const git_error *ge = git_error_last();
		rc = ifail(x, KHUB_EINVAL, "%s is not a complete git pack: %s", e->name, ge ? ge->message : "?");
		goto cleanup;
	}
	x->staged_pack[i] = xasprintf("%s/pack-%s", dir, git_indexer_name(idx));
cleanup:
	git_indexer_free(idx);
	free(dir);
	return rc;
}

static int stage_lfs(struct import_run *x, struct sync_in *in, long i, struct sync_progress *prog, char *buf)
{
	const struct sync_entry *e = &x->m.entries[i];
	const char *oid = e->name + 4;
	int fd = -1;
	char *path = NULL;
	/* an object the store has already is still hashed, never rewritten */
	if (x->apply && lfs_store_stat(x->o->lfs, oid, NULL) < 0) {
		path = xasprintf("%s/%s", x->lfs_dir, oid);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0) {
			int rc = ifail(x, KHUB_EIO, "cannot stage %s: %s", e->name, strerror(errno));
			free(path);
			return rc;
		}
	}
	int rc = stream_entry(x, in, e, NULL, NULL, fd, prog, buf);
	if (fd >= 0 && close(fd) < 0 && rc == 0)
		rc = ifail(x, KHUB_EIO, "cannot stage %s: %s", e->name, strerror(errno));
	free(path);
	return rc;
}

static int stream_all(struct import_run *x, struct sync_in *in)
{
	struct sync_progress prog = { x->o->progress, x->apply ? "import" : "verify", 0, 0, 0 };
	for (size_t i = 0; i < x->m.nentries; i++)
		prog.total += x->m.entries[i].size;
	char *buf = xmalloc(CHUNK);
	int rc = 0;
	for (;;) {
		const char *name;
		uint64_t size;
		int n = sync_in_next(in, &name, &size);
		if (n < 0) {
			rc = ifail(x, KHUB_EINVAL, "%s", sync_in_error(in));
			break;
		}
		if (n == 0)
			break;
		long i = entry_index(x, name);
		if (i < 0 || x->seen[i]) {
			rc = ifail(x, KHUB_EINVAL, "the bundle holds %.200s, which the signed manifest does not list%s", name,
				   i >= 0 ? " again" : "");
			break;
		}
		x->seen[i] = 1;
		rc = strncmp(name, "git/", 4) == 0 ? stage_pack(x, in, i, &prog, buf) : stage_lfs(x, in, i, &prog, buf);
		if (rc < 0)
			break;
	}
	for (size_t i = 0; rc == 0 && i < x->m.nentries; i++)
		if (!x->seen[i])
			rc = ifail(x, KHUB_EINVAL, "the bundle is truncated: %s is missing", x->m.entries[i].name);
	free(buf);
	if (rc == 0)
		sync_progress_end(&prog);
	else if (prog.on)
		fputc('\n', stderr);
	return rc;
}

/* ---- the hub's side -------------------------------------------------------------- */

static int local_ref(git_repository *git, const char *name, char sha[41])
{
	git_reference *ref = NULL;
	sha[0] = '\0';
	if (!git || git_reference_lookup(&ref, git, name) < 0)
		return -1;
	const git_oid *oid = git_reference_target(ref);
	if (oid)
		git_oid_tostr(sha, 41, oid);
	git_reference_free(ref);
	return oid ? 0 : -1;
}

static const char *first_hint(struct import_run *x)
{
	return x->m.since_bundle ? x->m.since_bundle : "the one that brought it";
}

/* The hub has what the bundle builds on. *pending counts refs still to
 * move and LFS objects still to link (0: the bundle is in already). */
static int check_base(struct import_run *x, size_t *pending)
{
	*pending = 0;
	for (size_t i = 0; i < x->m.nrepos; i++) {
		const struct sync_repo *r = &x->m.repos[i];
		struct repo_record rec;
		git_repository *git = NULL;
		int rc = db_repo_get(r->type, r->ns, r->name, &rec);
		if (rc < 0 && rc != KHUB_ENOTFOUND)
			return ifail(x, rc, "cannot read repo %s/%s (database)", r->ns, r->name);
		int have = rc == 0;
		if (have && !rec.mirrored)
			return ifail(x, KHUB_ECONFLICT, "repo %s/%s exists here and is not a mirrored repo: refusing to "
				     "overwrite it", r->ns, r->name);
		if (have && repo_store_open(x->o->repo_root, r->type, rec.ns, rec.name, &git) < 0)
			git = NULL;
		for (size_t k = 0; k < r->nrefs; k++) {
			const struct sync_ref *ref = &r->refs[k];
			char cur[41];
			int exists = local_ref(git, ref->name, cur) == 0;
			if (exists ? strcmp(cur, ref->new_) == 0 : !ref->new_[0])
				continue;	/* there already */
			(*pending)++;
			if (ref->old[0] && (!exists || strcmp(cur, ref->old) != 0)) {
				ifail(x, KHUB_ECONFLICT, "bundle %s needs repo %s/%s at commit %s (%s); this hub has %s: import "
				      "bundle %s first", x->m.bundle, r->ns, r->name, ref->old, ref->name,
				      exists ? cur : have ? "no such ref" : "no such repo", first_hint(x));
				git_repository_free(git);
				return KHUB_ECONFLICT;
			}
		}
		for (size_t k = 0; k < r->nbase; k++) {
			git_oid oid;
			git_odb *odb = NULL;
			git_oid_fromstr(&oid, r->base[k]);
			int ok = git && git_repository_odb(&odb, git) == 0 && git_odb_exists(odb, &oid);
			git_odb_free(odb);
			if (!ok) {
				ifail(x, KHUB_ECONFLICT, "bundle %s needs repo %s/%s at commit %s; this hub has %s: import "
				      "bundle %s first", x->m.bundle, r->ns, r->name, r->base[k],
				      have ? "no such commit" : "no such repo", first_hint(x));
				git_repository_free(git);
				return KHUB_ECONFLICT;
			}
		}
		for (size_t k = 0; have && k < r->nlfs; k++) {
			int linked = db_lfs_linked(rec.id, r->lfs[k].oid);
			if (linked < 0) {
				git_repository_free(git);
				return ifail(x, KHUB_EDB, "database unavailable");
			}
			if (!linked || lfs_store_stat(x->o->lfs, r->lfs[k].oid, NULL) < 0)
				(*pending)++;
		}
		if (!have)
			(*pending)++;
		git_repository_free(git);
	}
	return 0;
}

static int move_pack(struct import_run *x, git_repository *git, const char *staged, const struct sync_repo *r)
{
	const char *base = strrchr(staged, '/') + 1;
	int rc = 0;
	char *objdir = xasprintf("%sobjects/pack", git_repository_path(git));
	const char *ext[2] = { ".pack", ".idx" };	/* the .idx last: git reads a pack through it */
	for (int k = 0; k < 2 && rc == 0; k++) {
		char *from = xasprintf("%s%s", staged, ext[k]), *to = xasprintf("%s/%s%s", objdir, base, ext[k]);
		if (mkdir_p(objdir, 0755) < 0 || rename(from, to) < 0)
			rc = ifail(x, KHUB_EIO, "%s/%s: cannot move the pack into the repo: %s", r->ns, r->name,
				   strerror(errno));
		free(from);
		free(to);
	}
	fsync_dir(objdir);
	free(objdir);
	return rc;
}

static int apply_repo(struct import_run *x, const struct sync_repo *r, size_t *moved)
{
	static const struct publish_actor actor = { 0, "sync", NULL, "local" };
	struct repo_record rec;
	git_repository *git = NULL;
	int rc = db_repo_ensure_mirrored(r->type, r->ns, r->name, &rec);
	if (rc < 0)
		return ifail(x, rc, "%s/%s: cannot register the repo", r->ns, r->name);
	rc = repo_store_init_empty(x->o->repo_root, r->type, rec.ns, rec.name);
	if (rc < 0 && rc != KHUB_EEXIST)
		return ifail(x, rc, "%s/%s: cannot create the repo", r->ns, r->name);
	if (rec.private != r->private_ && db_repo_set_private(rec.id, r->private_) < 0)
		return ifail(x, KHUB_EDB, "%s/%s: cannot set its visibility", r->ns, r->name);
	/* the org's trust flag follows the source unless an admin set it here */
	db_account_copy_upstream_trust(r->ns, r->org_trusted);
	if ((rc = repo_store_open(x->o->repo_root, r->type, rec.ns, rec.name, &git)) < 0)
		return ifail(x, rc, "%s/%s: cannot open the repo", r->ns, r->name);
	long pi = r->pack ? entry_index(x, r->pack) : -1;
	if (pi >= 0 && x->staged_pack[pi]) {
		if ((rc = move_pack(x, git, x->staged_pack[pi], r)) < 0)
			goto cleanup;
		git_odb *odb = NULL;
		if (git_repository_odb(&odb, git) == 0)
			git_odb_refresh(odb);
		git_odb_free(odb);
	}
	for (size_t k = 0; k < r->nlfs; k++) {
		const char *oid = r->lfs[k].oid;
		if (lfs_store_stat(x->o->lfs, oid, NULL) < 0) {
			char *path = xasprintf("%s/%s", x->lfs_dir, oid);
			rc = lfs_store_adopt_hashed(x->o->lfs, path, oid);	/* hashed as it was staged */
			free(path);
			if (rc < 0) {
				ifail(x, rc, "%s/%s: cannot store LFS object %s", r->ns, r->name, oid);
				goto cleanup;
			}
		}
		if (db_lfs_link(rec.id, oid) < 0) {
			rc = ifail(x, KHUB_EDB, "%s/%s: cannot link LFS object %s (database)", r->ns, r->name, oid);
			goto cleanup;
		}
	}
	char *target = xasprintf("%s%s/%s", repo_type_url_prefix(rec.type), rec.ns, rec.name);
	for (size_t k = 0; k < r->nrefs && rc == 0; k++) {
		const struct sync_ref *ref = &r->refs[k];
		char cur[41];
		int exists = local_ref(git, ref->name, cur) == 0;
		if (exists ? strcmp(cur, ref->new_) == 0 : !ref->new_[0])
			continue;
		char *msg = xasprintf("khub sync import %s", x->m.bundle);
		rc = publish_import_ref(rec.id, git, ref->name, exists ? cur : NULL, ref->new_[0] ? ref->new_ : NULL, msg);
		free(msg);
		if (rc < 0) {
			ifail(x, rc, "%s/%s: cannot move %s to %.12s%s", r->ns, r->name, ref->name, ref->new_,
			      rc == KHUB_EINVAL ? " (its commit is not in the repo)" : "");
			break;
		}
		char *details = xasprintf("{\"bundle\":\"%s\",\"key_id\":\"%s\",\"ref\":\"%s\",\"old\":\"%s\",\"new\":\"%s\"}",
					  x->m.bundle, x->key_id, ref->name, exists ? cur : "", ref->new_);
		char commit[41] = "";
		if (ref->new_[0]) {	/* indexing wants the commit an annotated tag names */
			git_oid oid;
			git_object *obj = NULL, *c = NULL;
			git_oid_fromstr(&oid, ref->new_);
			if (git_object_lookup(&obj, git, &oid, GIT_OBJECT_ANY) == 0 &&
			    git_object_peel(&c, obj, GIT_OBJECT_COMMIT) == 0)
				git_oid_tostr(commit, sizeof(commit), git_object_id(c));
			git_object_free(c);
			git_object_free(obj);
		}
		publish_refs_moved(rec.id, git, commit[0] ? commit : NULL,
				   ref->new_[0] ? PUBLISH_NEW_COMMIT : PUBLISH_REFS_CHANGED, &actor, "sync.ref", target,
				   details);
		free(details);
		(*moved)++;
	}
	if (rc == 0) {
		char *details = xasprintf("{\"bundle\":\"%s\",\"key_id\":\"%s\",\"hub\":\"%s\",\"refs\":%zu,\"lfs\":%zu}",
					  x->m.bundle, x->key_id, x->m.hub, r->nrefs, r->nlfs);
		db_audit(0, "sync", "sync.import", target, details, "local");
		free(details);
	}
	free(target);
cleanup:
	git_repository_free(git);
	return rc;
}

/* ---- the report and the entry points --------------------------------------------------- */

static void report(struct import_run *x, const char *verb)
{
	FILE *fp = x->o->report;
	if (!fp)
		return;
	uint64_t bytes = 0;
	for (size_t i = 0; i < x->m.nentries; i++)
		bytes += x->m.entries[i].size;
	fprintf(fp, "bundle %s from %s (%s), signed by key %s: %zu repos, %zu entries, %" PRIu64 " bytes\n",
		x->m.bundle, x->m.hub, x->m.created, x->key_id, x->m.nrepos, x->m.nentries, bytes);
	if (x->m.since_bundle)
		fprintf(fp, "  builds on bundle %s\n", x->m.since_bundle);
	for (size_t i = 0; i < x->m.nrepos; i++) {
		const struct sync_repo *r = &x->m.repos[i];
		uint64_t lb = 0;
		for (size_t k = 0; k < r->nlfs; k++)
			lb += r->lfs[k].size;
		const struct sync_entry *pe = r->pack ? sync_manifest_entry(&x->m, r->pack) : NULL;
		fprintf(fp, "  %s %s/%s%s: pack %" PRIu64 " bytes, %zu LFS objects (%" PRIu64 " bytes)\n",
			repo_type_name(r->type), r->ns, r->name, r->private_ ? " (private)" : "", pe ? pe->size : 0,
			r->nlfs, lb);
		for (size_t k = 0; k < r->nrefs; k++)
			fprintf(fp, "    %s %s %s -> %s\n", verb, r->refs[k].name,
				r->refs[k].old[0] ? r->refs[k].old : "(none)",
				r->refs[k].new_[0] ? r->refs[k].new_ : "(deleted)");
	}
}

int sync_verify(const struct sync_import_opts *o, const char *bundle, char *err, size_t errlen)
{
	struct import_run x = { .o = o, .apply = 0, .err = err, .errlen = errlen };
	struct sync_in *in = NULL;
	int rc = open_checked(&x, bundle, &in);
	if (rc == 0) {
		x.seen = xcalloc(x.m.nentries + 1, 1);
		rc = stream_all(&x, in);
	}
	if (rc == 0) {
		report(&x, "would move");
		if (o->report)
			fprintf(o->report, "bundle %s verifies: signature, every entry's sha256 and size\n", x.m.bundle);
	}
	sync_in_close(in);
	free(x.seen);
	sync_manifest_release(&x.m);
	return rc;
}

int sync_import(const struct sync_import_opts *o, const char *bundle, char *err, size_t errlen)
{
	struct import_run x = { .o = o, .apply = 1, .err = err, .errlen = errlen };
	struct sync_in *in = NULL;
	size_t pending = 0, moved = 0;
	int lock_fd = -1;
	char *lock_path = NULL;
	int rc = open_checked(&x, bundle, &in);
	if (rc < 0)
		goto cleanup;
	if ((rc = check_base(&x, &pending)) < 0)
		goto cleanup;
	if (pending == 0) {
		if (o->report)
			fprintf(o->report, "bundle %s is imported already: nothing changed\n", x.m.bundle);
		goto cleanup;
	}
	x.seen = xcalloc(x.m.nentries + 1, 1);
	x.staged_pack = xcalloc(x.m.nentries + 1, sizeof(char *));
	/* one import of a bundle at a time (the staging is per bundle) */
	char *staging = xasprintf("%s/.sync-staging", o->repo_root);
	lock_path = xasprintf("%s/%s.lock", staging, x.m.bundle);
	if (mkdir_p(staging, 0755) == 0)
		lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	free(staging);
	if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) < 0) {
		rc = ifail(&x, lock_fd < 0 ? KHUB_EIO : KHUB_ECONFLICT, "%s",
			   lock_fd < 0 ? "cannot create the staging directory" : "another import of this bundle is running");
		goto cleanup;
	}
	x.pack_dir = xasprintf("%s/.sync-staging/%s", o->repo_root, x.m.bundle);
	x.lfs_dir = xasprintf("%s/sync-%s", lfs_store_tmp_dir(o->lfs), x.m.bundle);
	remove_tree(x.pack_dir);	/* what a killed run left */
	remove_tree(x.lfs_dir);
	if (mkdir_p(x.pack_dir, 0755) < 0 || mkdir_p(x.lfs_dir, 0700) < 0) {
		rc = ifail(&x, KHUB_EIO, "cannot create the staging directories: %s", strerror(errno));
		goto cleanup;
	}
	if ((rc = stream_all(&x, in)) < 0)
		goto cleanup;
	/* every entry verified: now the hub changes */
	for (size_t i = 0; i < x.m.nrepos && rc == 0; i++)
		rc = apply_repo(&x, &x.m.repos[i], &moved);
	if (rc == 0) {
		report(&x, "moved");
		if (o->report)
			fprintf(o->report, "bundle %s imported: %zu refs moved\n", x.m.bundle, moved);
	}
cleanup:
	if (x.pack_dir)
		remove_tree(x.pack_dir);
	if (x.lfs_dir)
		remove_tree(x.lfs_dir);
	if (lock_fd >= 0) {
		unlink(lock_path);
		close(lock_fd);
	}
	free(lock_path);
	for (size_t i = 0; x.staged_pack && i < x.m.nentries; i++)
		free(x.staged_pack[i]);
	free(x.staged_pack);
	free(x.pack_dir);
	free(x.lfs_dir);
	free(x.seen);
	sync_in_close(in);
	sync_manifest_release(&x.m);
	return rc;
}
