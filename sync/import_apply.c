/* import_apply.c -- the hub's side of an import: the base state the
 * bundle needs (checked before anything changes), then per repo the pack,
 * the LFS objects and the refs of a repo new here (through storage's
 * repo_import_*, see storage/git/repo.h). */
#include "sync/import_internal.h"
#include "storage/db/db.h"
#include "kernel/kernel.h"


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

int import_tag_would_move(const char *name, const char *cur, const char *new_)
{
	return strncmp(name, "refs/tags/", 10) == 0 && cur && new_[0] && strcmp(cur, new_) != 0;
}

static int in_selection(struct import_run *x, const char *name)
{
	static char *all[] = { "all" };
	if (strncmp(name, "refs/heads/", 11) != 0 && strncmp(name, "refs/tags/", 10) != 0)
		return 0;
	return x->nsel_refs ? select_ref(x->sel_refs, x->nsel_refs, name) : select_ref(all, 1, name);
}

void import_gone_refs(struct import_run *x, git_repository *git, const struct sync_repo *r, char ***names, size_t *n)
{
	git_reference_iterator *it = NULL;
	git_reference *ref;
	*names = NULL;
	*n = 0;
	if (!git || !r->has_current || git_reference_iterator_new(&it, git) < 0)
		return;
	while (git_reference_next(&ref, it) == 0) {
		const char *name = git_reference_name(ref);
		if (in_selection(x, name) && !sync_repo_current(r, name) && !sync_repo_ref(r, name)) {
			*names = xrealloc(*names, (*n + 1) * sizeof(char *));
			(*names)[(*n)++] = xstrdup(name);
		}
		git_reference_free(ref);
	}
	git_reference_iterator_free(it);
}

/* Refuse a repo that is local here, or new here in a local namespace: a
 * bundle never changes what this hub's own users and orgs hold or trust. */
static int check_local(struct import_run *x, const struct sync_repo *r, int have, const struct repo_record *rec)
{
	if (have && !rec->mirrored)
		return import_fail(x, KHUB_ECONFLICT, "repo %s/%s exists here and is not a mirrored repo: refusing to "
				   "overwrite it", r->ns, r->name);
	if (have)
		return 0;
	int kind = db_sync_account_kind(r->ns);
	if (kind < 0)
		return import_fail(x, KHUB_EDB, "database unavailable");
	if (kind == SYNC_ACCOUNT_LOCAL)
		return import_fail(x, KHUB_EPERM, "bundle %s would add repo %s/%s to %s, a user or org of this hub (not "
				   "made by an import): a bundle never changes the members or trust of a local account; "
				   "refusing", x->m.bundle, r->ns, r->name, r->ns);
	return 0;
}

/* A change the import would make, for --dry-run (into x->plan when set). */
static void plan(struct import_run *x, const struct sync_repo *r, const char *action, const char *ref,
		 const char *from, const char *to)
{
	if (!x->plan)
		return;
	char *id = xasprintf("%s/%s", r->ns, r->name);
	json_t *c = json_pack("{s:s, s:s}", "action", action, "repo", id);
	if (ref)
		json_object_set_new(c, "ref", json_string(ref));
	if (from)
		json_object_set_new(c, "from", from[0] ? json_string(from) : json_null());
	if (to)
		json_object_set_new(c, "to", to[0] ? json_string(to) : json_null());
	json_array_append_new(x->plan, c);
	free(id);
}

/* For a planned branch move: a fast-forward (1), not (0), or not known
 * before the bundle's pack is read (-1). */
static int plan_forward(git_repository *git, const char *cur, const char *new_)
{
	git_oid a, b;
	git_odb *odb = NULL;
	int known = git_oid_fromstr(&a, cur) == 0 && git_oid_fromstr(&b, new_) == 0 &&
		    git_repository_odb(&odb, git) == 0 && git_odb_exists(odb, &b);
	git_odb_free(odb);
	return known ? git_graph_descendant_of(git, &b, &a) == 1 : -1;
}

