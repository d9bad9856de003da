/* repo_access.c -- the access column of the route tables (access_check,
 * run once per request by the server), find a repo, decide what the caller
 * may do with it, open its git store, and resolve revisions. Repo records
 * are cached for a short time (http/repo_records.c) and git handles per
 * thread, so a warm read touches neither the database nor the repo's
 * config files. */
#include "api/api.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct api_context api_ctx;

#define THREAD_GIT_SLOTS 16

struct git_slot {
	char key[2 * REPO_NAME_MAX + 16];
	git_repository *git;
	uint64_t used;
};

static __thread struct git_slot git_slots[THREAD_GIT_SLOTS];
static __thread uint64_t git_slots_generation, git_slots_clock;

/* "type/ns/name" of a git slot, cut at size; by hand, as it runs for every
 * request. */
static void repo_key(char *key, size_t size, enum repo_type type, const char *ns, const char *name)
{
	char type_digits[4] = { (char)('0' + (int)type % 10), '/', '\0' };
	const char *parts[] = { type_digits, ns, "/", name };
	size_t n = 0;
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		for (const char *p = parts[i]; *p && n < size - 1; p++)
			key[n++] = *p;
	key[n] = '\0';
}

static void git_slots_clear(void)
{
	for (int i = 0; i < THREAD_GIT_SLOTS; i++) {
		git_repository_free(git_slots[i].git);
		memset(&git_slots[i], 0, sizeof(git_slots[i]));
	}
}

/* A worker thread that ends (the daemon stops) frees its handles through
 * this key's destructor; the key's value is only a marker. */
static pthread_key_t git_slots_key;
static pthread_once_t git_slots_key_once = PTHREAD_ONCE_INIT;

static void git_slots_at_thread_exit(void *marker)
{
	(void)marker;
	git_slots_clear();
}

static void git_slots_key_create(void)
{
	pthread_key_create(&git_slots_key, git_slots_at_thread_exit);
}

static git_repository *thread_git_open(const struct repo_record *rec)
{
	uint64_t gen = repo_cache_generation();
	if (gen != git_slots_generation) {
		git_slots_clear();
		git_slots_generation = gen;
	}
	pthread_once(&git_slots_key_once, git_slots_key_create);
	if (!pthread_getspecific(git_slots_key))
		pthread_setspecific(git_slots_key, git_slots);
	char key[sizeof(git_slots[0].key)];
	repo_key(key, sizeof(key), rec->type, rec->ns, rec->name);
	int victim = 0;
	for (int i = 0; i < THREAD_GIT_SLOTS; i++) {
		if (git_slots[i].git && strcmp(git_slots[i].key, key) == 0) {
			git_slots[i].used = ++git_slots_clock;
			return git_slots[i].git;
		}
		if (git_slots[i].used < git_slots[victim].used)
			victim = i;
	}
	git_repository *git = NULL;
	if (repo_store_open(api_ctx.repo_root, rec->type, rec->ns, rec->name, &git) < 0)
		return NULL;
	git_repository_free(git_slots[victim].git);
	snprintf(git_slots[victim].key, sizeof(git_slots[victim].key), "%s", key);
	git_slots[victim].git = git;
	git_slots[victim].used = ++git_slots_clock;
	return git;
}

/* As on the Hub: a read token only reads; a write token may do whatever
 * its user's role allows (admin operations included). */
static enum role scope_cap(const struct principal *p, enum role role)
{
	return p->scope == ROLE_READ && role > ROLE_READ ? ROLE_READ : role;
}

int repo_role_of(const struct principal *p, const struct repo_record *repo, enum role *out)
{
	enum role role = ROLE_NONE;
	int rc = 0;
	if (p->user_id && (p->is_site_admin || repo->owner_id == p->user_id))
		role = ROLE_ADMIN;
	else if (p->user_id)
		rc = db_membership_role(repo->owner_id, p->user_id, &role);
	*out = scope_cap(p, role);
	return rc;
}

