/* export.c -- write a bundle: pick the repos and refs (a selection shared
 * with the mirror, or kernels.lock files), build one git pack per repo
 * with libgit2's packbuilder holding only what the base state lacks, list
 * the wanted LFS objects, sign the manifest and stream everything out. */
#include "sync/sync.h"
#include "storage/db/db.h"
#include "kernel/kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>


struct export_run {
	const struct sync_export_opts *o;
	struct sync_manifest m;		/* what the bundle carries */
	struct sync_manifest since;	/* the base state (repos may be empty) */
	struct sync_lock_pin *pins;
	size_t npins;
	char *tmpdir;			/* packs before they are streamed */
	char **packs;			/* temp file per entry name */
	struct hashmap lfs_seen;	/* oid → "1": LFS entries already listed */
	char *err;
	size_t errlen;
};

static int efail(struct export_run *x, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int efail(struct export_run *x, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->err, x->errlen, fmt, ap);
	va_end(ap);
	return rc;
}

/* ---- git ----------------------------------------------------------------------- */

static int peel_commit(git_repository *git, const git_oid *oid, git_oid *commit)
{
	git_object *obj = NULL, *c = NULL;
	int rc = git_object_lookup(&obj, git, oid, GIT_OBJECT_ANY) == 0 && git_object_peel(&c, obj, GIT_OBJECT_COMMIT) == 0
			 ? 0
			 : -1;
	if (rc == 0)
		git_oid_cpy(commit, git_object_id(c));
	git_object_free(c);
	git_object_free(obj);
	return rc;
}

struct pack_sink {
	int fd;
	EVP_MD_CTX *sha;
	uint64_t size;
};

static int pack_chunk(void *buf, size_t size, void *arg)
{
	struct pack_sink *s = arg;
	if (write_all(s->fd, buf, size) < 0)
		return -1;
	EVP_DigestUpdate(s->sha, buf, size);
	s->size += size;
	return 0;
}

static void add_entry(struct export_run *x, const char *name, const char *sha, uint64_t size)
{
	x->m.entries = xrealloc(x->m.entries, (x->m.nentries + 1) * sizeof(*x->m.entries));
	struct sync_entry *e = &x->m.entries[x->m.nentries++];
	e->name = xstrdup(name);
	memcpy(e->sha256, sha, 65);
	e->size = size;
}

/* The pack of every object reachable from the new tips and not from the
 * base commits. */
static int build_pack(struct export_run *x, git_repository *git, struct sync_repo *r, git_oid *tips, size_t ntips,
		      git_oid *tags, size_t ntags)
{
	git_packbuilder *pb = NULL;
	git_revwalk *walk = NULL;
	int rc = KHUB_EIO;
	struct pack_sink sink = { -1, EVP_MD_CTX_new(), 0 };
	char *entry = xasprintf("git/%zu.pack", (size_t)(r - x->m.repos));
	char *path = xasprintf("%s/%zu.pack", x->tmpdir, (size_t)(r - x->m.repos));
	if (git_packbuilder_new(&pb, git) < 0 || git_revwalk_new(&walk, git) < 0)
		goto cleanup;
	git_packbuilder_set_threads(pb, 0);
	for (size_t i = 0; i < ntips; i++)
		if (git_revwalk_push(walk, &tips[i]) < 0)
			goto cleanup;
	for (size_t i = 0; i < r->nbase; i++) {
		git_oid b;
		git_oid_fromstr(&b, r->base[i]);
		if (git_revwalk_hide(walk, &b) < 0)
			goto cleanup;
	}
	if (git_packbuilder_insert_walk(pb, walk) < 0)
		goto cleanup;
	for (size_t i = 0; i < ntags; i++)
		if (git_packbuilder_insert(pb, &tags[i], NULL) < 0)
			goto cleanup;
	if (git_packbuilder_object_count(pb) == 0) {
		rc = 0;
		goto cleanup;
	}
	sink.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	EVP_DigestInit_ex(sink.sha, EVP_sha256(), NULL);
	if (sink.fd < 0 || git_packbuilder_foreach(pb, pack_chunk, &sink) < 0)
		goto cleanup;
	char hex[65];
	sha256_final_hex(sink.sha, hex);
	add_entry(x, entry, hex, sink.size);
	r->pack = xstrdup(entry);
	x->packs = xrealloc(x->packs, x->m.nentries * sizeof(char *));
	x->packs[x->m.nentries - 1] = path;
	path = NULL;
	rc = 0;
cleanup:
	if (rc < 0) {
		const git_error *e = git_error_last();
		efail(x, rc, "%s/%s: cannot build the git pack: %s", r->ns, r->name, e ? e->message : "?");
	}
	if (sink.fd >= 0)
		close(sink.fd);
	EVP_MD_CTX_free(sink.sha);
	git_revwalk_free(walk);
	git_packbuilder_free(pb);
	free(entry);
	free(path);
	return rc;
}