static void plan_ref(struct import_run *x, const struct sync_repo *r, git_repository *git, const char *name,
		     const char *cur, const char *new_)
{
	plan(x, r, !cur ? "create-ref" : new_[0] ? "move-ref" : "delete-ref", name, cur ? cur : "", new_);
	if (x->plan && cur && new_[0] && strncmp(name, "refs/heads/", 11) == 0) {
		int ff = plan_forward(git, cur, new_);
		json_object_set_new(json_array_get(x->plan, json_array_size(x->plan) - 1), "fast_forward",
				    ff < 0 ? json_null() : json_boolean(ff));
	}
}

/* A tag here stays where it is, whatever a bundle says: said and audited. */
static void tag_kept(struct import_run *x, const struct sync_repo *r, const struct sync_ref *ref, const char *cur)
{
	if (x->plan) {
		plan(x, r, "keep-tag", ref->name, cur, ref->new_);
		return;
	}
	if (x->o->report)
		fprintf(x->o->report, "  kept %s of %s/%s at %.12s (the bundle moves it to %.12s: tags never move)\n",
			ref->name, r->ns, r->name, cur, ref->new_);
	char *target = xasprintf("%s%s/%s", repo_type_url_prefix(r->type), r->ns, r->name);
	char *extra = xasprintf("\"ref\":\"%s\",\"old\":\"%s\",\"new\":\"%s\"", ref->name, cur, ref->new_);
	import_audit(x, "sync.tag_kept", target, extra);
	free(extra);
	free(target);
}

/* The refs of one repo against the hub's: *pending counts moves. */
static int check_refs(struct import_run *x, const struct sync_repo *r, git_repository *git, int have, size_t *pending)
{
	for (size_t k = 0; k < r->nrefs; k++) {
		const struct sync_ref *ref = &r->refs[k];
		char cur[41];
		int exists = local_ref(git, ref->name, cur) == 0;
		if (exists ? strcmp(cur, ref->new_) == 0 : !ref->new_[0])
			continue;	/* there already */
		if (exists && import_tag_would_move(ref->name, cur, ref->new_)) {
			tag_kept(x, r, ref, cur);
			continue;
		}
		(*pending)++;
		plan_ref(x, r, git, ref->name, exists ? cur : NULL, ref->new_);
		if (ref->old[0] && (!exists || strcmp(cur, ref->old) != 0)) {
			char hint[160];
			first_hint(x, hint, sizeof(hint));
			return import_fail(x, KHUB_ECONFLICT, "bundle %s needs repo %s/%s at commit %s (%s); this hub has %s: %s",
					   x->m.bundle, r->ns, r->name, ref->old, ref->name,
					   exists ? cur : have ? "no such ref" : "no such repo", hint);
		}
	}
	char **gone;
	size_t ngone;
	import_gone_refs(x, git, r, &gone, &ngone);
	*pending += ngone;
	for (size_t k = 0; k < ngone; k++) {
		char cur[41];
		if (local_ref(git, gone[k], cur) == 0)
			plan(x, r, "delete-ref", gone[k], cur, "");
	}
	free_strings(gone, ngone);
	return 0;
}

static int check_base_commits(struct import_run *x, const struct sync_repo *r, git_repository *git, int have)
{
	for (size_t k = 0; k < r->nbase; k++) {
		git_oid oid;
		git_odb *odb = NULL;
		git_oid_fromstr(&oid, r->base[k]);
		int ok = git && git_repository_odb(&odb, git) == 0 && git_odb_exists(odb, &oid);
		git_odb_free(odb);
		if (!ok) {
			char hint[160];
			first_hint(x, hint, sizeof(hint));
			return import_fail(x, KHUB_ECONFLICT, "bundle %s needs repo %s/%s at commit %s; this hub has %s: %s",
					   x->m.bundle, r->ns, r->name, r->base[k], have ? "no such commit" : "no such repo",
					   hint);
		}
	}
	return 0;
}

/* The trust flag of the repo's org (once per org in the plan) and the LFS
 * objects to link (repo_id 0: a repo new here, all of them). */
