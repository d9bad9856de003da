/* import_commit.c -- the visible part of an import, made so that a crash
 * at any moment leaves old or new state and a re-run finishes it: the
 * bundle's exporter sequence (a replayed or older bundle moves nothing),
 * one database transaction that records the bundle as being applied and
 * registers its repos (whose refs were set before, so a new repo appears
 * whole), then the ref moves of repos that were here already, each a
 * compare-and-swap, then the bundle marked applied. Every step on a repo
 * goes through storage's repo_import_* (storage/git/repo.h). */
#include "sync/import_internal.h"
#include "storage/db/db.h"
#include "storage/publish/publish.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int import_crash_at(const char *step)
{
	const char *at = getenv("KHUB_TEST_CRASH_AT");
	return at && strcmp(at, step) == 0;
}

void import_crash_point(const char *step)
{
	if (!import_crash_at(step))
		return;
	fprintf(stderr, "KHUB_TEST_CRASH_AT=%s: killed here\n", step);
	fflush(NULL);
	raise(SIGKILL);
}

static char *audit_details(struct import_run *x, const char *extra)
{
	json_t *name = json_string(x->o->operator_ ? x->o->operator_ : "unknown");
	char *op = name ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
	json_decref(name);
	char *d = xasprintf("{\"bundle\":\"%s\",\"key_id\":\"%s\",\"exporter\":\"%s\",\"sequence\":%lld,"
			    "\"operator\":%s%s%s}", x->m.bundle, x->key_id, x->m.exporter, (long long)x->m.sequence,
			    op ? op : "null", extra[0] ? "," : "", extra);
	free(op);
	return d;
}

static char *actor_name(struct import_run *x)
{
	return xasprintf("sync:%s", x->o->operator_ ? x->o->operator_ : "unknown");
}

void import_audit(struct import_run *x, const char *action, const char *target, const char *extra)
{
	char *details = audit_details(x, extra), *actor = actor_name(x);
	if (db_audit(0, actor, action, target, details, "local") < 0)
		log_error("audit: cannot record %s %s", action, target);
	free(details);
	free(actor);
}

void import_audit_refused(struct import_run *x, const char *file, int rc)
{
	const char *base = strrchr(file, '/');
	json_t *d = json_pack("{s:s, s:s?, s:s?, s:s?, s:I, s:s, s:s}", "file", base ? base + 1 : file, "bundle",
			      x->m.bundle[0] ? x->m.bundle : NULL, "key_id", x->key_id[0] ? x->key_id : NULL,
			      "exporter", x->m.exporter[0] ? x->m.exporter : NULL, "sequence", (json_int_t)x->m.sequence,
			      "reason", x->err, "operator", x->o->operator_ ? x->o->operator_ : "unknown");
	char *details = d ? json_dumps(d, JSON_COMPACT) : NULL, *actor = actor_name(x);
	const char *action = rc == KHUB_EEXIST ? "sync.stale" : "sync.refused";
	if (details && db_audit(0, actor, action, x->m.bundle[0] ? x->m.bundle : "bundle", details, "local") < 0)
		log_error("audit: cannot record %s of %s", action, file);
	json_decref(d);
	free(details);
	free(actor);
}

static char *ref_extra(const char *name, const char *old, const char *new_)
{
	return xasprintf("\"ref\":\"%s\",\"old\":\"%s\",\"new\":\"%s\"", name, old ? old : "", new_ ? new_ : "");
}

/* ---- the signing key's scope --------------------------------------------------------- */

static const struct sync_repo *outside_scope(const struct sync_repo *repos, size_t n, const char *orgs)
{
	for (size_t i = 0; i < n; i++)
		if (!sync_scope_allows(orgs, repos[i].ns))
			return &repos[i];
	return NULL;
}

int import_check_scope(struct import_run *x)
{
	char *orgs = NULL;
	int rc = db_sync_key_scope_get(x->key_id, &orgs);
	if (rc == KHUB_ENOTFOUND)
		return 0;	/* a key without a scope may bring in any org */
	if (rc < 0)
		return import_fail(x, KHUB_EDB, "database unavailable");
	const struct sync_repo *r = outside_scope(x->m.repos, x->m.nrepos, orgs);
	const char *what = "carries";
	if (!r) {
		r = outside_scope(x->m.deleted, x->m.ndeleted, orgs);
		what = "deletes";
	}
	if (r)
		rc = import_fail(x, KHUB_EPERM, "bundle %s is signed by key %s, which may bring in only %s (khub sync "
				 "key-scope); it %s repo %s/%s, outside that scope: refusing the whole bundle",
				 x->m.bundle, x->key_id, orgs, what, r->ns, r->name);
	free(orgs);
	return rc;
}