/* ---- LFS ---------------------------------------------------------------------- */

/* Is an LFS path wanted: the --variants globs, or the pin's variants. */
static int lfs_wanted(struct export_run *x, const struct sync_lock_pin *pin, const char *path)
{
	if (pin)
		return select_variant_path(pin->variants, pin->nvariants, path);
	if (x->o->nvariants == 0)
		return 1;
	return select_variant_path(x->o->variants, x->o->nvariants, path);
}

/* LFS oids of the wanted files at sha into set (value "1"). */
static int lfs_at(struct export_run *x, git_repository *git, const struct sync_repo *r, const char *sha,
		  const struct sync_lock_pin *pin, struct hashmap *set, struct hashmap *paths)
{
	struct tree_listing listing;
	git_oid oid, commit;
	char hex[41];
	git_oid_fromstr(&oid, sha);
	if (peel_commit(git, &oid, &commit) < 0)	/* an annotated tag names its commit */
		return efail(x, KHUB_EIO, "%s/%s: %.12s is not a commit", r->ns, r->name, sha);
	git_oid_tostr(hex, sizeof(hex), &commit);
	sha = hex;
	if (repo_list_tree(git, sha, "", 1, &listing) < 0)
		return efail(x, KHUB_EIO, "%s/%s: cannot list the tree of %.12s", r->ns, r->name, sha);
	for (size_t i = 0; i < listing.count; i++) {
		const struct tree_entry *e = &listing.entries[i];
		if (e->is_dir || !e->is_lfs || !lfs_wanted(x, pin, e->path))
			continue;
		if (!hashmap_get(set, e->lfs_oid)) {
			hashmap_put(set, e->lfs_oid, (void *)(uintptr_t)(e->size + 1));
			if (paths)
				free(hashmap_put(paths, e->lfs_oid, xstrdup(e->path)));
		}
	}
	tree_listing_release(&listing);
	return 0;
}

/* The LFS objects the wanted refs (tips: every selected ref, changed or
 * not, so what an earlier partial bundle left out travels now) need and
 * the base lacks: the state's own list of what the importing hub has, or
 * (an older state) the objects of the base commits. r->have gets the base
 * set (for --state-out). Each must be stored and linked to the repo
 * (repo_id): a pointer naming another repo's object (made behind khub's
 * back) is refused, never carried, as every read path refuses to serve it. */
