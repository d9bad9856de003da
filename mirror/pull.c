/* pull.c -- pull one selection of upstream repos: list refs (one ref
 * advertisement per repo; nothing more when nothing changed), fetch git
 * objects into a hidden staging namespace, fetch and verify the LFS objects
 * the selection wants eagerly, then move each visible ref to exactly the
 * upstream sha. A crash at any point leaves visible refs where they were;
 * the next pull resumes partial LFS downloads and skips verified objects. */
#include "mirror/pull_internal.h"
#include "kernel/kernel.h"
#include "accounts/accounts.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int pull_ref_selected(const struct mirror_selection *sel, const char *full)
{
	return select_ref(sel->refs, sel->nrefs, full);
}

/* An LFS file is wanted eagerly unless it lies in a build variant outside
 * the selection's eager globs. */
int pull_eager_path(const struct mirror_selection *sel, const char *path)
{
	return select_variant_path(sel->eager, sel->neager, path);
}

int mirror_run_fenced(struct mirror_run *run)
{
	if (atomic_load(&run->fenced))
		return 1;
	if (run->holds_lock && !run->holds_lock()) {
		atomic_store(&run->fenced, 1);
		return 1;
	}
	return 0;
}

void pull_progress(struct repo_pull *rp, const char *fmt, ...)
{
	if (!rp->run->progress)
		return;
	va_list ap;
	fprintf(stderr, "\r\033[K[%s] ", rp->upstream_repo);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
}

/* ---- status in the database ---------------------------------------------- */

static void status_begin(struct repo_pull *rp)
{
	struct mirror_pull_start start = { rp->rec.id, rp->sel->name, rp->up->name, rp->up->url, rp->upstream_repo,
					   rp->up->token_env, rp->up->token_file, rp->sel->lazy };
	db_mirror_pull_started(&start);
}

static void status_end(struct repo_pull *rp, int ok)
{
	db_mirror_pull_finished(rp->rec.id, ok, rp->errors.len ? rp->errors.buf : NULL,
				rp->warnings.len ? rp->warnings.buf : NULL, rp->bytes, rp->objects, rp->refs_behind);
}

/* ---- one repo ---------------------------------------------------------------- */

/* A repo new here, as every create: audited, with the trash path of a
 * directory found at its place (moved aside, never adopted). */
static void audit_created(struct repo_pull *rp, const char *quarantined)
{
	char *target = xasprintf("%s%s/%s", repo_type_url_prefix(rp->sel->type), rp->rec.ns, rp->rec.name);
	json_t *d = json_pack("{s:b, s:s?}", "private", rp->rec.private, "quarantined", quarantined);
	char *details = d ? json_dumps(d, JSON_COMPACT) : NULL;
	if (db_audit(0, "mirror", "repo.create", target, details, "mirror") < 0)
		log_error("audit: cannot record repo.create %s", target);
	free(details);
	json_decref(d);
	free(target);
}

/* The repo registered as mirrored and its store opened, under the registry
 * lock as every create: a repo new here gets a fresh empty store before its
 * row (a directory already at its place goes to the trash). */
static int open_repo(struct repo_pull *rp, const char *ns, const char *name)
{
	enum repo_type type = rp->sel->type;
	const char *root = rp->run->repo_root;
	char *quarantined = NULL;
	if (db_lock_wait(DB_LOCK_REGISTRY, 0) < 0)
		return KHUB_EDB;
	int rc = db_repo_get(type, ns, name, &rp->rec), fresh = rc == KHUB_ENOTFOUND;
	if (fresh)
		rc = repo_import_open(root, type, ns, name, 1, &rp->git, &quarantined);
	if (rc == 0)
		rc = repo_import_register(type, ns, name, 0, &rp->rec);
	if (rc == 0 && !fresh)
		rc = repo_import_open(root, type, rp->rec.ns, rp->rec.name, 0, &rp->git, NULL);
	db_unlock(DB_LOCK_REGISTRY, 0);
	if (rc == 0 && fresh)
		audit_created(rp, quarantined);
	free(quarantined);
	return rc;
}

