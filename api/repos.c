/* repos.c -- the registry of repositories: POST /api/repos/create, DELETE
 * /api/repos/delete and POST /api/repos/move (settings: repo_settings.c).
 * They hold one registry-wide lock (they are rare) and then the repo's write
 * lock, so they never race each other or a commit; a repo's directory is
 * only ever renamed, never removed: a delete moves it to the trash before
 * the row goes, and a create never adopts one it did not make. */
#include "api/api.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers --------------------------------------------------------- */

/* The repo type of a body (default model); -1 with a 400 queued when it
 * is not a known type. */
static int body_type(struct request *req, json_t *doc, enum repo_type *type, enum MHD_Result *result)
{
	const char *s;
	*type = REPO_MODEL;
	if (json_optional_string(doc, "type", &s) == 0 && (!s || repo_type_parse(s, type) == 0))
		return 0;
	*result = respond_error(req, 400, NULL, "Invalid repo type: must be model, dataset, space or kernel");
	return -1;
}

/* Split "ns/name" into two strings the request owns; -1 unless there is
 * exactly one '/' with something on both sides. */
static int split_repo_id(struct request *req, const char *id, char **ns, char **name)
{
	const char *slash = strchr(id, '/');
	if (!slash || slash == id || !slash[1] || strchr(slash + 1, '/'))
		return -1;
	*ns = request_own(req, xstrndup(id, (size_t)(slash - id)));
	*name = request_own(req, xstrdup(slash + 1));
	return 0;
}

/* {name, organization} as PY, RS and JS send them; an old-style "ns/name"
 * in name is accepted when organization is absent. The namespace defaults
 * to the caller. Fills *ns and *name (the request owns them); -1 with a
 * 400 queued. */
static int body_repo_name(struct request *req, json_t *doc, char **ns, char **name, enum MHD_Result *result)
{
	const char *n, *org;
	*ns = *name = NULL;
	if (json_optional_string(doc, "name", &n) < 0 || json_optional_string(doc, "organization", &org) < 0 || !n) {
		*result = respond_error(req, 400, NULL, "\"name\" (string) is required; \"organization\" must be a string or null");
		return -1;
	}
	if (!org && strchr(n, '/')) {
		if (split_repo_id(req, n, ns, name) == 0)
			return 0;
		*result = respond_error(req, 400, NULL, "Invalid repo name: %s", n);
		return -1;
	}
	*ns = request_own(req, xstrdup(org ? org : req->principal.name));
	*name = request_own(req, xstrdup(n));
	return 0;
}

/* The repo a create or delete body names: type, namespace and name. */
static int body_repo(struct request *req, json_t *doc, enum repo_type *type, char **ns, char **name,
		     enum MHD_Result *result)
{
	if (body_repo_name(req, doc, ns, name, result) < 0)
		return -1;
	return body_type(req, doc, type, result);
}

static char *repo_url(struct request *req, enum repo_type type, const char *ns, const char *name)
{
	return xasprintf("%s/%s%s/%s", request_base_url(req), repo_type_url_prefix(type), ns, name);
}

/* One lock for creates, deletes and moves, taken before any repo's write
 * lock (so the order is always registry, then repo). -1 with a 503 queued
 * when the database cannot give it. */
static int registry_lock(struct request *req, enum MHD_Result *result)
{
	if (db_lock_wait(DB_LOCK_REGISTRY, 0) == 0)
		return 0;
	*result = respond_db_unavailable(req);
	return -1;
}

static void registry_unlock(void)
{
	db_unlock(DB_LOCK_REGISTRY, 0);
}

/* Is h's repo still registered under its name (not deleted or moved since
 * it was opened)? 0, KHUB_ENOTFOUND or KHUB_EDB. */
static int repo_still_named(const struct repo_handle *h)
{
	struct repo_record current;
	int rc = db_repo_get(h->record.type, h->record.ns, h->record.name, &current);
	return rc == 0 && current.id != h->record.id ? KHUB_ENOTFOUND : rc;
}

/* The end of a delete or move: the locks it holds, in reverse order. */
static void manage_unlock(const struct repo_handle *h, int repo_locked, int registry_locked)
{
	if (repo_locked)
		repo_write_unlock(h->record.id);
	if (registry_locked)
		registry_unlock();
}