static int collect_lfs(struct export_run *x, git_repository *git, struct sync_repo *r, int64_t repo_id,
		       const struct sync_lock_pin *pin, const struct sync_repo *st, char (*tips)[41], size_t ntips)
{
	struct hashmap base, want, paths;
	hashmap_init(&base);
	hashmap_init(&want);
	hashmap_init(&paths);
	int rc = 0;
	if (st && st->has_have) {
		for (size_t i = 0; i < st->nhave; i++)
			hashmap_put(&base, st->have[i], "1");
	} else {
		for (size_t i = 0; i < r->nbase && rc == 0; i++)
			rc = lfs_at(x, git, r, r->base[i], pin, &base, NULL);
	}
	for (size_t b = 0; b < base.nbuckets; b++)
		for (struct hashmap_entry *e = base.buckets[b]; e; e = e->next)
			sync_repo_add_have(r, e->key);
	for (size_t i = 0; i < ntips && rc == 0; i++)
		rc = lfs_at(x, git, r, tips[i], pin, &want, &paths);
	r->lfs = xcalloc(want.count + 1, sizeof(*r->lfs));
	for (size_t b = 0; rc == 0 && b < want.nbuckets; b++) {
		for (struct hashmap_entry *e = want.buckets[b]; e && rc == 0; e = e->next) {
			if (hashmap_get(&base, e->key))
				continue;
			uint64_t size = (uint64_t)(uintptr_t)e->value - 1, have;
			if (lfs_store_stat(x->o->lfs, e->key, &have) < 0 || have != size) {
				rc = efail(x, KHUB_ENOTFOUND,
					   "%s/%s: the LFS object of %s (%s) is not in this hub's store (a lazily mirrored "
					   "variant never fetched?): fetch it or narrow --variants",
					   r->ns, r->name, (const char *)hashmap_get(&paths, e->key), e->key);
				break;
			}
			int linked = db_lfs_linked(repo_id, e->key);
			if (linked <= 0) {
				rc = linked < 0 ? efail(x, KHUB_EDB, "%s/%s: the database is unavailable", r->ns, r->name)
						: efail(x, KHUB_EINVAL,
							"%s/%s: the LFS object of %s (%s) is not linked to this repo (a "
							"pointer made behind khub's back: see khub check lfs-pointers); "
							"it is not carried", r->ns, r->name,
							(const char *)hashmap_get(&paths, e->key), e->key);
				break;
			}
			memcpy(r->lfs[r->nlfs].oid, e->key, 65);
			r->lfs[r->nlfs++].size = size;
			if (!hashmap_get(&x->lfs_seen, e->key)) {
				hashmap_put(&x->lfs_seen, e->key, "1");
				char *name = xasprintf("lfs/%s", e->key);
				add_entry(x, name, e->key, size);
				free(name);
				x->packs = xrealloc(x->packs, x->m.nentries * sizeof(char *));
				x->packs[x->m.nentries - 1] = NULL;
			}
		}
	}
	hashmap_release(&base, NULL);
	hashmap_release(&want, NULL);
	hashmap_release(&paths, free);
	return rc;
}

/* ---- one repo ------------------------------------------------------------------- */

static int ref_wanted(struct export_run *x, const char *name)
{
	static char *all[] = { "all" };
	if (x->o->nrefs == 0)
		return select_ref(all, 1, name);
	return select_ref(x->o->refs, x->o->nrefs, name);
}

/* The base: every commit the state names for this repo. */
static int export_base(struct export_run *x, git_repository *git, struct sync_repo *r, const struct sync_repo *st)
{
	r->base = xcalloc(st ? st->nrefs + 1 : 1, sizeof(*r->base));
	for (size_t i = 0; st && i < st->nrefs; i++) {
		git_oid oid, c;
		git_oid_fromstr(&oid, st->refs[i].new_);
		if (peel_commit(git, &oid, &c) < 0)
			return efail(x, KHUB_ECONFLICT, "%s/%s: the --since state names commit %s (%s), which this hub lacks",
				     r->ns, r->name, st->refs[i].new_, st->refs[i].name);
		char hex[41];
		git_oid_tostr(hex, sizeof(hex), &c);
		int dup = 0;
		for (size_t k = 0; k < r->nbase && !dup; k++)
			dup = strcmp(r->base[k], hex) == 0;
		if (!dup)
			memcpy(r->base[r->nbase++], hex, 41);
	}
	return 0;
}