static int open_remote(struct repo_pull *rp, git_remote **remote)
{
	char *url = xasprintf("%s/%s%s", rp->up->url, repo_type_url_prefix(rp->sel->type), rp->upstream_repo);
	/* The upstream's URL as configured, never rewritten by url.*.insteadOf
	 * (libgit2 1.5 also leaks a regex match per config entry it checks). */
	git_remote_create_options ropts = GIT_REMOTE_CREATE_OPTIONS_INIT;
	ropts.repository = rp->git;
	ropts.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF | GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
	int rc = git_remote_create_with_opts(remote, url, &ropts) < 0 ? KHUB_EIO : 0;
	free(url);
	return rc;
}

/* 1 when the visible ref already is at the upstream sha. */
static int ref_current(struct repo_pull *rp, const struct upstream_ref *ref)
{
	char sha[41];
	return pull_local_ref(rp->git, ref->name, sha) == 0 && strcmp(sha, ref->sha) == 0;
}

/* Nothing new: every selected visible ref already equals upstream. That
 * costs one ref advertisement. */
static int refs_unchanged(struct repo_pull *rp, const struct upstream_ref *refs, size_t nrefs)
{
	for (size_t i = 0; i < nrefs; i++)
		if (!ref_current(rp, &refs[i]))
			return 0;
	return 1;
}

/* One upstream ref whose objects were fetched: its wanted LFS objects,
 * then the visible ref moved. On failure the ref stays where it was: no
 * client ever sees a commit whose selected files are missing. */
static void pull_ref(struct repo_pull *rp, const struct upstream_ref *ref)
{
	git_object *obj = NULL, *commit = NULL;
	git_oid oid;
	char commit_sha[41] = "";
	git_oid_fromstr(&oid, ref->sha);
	if (git_object_lookup(&obj, rp->git, &oid, GIT_OBJECT_ANY) == 0 &&
	    git_object_peel(&commit, obj, GIT_OBJECT_COMMIT) == 0)
		git_oid_tostr(commit_sha, sizeof(commit_sha), git_object_id(commit));
	git_object_free(commit);
	git_object_free(obj);
	if (!commit_sha[0]) {
		strbuf_addf(&rp->errors, "%s: upstream commit %.12s missing after fetch; ", ref->name, ref->sha);
		rp->refs_behind++;
	} else if (pull_fetch_wanted_objects(rp, commit_sha) < 0) {
		rp->refs_behind++;
	} else if (pull_move_visible_ref(rp, ref->name, ref->sha) < 0) {
		strbuf_addf(&rp->errors, "%s: cannot move the ref; ", ref->name);
		rp->refs_behind++;
	}
}

/* List the upstream refs; fetch and move those that changed, apply
 * deletions. Errors go to rp->errors. */
static int pull_refs(struct repo_pull *rp, git_remote *remote, struct upstream_ref **refs, size_t *nrefs)
{
	int rc = pull_run_git_step(rp, remote, STEP_LIST, refs, nrefs);
	if (rc < 0)
		return rc;
	if (refs_unchanged(rp, *refs, *nrefs)) {
		rp->run->stats.repos_unchanged++;
	} else {
		if (mirror_run_fenced(rp->run))
			return KHUB_EIO;
		if ((rc = pull_run_git_step(rp, remote, STEP_FETCH, refs, nrefs)) < 0)
			return rc;
		for (size_t i = 0; i < *nrefs; i++)
			if (!ref_current(rp, &(*refs)[i]) && !mirror_run_fenced(rp->run))
				pull_ref(rp, &(*refs)[i]);
	}
	if (mirror_run_fenced(rp->run))
		return KHUB_EIO;
	pull_apply_deletions(rp, *refs, *nrefs);	/* visible refs gone upstream */
	return rp->errors.len ? KHUB_EIO : 0;
}

static void finish(struct repo_pull *rp, int ok)
{
	if (atomic_load(&rp->run->fenced))
		return;	/* no status: this run may write nothing more */
	status_end(rp, ok);
	pull_progress(rp, "%s%s\n", ok ? "in sync" : "failed: ", ok ? "" : rp->errors.buf);
	if (!ok)
		log_warn("mirror %s: %s", rp->upstream_repo, rp->errors.buf);
	if (rp->warnings.len)
		log_warn("mirror %s: %s", rp->upstream_repo, rp->warnings.buf);
}

