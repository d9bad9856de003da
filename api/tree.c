/* tree.c -- tree listings with absolute Link pagination, paths-info, and
 * repo info (GET /api/{type}s/{ns}/{name}[/revision/{rev}]). */
#include "api/api.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void add_entry_json(struct strbuf *sb, const struct tree_entry *e)
{
	if (e->is_dir) {
		strbuf_adds(sb, "{\"type\":\"directory\",\"oid\":\"");
		strbuf_adds(sb, e->oid);
		strbuf_adds(sb, "\",\"size\":0,\"path\":");
		strbuf_add_json_quoted(sb, e->path);
		strbuf_adds(sb, "}");
		return;
	}
	strbuf_addf(sb, "{\"type\":\"file\",\"oid\":\"%s\",\"size\":%" PRIu64 ",\"path\":", e->oid, e->size);
	strbuf_add_json_quoted(sb, e->path);
	if (e->is_lfs)
		strbuf_addf(sb, ",\"lfs\":{\"oid\":\"%s\",\"size\":%" PRIu64 ",\"pointerSize\":%" PRIu64 "}",
			    e->lfs_oid, e->size, e->pointer_size);
	strbuf_adds(sb, "}");
}

/* The cache key of a tree page: everything the page is a function of. */
static void tree_page_key(struct strbuf *key, const struct repo_handle *h, const char *sha, int recursive,
			  int expand, long limit, const char *cursor, const char *base, const char *path)
{
	strbuf_grow(key, 192);
	strbuf_adds(key, "T|");
	strbuf_add_int(key, h->record.id);
	strbuf_adds(key, "|");
	strbuf_adds(key, h->record.ns);
	strbuf_adds(key, "/");
	strbuf_adds(key, h->record.name);
	strbuf_adds(key, "|");
	strbuf_adds(key, sha);
	strbuf_adds(key, recursive ? "|1" : "|0");
	strbuf_adds(key, expand ? "|1|" : "|0|");
	strbuf_add_int(key, limit);
	strbuf_adds(key, "|");
	strbuf_adds(key, cursor);
	strbuf_adds(key, "|");
	strbuf_adds(key, base);
	strbuf_adds(key, "|");
	strbuf_adds(key, path);
}

/* The arguments of a tree listing, read (and judged) before the revision
 * is resolved; a bad one is answered after it, as the Hub does. */
struct tree_args {
	int recursive, expand;
	long limit;
	const char *cursor;		/* "" for the first page */
	const char *base;		/* request_base_url */
	const char *why;		/* what is wrong with the path */
	int path_ok, limit_ok, cursor_ok;
};

static void tree_args_read(struct request *req, struct tree_args *a)
{
	/* Trailing slashes name the same directory. */
	size_t plen = strlen(req->path);
	while (plen > 0 && req->path[plen - 1] == '/')
		req->path[--plen] = '\0';
	a->path_ok = !req->path[0] || repo_path_validate(req->path, &a->why) == 0;
	a->recursive = request_query_bool(req, "recursive", 0);
	a->expand = request_query_bool(req, "expand", 0);
	a->limit = api_ctx.tree_page_size;
	const char *limit_arg = request_query(req, "limit");
	if (limit_arg)
		a->limit = strtol(limit_arg, NULL, 10);
	a->limit_ok = a->limit >= 1 && a->limit <= 10000;
	/* The cursor is the last path of the previous page, relative to the
	 * listed directory: the next page starts right after it. */
	a->cursor = request_query(req, "cursor");
	a->cursor_ok = !a->cursor || (a->cursor[0] && repo_path_validate(a->cursor, NULL) == 0);
	if (!a->cursor)
		a->cursor = "";
	a->base = request_base_url(req);
}