/* The refs of one repo being exported: tips (commits) and tags (annotated
 * tag objects) for the pack, lfs_tips for its LFS objects. */
struct repo_refs {
	git_oid *tips, *tags;
	size_t ntips, ntags;
	char (*lfs_tips)[41];
	size_t nlfs_tips;
};

static void refs_take(struct repo_refs *rr, struct sync_repo *r, const struct sync_repo *st, const char *name,
		      const git_oid *target, const git_oid *commit)
{
	char hex[41], chex[41];
	git_oid_tostr(hex, sizeof(hex), target);
	git_oid_tostr(chex, sizeof(chex), commit);
	rr->lfs_tips = xrealloc(rr->lfs_tips, (rr->nlfs_tips + 1) * sizeof(*rr->lfs_tips));
	memcpy(rr->lfs_tips[rr->nlfs_tips++], chex, 41);
	const struct sync_ref *old = st ? sync_repo_ref(st, name) : NULL;
	if (old && strcmp(old->new_, hex) == 0)
		return;	/* the base has it */
	sync_repo_add_ref(r, name, old ? old->new_ : NULL, hex);
	rr->tips = xrealloc(rr->tips, (rr->ntips + 1) * sizeof(*rr->tips));
	git_oid_cpy(&rr->tips[rr->ntips++], commit);
	if (!git_oid_equal(commit, target)) {	/* an annotated tag */
		rr->tags = xrealloc(rr->tags, (rr->ntags + 1) * sizeof(*rr->tags));
		git_oid_cpy(&rr->tags[rr->ntags++], target);
	}
}

/* Which refs travel: the selection's (all listed in current), or for a
 * lock the branches and tags at the locked commit plus main (the loader
 * reads kernel-status.toml there before it resolves a version). */
static int export_refs(struct export_run *x, git_repository *git, struct sync_repo *r, const struct sync_repo *st,
		       const struct sync_lock_pin *pin, struct repo_refs *rr)
{
	git_reference_iterator *it = NULL;
	git_reference *ref = NULL;
	git_oid p;
	if (pin)
		git_oid_fromstr(&p, pin->sha);
	else
		r->has_current = 1;
	if (git_reference_iterator_new(&it, git) < 0)
		return efail(x, KHUB_EIO, "%s/%s: cannot list refs", r->ns, r->name);
	while (git_reference_next(&ref, it) == 0) {
		const char *name = git_reference_name(ref);
		const git_oid *target = git_reference_target(ref);
		git_oid commit;
		int take = target && peel_commit(git, target, &commit) == 0;
		if (take && pin)
			take = (strncmp(name, "refs/heads/", 11) == 0 || strncmp(name, "refs/tags/", 10) == 0) &&
			       (git_oid_equal(&commit, &p) || strcmp(name, "refs/heads/main") == 0);
		else if (take)
			take = ref_wanted(x, name);
		if (take) {
			if (!pin) {
				char hex[41];
				git_oid_tostr(hex, sizeof(hex), target);
				sync_repo_add_current(r, name, hex);
			}
			refs_take(rr, r, st, name, target, &commit);
		}
		git_reference_free(ref);
	}
	git_reference_iterator_free(it);
	return 0;
}

/* A hidden ref keeps the locked commit reachable on the importing hub. */
static int export_lock_ref(struct export_run *x, git_repository *git, struct sync_repo *r, const struct sync_repo *st,
			   const struct sync_lock_pin *pin, struct repo_refs *rr)
{
	char *keep = xasprintf("refs/khub-sync/lock/%s", pin->sha);
	git_oid p, c;
	git_oid_fromstr(&p, pin->sha);
	int rc = 0;
	if (peel_commit(git, &p, &c) < 0 || !git_oid_equal(&p, &c))
		rc = efail(x, KHUB_ENOTFOUND, "%s/%s: this hub has no commit %s (from the lockfile)", r->ns, r->name,
			   pin->sha);
	else
		refs_take(rr, r, st, keep, &p, &p);
	free(keep);
	return rc;
}