/* May the caller create a repo of this type named name under ns (create,
 * or the target of a move)? Fills owner; on failure a 400 (a bad name) or
 * 403/503 is queued. */
static int namespace_writable(struct request *req, enum repo_type type, const char *ns, const char *name,
			      struct account *owner, enum MHD_Result *result)
{
	const char *why;
	enum role role = ROLE_NONE;
	if (repo_name_validate(name, &why) < 0) {
		*result = respond_error(req, 400, NULL, "Invalid repo name: %s", why);
		return -1;
	}
	int rc = repo_name_validate(ns, &why) < 0 ? KHUB_ENOTFOUND : db_account_get(ns, owner);
	if (rc == 0)
		rc = namespace_role(&req->principal, owner, &role);
	if (rc == KHUB_EDB) {
		*result = respond_db_unavailable(req);
		return -1;
	}
	if (rc < 0 || role < ROLE_WRITE) {
		*result = respond_error(req, 403, NULL, "You don't have the rights to create a %s under the namespace \"%s\"%s",
					repo_type_name(type), ns,
					req->principal.scope < ROLE_WRITE ? " (your token's scope is too small)" : "");
		return -1;
	}
	return 0;
}

/* ---- files committed at creation (JS createRepo `files`) -------------------- */

struct initial_file {
	char *path;
	unsigned char *data;
	size_t len;
};

static void initial_files_free(struct initial_file *files, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(files[i].path);
		free(files[i].data);
	}
	free(files);
}

/* Standard base64 (no line breaks); -1 when malformed. *out is owned. */
static int base64_decode(const char *in, unsigned char **out, size_t *out_len)
{
	size_t len = strlen(in);
	if (len % 4 != 0 || len > (size_t)1 << 30)
		return -1;
	*out = xmalloc(len / 4 * 3 + 1);
	if (len == 0) {
		*out_len = 0;
		return 0;
	}
	int n = EVP_DecodeBlock(*out, (const unsigned char *)in, (int)len);
	if (n < 0) {
		free(*out);
		*out = NULL;
		return -1;
	}
	size_t pad = in[len - 1] == '=' ? (in[len - 2] == '=' ? 2 : 1) : 0;
	*out_len = (size_t)n - pad;
	return 0;
}

/* Decode `files: [{path, content, encoding: "base64"|"utf-8"}]` before
 * anything is created, so a bad entry leaves nothing behind. */
static int decode_initial_files(struct request *req, json_t *doc, struct initial_file **out, size_t *count,
				enum MHD_Result *result)
{
	json_t *list = json_object_get(doc, "files");
	*out = NULL;
	*count = 0;
	if (!list || json_is_null(list))
		return 0;
	if (!json_is_array(list)) {
		*result = respond_error(req, 400, NULL, "\"files\" must be an array");
		return -1;
	}
	struct initial_file *files = xcalloc(json_array_size(list) + 1, sizeof(*files));
	size_t i;
	json_t *item;
	json_array_foreach(list, i, item) {
		const char *path = NULL, *content = NULL, *encoding = NULL, *why = "";
		if (!json_is_object(item) || json_optional_string(item, "path", &path) < 0 || !path ||
		    json_optional_string(item, "content", &content) < 0 || !content ||
		    json_optional_string(item, "encoding", &encoding) < 0) {
			*result = respond_error(req, 400, NULL, "files[%zu] needs \"path\" and \"content\" strings", i);
			goto fail;
		}
		if (repo_path_validate(path, &why) < 0) {
			*result = respond_error(req, 400, NULL, "files[%zu]: invalid path: %s", i, why);
			goto fail;
		}
		files[i].path = xstrdup(path);
		if (!encoding || strcmp(encoding, "utf-8") == 0) {
			files[i].len = strlen(content);
			files[i].data = (unsigned char *)xstrdup(content);
		} else if (strcmp(encoding, "base64") != 0 ||
			   base64_decode(content, &files[i].data, &files[i].len) < 0) {
			*result = respond_error(req, 400, NULL, "files[%zu]: content is not valid %s", i,
						strcmp(encoding, "base64") == 0 ? "base64" : "utf-8 or base64");
			goto fail;
		}
		/* a new repo has no LFS object: a pointer text would name
		 * another repo's (see lfs_repo_objects) */
		struct lfs_pointer ptr;
		if (lfs_pointer_parse((const char *)files[i].data, files[i].len, &ptr) == 0) {
			*result = respond_error(req, 400, NULL, "files[%zu]: the content of %s is an LFS pointer (to %s); "
						"a new repo has no LFS objects: send the file's bytes", i, path, ptr.oid);
			goto fail;
		}
	}
	*out = files;
	*count = json_array_size(list);
	return 0;
fail:
	initial_files_free(files, json_array_size(list));
	return -1;
}