static int check_lfs(struct import_run *x, const struct sync_repo *r, int64_t repo_id, size_t *pending)
{
	int t = db_sync_trust_differs(r->ns, r->org_trusted);
	if (t < 0)
		return import_fail(x, KHUB_EDB, "database unavailable");
	*pending += (size_t)t;
	if (t && x->plan) {
		int seen = 0;
		for (size_t i = 0; i < json_array_size(x->plan) && !seen; i++) {
			json_t *c = json_array_get(x->plan, i);
			seen = json_is_string(json_object_get(c, "org")) &&
			       strcasecmp(json_string_value(json_object_get(c, "org")), r->ns) == 0;
		}
		if (!seen)
			json_array_append_new(x->plan, json_pack("{s:s, s:s, s:b}", "action", "set-org-trust", "org", r->ns,
								 "trusted", r->org_trusted));
	}
	uint64_t n = 0, bytes = 0;
	for (size_t k = 0; k < r->nlfs; k++) {
		int linked = repo_id ? db_lfs_linked(repo_id, r->lfs[k].oid) : 0;
		if (linked < 0)
			return import_fail(x, KHUB_EDB, "database unavailable");
		if (!linked || lfs_store_stat(x->o->lfs, r->lfs[k].oid, NULL) < 0) {
			(*pending)++;
			n++;
			bytes += r->lfs[k].size;
		}
	}
	if (n && x->plan) {
		char *id = xasprintf("%s/%s", r->ns, r->name);
		json_array_append_new(x->plan, json_pack("{s:s, s:s, s:I, s:I}", "action", "link-lfs", "repo", id,
							 "objects", (json_int_t)n, "bytes", (json_int_t)bytes));
		free(id);
	}
	return 0;
}

/* What the bundle would change of a registered repo besides refs: its
 * privacy, its org's trust flag, its LFS links. */
static int check_meta(struct import_run *x, const struct sync_repo *r, const struct repo_record *rec, size_t *pending)
{
	if (r->private_ && !rec->private) {
		(*pending)++;
		plan(x, r, "make-private", NULL, NULL, NULL);
	}
	return check_lfs(x, r, rec ? rec->id : 0, pending);
}

static void load_selection(struct import_run *x)
{
	json_t *refs = x->m.selection ? json_object_get(x->m.selection, "refs") : NULL;
	size_t i;
	json_t *v;
	json_array_foreach(refs, i, v) {
		if (!json_is_string(v))
			continue;
		x->sel_refs = xrealloc(x->sel_refs, (x->nsel_refs + 1) * sizeof(char *));
		x->sel_refs[x->nsel_refs++] = xstrdup(json_string_value(v));
	}
}

/* The hub has what the bundle builds on. *pending counts what the import
 * would change (0: the bundle is in already). */
int import_check_base(struct import_run *x, size_t *pending)
{
	*pending = 0;
	if (!x->sel_refs)
		load_selection(x);
	for (size_t i = 0; i < x->m.nrepos; i++) {
		const struct sync_repo *r = &x->m.repos[i];
		struct repo_record rec;
		git_repository *git = NULL;
		int rc = db_repo_get(r->type, r->ns, r->name, &rec);
		if (rc < 0 && rc != KHUB_ENOTFOUND)
			return import_fail(x, rc, "cannot read repo %s/%s (database)", r->ns, r->name);
		int have = rc == 0;
		if ((rc = check_local(x, r, have, &rec)) < 0)
			return rc;
		if (have && repo_store_open(x->o->repo_root, r->type, rec.ns, rec.name, &git) < 0)
			git = NULL;
		rc = check_refs(x, r, git, have, pending);
		if (rc == 0)
			rc = check_base_commits(x, r, git, have);
		if (rc == 0 && have)
			rc = check_meta(x, r, &rec, pending);
		else if (rc == 0)
			rc = check_lfs(x, r, 0, pending);
		git_repository_free(git);
		if (rc < 0)
			return rc;
		if (!have) {
			(*pending)++;
			plan(x, r, r->private_ ? "create-private-repo" : "create-repo", NULL, NULL, NULL);
		}
	}
	for (size_t i = 0; i < x->m.ndeleted; i++) {
		const struct sync_repo *d = &x->m.deleted[i];
		int del = db_sync_deletable(d->type, d->ns, d->name, NULL);
		if (del < 0)
			return import_fail(x, KHUB_EDB, "database unavailable");
		if (del) {
			(*pending)++;
			plan(x, d, "delete-repo", NULL, NULL, NULL);
		}
	}
	return 0;
}