/* 0, or -1 with 400 answered. */
static int tree_args_check(struct request *req, const struct tree_args *a, enum MHD_Result *result)
{
	if (!a->path_ok)
		*result = respond_error(req, 400, NULL, "invalid path: %s", a->why);
	else if (!a->limit_ok)
		*result = respond_error(req, 400, NULL, "limit must be between 1 and 10000");
	else if (!a->cursor_ok)
		*result = respond_error(req, 400, NULL, "invalid cursor");
	return a->path_ok && a->limit_ok && a->cursor_ok ? 0 : -1;
}

/* The page as the response cache keeps it: the next page's link (when
 * there is more), a line break, the JSON array. */
static void tree_page_text(struct request *req, const struct repo_handle *h, const char *sha, const struct tree_args *a,
			   const struct tree_listing *listing, int more, struct strbuf *page)
{
	if (more && listing->count) {
		/* Absolute, with every query parameter, at the resolved sha so the
		 * pages of one listing can never mix two commits. */
		const char *last = listing->entries[listing->count - 1].path;
		if (req->path[0])
			last += strlen(req->path) + 1;
		strbuf_addf(page, "%s/api/%s/%s/%s/tree/%s", a->base, repo_type_plural(req->type), h->record.ns,
			    h->record.name, sha);
		if (req->path[0]) {
			strbuf_adds(page, "/");
			strbuf_add_urlencoded(page, req->path, 1);
		}
		strbuf_addf(page, "?recursive=%s&expand=%s&limit=%ld&cursor=", a->recursive ? "true" : "false",
			    a->expand ? "true" : "false", a->limit);
		strbuf_add_urlencoded(page, last, 0);
	}
	strbuf_adds(page, "\n[");
	for (size_t i = 0; i < listing->count; i++) {
		if (i > 0)
			strbuf_adds(page, ",");
		add_entry_json(page, &listing->entries[i]);
	}
}

static enum MHD_Result handle_tree(struct request *req)
{
	struct repo_handle h = *req->repo;
	enum MHD_Result result;
	struct tree_args a;
	struct strbuf key = STRBUF_INIT, page = STRBUF_INIT;
	struct tree_listing listing;
	char sha[41];
	int more = 0;
	tree_args_read(req, &a);
	/* A page of a 40-hex revision that is cached was listed before (the
	 * key holds the repo id and the sha): no lookup. */
	if (a.path_ok && a.limit_ok && a.cursor_ok && strlen(req->rev) == 40 && is_lower_hex(req->rev, 40)) {
		tree_page_key(&key, &h, req->rev, a.recursive, a.expand, a.limit, a.cursor, a.base, req->path);
		int answered = respond_cached_listing(req, key.buf, 0, &result);
		strbuf_release(&key);
		if (answered)
			return result;
	}
	if (repo_resolve_or_respond(req, &h, req->rev, sha, &result) < 0 || tree_args_check(req, &a, &result) < 0)
		return result;
	tree_page_key(&key, &h, sha, a.recursive, a.expand, a.limit, a.cursor, a.base, req->path);
	if (respond_cached_listing(req, key.buf, 0, &result))
		goto cleanup;
	int rc = repo_list_tree_page(h.git, sha, req->path, a.recursive, a.cursor, (size_t)a.limit, &listing, &more);
	if (rc == KHUB_ENOTFOUND || rc == KHUB_ENOTDIR)
		result = respond_entry_not_found(req, sha, req->path);
	else if (rc == KHUB_EINVAL)
		result = respond_error(req, 400, NULL, "invalid cursor: not a path of this listing");
	else if (rc < 0)
		result = respond_error(req, 500, NULL, "cannot read tree");
	if (rc < 0)
		goto cleanup;
	tree_page_text(req, &h, sha, &a, &listing, more, &page);
	tree_listing_release(&listing);
	result = respond_new_listing_page(req, key.buf, &page, 0);
cleanup:
	strbuf_release(&key);
	return result;
}