/* Refs the base has that this hub no longer has: deleted. */
static void export_deleted_refs(struct export_run *x, git_repository *git, struct sync_repo *r,
				const struct sync_repo *st)
{
	for (size_t i = 0; st && i < st->nrefs; i++)
		if (ref_wanted(x, st->refs[i].name) && !sync_repo_ref(r, st->refs[i].name)) {
			git_reference *gone = NULL;
			if (git_reference_lookup(&gone, git, st->refs[i].name) < 0)
				sync_repo_add_ref(r, st->refs[i].name, st->refs[i].new_, NULL);
			git_reference_free(gone);
		}
}

/* One repo: always listed (its privacy, its org's trust and its current
 * refs travel even when nothing else changed), with the refs that moved,
 * a pack of what the base lacks and the LFS objects it lacks. */
static int export_repo(struct export_run *x, const struct repo_record *rec, const struct sync_lock_pin *pin)
{
	git_repository *git = NULL;
	struct repo_refs rr = { 0 };
	int rc = repo_store_open(x->o->repo_root, rec->type, rec->ns, rec->name, &git);
	if (rc < 0)
		return efail(x, rc, "%s/%s: cannot open the repo", rec->ns, rec->name);
	struct sync_repo *r = sync_manifest_add_repo(&x->m);
	r->type = rec->type;
	snprintf(r->ns, sizeof(r->ns), "%s", rec->ns);
	snprintf(r->name, sizeof(r->name), "%s", rec->name);
	r->private_ = rec->private;
	struct account acct;
	r->org_trusted = db_account_get(rec->ns, &acct) == 0 && acct.trusted_kernel_publisher;
	const struct sync_repo *st = sync_manifest_repo(&x->since, rec->type, rec->ns, rec->name);
	if ((rc = export_base(x, git, r, st)) < 0 || (rc = export_refs(x, git, r, st, pin, &rr)) < 0)
		goto cleanup;
	if (pin)
		rc = export_lock_ref(x, git, r, st, pin, &rr);
	else
		export_deleted_refs(x, git, r, st);
	if (rc < 0 || (rc = build_pack(x, git, r, rr.tips, rr.ntips, rr.tags, rr.ntags)) < 0)
		goto cleanup;
	rc = collect_lfs(x, git, r, rec->id, pin, st, rr.lfs_tips, rr.nlfs_tips);
	if (rc == 0 && db_sync_exported_add(rec->type, rec->ns, rec->name) < 0)
		rc = efail(x, KHUB_EDB, "the database is unavailable");
cleanup:
	git_repository_free(git);
	free(rr.tips);
	free(rr.tags);
	free(rr.lfs_tips);
	return rc;
}

struct pick {
	struct export_run *x;
	struct repo_record *recs;
	size_t n;
};

static int pick_repo(const struct repo_record *rec, void *arg)
{
	struct pick *p = arg;
	if (rec->type != p->x->o->type)
		return 0;
	char id[2 * REPO_NAME_MAX + 2];
	snprintf(id, sizeof(id), "%s/%s", rec->ns, rec->name);
	int hit = p->x->o->nrepos == 0;
	for (size_t i = 0; i < p->x->o->nrepos && !hit; i++)
		hit = fnmatch(p->x->o->repos[i], id, FNM_CASEFOLD) == 0;
	if (hit) {
		p->recs = xrealloc(p->recs, (p->n + 1) * sizeof(*p->recs));
		p->recs[p->n++] = *rec;
	}
	return 0;
}

/* ---- the bundle ------------------------------------------------------------------ */