int repo_open_for_read(struct request *req, struct repo_handle *h, enum MHD_Result *result)
{
	const char *why;
	memset(h, 0, sizeof(*h));
	if (repo_name_validate(req->ns, &why) < 0 || repo_name_validate(req->name, &why) < 0) {
		*result = respond_repo_not_found(req);
		return -1;
	}
	int rc = repo_record_lookup(req->type, req->ns, req->name, &h->record);
	if (rc == KHUB_ENOTFOUND && req->type == REPO_MODEL)
		rc = repo_record_lookup(REPO_KERNEL, req->ns, req->name, &h->record);
	if (rc == KHUB_EDB) {
		*result = respond_db_unavailable(req);
		return -1;
	}
	if (rc < 0) {
		*result = respond_repo_not_found(req);
		return -1;
	}
	if (h->record.private) {
		if (repo_role_of(&req->principal, &h->record, &h->role) < 0) {
			*result = respond_db_unavailable(req);
			return -1;
		}
		if (h->role < ROLE_READ) {
			*result = respond_repo_not_found(req);
			return -1;
		}
	} else {
		h->role = req->principal.user_id ? ROLE_READ : ROLE_NONE;
	}
	h->git = thread_git_open(&h->record);
	if (!h->git) {
		*result = respond_error(req, 500, NULL, "repository storage is unavailable");
		return -1;
	}
	return 0;
}

int repo_resolve_or_respond(struct request *req, struct repo_handle *h, const char *rev, char sha[41],
			    enum MHD_Result *result)
{
	if (repo_resolve_revision(h->git, rev, sha) == 0)
		return 0;
	*result = respond_revision_not_found(req, rev);
	return -1;
}

int require_signed_in(struct request *req, enum MHD_Result *result)
{
	if (req->principal.user_id)
		return 0;
	*result = req->bad_token ? respond_invalid_token(req)
				 : respond_error(req, 401, NULL, "Invalid username or password.");
	return -1;
}

int namespace_role(const struct principal *p, const struct account *ns, enum role *out)
{
	enum role role = ROLE_NONE;
	int rc = 0;
	if (p->user_id && (p->is_site_admin || ns->id == p->user_id))
		role = ROLE_ADMIN;
	else if (p->user_id && ns->kind == ACCOUNT_ORG)
		rc = db_membership_role(ns->id, p->user_id, &role);
	*out = scope_cap(p, role);
	return rc;
}

int repo_open_named(struct request *req, enum repo_type type, const char *ns, const char *name,
		    enum role needed, struct repo_handle *h, enum MHD_Result *result)
{
	const char *why;
	memset(h, 0, sizeof(*h));
	if (!req->principal.user_id) {
		/* Anonymous: a repo they cannot see is RepoNotFound (as reads
		 * answer); a public one needs a token. */
		struct repo_record rec;
		int rc = ns && name ? db_repo_get(type, ns, name, &rec) : KHUB_ENOTFOUND;
		if (rc == KHUB_EDB) {
			*result = respond_db_unavailable(req);
			return -1;
		}
		if (rc < 0 || rec.private) {
			*result = respond_repo_not_found(req);
			return -1;
		}
	}
	if (require_signed_in(req, result) < 0)
		return -1;
	if (!ns || !name || repo_name_validate(ns, &why) < 0 || repo_name_validate(name, &why) < 0) {
		*result = respond_repo_not_found(req);
		return -1;
	}
	int rc = db_repo_get(type, ns, name, &h->record);	/* fresh: writes never use the cache */
	if (rc == KHUB_EDB || (rc == 0 && repo_role_of(&req->principal, &h->record, &h->role) < 0)) {
		*result = respond_db_unavailable(req);
		return -1;
	}
	if (rc < 0) {
		*result = respond_repo_not_found(req);
		return -1;
	}
	if (!h->record.private && h->role < ROLE_READ)
		h->role = ROLE_READ;
	if (h->role < ROLE_READ) {
		*result = respond_repo_not_found(req);
		return -1;
	}
	if (h->record.mirrored && needed >= ROLE_WRITE) {
		*result = respond_error(req, 403, NULL, "%s/%s is a mirror of an upstream hub and is read-only here",
					h->record.ns, h->record.name);
		return -1;
	}
	if (h->role < needed) {
		*result = respond_error(req, 403, NULL, "You don't have the rights to %s %s/%s (needs %s access%s)",
					needed == ROLE_ADMIN ? "administer" : "write to", h->record.ns, h->record.name,
					role_name(needed),
					req->principal.scope == ROLE_READ ? "; your token is read-only" : "");
		return -1;
	}
	h->git = thread_git_open(&h->record);
	if (!h->git) {
		*result = respond_error(req, 500, NULL, "repository storage is unavailable");
		return -1;
	}
	return 0;
}