static int pull_repo(struct mirror_run *run, const struct mirror_selection *sel, struct upstream_client *client,
		     const char *repo_id)
{
	struct repo_pull rp = { run, sel, mirror_config_upstream(run->cfg, sel->upstream), client };
	strbuf_init(&rp.warnings);
	strbuf_init(&rp.errors);
	snprintf(rp.upstream_repo, sizeof(rp.upstream_repo), "%s", repo_id);
	char *ns = xstrndup(repo_id, (size_t)(strchr(repo_id, '/') - repo_id));
	const char *name = strchr(repo_id, '/') + 1, *why;
	git_remote *remote = NULL;
	struct upstream_ref *refs = NULL;
	size_t nrefs = 0;
	int rc;

	if (repo_name_validate(ns, &why) < 0 || repo_name_validate(name, &why) < 0) {
		log_warn("mirror: skipping %s: %s", repo_id, why);
		free(ns);
		return KHUB_EINVAL;
	}
	if (mirror_run_fenced(run))
		rc = KHUB_EIO;
	else if ((rc = open_repo(&rp, ns, name)) == 0) {
		status_begin(&rp);
		rc = open_remote(&rp, &remote);
		if (rc == 0)
			rc = pull_refs(&rp, remote, &refs, &nrefs);
		finish(&rp, rc == 0 && rp.errors.len == 0);
	}
	for (size_t i = 0; i < nrefs; i++)
		free(refs[i].name);
	free(refs);
	git_remote_free(remote);
	git_repository_free(rp.git);
	strbuf_release(&rp.warnings);
	strbuf_release(&rp.errors);
	free(ns);
	run->stats.repos++;
	run->stats.bytes += rp.bytes;
	run->stats.objects += rp.objects;
	if (rc < 0)
		run->stats.errors++;
	return rc;
}

/* ---- namespaces and the repo list ------------------------------------------------- */

/* Copy the upstream org's trustedKernelPublisher unless an admin overrode it. */
static void copy_trust(struct upstream_client *client, const struct mirror_upstream *up, const char *ns)
{
	static const char *const kinds[] = { "organizations", "users" };
	for (size_t k = 0; k < 2; k++) {
		char *url = xasprintf("%s/api/%s/%s/overview", up->url, kinds[k], ns);
		json_t *doc = NULL;
		long status;
		int rc = upstream_get_json(client, url, &doc, &status, NULL);
		free(url);
		if (rc == 0 && json_is_object(doc)) {
			int trusted = json_is_true(json_object_get(doc, "trustedKernelPublisher"));
			repo_import_copy_trust(ns, trusted);
			json_decref(doc);
			return;
		}
		json_decref(doc);
	}
}