static json_t *selection_json(const struct sync_export_opts *o)
{
	json_t *sel = json_object();
	json_t *a = json_array();
	for (size_t i = 0; i < o->nrepos; i++)
		json_array_append_new(a, json_string(o->repos[i]));
	json_object_set_new(sel, "repos", a);
	a = json_array();
	for (size_t i = 0; i < o->nrefs; i++)
		json_array_append_new(a, json_string(o->refs[i]));
	json_object_set_new(sel, "refs", a);
	a = json_array();
	for (size_t i = 0; i < o->nvariants; i++)
		json_array_append_new(a, json_string(o->variants[i]));
	json_object_set_new(sel, "variants", a);
	a = json_array();
	for (size_t i = 0; i < o->nlocks; i++) {
		const char *base = strrchr(o->locks[i], '/');
		json_array_append_new(a, json_string(base ? base + 1 : o->locks[i]));
	}
	json_object_set_new(sel, "locks", a);
	json_object_set_new(sel, "type", json_string(repo_type_name(o->type)));
	return sel;
}

static int write_bundle(struct export_run *x, const char *manifest, const char *sig, uint64_t *bytes)
{
	struct sync_progress prog = { x->o->progress, "export", 0, 0, 0 };
	for (size_t i = 0; i < x->m.nentries; i++)
		prog.total += x->m.entries[i].size;
	*bytes = prog.total;
	struct sync_out *out = sync_out_open(x->o->out, x->o->volume_size, x->o->compression, x->err, x->errlen);
	if (!out)
		return KHUB_EIO;
	int rc = 0;
	if (sync_out_bytes(out, "manifest.json", manifest, strlen(manifest)) < 0 ||
	    sync_out_bytes(out, "manifest.sig", sig, strlen(sig)) < 0)
		rc = efail(x, KHUB_EIO, "cannot write %s", x->o->out);
	for (size_t i = 0; i < x->m.nentries && rc == 0; i++) {
		const struct sync_entry *e = &x->m.entries[i];
		int fd = -1;
		uint64_t size = 0;
		if (x->packs[i])
			fd = open(x->packs[i], O_RDONLY | O_CLOEXEC);
		else
			lfs_store_open_object(x->o->lfs, e->name + 4, &fd, &size);
		if (fd < 0) {
			rc = efail(x, KHUB_EIO, "cannot read %s", e->name);
			break;
		}
		posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		if (sync_out_fd(out, e->name, fd, e->size, &prog) < 0)
			rc = efail(x, KHUB_EIO, "cannot write %s into %s", e->name, x->o->out);
		close(fd);
	}
	unsigned vols = 0;
	if (rc == 0)
		rc = sync_out_close(out, &vols, x->err, x->errlen);
	else
		sync_out_abort(out);
	sync_progress_end(&prog);
	return rc;
}

/* A repo exported once and deleted here since: its deletion travels. */
static int add_deleted(const char *ns, const char *name, void *arg)
{
	struct export_run *x = arg;
	x->m.deleted = xrealloc(x->m.deleted, (x->m.ndeleted + 1) * sizeof(*x->m.deleted));
	struct sync_repo *d = &x->m.deleted[x->m.ndeleted++];
	memset(d, 0, sizeof(*d));
	d->type = x->o->type;
	snprintf(d->ns, sizeof(d->ns), "%s", ns);
	snprintf(d->name, sizeof(d->name), "%s", name);
	return 0;
}

/* The base state (--since), this hub's exporter id and the bundle's
 * sequence, and the repos deleted since they were exported. */
static int export_origin(struct export_run *x)
{
	const struct sync_export_opts *o = x->o;
	int rc;
	if (o->since) {
		size_t len;
		char *text = sync_read_file(o->since, SYNC_MANIFEST_MAX, &len, x->err, x->errlen);
		if (!text)
			return KHUB_EINVAL;
		char perr[256];
		rc = sync_manifest_parse(text, len, 1, &x->since, perr, sizeof(perr));
		free(text);
		if (rc < 0)
			return efail(x, rc, "%s is not a sync state: %s", o->since, perr);
		x->m.since_bundle = x->since.bundle[0] ? xstrdup(x->since.bundle) : NULL;
	}
	char candidate[37];
	sync_uuid(candidate);
	if (db_sync_next_sequence(candidate, x->m.exporter, &x->m.sequence) < 0)
		return efail(x, KHUB_EDB, "cannot take the next bundle sequence (database)");
	if ((rc = db_sync_exported_gone(o->type, add_deleted, x)) < 0)
		return efail(x, rc, "cannot list the repos exported before (database)");
	return 0;
}