/* One commit on main with the files (kept as regular blobs: the Hub only
 * takes a few small files at creation). */
static int commit_initial_files(struct request *req, const struct repo_record *rec,
				const struct initial_file *files, size_t count)
{
	struct publication *pub = NULL;
	struct publish_op *ops = xcalloc(count + 1, sizeof(*ops));
	struct publish_result res;
	char email[REPO_NAME_MAX + 32];
	char *summary = NULL;
	snprintf(email, sizeof(email), "%s@users.khub", req->principal.name);
	struct publish_actor who = { req->principal.user_id, req->principal.name, email, req->remote_addr };
	int rc = publish_begin(api_ctx.repo_root, api_ctx.lfs, rec, &pub);
	if (rc < 0)
		goto cleanup;
	/* the repo was registered a moment ago under the registry lock: no
	 * other writer knows it yet, so this wait is immediate */
	if ((rc = publish_lock(pub)) < 0)
		goto cleanup;
	for (size_t i = 0; i < count; i++)
		ops[i] = (struct publish_op){ .kind = PUBLISH_PUT, .path = files[i].path, .data = files[i].data,
					      .len = files[i].len };
	summary = count == 1 ? xasprintf("Add %s", files[0].path) : xasprintf("Add %zu files", count);
	struct publish_changeset change = { .ops = ops, .nops = count, .ref = "refs/heads/main", .summary = summary };
	rc = publish_apply(pub, &who, &change, &res);
cleanup:
	publish_end(pub, &who, rc == 0 ? "commit" : NULL, NULL);
	free(summary);
	free(ops);
	return rc;
}

/* ---- POST /api/repos/create ------------------------------------------------ */

/* The Hub's 409 carries the existing repo's url (PY create_repo(exist_ok)). */
static enum MHD_Result respond_exists(struct request *req, const struct repo_record *rec)
{
	char *url = repo_url(req, rec->type, rec->ns, rec->name);
	char *msg = xasprintf("You already created this %s repo", repo_type_name(rec->type));
	json_t *body = json_pack("{s:s, s:s}", "error", msg, "url", url);
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	struct answer a;
	answer_init(&a, 409);
	answer_header(&a, "Content-Type", "application/json; charset=utf-8");
	answer_header(&a, "X-Error-Message", msg);
	answer_body_take(&a, text, strlen(text));
	enum MHD_Result r = answer_send(req, &a);
	free(msg);
	free(url);
	return r;
}

/* Under the registry lock: the repo's git store, made fresh (a directory
 * already there, which no row owns, is moved to the trash: *quarantined,
 * which the caller frees), then its row: 0 with *rec, or -1 answered (409
 * when it exists). */
static int create_registered(struct request *req, enum repo_type type, const char *ns, const char *name, int private,
			     struct repo_record *rec, char **quarantined, enum MHD_Result *result)
{
	int rc = db_repo_get(type, ns, name, rec);
	if (rc == 0 || rc == KHUB_EDB) {
		*result = rc == 0 ? respond_exists(req, rec) : respond_db_unavailable(req);
		return -1;
	}
	/* git first, then the row: a crash in between leaves a directory that
	 * no one reads (there is no row) and that the next create of the name
	 * (or khub fsck --repair) moves to the trash. */
	rc = repo_store_create_fresh(api_ctx.repo_root, type, ns, name, quarantined);
	if (rc < 0) {
		*result = rc == KHUB_ENOSPC ? respond_storage_full(req, "repositories")
					    : respond_error(req, 500, NULL, "cannot create the repository's storage");
		return -1;
	}
	rc = db_repo_insert(type, ns, name, private, rec);
	if (rc == KHUB_EEXIST && db_repo_get(type, ns, name, rec) == 0) {
		*result = respond_exists(req, rec);	/* registered by a process without our lock */
		return -1;
	}
	if (rc < 0) {
		*result = respond_err(req, rc == KHUB_EDB ? rc : KHUB_EIO, "cannot register the repository");
		return -1;
	}
	return 0;
}