/* ---- the exporter's key and sequence ------------------------------------------------- */

int import_check_exporter_key(struct import_run *x)
{
	char bound[SYNC_KEY_ID_LEN + 1];
	int rc = db_sync_exporter_key_get(x->m.exporter, bound);
	if (rc == KHUB_ENOTFOUND || (rc == 0 && strcmp(bound, x->key_id) == 0))
		return 0;
	if (rc < 0)
		return import_fail(x, KHUB_EDB, "database unavailable");
	return import_fail(x, SYNC_EEXPORTER_KEY, "bundle %s names exporter %s, which is bound to key %s; it is signed "
			   "by key %s, which may not sign for it (khub sync key-scope KEY --exporter ID binds an "
			   "exporter to another key): refusing the whole bundle", x->m.bundle, x->m.exporter, bound,
			   x->key_id);
}

int import_bind_exporter(struct import_run *x)
{
	const char *op = x->o->operator_ ? x->o->operator_ : "unknown";
	int rc = db_sync_exporter_key_set(x->m.exporter, x->key_id, op, 0);
	if (rc < 0)
		return import_fail(x, KHUB_EDB, "cannot bind the exporter to the key (database)");
	if (rc == 0)	/* bound already: to this key, unless another import bound it since the check */
		return import_check_exporter_key(x);
	/* its first bundle here: from now on only this key signs for it */
	import_audit(x, "sync.exporter_key", x->m.exporter, "\"first_bundle\":true");
	return 0;
}

int import_check_sequence(struct import_run *x, int *resume)
{
	struct sync_import_record last;
	*resume = 0;
	int rc = db_sync_import_last(x->m.exporter, &last);
	if (rc == KHUB_ENOTFOUND)
		return 0;
	if (rc < 0)
		return import_fail(x, KHUB_EDB, "database unavailable");
	if (strcmp(last.bundle, x->m.bundle) == 0) {
		*resume = !last.done;
		return last.done ? 1 : 0;
	}
	if (x->m.sequence > last.sequence)
		return 0;
	return import_fail(x, KHUB_EEXIST, "bundle %s is number %lld of exporter %s; this hub applied number %lld "
			   "(bundle %s) already: an older or replayed bundle moves nothing",
			   x->m.bundle, (long long)x->m.sequence, x->m.exporter, (long long)last.sequence, last.bundle);
}

int import_record_unchanged(struct import_run *x)
{
	int rc = import_bind_exporter(x);
	if (rc < 0)
		return rc;
	if (db_sync_import_begin(x->m.exporter, x->m.sequence, x->m.bundle, x->key_id, x->m.hub,
				 x->o->operator_ ? x->o->operator_ : "unknown") < 0 ||
	    db_sync_import_done(x->m.bundle, 0) < 0)
		return import_fail(x, KHUB_EDB, "cannot record the bundle (database)");
	return 0;
}

/* ---- one transaction -------------------------------------------------------------- */

static int register_links(struct import_run *x, const struct sync_repo *r, int64_t id)
{
	for (size_t k = 0; k < r->nlfs; k++)	/* stored by import_prepare */
		if (repo_import_add_lfs(x->o->lfs, id, NULL, r->lfs[k].oid) < 0)
			return import_fail(x, KHUB_EDB, "%s/%s: cannot link LFS object %s (database)", r->ns, r->name,
					   r->lfs[k].oid);
	return 0;
}

static int register_repo(struct import_run *x, size_t i)
{
	const struct sync_repo *r = &x->m.repos[i];
	struct repo_record rec;
	int kind = db_sync_account_kind(r->ns);
	if (kind < 0 || repo_import_register(r->type, r->ns, r->name, r->private_, &rec) < 0)
		return import_fail(x, KHUB_EDB, "%s/%s: cannot register the repo (database)", r->ns, r->name);
	x->repo_id[i] = rec.id;
	/* private at the source: private here; public at the source: public
	 * when the repo is new here (an admin may have hidden it since) */
	if (r->private_ && !rec.private) {
		struct repo_settings want = { .value[REPO_SETTING_PRIVATE] = 1 }, before, after;
		if (db_repo_settings_set(rec.id, REPO_SETTING_BIT(REPO_SETTING_PRIVATE), &want, &before, &after) < 0)
			return import_fail(x, KHUB_EDB, "%s/%s: cannot set its visibility", r->ns, r->name);
		x->changes++;
	}
	/* the org's trust flag follows the source unless an admin set it here;
	 * a local account (an old import's repo in it) is never touched */
	if (kind != SYNC_ACCOUNT_LOCAL) {
		int t = db_sync_trust_differs(r->ns, r->org_trusted);
		if (t > 0 && repo_import_copy_trust(r->ns, r->org_trusted) < 0)
			t = -1;
		if (t < 0)
			return import_fail(x, KHUB_EDB, "%s: cannot copy its trust flag (database)", r->ns);
		x->changes += (size_t)t;
	}
	return register_links(x, r, rec.id);
}