/* paths-info takes a form (huggingface_hub) or JSON (@huggingface/hub). */
static int collect_paths(struct request *req, json_t **paths_out)
{
	json_t *paths = json_array();
	const char *type = request_header(req, "Content-Type");
	const char *body = req->body.buf ? req->body.buf : "";
	if (type && strncmp(type, "application/json", 16) == 0) {
		json_t *doc = json_loadb(body, req->body.len, 0, NULL);
		json_t *list = doc ? json_object_get(doc, "paths") : NULL;
		if (!json_is_array(list)) {
			json_decref(doc);
			json_decref(paths);
			return -1;
		}
		size_t i;
		json_t *v;
		json_array_foreach(list, i, v)
			if (json_is_string(v))
				json_array_append(paths, v);
		json_decref(doc);
	} else {
		char *copy = xstrdup(body), *save = NULL;
		for (char *pair = strtok_r(copy, "&", &save); pair; pair = strtok_r(NULL, "&", &save)) {
			if (strncmp(pair, "paths=", 6) != 0)
				continue;
			char *value = pair + 6;
			for (char *p = value; *p; p++)
				if (*p == '+')
					*p = ' ';
			if (percent_decode_inplace(value) == 0)
				json_array_append_new(paths, json_string(value));
		}
		free(copy);
	}
	*paths_out = paths;
	return 0;
}

static enum MHD_Result handle_paths_info(struct request *req)
{
	struct repo_handle h;
	enum MHD_Result result;
	char sha[41];
	json_t *paths;
	if (req->body_too_large)
		return respond_error(req, 413, NULL, "request body too large");
	h = *req->repo;
	if (repo_resolve_or_respond(req, &h, req->rev, sha, &result) < 0)
		return result;
	if (collect_paths(req, &paths) < 0)
		return respond_error(req, 400, NULL, "body must be a form with paths= or JSON {\"paths\": [...]}");
	struct strbuf out = STRBUF_INIT;
	strbuf_adds(&out, "[");
	size_t i, shown = 0;
	json_t *v;
	json_array_foreach(paths, i, v) {
		const char *path = json_string_value(v);
		struct tree_entry e;
		if (repo_path_validate(path, NULL) < 0 || repo_stat_path(h.git, sha, path, &e) < 0)
			continue;
		if (shown++)
			strbuf_adds(&out, ",");
		add_entry_json(&out, &e);
		tree_entry_release(&e);
	}
	strbuf_adds(&out, "]");
	json_decref(paths);
	enum MHD_Result r = respond_json_text(req, 200, out.buf, out.len);
	strbuf_release(&out);
	return r;
}

static json_t *siblings_of(struct repo_handle *h, const char *sha)
{
	struct tree_listing listing;
	json_t *siblings = json_array();
	if (repo_list_tree(h->git, sha, "", 1, &listing) < 0)
		return siblings;
	for (size_t i = 0; i < listing.count; i++) {
		const struct tree_entry *e = &listing.entries[i];
		if (e->is_dir)
			continue;
		json_t *s = json_pack("{s:s, s:I, s:s}", "rfilename", e->path, "size", (json_int_t)e->size,
				      "blobId", e->oid);
		if (e->is_lfs)
			json_object_set_new(s, "lfs", json_pack("{s:I, s:s, s:I}", "size", (json_int_t)e->size,
								"sha256", e->lfs_oid, "pointerSize",
								(json_int_t)e->pointer_size));
		json_array_append_new(siblings, s);
	}
	tree_listing_release(&listing);
	return siblings;
}

/* The cache key of repo info: everything the answer is a function of. */
static void repo_info_key(struct strbuf *key, const struct request *req, const struct repo_handle *h,
			  const char *sha)
{
	strbuf_grow(key, 160);
	strbuf_adds(key, "I|");
	strbuf_add_int(key, h->record.id);
	strbuf_adds(key, "|");
	strbuf_add_int(key, (int)req->type);
	strbuf_adds(key, "|");
	strbuf_add_int(key, (int)h->record.type);
	strbuf_adds(key, "|");
	strbuf_adds(key, sha);
	strbuf_adds(key, "|");
	strbuf_add_int(key, (int64_t)h->record.last_modified);
	strbuf_adds(key, "|");
	strbuf_add_int(key, h->record.downloads);
	strbuf_adds(key, h->record.private ? "|1|" : "|0|");
	strbuf_adds(key, h->record.ns);
	strbuf_adds(key, "/");
	strbuf_adds(key, h->record.name);
}

