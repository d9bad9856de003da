/* import_stream.c -- a bundle read as it streams: the manifest and its
 * signature first, then every entry hashed in 1 MiB chunks (packs through
 * libgit2's indexer when importing or in a dry run, LFS objects into
 * staging files when importing). */
#include "sync/import_internal.h"
#include "storage/db/db.h"
#include "storage/publish/publish.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>

/* ---- the manifest and its signature ----------------------------------------------- */

static int read_small_entry(struct sync_in *in, const char *want, size_t max, char **out, size_t *len,
			    struct import_run *x)
{
	const char *name;
	uint64_t size;
	int rc = sync_in_next(in, &name, &size);
	if (rc <= 0)
		return import_fail(x, KHUB_EINVAL, "not a bundle: %s", rc == 0 ? "it is empty" : sync_in_error(in));
	if (strcmp(name, want) != 0)
		return import_fail(x, KHUB_EINVAL, "not a bundle: %s must come %s", want,
			     strcmp(want, "manifest.json") == 0 ? "first" : "second");
	if (size > max)
		return import_fail(x, KHUB_EINVAL, "%s is larger than %zu bytes", want, max);
	char *buf = xmalloc((size_t)size + 1);
	size_t n = 0;
	while (n < size) {
		long r = sync_in_read(in, buf + n, (size_t)size - n);
		if (r <= 0) {
			free(buf);
			return import_fail(x, KHUB_EINVAL, "%s: %s", want, r == 0 ? "truncated" : sync_in_error(in));
		}
		n += (size_t)r;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

int import_open_checked(struct import_run *x, const char *bundle, struct sync_in **in)
{
	struct sync_keyring *ring = NULL;
	char *manifest = NULL, *sig = NULL;
	size_t mlen = 0, slen = 0;
	int rc;
	if ((rc = sync_keyring_load(x->o->trusted, &ring, x->err, x->errlen)) < 0)
		return rc;
	if (sync_keyring_count(ring) == 0) {
		sync_keyring_free(ring);
		return import_fail(x, KHUB_EPERM, "no trusted keys: set sync_trusted_keys (or give --key PUB to verify)");
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
		import_fail(x, rc, "the signed manifest is invalid: %s", perr);
cleanup:
	sync_keyring_free(ring);
	free(manifest);
	free(sig);
	return rc;
}

/* ---- streaming the entries ---------------------------------------------------------- */

long import_entry_index(struct import_run *x, const char *name)
{
	const struct sync_entry *e = sync_manifest_entry(&x->m, name);
	return e ? (long)(e - x->m.entries) : -1;
}

/* Read one entry to its end, hashing it; into the indexer or a file when
 * given. The bytes are taken from the reader's buffer (no copy). */
static int stream_entry(struct import_run *x, struct sync_in *in, const struct sync_entry *e, git_indexer *idx,
			git_indexer_progress *stats, int fd, struct sync_progress *prog)
{
	EVP_MD_CTX *sha = EVP_MD_CTX_new();
	EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
	uint64_t total = 0;
	int rc = 0;
	for (;;) {
		const void *buf;
		long n = sync_in_block(in, &buf);
		if (n < 0) {
			rc = import_fail(x, KHUB_EINVAL, "%s: %s", e->name, sync_in_error(in));
			break;
		}
		if (n == 0)
			break;
		total += (uint64_t)n;
		if (total > e->size) {
			rc = import_fail(x, KHUB_EINVAL, "%s is larger than the manifest says", e->name);
			break;
		}
		EVP_DigestUpdate(sha, buf, (size_t)n);
		if (idx && git_indexer_append(idx, buf, (size_t)n, stats) < 0) {
			const git_error *ge = git_error_last();
			rc = import_fail(x, KHUB_EINVAL, "%s is not a valid git pack: %s", e->name, ge ? ge->message : "?");
			break;
		}
		if (fd >= 0 && write_all(fd, buf, (size_t)n) < 0) {
			rc = import_fail(x, errno == ENOSPC ? KHUB_ENOSPC : KHUB_EIO, "cannot stage %s: %s", e->name,
					 strerror(errno));
			break;
		}
		sync_progress_add(prog, (uint64_t)n);
	}
	char hex[65];
	sha256_final_hex(sha, hex);
	EVP_MD_CTX_free(sha);
	if (rc == 0 && (total != e->size || strcmp(hex, e->sha256) != 0))
		rc = import_fail(x, KHUB_EINVAL, "%s fails verification (%s differs from the signed manifest): the bundle was "
			   "altered or damaged", e->name, total != e->size ? "size" : "sha256");
	return rc;
}

static int stage_pack(struct import_run *x, struct sync_in *in, long i, struct sync_progress *prog)
{
	const struct sync_entry *e = &x->m.entries[i];
	git_indexer *idx = NULL;
	if (!x->pack_dir)	/* verify: hashed only */
		return stream_entry(x, in, e, NULL, NULL, -1, prog);
	char *dir = xasprintf("%s/%ld", x->pack_dir, i);
	int rc = 0;
	git_indexer_options opts = GIT_INDEXER_OPTIONS_INIT;
	if (mkdir_p(dir, 0755) < 0 || git_indexer_new(&idx, dir, 0444, NULL, &opts) < 0) {
		rc = import_fail(x, KHUB_EIO, "cannot stage %s", e->name);
		goto cleanup;
	}
	git_indexer_progress stats = { 0 };
	if ((rc = stream_entry(x, in, e, idx, &stats, -1, prog)) < 0)
		goto cleanup;
	if (git_indexer_commit(idx, &stats) < 0) {
		const git_error *ge = git_error_last();
		rc = import_fail(x, KHUB_EINVAL, "%s is not a complete git pack: %s", e->name, ge ? ge->message : "?");
		goto cleanup;
	}
	x->staged_pack[i] = xasprintf("%s/pack-%s", dir, git_indexer_name(idx));
	/* the indexer fsynced the pack and its index (GIT_OPT_ENABLE_FSYNC_GITDIR); a dry run journals nothing */
	char *line = x->apply ? xasprintf("%s %s pack-%s\n", e->name, e->sha256, git_indexer_name(idx)) : NULL;
	if (line)
		rc = import_flush_add(x->flush, -1, NULL, NULL, line);
	free(line);
cleanup:
	git_indexer_free(idx);
	free(dir);
	return rc;
}

/* An LFS object is staged as OID.part, then (fsynced, by the flush thread)
 * renamed OID and journaled: a staged OID is whole and verified. */
static int stage_lfs(struct import_run *x, struct sync_in *in, long i, struct sync_progress *prog)
{
	const struct sync_entry *e = &x->m.entries[i];
	const char *oid = e->name + 4;
	int fd = -1;
	char *part = NULL;
	/* named in flight from now until the import ends (its links exist
	 * then): khub gc must not remove an object found in the store here */
	if (x->apply) {
		int64_t id = 0;
		if (db_lfs_inflight_begin(oid, &id) < 0)
			return import_fail(x, KHUB_EDB, "cannot record %s as in flight (database)", e->name);
		x->inflight = xrealloc(x->inflight, (x->ninflight + 1) * sizeof(*x->inflight));
		x->inflight[x->ninflight++] = id;
	}
	/* an object the store has already is still hashed, never rewritten */
	if (x->apply && lfs_store_stat(x->o->lfs, oid, NULL) < 0) {
		part = xasprintf("%s/%s.part", x->lfs_dir, oid);
		fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0) {
			int rc = import_fail(x, KHUB_EIO, "cannot stage %s: %s", e->name, strerror(errno));
			free(part);
			return rc;
		}
	}
	int rc = stream_entry(x, in, e, NULL, NULL, fd, prog);
	if (fd >= 0 && rc == 0) {
		char *final = xasprintf("%s/%s", x->lfs_dir, oid), *line = xasprintf("%s %s\n", e->name, e->sha256);
		rc = import_flush_add(x->flush, fd, part, final, line);	/* takes fd */
		free(final);
		free(line);
	} else if (fd >= 0) {
		close(fd);
		unlink(part);
	}
	free(part);
	return rc;
}

int import_stream_all(struct import_run *x, struct sync_in *in)
{
	struct sync_progress prog = { x->o->progress, x->apply ? "import" : "verify", 0, 0, 0 };
	for (size_t i = 0; i < x->m.nentries; i++)
		prog.total += x->m.entries[i].size;
	int rc = 0;
	size_t streamed = 0;
	for (;;) {
		const char *name;
		uint64_t size;
		int n = sync_in_next(in, &name, &size);
		if (n < 0) {
			rc = import_fail(x, KHUB_EINVAL, "%s", sync_in_error(in));
			break;
		}
		if (n == 0)
			break;
		long i = import_entry_index(x, name);
		if (i < 0 || x->seen[i]) {
			rc = import_fail(x, KHUB_EINVAL, "the bundle holds %.200s, which the signed manifest does not list%s", name,
				   i >= 0 ? " again" : "");
			break;
		}
		x->seen[i] = 1;
		if (x->verified && x->verified[i]) {
			/* staged and verified by a killed run of this bundle: not read again (skipped by the reader) */
			prog.total -= size <= prog.total ? size : prog.total;
			if (sync_in_skip(in) < 0) {
				rc = import_fail(x, KHUB_EINVAL, "%s", sync_in_error(in));
				break;
			}
			continue;
		}
		rc = strncmp(name, "git/", 4) == 0 ? stage_pack(x, in, i, &prog) : stage_lfs(x, in, i, &prog);
		if (rc < 0)
			break;
		if (x->flush && ++streamed == (x->m.nentries + 1) / 2 && import_crash_at("streaming")) {
			import_flush_finish(x->flush);	/* tests: a kill mid-stream, the first half journaled */
			x->flush = NULL;
			import_crash_point("streaming");
		}
	}
	for (size_t i = 0; rc == 0 && i < x->m.nentries; i++)
		if (!x->seen[i])
			rc = import_fail(x, KHUB_EINVAL, "the bundle is truncated: %s is missing", x->m.entries[i].name);
	if (rc == 0)
		sync_progress_end(&prog);
	else if (prog.on)
		fputc('\n', stderr);
	return rc;
}