static void audit_fresh(struct import_run *x, size_t i)
{
	const struct sync_repo *r = &x->m.repos[i];
	char *target = xasprintf("%s%s/%s", repo_type_url_prefix(r->type), r->ns, r->name);
	struct strbuf created = STRBUF_INIT;	/* as the API's create */
	strbuf_addf(&created, "\"private\":%s,\"quarantined\":", r->private_ ? "true" : "false");
	if (x->quarantined[i])
		strbuf_add_json_quoted(&created, x->quarantined[i]);
	else
		strbuf_adds(&created, "null");
	import_audit(x, "repo.create", target, created.buf);
	strbuf_release(&created);
	for (size_t k = 0; k < r->nrefs; k++) {
		if (!r->refs[k].new_[0])
			continue;
		char *extra = ref_extra(r->refs[k].name, "", r->refs[k].new_);
		import_audit(x, "sync.ref", target, extra);
		free(extra);
	}
	free(target);
}

/* The directories of the repos deleted at the source (those a bundle may
 * delete: mirrored, not kept by `khub mirror`) into the trash, before any
 * row goes, as the API's delete: a move that fails deletes nothing. */
static int trash_deleted(struct import_run *x)
{
	x->deleted_id = xcalloc(x->m.ndeleted + 1, sizeof(*x->deleted_id));
	x->deleted_slot = xcalloc(x->m.ndeleted + 1, sizeof(*x->deleted_slot));
	for (size_t i = 0; i < x->m.ndeleted; i++) {
		const struct sync_repo *d = &x->m.deleted[i];
		int64_t id = 0;
		int del = db_sync_deletable(d->type, d->ns, d->name, &id);
		if (del < 0)
			return import_fail(x, KHUB_EDB, "database unavailable");
		if (!del)
			continue;	/* local, gone already, or kept by `khub mirror` */
		int rc = repo_store_trash_to(x->o->repo_root, d->type, d->ns, d->name, &x->deleted_slot[i]);
		if (rc < 0 && rc != KHUB_ENOTFOUND)	/* none: lost already (or a killed run moved it) */
			return import_fail(x, rc, "%s/%s: cannot move its directory to the trash; nothing was deleted",
					   d->ns, d->name);
		x->deleted_id[i] = id;
	}
	return 0;
}

/* The import did not commit: the trashed directories go back. */
static void untrash_deleted(struct import_run *x)
{
	for (size_t i = 0; x->deleted_slot && i < x->m.ndeleted; i++) {
		const struct sync_repo *d = &x->m.deleted[i];
		const char *slot = x->deleted_slot[i];
		if (slot && repo_store_untrash(x->o->repo_root, d->type, d->ns, d->name, slot) < 0)
			log_error("sync import: %s/%s stays registered but its directory is still at %s", d->ns,
				  d->name, slot);
		free(x->deleted_slot[i]);
		x->deleted_slot[i] = NULL;
	}
}

static int unregister_deleted(struct import_run *x)
{
	for (size_t i = 0; i < x->m.ndeleted; i++) {
		const struct sync_repo *d = &x->m.deleted[i];
		if (!x->deleted_id[i])
			continue;
		if (db_repo_delete(x->deleted_id[i]) < 0)
			return import_fail(x, KHUB_EDB, "%s/%s: cannot delete it (database)", d->ns, d->name);
		char *target = xasprintf("%s%s/%s", repo_type_url_prefix(d->type), d->ns, d->name);
		import_audit(x, "sync.delete", target, "\"deleted_at_source\":true");
		free(target);
		x->changes++;
	}
	return 0;
}

/* Inside the transaction: the repos registered, those new here audited as
 * created (with where a directory found at their place went), the deleted
 * ones unregistered. */
static int register_all(struct import_run *x)
{
	int rc = import_bind_exporter(x);
	if (rc == 0 && db_sync_import_begin(x->m.exporter, x->m.sequence, x->m.bundle, x->key_id, x->m.hub,
					    x->o->operator_ ? x->o->operator_ : "unknown") < 0)
		rc = import_fail(x, KHUB_EDB, "cannot record the bundle (database)");
	for (size_t i = 0; i < x->m.nrepos && rc == 0; i++) {
		rc = register_repo(x, i);
		if (rc == 0 && x->fresh[i])
			audit_fresh(x, i);
	}
	if (rc == 0)
		rc = unregister_deleted(x);
	return rc;
}