static enum MHD_Result respond_created(struct request *req, enum repo_type type, const struct repo_record *rec,
				       const char *quarantined, size_t nfiles)
{
	const char *target = repo_audit_target(req, type, rec->ns, rec->name);
	struct strbuf details = STRBUF_INIT;
	strbuf_addf(&details, "{\"private\":%s,\"files\":%zu,\"quarantined\":", rec->private ? "true" : "false",
		    nfiles);
	if (quarantined)
		strbuf_add_json_quoted(&details, quarantined);
	else
		strbuf_adds(&details, "null");
	strbuf_adds(&details, "}");
	api_audit(req, "repo.create", target, details.buf);
	strbuf_release(&details);
	char *url = repo_url(req, type, rec->ns, rec->name);
	char *id = xasprintf("%s/%s", rec->ns, rec->name);
	enum MHD_Result result = respond_json(req, 200, json_pack("{s:s, s:s, s:s}", "url", url, "id", id, "name", id));
	free(id);
	free(url);
	return result;
}

static enum MHD_Result handle_create(struct request *req)
{
	enum MHD_Result result;
	json_t *doc = NULL;
	char *ns = NULL, *name = NULL, *quarantined = NULL;
	struct initial_file *files = NULL;
	size_t nfiles = 0;
	struct account owner;
	struct repo_record rec;
	enum repo_type type;
	int private = 0, private_set, locked = 0;

	if (require_signed_in(req, &result) < 0)
		return result;
	if (!(doc = request_json_body(req, &result)))
		return result;
	if (body_repo(req, doc, &type, &ns, &name, &result) < 0)
		goto cleanup;
	if (repo_visibility_from_body(doc, &private, &private_set) < 0) {
		result = respond_error(req, 400, NULL,
				       "\"private\" must be a boolean and \"visibility\" public, private or protected");
		goto cleanup;
	}
	if (namespace_writable(req, type, ns, name, &owner, &result) < 0)
		goto cleanup;
	if (decode_initial_files(req, doc, &files, &nfiles, &result) < 0)
		goto cleanup;

	if (registry_lock(req, &result) < 0)
		goto cleanup;
	locked = 1;
	if (create_registered(req, type, owner.name, name, private, &rec, &quarantined, &result) < 0)
		goto cleanup;
	/* Registered: from here on the answer is 200 whatever happens, or a
	 * retrying client would get a 409 for a repo it created. */
	if (nfiles && commit_initial_files(req, &rec, files, nfiles) < 0)
		log_error("create %s/%s: the files sent at creation could not be committed", rec.ns, rec.name);
	registry_unlock();
	locked = 0;
	repo_cache_invalidate();
	result = respond_created(req, type, &rec, quarantined, nfiles);
cleanup:
	if (locked)
		registry_unlock();
	free(quarantined);
	initial_files_free(files, nfiles);
	json_decref(doc);
	return result;
}

/* ---- DELETE /api/repos/delete ------------------------------------------------ */

/* Under both locks: the directory into the trash first, then the row (the
 * directory goes back when the row cannot go), so that a failure at any
 * step leaves the repo registered with its content, or gone whole. 0, or
 * -1 answered. */
static int delete_trashed_then_unregistered(struct request *req, const struct repo_handle *h,
					    enum MHD_Result *result)
{
	const struct repo_record *r = &h->record;
	char *slot = NULL;
	int rc = repo_still_named(h);
	if (rc == 0) {
		rc = repo_store_trash_to(api_ctx.repo_root, r->type, r->ns, r->name, &slot);
		if (rc == KHUB_ENOTFOUND)
			rc = 0;	/* no directory (lost already): the row may go */
		else if (rc < 0) {
			*result = respond_error(req, 500, NULL, "cannot move the repository's storage to the trash; "
						"nothing was deleted");
			goto cleanup;
		}
		rc = db_repo_delete(r->id);
	}
	if (rc < 0 && slot && repo_store_untrash(api_ctx.repo_root, r->type, r->ns, r->name, slot) < 0)
		log_error("delete %s/%s: the row stays but its directory is still at %s", r->ns, r->name, slot);
	if (rc == KHUB_ENOTFOUND)
		*result = respond_repo_not_found(req);	/* deleted meanwhile */
	else if (rc < 0)
		*result = respond_db_unavailable(req);
cleanup:
	free(slot);
	return rc < 0 ? -1 : 0;
}