/* The state after this bundle: the base state with the carried refs applied. */
static int write_state(struct export_run *x)
{
	struct sync_manifest st = { 0 };
	st.format = SYNC_FORMAT;
	memcpy(st.bundle, x->m.bundle, sizeof(st.bundle));
	st.hub = xstrdup(x->m.hub);
	st.created = xstrdup(x->m.created);
	for (size_t i = 0; i < x->since.nrepos; i++) {
		const struct sync_repo *s = &x->since.repos[i];
		struct sync_repo *r = sync_manifest_add_repo(&st);
		r->type = s->type;
		memcpy(r->ns, s->ns, sizeof(r->ns));
		memcpy(r->name, s->name, sizeof(r->name));
		for (size_t k = 0; k < s->nrefs; k++)
			sync_repo_add_ref(r, s->refs[k].name, NULL, s->refs[k].new_);
		if (s->has_have && !sync_manifest_repo(&x->m, s->type, s->ns, s->name))
			for (size_t k = 0; k < s->nhave; k++)
				sync_repo_add_have(r, s->have[k]);
	}
	for (size_t i = 0; i < x->m.nrepos; i++) {
		const struct sync_repo *m = &x->m.repos[i];
		struct sync_repo *r = sync_manifest_repo(&st, m->type, m->ns, m->name);
		if (!r) {
			r = sync_manifest_add_repo(&st);
			r->type = m->type;
			memcpy(r->ns, m->ns, sizeof(r->ns));
			memcpy(r->name, m->name, sizeof(r->name));
		}
		for (size_t k = 0; k < m->nrefs; k++) {
			struct sync_ref *have = (struct sync_ref *)sync_repo_ref(r, m->refs[k].name);
			if (have)
				memcpy(have->new_, m->refs[k].new_, 41);
			else
				sync_repo_add_ref(r, m->refs[k].name, NULL, m->refs[k].new_);
		}
		/* the LFS objects the importing hub has then: the base's and this bundle's */
		r->has_have = 1;
		for (size_t k = 0; k < m->nhave; k++)
			sync_repo_add_have(r, m->have[k]);
		for (size_t k = 0; k < m->nlfs; k++)
			sync_repo_add_have(r, m->lfs[k].oid);
	}
	char *text = sync_manifest_format(&st, 1);
	FILE *fp = fopen(x->o->state_out, "w");
	int rc = fp && fputs(text, fp) >= 0 && fputc('\n', fp) >= 0 ? 0 : KHUB_EIO;
	if (fp && fclose(fp) != 0)
		rc = KHUB_EIO;
	if (rc < 0)
		efail(x, rc, "cannot write the state %s", x->o->state_out);
	free(text);
	sync_manifest_release(&st);
	return rc;
}

/* The repos of the bundle: those of the lockfiles at their commits, or
 * the selection's. */
static int export_repos(struct export_run *x, struct pick *pick)
{
	const struct sync_export_opts *o = x->o;
	int rc = 0;
	for (size_t i = 0; i < o->nlocks && rc == 0; i++)
		rc = sync_lock_load(o->locks[i], &x->pins, &x->npins, x->err, x->errlen);
	if (rc < 0)
		return rc;
	if (!o->nlocks) {
		if ((rc = db_repo_each(pick_repo, pick)) < 0)
			return efail(x, rc, "cannot list repos (database)");
		for (size_t i = 0; i < pick->n && rc == 0; i++)
			rc = export_repo(x, &pick->recs[i], NULL);
		return rc;
	}
	for (size_t i = 0; i < x->npins && rc == 0; i++) {
		struct repo_record rec;
		rc = db_repo_get(o->type, x->pins[i].ns, x->pins[i].name, &rec);
		if (rc < 0)
			return efail(x, rc, "%s/%s (from the lockfile) is not a repo of this hub", x->pins[i].ns,
				     x->pins[i].name);
		if (sync_manifest_repo(&x->m, rec.type, rec.ns, rec.name))
			return efail(x, KHUB_EINVAL, "%s/%s is locked twice: one bundle per lock set", rec.ns, rec.name);
		rc = export_repo(x, &rec, &x->pins[i]);
	}
	return rc;
}