/* The pack and the LFS objects of repo i, not yet referenced; a repo new
 * here gets a fresh store (a directory found at its place goes to the
 * trash, never adopted). */
static int fill_repo(struct import_run *x, size_t i, git_repository **git)
{
	const struct sync_repo *r = &x->m.repos[i];
	int rc = repo_import_open(x->o->repo_root, r->type, r->ns, r->name, x->fresh[i], git, &x->quarantined[i]);
	if (rc < 0)
		return import_fail(x, rc, "%s/%s: cannot create or open the repo", r->ns, r->name);
	long pi = r->pack ? import_entry_index(x, r->pack) : -1;
	if (pi >= 0 && x->staged_pack[pi] && (rc = repo_import_add_pack(*git, x->staged_pack[pi])) < 0)
		return import_fail(x, rc, "%s/%s: cannot move the pack into the repo: %s", r->ns, r->name,
				   strerror(errno));
	for (size_t k = 0; k < r->nlfs; k++) {
		const char *oid = r->lfs[k].oid;
		if (lfs_store_stat(x->o->lfs, oid, NULL) == 0)
			continue;
		char *path = xasprintf("%s/%s", x->lfs_dir, oid);
		rc = repo_import_add_lfs(x->o->lfs, 0, path, oid);	/* hashed as it was staged; linked once registered */
		free(path);
		if (rc < 0)
			return import_fail(x, rc, "%s/%s: cannot store LFS object %s", r->ns, r->name, oid);
	}
	return 0;
}

static int peel_commit(git_repository *git, const char *sha, git_oid *out)
{
	git_oid oid;
	git_object *obj = NULL, *c = NULL;
	int rc = git_oid_fromstr(&oid, sha) == 0 && git_object_lookup(&obj, git, &oid, GIT_OBJECT_ANY) == 0 &&
			 git_object_peel(&c, obj, GIT_OBJECT_COMMIT) == 0
		 ? 0
		 : -1;
	if (rc == 0)
		git_oid_cpy(out, git_object_id(c));
	git_object_free(c);
	git_object_free(obj);
	return rc;
}

/* A branch of a repo here may only move forward unless --allow-rewind. */
static int check_forward(struct import_run *x, const struct sync_repo *r, git_repository *git)
{
	for (size_t k = 0; k < r->nrefs; k++) {
		const struct sync_ref *ref = &r->refs[k];
		char cur[41];
		git_oid ca, cb;
		if (!ref->new_[0] || local_ref(git, ref->name, cur) < 0 || strcmp(cur, ref->new_) == 0 ||
		    strncmp(ref->name, "refs/tags/", 10) == 0)
			continue;
		if (peel_commit(git, cur, &ca) < 0 || peel_commit(git, ref->new_, &cb) < 0)
			return import_fail(x, KHUB_EINVAL, "%s/%s: %s: commit %.12s is not in the repo", r->ns, r->name,
					   ref->name, ref->new_);
		if (git_graph_descendant_of(git, &cb, &ca) == 1 || x->o->allow_rewind)
			continue;
		return import_fail(x, KHUB_EPERM, "bundle %s would move %s of %s/%s from %.12s back to %.12s (not a "
				   "fast-forward: an older or rewritten history): refused; an admin who wants it passes "
				   "--allow-rewind", x->m.bundle, ref->name, r->ns, r->name, cur, ref->new_);
	}
	return 0;
}

/* Every commit the repo's refs move to is in the repo or the bundle's pack
 * (the import could not set the ref otherwise). */
static int check_targets(struct import_run *x, const struct sync_repo *r, git_repository *git)
{
	git_odb *odb = NULL;
	int rc = git_repository_odb(&odb, git) < 0 ? import_fail(x, KHUB_EIO, "%s/%s: cannot read its objects", r->ns,
								    r->name)
						    : 0;
	for (size_t k = 0; k < r->nrefs && rc == 0; k++) {
		git_oid oid;
		if (r->refs[k].new_[0] && (git_oid_fromstr(&oid, r->refs[k].new_) < 0 || !git_odb_exists(odb, &oid)))
			rc = import_fail(x, KHUB_EINVAL, "%s/%s: %s: commit %.12s is in neither the repo nor the bundle",
					 r->ns, r->name, r->refs[k].name, r->refs[k].new_);
	}
	git_odb_free(odb);
	return rc;
}

