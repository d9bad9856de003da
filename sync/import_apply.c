/* import_apply.c -- the hub's side of an import: the base state the
 * bundle needs (checked before anything changes), then per repo the pack,
 * the LFS objects and the refs (through publish_import_ref). */
#include "sync/import_internal.h"
#include "storage/db.h"
#include "storage/publish.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>

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

/* "import bundle <id> first", or without a base bundle (the base was a
 * hub's `khub sync state`) what to do instead. */
static void first_hint(struct import_run *x, char *out, size_t len)
{
	if (x->m.since_bundle)
		snprintf(out, len, "import bundle %s first", x->m.since_bundle);
	else
		snprintf(out, len, "import what this hub had when its state was taken, or export without --since");
}

/* The hub has what the bundle builds on. *pending counts refs still to
 * move and LFS objects still to link (0: the bundle is in already). */
int import_check_base(struct import_run *x, size_t *pending)
{
	*pending = 0;
	for (size_t i = 0; i < x->m.nrepos; i++) {
		const struct sync_repo *r = &x->m.repos[i];
		struct repo_record rec;
		git_repository *git = NULL;
		int rc = db_repo_get(r->type, r->ns, r->name, &rec);
		if (rc < 0 && rc != KHUB_ENOTFOUND)
			return import_fail(x, rc, "cannot read repo %s/%s (database)", r->ns, r->name);
		int have = rc == 0;
		if (have && !rec.mirrored)
			return import_fail(x, KHUB_ECONFLICT, "repo %s/%s exists here and is not a mirrored repo: refusing to "
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
				char hint[160];
				first_hint(x, hint, sizeof(hint));
				import_fail(x, KHUB_ECONFLICT, "bundle %s needs repo %s/%s at commit %s (%s); this hub has %s: %s",
				      x->m.bundle, r->ns, r->name, ref->old, ref->name,
				      exists ? cur : have ? "no such ref" : "no such repo", hint);
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
				char hint[160];
				first_hint(x, hint, sizeof(hint));
				import_fail(x, KHUB_ECONFLICT, "bundle %s needs repo %s/%s at commit %s; this hub has %s: %s",
				      x->m.bundle, r->ns, r->name, r->base[k], have ? "no such commit" : "no such repo", hint);
				git_repository_free(git);
				return KHUB_ECONFLICT;
			}
		}
		for (size_t k = 0; have && k < r->nlfs; k++) {
			int linked = db_lfs_linked(rec.id, r->lfs[k].oid);
			if (linked < 0) {
				git_repository_free(git);
				return import_fail(x, KHUB_EDB, "database unavailable");
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
			rc = import_fail(x, KHUB_EIO, "%s/%s: cannot move the pack into the repo: %s", r->ns, r->name,
				   strerror(errno));
		free(from);
		free(to);
	}
	fsync_dir(objdir);
	free(objdir);
	return rc;
}

int import_apply_repo(struct import_run *x, const struct sync_repo *r, size_t *moved)
{
	static const struct publish_actor actor = { 0, "sync", NULL, "local" };
	struct repo_record rec;
	git_repository *git = NULL;
	int existed = db_repo_get(r->type, r->ns, r->name, &rec) == 0;
	int rc = db_repo_ensure_mirrored(r->type, r->ns, r->name, &rec);
	if (rc < 0)
		return import_fail(x, rc, "%s/%s: cannot register the repo", r->ns, r->name);
	rc = repo_store_init_empty(x->o->repo_root, r->type, rec.ns, rec.name);
	if (rc < 0 && rc != KHUB_EEXIST)
		return import_fail(x, rc, "%s/%s: cannot create the repo", r->ns, r->name);
	/* private at the source: private here; public at the source: public
	 * when the repo is new here (an admin may have hidden it since) */
	int want_private = r->private_ || (existed && rec.private);
	if (rec.private != want_private && db_repo_set_private(rec.id, want_private) < 0)
		return import_fail(x, KHUB_EDB, "%s/%s: cannot set its visibility", r->ns, r->name);
	/* the org's trust flag follows the source unless an admin set it here */
	db_account_copy_upstream_trust(r->ns, r->org_trusted);
	if ((rc = repo_store_open(x->o->repo_root, r->type, rec.ns, rec.name, &git)) < 0)
		return import_fail(x, rc, "%s/%s: cannot open the repo", r->ns, r->name);
	long pi = r->pack ? import_entry_index(x, r->pack) : -1;
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
				import_fail(x, rc, "%s/%s: cannot store LFS object %s", r->ns, r->name, oid);
				goto cleanup;
			}
		}
		if (db_lfs_link(rec.id, oid) < 0) {
			rc = import_fail(x, KHUB_EDB, "%s/%s: cannot link LFS object %s (database)", r->ns, r->name, oid);
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
			import_fail(x, rc, "%s/%s: cannot move %s to %.12s%s", r->ns, r->name, ref->name, ref->new_,
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