int sync_export(const struct sync_export_opts *o, char *err, size_t errlen)
{
	struct export_run x = { .o = o, .err = err, .errlen = errlen };
	struct pick pick = { &x, NULL, 0 };
	char *manifest = NULL, *sig = NULL;
	int rc = 0;
	hashmap_init(&x.lfs_seen);
	x.m.format = SYNC_FORMAT;
	sync_uuid(x.m.bundle);
	x.m.hub = xstrdup(o->hub);
	char now[32];
	format_iso8601(time(NULL), now);
	x.m.created = xstrdup(now);
	x.m.selection = selection_json(o);
	if ((rc = export_origin(&x)) < 0)
		goto cleanup;
	x.tmpdir = xasprintf("%s.tmpXXXXXX", o->out);
	if (!mkdtemp(x.tmpdir)) {
		rc = efail(&x, KHUB_EIO, "cannot create a directory next to %s: %s", o->out, strerror(errno));
		free(x.tmpdir);
		x.tmpdir = NULL;
		goto cleanup;
	}
	rc = export_repos(&x, &pick);
	if (rc < 0)
		goto cleanup;
	manifest = sync_manifest_format(&x.m, 0);
	unsigned char digest[32];
	char key_id[SYNC_KEY_ID_LEN + 1];
	EVP_Digest(manifest, strlen(manifest), digest, NULL, EVP_sha256(), NULL);
	if ((rc = sync_sign(o->key_path, digest, &sig, key_id, err, errlen)) < 0)
		goto cleanup;
	uint64_t bytes = 0;
	if ((rc = write_bundle(&x, manifest, sig, &bytes)) < 0)
		goto cleanup;
	if (o->state_out && (rc = write_state(&x)) < 0)
		goto cleanup;
	size_t nrefs = 0, nlfs = 0, nchanged = 0;
	for (size_t i = 0; i < x.m.nrepos; i++) {
		nrefs += x.m.repos[i].nrefs;
		nchanged += x.m.repos[i].nrefs || x.m.repos[i].nlfs;
	}
	for (size_t i = 0; i < x.m.nentries; i++)
		nlfs += strncmp(x.m.entries[i].name, "lfs/", 4) == 0;
	if (o->report)
		fprintf(o->report, "bundle %s: %zu repos, %zu refs, %zu LFS objects, %" PRIu64 " bytes of entries; "
			"the state of %zu repos, %zu deleted; sequence %" PRId64 " of exporter %s, signed by key %s\n",
			x.m.bundle, nchanged, nrefs, nlfs, bytes, x.m.nrepos, x.m.ndeleted, x.m.sequence, x.m.exporter,
			key_id);
cleanup:
	if (x.tmpdir) {
		for (size_t i = 0; i < x.m.nentries; i++)
			if (x.packs && x.packs[i])
				unlink(x.packs[i]);
		rmdir(x.tmpdir);
	}
	for (size_t i = 0; x.packs && i < x.m.nentries; i++)
		free(x.packs[i]);
	free(x.packs);
	free(x.tmpdir);
	sync_lock_release(x.pins, x.npins);
	free(pick.recs);
	free(manifest);
	free(sig);
	hashmap_release(&x.lfs_seen, NULL);
	sync_manifest_release(&x.m);
	sync_manifest_release(&x.since);
	return rc;
}