static int has_glob(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

/* Upstream repo ids matching a pattern "ns/glob" (listing by author). */
static void list_matching(struct upstream_client *client, const struct mirror_upstream *up,
			  const struct mirror_selection *sel, const char *pattern, char ***ids, size_t *n)
{
	char *ns = xstrndup(pattern, (size_t)(strchr(pattern, '/') - pattern));
	char *url = xasprintf("%s/api/%s?author=%s&limit=500", up->url, repo_type_plural(sel->type), ns);
	while (url) {
		json_t *doc = NULL;
		long status;
		char *next = NULL;
		int rc = upstream_get_json(client, url, &doc, &status, &next);
		free(url);
		url = next;
		if (rc < 0 || !json_is_array(doc)) {
			log_warn("mirror: cannot list %s repos of %s (HTTP %ld)", repo_type_name(sel->type), ns, status);
			json_decref(doc);
			break;
		}
		size_t i;
		json_t *item;
		json_array_foreach(doc, i, item) {
			const char *id = json_string_value(json_object_get(item, "id"));
			if (!id || fnmatch(pattern, id, FNM_CASEFOLD) != 0)
				continue;
			*ids = xrealloc(*ids, (*n + 1) * sizeof(char *));
			(*ids)[(*n)++] = xstrdup(id);
		}
		json_decref(doc);
	}
	free(url);
	free(ns);
}

int mirror_pull_selection(struct mirror_run *run, const struct mirror_selection *sel, const char *only_repo)
{
	const struct mirror_upstream *up = mirror_config_upstream(run->cfg, sel->upstream);
	char *token = mirror_upstream_token(up);
	struct upstream_client *client = upstream_client_new(up, token);
	free(token);
	char **ids = NULL, **namespaces = NULL;
	size_t nids = 0, nns = 0;
	for (size_t i = 0; i < sel->nrepos && !mirror_run_fenced(run); i++) {
		if (has_glob(sel->repos[i]))
			list_matching(client, up, sel, sel->repos[i], &ids, &nids);
		else {
			ids = xrealloc(ids, (nids + 1) * sizeof(char *));
			ids[nids++] = xstrdup(sel->repos[i]);
		}
	}
	for (size_t i = 0; i < nids && !mirror_run_fenced(run); i++) {
		if (only_repo && strcasecmp(only_repo, ids[i]) != 0)
			continue;
		int seen = 0;
		for (size_t k = 0; k < i && !seen; k++)
			seen = strcasecmp(ids[k], ids[i]) == 0;
		if (seen)
			continue;
		/* the namespace (and its trust flag) first, once per run */
		char *ns = xstrndup(ids[i], (size_t)(strchr(ids[i], '/') - ids[i]));
		int known = 0;
		for (size_t k = 0; k < nns && !known; k++)
			known = strcasecmp(namespaces[k], ns) == 0;
		if (!known) {
			struct account acct;
			if (db_account_get(ns, &acct) == KHUB_ENOTFOUND)
				accounts_mirror_org_ensure(ns);
			copy_trust(client, up, ns);
			namespaces = xrealloc(namespaces, (nns + 1) * sizeof(char *));
			namespaces[nns++] = ns;
		} else {
			free(ns);
		}
		pull_repo(run, sel, client, ids[i]);
	}
	free_strings(ids, nids);
	free_strings(namespaces, nns);
	log_info("mirror %s: %" PRIu64 " upstream requests", sel->name, upstream_requests(client));
	upstream_client_free(client);
	return 0;
}

static int lazy_fetch_locked(int64_t repo_id, const char *commit_sha, const char *path, const char *oid,
			     uint64_t size, struct lfs_store *lfs)
{
	struct mirror_lazy_source src;
	int rc = db_mirror_lazy_source(repo_id, &src);
	if (rc < 0)
		return rc;
	struct mirror_upstream up = { 0 };
	up.name = "lazy";
	up.url = src.upstream_url;
	up.token_env = src.token_env;
	up.token_file = src.token_file;
	up.concurrency = 1;
	up.max_retries = 1;	/* a client is waiting: fail fast */
	up.request_timeout = 30;
	enum repo_type type = src.type;
	char *token = mirror_upstream_token(&up);
	struct upstream_client *client = upstream_client_new(&up, token);
	struct strbuf url = STRBUF_INIT;
	strbuf_addf(&url, "%s/%s%s/resolve/%s/", up.url, repo_type_url_prefix(type), src.upstream_repo, commit_sha);
	strbuf_add_urlencoded(&url, path, 1);
	uint64_t transferred = 0;
	/* linked only once this repo's upstream served the verified bytes */
	int linked = db_lfs_linked(repo_id, oid);
	int64_t inflight = 0;	/* khub gc keeps the object until it is linked */
	if (linked == 0 && db_lfs_inflight_begin(oid, &inflight) < 0)
		linked = KHUB_EDB;
	rc = linked < 0 ? KHUB_EDB
			: upstream_fetch_lfs(client, url.buf, oid, size, lfs, linked ? 0 : repo_id, &transferred);
	db_lfs_inflight_end(inflight);
	if (rc == 0)
		log_info("mirror: fetched %s (%s, %" PRIu64 " bytes) on first request", path, oid, transferred);
	if (transferred > 0) {	/* lazy bytes crossed the network too: count them */
		db_mirror_count_transfer(repo_id, transferred, rc == 0);
	}
	strbuf_release(&url);
	upstream_client_free(client);
	free(token);
	mirror_lazy_source_release(&src);
	return rc;
}

/* One fetch from upstream however many nodes (or threads) miss the object
 * at the same moment: the others wait on the object's lock and then find
 * it stored and linked. */
int mirror_lazy_fetch(int64_t repo_id, const char *commit_sha, const char *path, const char *oid, uint64_t size,
		      struct lfs_store *lfs)
{
	int64_t key = db_lfs_object_key(oid);
	if (db_lock_wait(DB_LOCK_LAZY_FETCH, key) < 0)
		return KHUB_EDB;
	uint64_t have = 0;
	int rc = 0;
	if (db_lfs_linked(repo_id, oid) == 1 && lfs_store_stat(lfs, oid, &have) == 0 && have == size)
		log_info("mirror: %s (%s) was fetched meanwhile by another node or request", path, oid);
	else
		rc = lazy_fetch_locked(repo_id, commit_sha, path, oid, size, lfs);
	db_unlock(DB_LOCK_LAZY_FETCH, key);
	return rc;
}