/* The repo as the import would see it once its pack is in: the repo here
 * (or an empty one) with the staged pack added to its objects, in memory. */
static int open_with_pack(struct import_run *x, const struct sync_repo *r, int have, const struct repo_record *rec,
			  git_repository **git)
{
	long pi = r->pack ? import_entry_index(x, r->pack) : -1;
	const char *staged = pi >= 0 ? x->staged_pack[pi] : NULL;
	int rc = repo_import_open_with_pack(x->o->repo_root, r->type, have ? rec->ns : r->ns, have ? rec->name : r->name,
					    have, staged, git);
	return rc < 0 ? import_fail(x, rc, "%s/%s: cannot open the repo with the bundle's pack", r->ns, r->name) : 0;
}

int import_check_packs(struct import_run *x)
{
	int rc = 0;
	for (size_t i = 0; i < x->m.nrepos && rc == 0; i++) {
		const struct sync_repo *r = &x->m.repos[i];
		struct repo_record rec;
		git_repository *git = NULL;
		rc = db_repo_get(r->type, r->ns, r->name, &rec);
		int have = rc == 0;
		if (rc < 0 && rc != KHUB_ENOTFOUND)
			return import_fail(x, rc, "cannot read repo %s/%s (database)", r->ns, r->name);
		rc = open_with_pack(x, r, have, &rec, &git);
		if (rc == 0)
			rc = check_targets(x, r, git);
		if (rc == 0 && have)
			rc = check_forward(x, r, git);
		git_repository_free(git);
	}
	return rc;
}

/* The refs of a repo not registered here: set before it is registered, so
 * it appears whole. */
static int set_fresh_refs(struct import_run *x, const struct sync_repo *r, git_repository *git)
{
	char *msg = xasprintf("khub sync import %s", x->m.bundle);
	int rc = 0;
	for (size_t k = 0; k < r->nrefs && rc == 0; k++) {
		const struct sync_ref *ref = &r->refs[k];
		char cur[41];
		int exists = local_ref(git, ref->name, cur) == 0;
		if (!ref->new_[0] || (exists && strcmp(cur, ref->new_) == 0))
			continue;
		struct repo_import_ref set = { ref->name, exists ? cur : NULL, ref->new_, msg };
		rc = repo_import_set_fresh_ref(git, &set);
		if (rc < 0)
			import_fail(x, rc, "%s/%s: cannot set %s", r->ns, r->name, ref->name);
	}
	free(msg);
	return rc;
}

int import_prepare(struct import_run *x)
{
	git_repository **gits = xcalloc(x->m.nrepos + 1, sizeof(*gits));
	int rc = 0;
	x->fresh = xcalloc(x->m.nrepos + 1, 1);
	x->quarantined = xcalloc(x->m.nrepos + 1, sizeof(*x->quarantined));
	for (size_t i = 0; i < x->m.nrepos && rc == 0; i++) {
		const struct sync_repo *r = &x->m.repos[i];
		struct repo_record rec;
		rc = db_repo_get(r->type, r->ns, r->name, &rec);
		x->fresh[i] = rc == KHUB_ENOTFOUND;
		if (rc < 0 && rc != KHUB_ENOTFOUND) {
			rc = import_fail(x, rc, "cannot read repo %s/%s (database)", r->ns, r->name);
			break;
		}
		if ((rc = fill_repo(x, i, &gits[i])) == 0 && !x->fresh[i])
			rc = check_forward(x, r, gits[i]);
	}
	for (size_t i = 0; i < x->m.nrepos && rc == 0; i++)
		if (x->fresh[i])
			rc = set_fresh_refs(x, &x->m.repos[i], gits[i]);
	for (size_t i = 0; i < x->m.nrepos; i++)
		git_repository_free(gits[i]);
	free(gits);
	return rc;
}