int repo_open_for_write(struct request *req, struct repo_handle *h, enum role needed,
			enum MHD_Result *result)
{
	return repo_open_named(req, req->type, req->ns, req->name, needed, h, result);
}

int repo_open_to_manage(struct request *req, enum repo_type type, const char *ns, const char *name,
			struct repo_handle *h, enum MHD_Result *result)
{
	if (repo_open_named(req, type, ns, name, ROLE_READ, h, result) < 0)
		return -1;
	/* As on the Hub: an org's write members may create, delete, rename
	 * and configure any repo of the org. h->role is already capped by the
	 * token's scope (a read-only token only reads). */
	if (h->role >= ROLE_WRITE)
		return 0;
	*result = respond_error(req, 403, NULL, "You don't have the rights to manage %s/%s (needs write access%s)",
				h->record.ns, h->record.name,
				req->principal.scope == ROLE_READ ? "; your token is read-only" : "");
	return -1;
}

/* ---- the access column of the route tables ------------------------------ */

static const struct {
	const char *name;
	enum role scope;
} access_table[ACCESS_COUNT] = {
	[ACCESS_PUBLIC] = { "public", ROLE_READ },
	[ACCESS_SIGNED_IN] = { "signed-in", ROLE_READ },
	[ACCESS_REPO_READ] = { "repo-read", ROLE_READ },
	[ACCESS_REPO_CONTRIBUTE] = { "repo-contribute", ROLE_WRITE },
	[ACCESS_REPO_WRITE] = { "repo-write", ROLE_WRITE },
	[ACCESS_REPO_MANAGE] = { "repo-manage", ROLE_WRITE },
	[ACCESS_NAMESPACE_CREATE] = { "namespace-create", ROLE_WRITE },
	[ACCESS_NAMESPACE_WRITE] = { "namespace-write", ROLE_WRITE },
	[ACCESS_SITE_ADMIN] = { "site-admin", ROLE_WRITE },
	[ACCESS_SIGNED_URL] = { "signed-url", ROLE_READ },
	[ACCESS_GIT] = { "git", ROLE_READ },
	[ACCESS_WORKER] = { "worker", ROLE_NONE },
};

const char *access_name(enum route_access access)
{
	return access > ACCESS_UNSET && access < ACCESS_COUNT ? access_table[access].name : NULL;
}

enum role access_min_scope(enum route_access access)
{
	return access > ACCESS_UNSET && access < ACCESS_COUNT ? access_table[access].scope : ROLE_ADMIN;
}

/* Repo-level access opens the repo the handler works on. */
static int open_route_repo(struct request *req, enum route_access access, enum MHD_Result *result)
{
	struct repo_handle *h = &req->repo_storage;
	int rc;
	switch (access) {
	case ACCESS_REPO_READ:
		rc = repo_open_for_read(req, h, result);
		break;
	case ACCESS_REPO_WRITE:
		rc = repo_open_named(req, req->type, req->ns, req->name, ROLE_WRITE, h, result);
		break;
	case ACCESS_REPO_MANAGE:
		rc = repo_open_to_manage(req, req->type, req->ns, req->name, h, result);
		break;
	default:	/* ACCESS_REPO_CONTRIBUTE */
		rc = repo_open_named(req, req->type, req->ns, req->name, ROLE_READ, h, result);
		if (rc == 0 && req->principal.scope < ROLE_WRITE) {
			*result = respond_error(req, 403, NULL, "a read-only token cannot open or update pull requests or "
						"upload to %s/%s (needs a write token)", h->record.ns, h->record.name);
			rc = -1;
		}
		break;
	}
	if (rc < 0)
		return -1;
	req->repo = h;
	return 0;
}