static enum MHD_Result handle_delete(struct request *req)
{
	enum MHD_Result result;
	json_t *doc = NULL;
	char *ns = NULL, *name = NULL;
	struct repo_handle h;
	enum repo_type type;
	int registry_locked = 0, repo_locked = 0;

	/* anonymous callers are answered by repo_open_admin: RepoNotFound for
	 * a repo they cannot see, as reads answer */
	doc = req->json;
	if (body_repo(req, doc, &type, &ns, &name, &result) < 0)
		goto cleanup;
	if (repo_open_to_manage(req, type, ns, name, &h, &result) < 0)
		goto cleanup;
	if (registry_lock(req, &result) < 0)
		goto cleanup;
	registry_locked = 1;
	/* parked (the registry lock is released by cleanup, and everything
	 * before is repeated when the handler runs again) or answered */
	if (repo_write_lock_request(req, h.record.id, &result) != 0)
		goto cleanup;
	repo_locked = 1;
	if (delete_trashed_then_unregistered(req, &h, &result) < 0)
		goto cleanup;
	repo_cache_invalidate();
	api_audit(req, "repo.delete", repo_audit_target(req, type, h.record.ns, h.record.name), "{\"trashed\":true}");
	struct answer a;
	answer_init(&a, 200);
	answer_header(&a, "Content-Type", "text/plain; charset=utf-8");
	answer_body_static(&a, "OK", 2);
	result = answer_send(req, &a);
cleanup:
	manage_unlock(&h, repo_locked, registry_locked);
	return result;
}

/* ---- POST /api/repos/move ---------------------------------------------------- */

/* The move's repos: fromRepo opened to manage, toRepo's namespace
 * writable (owner), and the namespace admin's call when the repo leaves
 * its namespace (an org's write members may rename its repos, not carry
 * them off). 0, or -1 answered. */
static int move_open(struct request *req, enum repo_type *type, struct repo_handle *h, struct account *owner,
		     char **to_name, enum MHD_Result *result)
{
	json_t *doc = req->json;
	const char *from_id, *to_id;
	char *from_ns = NULL, *from_name = NULL, *to_ns = NULL;
	if (json_optional_string(doc, "fromRepo", &from_id) < 0 || json_optional_string(doc, "toRepo", &to_id) < 0 || !from_id ||
	    !to_id || split_repo_id(req, from_id, &from_ns, &from_name) < 0 ||
	    split_repo_id(req, to_id, &to_ns, to_name) < 0) {
		*result = respond_error(req, 400, NULL, "\"fromRepo\" and \"toRepo\" must be repo ids of the form ns/name");
		return -1;
	}
	if (body_type(req, doc, type, result) < 0 ||
	    repo_open_to_manage(req, *type, from_ns, from_name, h, result) < 0 ||
	    namespace_writable(req, *type, to_ns, *to_name, owner, result) < 0)
		return -1;
	if (strcmp(h->record.ns, owner->name) != 0 && h->role < ROLE_ADMIN) {
		*result = respond_error(req, 403, NULL,
					"You don't have the rights to move %s/%s out of \"%s\" (needs admin of \"%s\")",
					h->record.ns, h->record.name, h->record.ns, h->record.ns);
		return -1;
	}
	return 0;
}

/* Under the registry lock: the repo still has its name and no other repo
 * has the new one. 0, or -1 answered. */
static int move_target_free(struct request *req, enum repo_type type, struct repo_handle *h, const char *to_ns,
			    const char *to_name, enum MHD_Result *result)
{
	struct repo_record existing;
	int rc = repo_still_named(h);
	if (rc < 0) {
		*result = rc == KHUB_EDB ? respond_db_unavailable(req) : respond_repo_not_found(req);
		return -1;
	}
	rc = db_repo_get(type, to_ns, to_name, &existing);
	if (rc == 0 && existing.id != h->record.id) {
		*result = respond_error(req, 409, NULL, "Repository %s/%s already exists", existing.ns, existing.name);
		return -1;
	}
	if (rc == KHUB_EDB) {
		*result = respond_db_unavailable(req);
		return -1;
	}
	return 0;
}

/* Move the directory, then the row (the directory goes back when the row
 * cannot move): 0 with *moved, or -1 answered. */