static enum MHD_Result handle_repo_info(struct request *req)
{
	struct repo_handle h;
	char sha[41];
	h = *req->repo;
	const char *rev = req->rev ? req->rev : "main";
	/* Kernel info (not /revision/{rev}, which every load calls) lists the
	 * vN versions with their variants, from the variant index. */
	int versions = req->type == REPO_KERNEL && h.record.type == REPO_KERNEL && !req->rev;
	/* Everything else is a function of the sha and the record: cached (the
	 * hot path of every get_kernel). A 40-hex revision whose answer is
	 * cached was found in this repo before (the key holds the repo id and
	 * the sha; commits are never removed from a repo): no lookup. */
	struct strbuf key = STRBUF_INIT;
	enum MHD_Result r;
	if (!versions && strlen(rev) == 40 && is_lower_hex(rev, 40)) {
		repo_info_key(&key, req, &h, rev);
		int answered = respond_cached_json(req, key.buf, &r);
		strbuf_release(&key);
		if (answered)
			return r;
	}
	int have_sha = repo_resolve_revision(h.git, rev, sha) == 0;
	if (!have_sha && req->rev)
		return respond_revision_not_found(req, req->rev);
	if (have_sha && !versions) {
		repo_info_key(&key, req, &h, sha);
		if (respond_cached_json(req, key.buf, &r)) {
			strbuf_release(&key);
			return r;
		}
	}
	char id[2 * REPO_NAME_MAX + 2], modified[32], rid[24];
	snprintf(id, sizeof(id), "%s/%s", h.record.ns, h.record.name);
	snprintf(rid, sizeof(rid), "%" PRId64, h.record.id);
	format_iso8601(h.record.last_modified, modified);
	json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:b, s:b, s:b, s:I, s:i, s:[], s:s}",
				 "_id", rid, "id", id, "author", h.record.ns, "lastModified", modified,
				 "private", h.record.private, "gated", 0, "disabled", 0,
				 "downloads", (json_int_t)h.record.downloads, "likes", 0, "tags",
				 "repoType", repo_type_name(h.record.type));
	if (have_sha)
		json_object_set_new(body, "sha", json_string(sha));
	/* Kernel repos never carry siblings (huggingface_hub 1.10-1.21 crash on
	 * them); model, dataset and space answers do, as on the Hub. */
	if (req->type != REPO_KERNEL && have_sha)
		json_object_set_new(body, "siblings", siblings_of(&h, sha));
	if (versions)
		json_object_set_new(body, "versions", kernel_versions_json(&h));
	if (!key.len)
		return respond_json(req, 200, body);
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!text) {
		strbuf_release(&key);
		return respond_error(req, 500, NULL, "cannot encode response");
	}
	response_cache_put(key.buf, text, strlen(text));
	strbuf_release(&key);
	r = respond_json_text(req, 200, text, strlen(text));
	free(text);
	return r;
}

const struct route tree_routes[] = {
	{ METHOD_GET | METHOD_HEAD, "/api/{type}/{ns}/{name}/tree/{rev}/{path*}", handle_tree, 0, 0,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_POST, "/api/{type}/{ns}/{name}/paths-info/{rev}", handle_paths_info, ROUTE_BODY, 0,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/api/{type}/{ns}/{name}/revision/{rev}", handle_repo_info, 0, 0,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/api/{type}/{ns}/{name}", handle_repo_info, 0, 0, NULL, ACCESS_REPO_READ },
	{ 0, NULL, NULL, 0, 0 },
};