int access_check(struct request *req, enum MHD_Result *result)
{
	const struct route *route = req->route;
	enum route_access access = route->access_for ? route->access_for(req) : route->access;
	const struct principal *p = &req->principal;
	assert(access > ACCESS_UNSET && access < ACCESS_COUNT);
	req->repo = NULL;
	/* A build worker's token opens the worker routes and nothing else. */
	if (p->worker_id != 0 && access != ACCESS_WORKER) {
		*result = respond_error(req, 403, NULL, "a worker token may only call the build farm's worker routes");
		return -1;
	}
	/* A token honoured from the cache while the database is down reads
	 * only; a write waits for the database (503, never 401 or 403). */
	if (req->auth_stale && access_min_scope(access) > ROLE_READ) {
		*result = respond_db_unavailable(req);
		return -1;
	}
	switch (access) {
	case ACCESS_WORKER:
		if (p->worker_id)
			return 0;
		if (require_signed_in(req, result) < 0)
			return -1;
		*result = respond_error(req, 403, NULL, "build workers only (needs a worker token)");
		return -1;
	case ACCESS_PUBLIC:
	case ACCESS_SIGNED_URL:
	case ACCESS_GIT:
		return 0;
	case ACCESS_SIGNED_IN:
		return require_signed_in(req, result);
	case ACCESS_SITE_ADMIN:
		if (require_signed_in(req, result) < 0)
			return -1;
		if (!p->is_site_admin || p->scope < access_min_scope(access)) {
			*result = respond_error(req, 403, NULL, "site administrators only%s",
						p->is_site_admin ? " (your token is read-only)" : "");
			return -1;
		}
		return 0;
	case ACCESS_NAMESPACE_CREATE:
	case ACCESS_NAMESPACE_WRITE:
		/* Decided from the headers, before the body naming the
		 * namespace or repo is read: anonymous callers of a move or
		 * delete get what a repo they cannot see answers. */
		if (!p->user_id && access == ACCESS_NAMESPACE_WRITE) {
			*result = respond_repo_not_found(req);
			return -1;
		}
		if (require_signed_in(req, result) < 0)
			return -1;
		if (p->scope < access_min_scope(access)) {
			*result = respond_error(req, 403, NULL, "You don't have the rights to create, move or delete repos "
						"with a read-only token");
			return -1;
		}
		return 0;
	default:
		return open_route_repo(req, access, result);
	}
}

/* A busy lock: park the request (woken when a writer of this process lets
 * go, polled with backoff for writers in other processes: imports, pushes,
 * the mirror) until lock_wait_ms, then 503. rc is what the try gave. */
static int wait_for_lock(struct request *req, int64_t repo_id, int rc, enum MHD_Result *result)
{
	if (rc == 0) {
		req->wait_started_usec = 0;
		return 0;
	}
	if (rc == KHUB_EDB) {
		*result = respond_db_unavailable(req);
		return -1;
	}
	uint64_t now = monotonic_usec();
	if (!req->wait_started_usec)
		req->wait_started_usec = now;
	if (now - req->wait_started_usec >= (uint64_t)api_ctx.lock_wait_ms * 1000u) {
		log_warn("repo %lld: write lock still busy after %ld ms", (long long)repo_id, api_ctx.lock_wait_ms);
		*result = respond_error(req, 503, NULL, "another write to this repository is in progress; retry later");
		return -1;
	}
	char key[PARK_KEY_MAX];
	park_key(key, "repo-lock", (uint64_t)repo_id);
	unsigned rounds = req->park_rounds < 5 ? req->park_rounds : 5;
	request_park(req, key, 10u << rounds);
	*result = MHD_YES;
	return 1;
}

int repo_write_lock_request(struct request *req, int64_t repo_id, enum MHD_Result *result)
{
	return wait_for_lock(req, repo_id, publish_repo_trylock(repo_id), result);
}

int publication_lock_request(struct request *req, struct publication *pub, int64_t repo_id, enum MHD_Result *result)
{
	return wait_for_lock(req, repo_id, publish_trylock(pub), result);
}

void repo_write_unlock(int64_t repo_id)
{
	publish_repo_unlock(repo_id);
}

void api_lock_released(int64_t repo_id)
{
	char key[PARK_KEY_MAX];
	park_key(key, "repo-lock", (uint64_t)repo_id);
	request_wake(key);
}

void api_after_publish(int64_t repo_id, enum publish_change change)
{
	(void)repo_id;
	if (change == PUBLISH_REFS_CHANGED)
		repo_cache_invalidate();
}

const char *repo_audit_target(struct request *req, enum repo_type type, const char *ns, const char *name)
{
	return request_own(req, xasprintf("%s/%s/%s", repo_type_plural(type), ns, name));
}

struct accounts_actor api_actor(const struct request *req)
{
	return (struct accounts_actor){ &req->principal, req->remote_addr };
}

void api_audit(struct request *req, const char *action, const char *target, const char *details)
{
	if (db_audit(req->principal.user_id, req->principal.user_id ? req->principal.name : "anonymous", action,
		     target, details, req->remote_addr) < 0)
		log_error("audit: cannot record %s %s", action, target);
}