static int move_rename(struct request *req, enum repo_type type, struct repo_handle *h, const char *to_ns,
		       const char *to_name, struct repo_record *moved, enum MHD_Result *result)
{
	int rc = repo_store_rename(api_ctx.repo_root, type, h->record.ns, h->record.name, to_ns, to_name);
	if (rc == KHUB_EEXIST) {
		/* A directory without a row: a crash leftover; keep it aside. */
		if (repo_store_trash(api_ctx.repo_root, type, to_ns, to_name) == 0)
			rc = repo_store_rename(api_ctx.repo_root, type, h->record.ns, h->record.name, to_ns, to_name);
	}
	if (rc < 0) {
		*result = respond_error(req, 500, NULL, "cannot move the repository's storage");
		return -1;
	}
	rc = db_repo_rename(h->record.id, to_ns, to_name, moved);
	if (rc < 0) {
		if (repo_store_rename(api_ctx.repo_root, type, to_ns, to_name, h->record.ns, h->record.name) < 0)
			log_error("move %s/%s: cannot put the directory back after a failed rename", h->record.ns,
				  h->record.name);
		if (rc == KHUB_EEXIST)
			*result = respond_error(req, 409, NULL, "Repository %s/%s already exists", to_ns, to_name);
		else
			*result = respond_db_unavailable(req);
		return -1;
	}
	return 0;
}

static enum MHD_Result respond_moved(struct request *req, enum repo_type type, const struct repo_handle *h,
				     const struct repo_record *moved)
{
	repo_cache_invalidate();
	const char *from_target = repo_audit_target(req, type, h->record.ns, h->record.name);
	const char *to_target = repo_audit_target(req, type, moved->ns, moved->name);
	struct strbuf details = STRBUF_INIT;
	strbuf_adds(&details, "{\"to\":");
	strbuf_add_json_quoted(&details, to_target);
	strbuf_adds(&details, "}");
	api_audit(req, "repo.move", from_target, details.buf);
	strbuf_release(&details);
	char *url = repo_url(req, type, moved->ns, moved->name);
	enum MHD_Result result = respond_json(req, 200, json_pack("{s:s}", "url", url));
	free(url);
	return result;
}

static enum MHD_Result handle_move(struct request *req)
{
	enum MHD_Result result;
	char *to_name = NULL;
	struct repo_handle h;
	struct repo_record moved;
	struct account owner;
	enum repo_type type;
	int registry_locked = 0, repo_locked = 0;

	if (move_open(req, &type, &h, &owner, &to_name, &result) < 0)
		goto cleanup;
	if (registry_lock(req, &result) < 0)
		goto cleanup;
	registry_locked = 1;
	if (move_target_free(req, type, &h, owner.name, to_name, &result) < 0)
		goto cleanup;
	/* parked (the registry lock is released by cleanup, and everything
	 * before is repeated when the handler runs again) or answered */
	if (repo_write_lock_request(req, h.record.id, &result) != 0)
		goto cleanup;
	repo_locked = 1;
	if (move_rename(req, type, &h, owner.name, to_name, &moved, &result) == 0)
		result = respond_moved(req, type, &h, &moved);
cleanup:
	manage_unlock(&h, repo_locked, registry_locked);
	return result;
}

/* create, delete and move name their repo in the body: the server asks for
 * a write token from the headers (anonymous callers: 401, RepoNotFound for
 * a move or delete, as reads answer), the handlers for the write role in
 * the namespace (create), repo_open_to_manage on the repo (delete, move),
 * and for a move out of a namespace its admin and write in the destination. */
const struct route repos_routes[] = {
	{ METHOD_POST, "/api/repos/create", handle_create, ROUTE_BODY | ROUTE_HANDLER_ACCESS, 0,
	  NULL, ACCESS_NAMESPACE_CREATE },
	{ METHOD_DELETE, "/api/repos/delete", handle_delete, ROUTE_JSON | ROUTE_HANDLER_ACCESS, 0,
	  NULL, ACCESS_NAMESPACE_WRITE },
	{ METHOD_POST, "/api/repos/move", handle_move, ROUTE_JSON | ROUTE_HANDLER_ACCESS, 0,
	  NULL, ACCESS_NAMESPACE_WRITE },
	{ 0, NULL, NULL, 0, 0 },
};
