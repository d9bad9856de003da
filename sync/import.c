/* import.c -- verify and import a bundle: the manifest and its signature
 * first (a trusted key, or nothing happens), then the hub's base state
 * (refused before anything changes when the hub lacks it), then every
 * entry streamed and hashed as it arrives (constant memory: packs through
 * libgit2's indexer into a staging directory, LFS objects into staging
 * files), and only when every entry verified: packs moved into the repos,
 * LFS objects into the store and linked, refs moved, all through
 * storage's repo_import_* (storage/git/repo.h). A killed import leaves
 * staging and its journal of verified entries; a re-run reads the stream
 * again but skips those. */
#include "sync/import_internal.h"
#include "storage/db/db.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <ftw.h>
#include <sys/file.h>

int import_fail(struct import_run *x, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->err, x->errlen, fmt, ap);
	va_end(ap);
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
	int rc = import_open_checked(&x, bundle, &in);
	if (rc == 0) {
		x.seen = xcalloc(x.m.nentries + 1, 1);
		rc = import_stream_all(&x, in);
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

/* One import at a time on this hub, taken before the sequence is checked
 * (two bundles applied at once could each pass it). */
static int import_lock(struct import_run *x, int *lock_fd, char **lock_path)
{
	char *staging = xasprintf("%s/.sync-staging", x->o->repo_root);
	*lock_path = xasprintf("%s/import.lock", staging);
	if (mkdir_p(staging, 0755) == 0)
		*lock_fd = open(*lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	free(staging);
	if (*lock_fd < 0 || flock(*lock_fd, LOCK_EX | LOCK_NB) < 0)
		return import_fail(x, *lock_fd < 0 ? KHUB_EIO : KHUB_ECONFLICT, "%s",
				   *lock_fd < 0 ? "cannot create the staging directory"
						: "another import is running on this hub (one at a time)");
	return 0;
}

/* A journal line "NAME SHA256 [PACK]" names an entry a killed run of this
 * bundle verified and staged: trusted again only when it matches the signed
 * manifest and its staged file is still there (an LFS object of the right
 * size, or in the store already; a pack and its index). */
static void journal_line(struct import_run *x, char *line)
{
	char *save = NULL, *name = strtok_r(line, " \n", &save), *sha = strtok_r(NULL, " \n", &save);
	char *pack = strtok_r(NULL, " \n", &save);
	long i = name && sha ? import_entry_index(x, name) : -1;
	if (i < 0 || strcmp(x->m.entries[i].sha256, sha) != 0)
		return;
	const struct sync_entry *e = &x->m.entries[i];
	struct stat st;
	if (strncmp(name, "lfs/", 4) == 0) {
		char *path = xasprintf("%s/%s", x->lfs_dir, name + 4);
		x->verified[i] = (stat(path, &st) == 0 && (uint64_t)st.st_size == e->size) ||
				 lfs_store_stat(x->o->lfs, name + 4, NULL) == 0;
		free(path);
	} else if (pack && strncmp(pack, "pack-", 5) == 0 && !strchr(pack, '/')) {
		char *base = xasprintf("%s/%ld/%s", x->pack_dir, i, pack), *p = xasprintf("%s.pack", base),
		     *idx = xasprintf("%s.idx", base);
		if (stat(p, &st) == 0 && stat(idx, &st) == 0 && !x->staged_pack[i]) {
			x->verified[i] = 1;
			x->staged_pack[i] = base;
			base = NULL;
		}
		free(base);
		free(p);
		free(idx);
	}
}

static size_t journal_load(struct import_run *x, const char *path)
{
	FILE *fp = fopen(path, "r");
	char line[256];
	size_t n = 0;
	while (fp && fgets(line, sizeof(line), fp))
		journal_line(x, line);
	if (fp)
		fclose(fp);
	for (size_t i = 0; i < x->m.nentries; i++)
		n += x->verified[i];
	return n;
}

static int drop_part(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	size_t len = strlen(path);
	if (flag == FTW_F && len > 5 && strcmp(path + len - 5, ".part") == 0)
		unlink(path);	/* a staging file a killed run did not finish */
	return 0;
}

/* The staging directories; what a killed run of this bundle verified stays
 * (its journal), the rest of what it left goes. */
static int import_stage_begin(struct import_run *x)
{
	x->pack_dir = xasprintf("%s/.sync-staging/%s", x->o->repo_root, x->m.bundle);
	x->lfs_dir = xasprintf("%s/sync-%s", lfs_store_tmp_dir(x->o->lfs), x->m.bundle);
	if (mkdir_p(x->pack_dir, 0755) < 0 || mkdir_p(x->lfs_dir, 0700) < 0)
		return import_fail(x, KHUB_EIO, "cannot create the staging directories: %s", strerror(errno));
	nftw(x->lfs_dir, drop_part, 16, FTW_PHYS);
	x->seen = xcalloc(x->m.nentries + 1, 1);
	x->verified = xcalloc(x->m.nentries + 1, 1);
	x->staged_pack = xcalloc(x->m.nentries + 1, sizeof(char *));
	char *journal = xasprintf("%s/verified", x->pack_dir);
	size_t kept = journal_load(x, journal);
	if (kept && x->o->report)
		fprintf(x->o->report, "bundle %s: %zu entries verified by an earlier, cut-short run are not read again\n",
			x->m.bundle, kept);
	x->journal = open(journal, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	free(journal);
	if (x->journal < 0)
		return import_fail(x, KHUB_EIO, "cannot create the staging journal: %s", strerror(errno));
	x->flush = import_flush_start(x->journal);
	return 0;
}

/* Every staged file durable (and named) before anything refers to it. */
static int import_stage_end(struct import_run *x)
{
	int e = import_flush_finish(x->flush);
	x->flush = NULL;
	if (e)
		return import_fail(x, e == ENOSPC ? KHUB_ENOSPC : KHUB_EIO, "cannot stage the bundle's objects: %s",
				   strerror(e));
	return 0;
}

/* Whether the bundle is to be applied: 1 when it is (or was) in already. */
static int import_decide(struct import_run *x)
{
	int resume = 0;
	size_t pending = 0;
	int rc = import_check_sequence(x, &resume);
	if (rc == 1 && x->o->report)
		fprintf(x->o->report, "bundle %s is imported already: nothing changed\n", x->m.bundle);
	if (rc != 0)
		return rc;
	if (resume && x->o->report)
		fprintf(x->o->report, "bundle %s: an earlier import was cut short; finishing it\n", x->m.bundle);
	if ((rc = import_check_base(x, &pending)) < 0)
		return rc;
	if (pending)
		return 0;
	if ((rc = import_record_unchanged(x)) < 0)
		return rc;
	if (x->o->report)
		fprintf(x->o->report, "bundle %s (number %lld of exporter %s): everything is here already, nothing "
			"changed\n", x->m.bundle, (long long)x->m.sequence, x->m.exporter);
	return 1;
}

static void dry_run_text(struct import_run *x, const char *status, uint64_t bytes)
{
	FILE *fp = x->o->report;
	fprintf(fp, "bundle %s (number %lld of exporter %s) from %s, signed by key %s: %s\n", x->m.bundle,
		(long long)x->m.sequence, x->m.exporter, x->m.hub, x->key_id, status);
	size_t i;
	json_t *c;
	json_array_foreach(x->plan, i, c) {
		const char *action = json_string_value(json_object_get(c, "action"));
		const char *ref = json_string_value(json_object_get(c, "ref"));
		const char *from = json_string_value(json_object_get(c, "from")), *to = json_string_value(json_object_get(c, "to"));
		json_t *ff = json_object_get(c, "fast_forward");
		fprintf(fp, "  %s %s", action, json_string_value(json_object_get(c, json_object_get(c, "org") ? "org" : "repo")));
		if (ref)
			fprintf(fp, " %s %.12s -> %.12s", ref, from ? from : "(none)", to ? to : "(deleted)");
		if (json_is_boolean(ff))
			fprintf(fp, "%s", json_is_true(ff) ? " (fast-forward)" : " (moves back: refused without --allow-rewind)");
		if (json_object_get(c, "objects"))
			fprintf(fp, " %lld objects, %lld bytes", (long long)json_integer_value(json_object_get(c, "objects")),
				(long long)json_integer_value(json_object_get(c, "bytes")));
		if (json_object_get(c, "trusted"))
			fprintf(fp, " %s", json_is_true(json_object_get(c, "trusted")) ? "trusted" : "not trusted");
		fputc('\n', fp);
	}
	fprintf(fp, "  %zu changes; %" PRIu64 " bytes of entries verified (signature, every sha256 and size); "
		"nothing was changed\n", json_array_size(x->plan), bytes);
}

static void dry_run_print(struct import_run *x, const char *status, int verified)
{
	uint64_t bytes = 0;
	for (size_t i = 0; i < x->m.nentries; i++)
		bytes += x->m.entries[i].size;
	if (x->o->report && x->o->json) {
		json_t *doc = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:O, s:I, s:b}", "bundle", x->m.bundle, "exporter",
					x->m.exporter, "sequence", (json_int_t)x->m.sequence, "key_id", x->key_id, "hub",
					x->m.hub, "status", status, "changes", x->plan, "bytes", (json_int_t)bytes,
					"verified", verified);
		char *text = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
		fprintf(x->o->report, "%s\n", text ? text : "{}");
		free(text);
		json_decref(doc);
	} else if (x->o->report) {
		dry_run_text(x, status, verified ? bytes : 0);
	}
}

/* The packs indexed into a scratch directory of the staging area (removed
 * after), then every check import_prepare makes. */
static int dry_run_packs(struct import_run *x, struct sync_in *in, int *verified)
{
	char *staging = xasprintf("%s/.sync-staging", x->o->repo_root);
	x->pack_dir = xasprintf("%s/dry-run-XXXXXX", staging);
	int rc = mkdir_p(staging, 0755) == 0 && mkdtemp(x->pack_dir) ? 0 : KHUB_EIO;
	free(staging);
	if (rc < 0) {
		free(x->pack_dir);
		x->pack_dir = NULL;
		return import_fail(x, rc, "cannot create a scratch directory for the packs: %s", strerror(errno));
	}
	x->staged_pack = xcalloc(x->m.nentries + 1, sizeof(char *));
	rc = import_stream_all(x, in);
	*verified = rc == 0;
	if (rc == 0)
		rc = import_check_packs(x);
	tree_remove(x->pack_dir);
	free(x->pack_dir);
	x->pack_dir = NULL;
	return rc;
}

/* --dry-run: every check of an import, in its order, and the bundle
 * verified (its packs indexed), nothing written; what would change, as
 * text or JSON; the import's return (so its exit status). */
static int import_dry_run(struct import_run *x, struct sync_in *in)
{
	int resume = 0, rc;
	size_t pending = 0;
	x->plan = json_array();
	int seq = import_check_sequence(x, &resume);
	if (seq < 0 && seq != KHUB_EEXIST)
		return seq;
	if (seq == 1 || seq == KHUB_EEXIST) {	/* the import stops here too */
		dry_run_print(x, seq == 1 ? "applied already: nothing would change" : "older or replayed: nothing would move", 0);
		return seq == KHUB_EEXIST ? seq : 0;
	}
	if ((rc = import_check_base(x, &pending)) < 0)
		return rc;
	if (pending == 0) {
		dry_run_print(x, "nothing would change", 0);
		return 0;
	}
	x->apply = 0;
	x->seen = xcalloc(x->m.nentries + 1, 1);
	int verified = 0;
	rc = dry_run_packs(x, in, &verified);
	char *status = rc < 0 ? xasprintf("would be refused: %s", x->err)
			      : xstrdup(resume ? "would finish a cut-short import" : "would apply");
	dry_run_print(x, status, verified);
	free(status);
	return rc;
}

/* Repos new here get their stores and rows, and repos deleted at the
 * source leave, under the registry lock as the API's create and delete: no
 * create, delete or move of a repo runs in between. */
static int import_prepare_register(struct import_run *x)
{
	if (db_lock_wait(DB_LOCK_REGISTRY, 0) < 0)
		return import_fail(x, KHUB_EDB, "database unavailable");
	int rc = import_prepare(x);
	if (rc == 0) {
		import_crash_point("prepared");
		rc = import_register(x);
	}
	db_unlock(DB_LOCK_REGISTRY, 0);
	return rc;
}

static void import_run_release(struct import_run *x)
{
	for (size_t i = 0; x->quarantined && i < x->m.nrepos; i++)
		free(x->quarantined[i]);
	free(x->quarantined);
	for (size_t i = 0; x->deleted_slot && i < x->m.ndeleted; i++)
		free(x->deleted_slot[i]);
	free(x->deleted_slot);
	free(x->deleted_id);
}

int sync_import(const struct sync_import_opts *o, const char *bundle, char *err, size_t errlen)
{
	struct import_run x = { .o = o, .apply = 1, .err = err, .errlen = errlen, .journal = -1 };
	struct sync_in *in = NULL;
	size_t moved = 0;
	int lock_fd = -1;
	char *lock_path = NULL;
	int rc = import_open_checked(&x, bundle, &in);
	if (rc == 0)
		rc = import_check_scope(&x);
	if (rc == 0)
		rc = import_check_exporter_key(&x);
	if (rc == 0 && o->dry_run) {
		rc = import_dry_run(&x, in);
		goto cleanup;
	}
	if (rc < 0 || (rc = import_lock(&x, &lock_fd, &lock_path)) < 0 || (rc = import_decide(&x)) != 0)
		goto cleanup;
	if ((rc = import_stage_begin(&x)) < 0 || (rc = import_stream_all(&x, in)) < 0 ||
	    (rc = import_stage_end(&x)) < 0)
		goto cleanup;
	/* every entry verified: now the hub changes, invisibly first */
	import_crash_point("staged");
	if ((rc = import_prepare_register(&x)) < 0)
		goto cleanup;
	import_crash_point("registered");
	if ((rc = import_move_refs(&x, &moved)) < 0)
		goto cleanup;
	report(&x, "moved");
	if (o->report)
		fprintf(o->report, "bundle %s imported: %zu refs moved%s\n", x.m.bundle, moved,
			moved || x.changes ? "" : " (nothing changed)");
cleanup:
	if (rc == 1)
		rc = 0;
	if (rc < 0 && rc != KHUB_EDB && !o->dry_run)
		import_audit_refused(&x, bundle, rc);
	json_decref(x.plan);
	import_flush_finish(x.flush);
	if (x.journal >= 0)
		close(x.journal);
	for (size_t i = 0; i < x.ninflight; i++)	/* linked by now, or the import failed */
		db_lfs_inflight_end(x.inflight[i]);
	free(x.inflight);
	/* kept for a re-run after a disk or database failure (what verified is not read again) */
	if (x.pack_dir && rc != KHUB_EIO && rc != KHUB_ENOSPC && rc != KHUB_EDB)
		tree_remove(x.pack_dir);
	if (x.lfs_dir && rc != KHUB_EIO && rc != KHUB_ENOSPC && rc != KHUB_EDB)
		tree_remove(x.lfs_dir);
	if (lock_fd >= 0)
		close(lock_fd);	/* the file stays: unlinking it would let a third import lock another inode */
	free(lock_path);
	for (size_t i = 0; x.staged_pack && i < x.m.nentries; i++)
		free(x.staged_pack[i]);
	free(x.staged_pack);
	free(x.pack_dir);
	free(x.lfs_dir);
	free(x.seen);
	free(x.verified);
	free(x.fresh);
	free(x.repo_id);
	import_run_release(&x);
	free_strings(x.sel_refs, x.nsel_refs);
	sync_in_close(in);
	sync_manifest_release(&x.m);
	return rc;
}