int import_register(struct import_run *x)
{
	x->repo_id = xcalloc(x->m.nrepos + 1, sizeof(*x->repo_id));
	int rc = trash_deleted(x);
	if (rc == 0 && db_tx_begin() < 0)
		rc = import_fail(x, KHUB_EDB, "database unavailable");
	else if (rc == 0 && (rc = register_all(x)) < 0)
		db_tx_rollback();
	else if (rc == 0 && db_tx_commit() < 0)
		rc = import_fail(x, KHUB_EDB, "cannot commit the import (database): nothing changed");
	if (rc < 0)
		untrash_deleted(x);
	return rc;
}

/* ---- the refs of repos that were here already --------------------------------------- */

static int move_one(struct import_run *x, const struct sync_repo *r, int64_t id, git_repository *git,
		    const char *name, const char *new_, const char *target, size_t *moved)
{
	char cur[41] = "";
	git_reference *ref = NULL;
	int exists = git_reference_lookup(&ref, git, name) == 0 && git_reference_target(ref);
	if (exists)
		git_oid_tostr(cur, sizeof(cur), git_reference_target(ref));
	git_reference_free(ref);
	if (exists ? strcmp(cur, new_) == 0 : !new_[0])
		return 0;
	char *extra = ref_extra(name, cur, new_);
	if (exists && import_tag_would_move(name, cur, new_)) {	/* said and audited by the check */
		free(extra);
		return 0;
	}
	git_oid a, b;
	int rewind = exists && new_[0] && strncmp(name, "refs/tags/", 10) != 0 && git_oid_fromstr(&a, cur) == 0 &&
		     git_oid_fromstr(&b, new_) == 0 && git_graph_descendant_of(git, &b, &a) != 1;
	char *msg = xasprintf("khub sync import %s", x->m.bundle), *details = audit_details(x, extra);
	char *actor = actor_name(x);
	struct repo_import_ref move = { name, exists ? cur : NULL, new_, msg };
	struct publish_actor who = { 0, actor, NULL, "local" };
	int rc = repo_import_move_ref(id, git, &move, &who, rewind ? "sync.rewind" : "sync.ref", target, details);
	free(actor);
	free(details);
	free(msg);
	free(extra);
	if (rc < 0)
		return import_fail(x, rc, "%s/%s: cannot move %s to %.12s%s", r->ns, r->name, name, new_,
				   rc == KHUB_EINVAL ? " (its commit is not in the repo)" : "");
	(*moved)++;
	import_crash_point("moving");
	return 0;
}

static int move_repo(struct import_run *x, size_t i, size_t *moved)
{
	const struct sync_repo *r = &x->m.repos[i];
	git_repository *git = NULL;
	char **gone = NULL;
	size_t ngone = 0;
	int rc = repo_store_open(x->o->repo_root, r->type, r->ns, r->name, &git);
	if (rc < 0)
		return import_fail(x, rc, "%s/%s: cannot open the repo", r->ns, r->name);
	char *target = xasprintf("%s%s/%s", repo_type_url_prefix(r->type), r->ns, r->name);
	if (x->fresh[i]) {	/* set and audited before it was registered */
		for (size_t k = 0; k < r->nrefs; k++)
			repo_import_refs_moved(x->repo_id[i], git, r->refs[k].new_, NULL, NULL, target, NULL);
		*moved += r->nrefs;
	} else {
		for (size_t k = 0; k < r->nrefs && rc == 0; k++)
			rc = move_one(x, r, x->repo_id[i], git, r->refs[k].name, r->refs[k].new_, target, moved);
		import_gone_refs(x, git, r, &gone, &ngone);
		for (size_t k = 0; k < ngone && rc == 0; k++)
			rc = move_one(x, r, x->repo_id[i], git, gone[k], "", target, moved);
	}
	if (rc == 0) {
		char *extra = xasprintf("\"hub\":\"%s\",\"refs\":%zu,\"lfs\":%zu,\"private\":%s", x->m.hub, r->nrefs,
					r->nlfs, r->private_ ? "true" : "false");
		import_audit(x, "sync.import", target, extra);
		free(extra);
	}
	free_strings(gone, ngone);
	free(target);
	git_repository_free(git);
	return rc;
}

int import_move_refs(struct import_run *x, size_t *moved)
{
	int rc = 0;
	for (size_t i = 0; i < x->m.nrepos && rc == 0; i++)
		rc = move_repo(x, i, moved);
	if (rc == 0 && db_sync_import_done(x->m.bundle, (long)*moved) < 0)
		rc = import_fail(x, KHUB_EDB, "cannot record the bundle as applied (database)");
	return rc;
}
