/* resolve.c -- HEAD/GET /{prefix}{ns}/{name}/resolve/{rev}/{path}: file
 * bytes with X-Repo-Commit, the Hub's ETag rule (git blob sha1 for regular
 * files, sha256 for LFS), real sizes on HEAD, and single Range requests.
 * LFS bodies go out with sendfile from the object store, only when the
 * object is linked to the repo being read (lfs_repo_objects). */
#include "api/api.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define SMALL_FILE_CACHE_MAX (256 * 1024)

struct file_meta {
	int is_dir;
	int is_lfs;
	char oid[41];
	char lfs_oid[65];
	uint64_t size;
	int linked;		/* LFS: the object is linked to the repo (only positives are cached) */
	int stored;		/* LFS: the object is in the store with this size (objects are never
				 * removed: a garbage collector must empty the response cache) */
	uint64_t cached_body;	/* bytes of the body that follow in the cache value */
};

static const char *content_type_for(const char *path)
{
	static const struct { const char *ext, *type; } types[] = {
		{ ".json", "application/json" },
		{ ".py", "text/plain; charset=utf-8" },
		{ ".md", "text/markdown; charset=utf-8" },
		{ ".txt", "text/plain; charset=utf-8" },
		{ ".toml", "text/plain; charset=utf-8" },
		{ ".gitattributes", "text/plain; charset=utf-8" },
	};
	size_t len = strlen(path);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		size_t n = strlen(types[i].ext);
		if (len >= n && strcmp(path + len - n, types[i].ext) == 0)
			return types[i].type;
	}
	return "application/octet-stream";
}

/* What a page route (the web UI's same-origin file path) sends a browser:
 * images and plain text inline, everything else, SVG and HTML included,
 * as a download; every answer also carries a sandbox CSP, so even a file
 * opened directly runs no script with this site's cookies. */
static const struct page_file_type {
	const char *ext, *type;
	int shown_inline;
} page_file_types[] = {
	{ ".png", "image/png", 1 },
	{ ".jpg", "image/jpeg", 1 },
	{ ".jpeg", "image/jpeg", 1 },
	{ ".gif", "image/gif", 1 },
	{ ".webp", "image/webp", 1 },
	{ ".avif", "image/avif", 1 },
	{ ".svg", "image/svg+xml", 0 },	/* an <img> shows it; opened, it is a download */
	{ ".json", "application/json", 1 },
	{ ".md", "text/plain; charset=utf-8", 1 },
	{ ".txt", "text/plain; charset=utf-8", 1 },
	{ ".py", "text/plain; charset=utf-8", 1 },
	{ ".toml", "text/plain; charset=utf-8", 1 },
	{ ".lock", "text/plain; charset=utf-8", 1 },
	{ ".gitattributes", "text/plain; charset=utf-8", 1 },
};

static const struct page_file_type *page_file_type_for(const char *path)
{
	static const struct page_file_type other = { "", "application/octet-stream", 0 };
	size_t len = strlen(path);
	for (size_t i = 0; i < sizeof(page_file_types) / sizeof(page_file_types[0]); i++) {
		size_t n = strlen(page_file_types[i].ext);
		if (len >= n && strcasecmp(path + len - n, page_file_types[i].ext) == 0)
			return &page_file_types[i];
	}
	return &other;
}

static char *describe_key(const struct repo_handle *h, const char *sha, const char *path)
{
	struct strbuf key = STRBUF_INIT;
	strbuf_grow(&key, 48 + strlen(path));
	strbuf_adds(&key, "F|");
	strbuf_add_int(&key, h->record.id);
	strbuf_adds(&key, "|");
	strbuf_adds(&key, sha);
	strbuf_adds(&key, "|");
	strbuf_adds(&key, path);
	return strbuf_detach(&key, NULL);
}

/* Describe path at sha (and keep small regular bodies), through the cache.
 * Returns the cache value (caller frees; *len_out its length) whose head is
 * a struct file_meta. */
static char *describe_file(struct repo_handle *h, const char *sha, const char *path, size_t *len_out, int *rc_out)
{
	char *key = describe_key(h, sha, path);
	size_t len;
	char *value = response_cache_get(key, &len);
	if (value) {
		free(key);
		*len_out = len;
		*rc_out = 0;
		return value;
	}
	struct tree_entry e;
	int rc = repo_stat_path(h->git, sha, path, &e);
	if (rc < 0) {
		free(key);
		*rc_out = rc;
		return NULL;
	}
	struct file_meta meta;
	memset(&meta, 0, sizeof(meta));
	meta.is_dir = e.is_dir;
	meta.is_lfs = e.is_lfs;
	memcpy(meta.oid, e.oid, sizeof(meta.oid));
	memcpy(meta.lfs_oid, e.lfs_oid, sizeof(meta.lfs_oid));
	meta.size = e.size;
	tree_entry_release(&e);
	char *body = NULL;
	size_t body_len = 0;
	if (!meta.is_dir && !meta.is_lfs && meta.size <= SMALL_FILE_CACHE_MAX &&
	    repo_read_blob(h->git, meta.oid, SMALL_FILE_CACHE_MAX, &body, &body_len) == 0)
		meta.cached_body = body_len;
	len = sizeof(meta) + body_len;
	value = xmalloc(len + 1);
	memcpy(value, &meta, sizeof(meta));
	if (body_len)
		memcpy(value + sizeof(meta), body, body_len);
	free(body);
	response_cache_put(key, value, len);
	free(key);
	*len_out = len;
	*rc_out = 0;
	return value;
}

/* Downloading a file from a mirror's upstream may take minutes: it runs on
 * a background thread, once per repo and object however many requests want
 * it, while the requests wait parked. */
struct fetch_job {
	int64_t repo_id;
	char sha[41];
	char *path;
	char oid[65];
	uint64_t size;
};

static int fetch_job_run(void *arg)
{
	struct fetch_job *j = arg;
	return api_ctx.lazy_fetch(j->repo_id, j->sha, j->path, j->oid, j->size, api_ctx.lfs);
}

static void fetch_job_free(void *arg)
{
	struct fetch_job *j = arg;
	free(j->path);
	free(j);
}

/* 0 when the fetch this request waited for ended (*fetch_rc its result),
 * else the request was parked or answered: return *result. */
static int lazy_fetch_background(struct request *req, const struct repo_handle *h, const char *sha, const char *path,
				 const struct file_meta *meta, int *fetch_rc, enum MHD_Result *result)
{
	struct fetch_job *j = xcalloc(1, sizeof(*j));
	j->repo_id = h->record.id;
	memcpy(j->sha, sha, sizeof(j->sha));
	j->path = xstrdup(path);
	memcpy(j->oid, meta->lfs_oid, sizeof(j->oid));
	j->size = meta->size;
	char key[112];
	snprintf(key, sizeof(key), "lfs|%" PRId64 "|%s", h->record.id, meta->lfs_oid);
	return work_queue_run(req, key, fetch_job_run, j, fetch_job_free, fetch_rc, result) == 0 ? 0 : -1;
}

#define LFS_WAITING 2

/* Keep what was learnt about meta (linked, stored) in the file's cached
 * description (value, len), so the next request skips the check. */
static void remember_meta(struct repo_handle *h, const char *sha, const char *path, const struct file_meta *meta,
			  char *value, size_t len)
{
	memcpy(value, meta, sizeof(*meta));
	char *key = describe_key(h, sha, path);
	response_cache_put(key, value, len);
	free(key);
}

/* May this repo serve the LFS object of meta? A pointer in a repo's tree is
 * not enough: it may have been planted (a pointer-shaped file written before
 * commits checked them) to read another repo's private object. 1 yes (and the
 * cached description says so from now on), 0 no, KHUB_EDB, LFS_WAITING (the
 * request waits for a download or was answered: return *result). A mirrored
 * repo with lazy fetching proves the object by downloading it from its
 * upstream (verified, then linked). Positives stay cached for the life of the
 * process: links are only removed with their repo (ids are never reused);
 * `khub check lfs-pointers` removes none. */
static int lfs_usable(struct request *req, struct repo_handle *h, const char *sha, const char *path,
		      struct file_meta *meta, char *value, size_t len, int *fetch_rc, enum MHD_Result *result)
{
	*fetch_rc = 0;
	if (meta->linked)
		return 1;
	int linked = db_lfs_linked(h->record.id, meta->lfs_oid);
	if (linked < 0)
		return KHUB_EDB;
	if (!linked && h->record.mirrored && api_ctx.lazy_fetch) {
		int frc;
		if (lazy_fetch_background(req, h, sha, path, meta, &frc, result) < 0)
			return LFS_WAITING;
		if (frc == KHUB_EDB)
			return KHUB_EDB;
		*fetch_rc = frc;
		linked = frc == 0;
	}
	if (!linked)
		return 0;
	meta->linked = 1;
	remember_meta(h, sha, path, meta, value, len);
	return 1;
}

static ssize_t no_body_for_head(void *cls, uint64_t pos, char *buf, size_t max)
{
	return MHD_CONTENT_READER_END_WITH_ERROR;
}

static void add_file_headers(struct MHD_Response *resp, const struct file_meta *meta, const char *sha,
			     const char *path, int for_page)
{
	char etag[80], size[24];
	snprintf(etag, sizeof(etag), "\"%s\"", meta->is_lfs ? meta->lfs_oid : meta->oid);
	snprintf(size, sizeof(size), "%" PRIu64, meta->size);
	MHD_add_response_header(resp, "X-Repo-Commit", sha);
	MHD_add_response_header(resp, "ETag", etag);
	if (meta->is_lfs) {
		MHD_add_response_header(resp, "X-Linked-Etag", etag);
		MHD_add_response_header(resp, "X-Linked-Size", size);
	}
	MHD_add_response_header(resp, "Accept-Ranges", "bytes");
	const struct page_file_type *shown = for_page ? page_file_type_for(path) : NULL;
	MHD_add_response_header(resp, "Content-Type", shown ? shown->type : content_type_for(path));
	if (shown)	/* beside the page's own CSP (http_ctx.page_headers): both apply */
		MHD_add_response_header(resp, "Content-Security-Policy", "sandbox; default-src 'none'; "
					"img-src 'self'; style-src 'unsafe-inline'");
	else		/* a page answer's Cache-Control comes with the page headers */
		MHD_add_response_header(resp, "Cache-Control", "private, max-age=0, must-revalidate");
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	struct strbuf cd = STRBUF_INIT;
	strbuf_adds(&cd, !shown || shown->shown_inline ? "inline" : "attachment");
	strbuf_adds(&cd, "; filename*=UTF-8''");
	strbuf_add_urlencoded(&cd, base, 0);
	MHD_add_response_header(resp, "Content-Disposition", cd.buf);
	strbuf_release(&cd);
}

/* A lazily mirrored file the upstream could not give (frc KHUB_EIO) or gave
 * wrong (KHUB_EINVAL): a passing failure, 503. */
static enum MHD_Result respond_lazy_fetch_failed(struct request *req, int frc)
{
	return respond_unavailable(req, "%s is not mirrored here yet and the upstream hub could not provide it "
				   "(%s); try again later", req->path,
				   frc == KHUB_EIO ? "unreachable" : "its bytes failed verification");
}

/* A plain HEAD (no Range) answered with the answer its thread kept under
 * key, the file's description key (api/response_memo.c): 1 with *result
 * set and the download counted, 0 when none is kept. */
static int respond_kept_head(struct request *req, const struct repo_handle *h, const char *sha, const char *key,
			     enum MHD_Result *result)
{
	if (!respond_memo(req, key, result))
		return 0;
	download_stats_note(req, h, sha, 0);
	return 1;
}

/* The file answer; for_page: the web UI's page route (the session's
 * caller, page headers), which never counts a download and keeps no HEAD
 * answer. */
static enum MHD_Result resolve_file(struct request *req, int for_page)
{
	struct repo_handle h;
	enum MHD_Result result;
	char sha[41];
	const char *why;
	int rc;
	h = *req->repo;
	size_t value_len;
	char *value = NULL;
	/* A plain HEAD's answer is kept whole (api/response_memo.c) under
	 * the file's key: only Date and X-Request-Id change between two. */
	int plain_head = !for_page && req->method == METHOD_HEAD && !request_header(req, "Range");
	/* A 40-hex revision whose file description is cached was resolved
	 * before (the key holds the repo id and the sha): no lookup. */
	if (strlen(req->rev) == 40 && is_lower_hex(req->rev, 40)) {
		char *key = describe_key(&h, req->rev, req->path);
		if (plain_head && respond_kept_head(req, &h, req->rev, key, &result)) {
			free(key);
			return result;
		}
		value = response_cache_get(key, &value_len);
		free(key);
		if (value)
			memcpy(sha, req->rev, 41);
	}
	if (!value) {
		if (repo_resolve_or_respond(req, &h, req->rev, sha, &result) < 0)
			return result;
		if (repo_path_validate(req->path, &why) < 0)
			return respond_entry_not_found(req, sha, req->path);
		if (plain_head && strcmp(sha, req->rev) != 0) {
			char *key = describe_key(&h, sha, req->path);
			int kept = respond_kept_head(req, &h, sha, key, &result);
			free(key);
			if (kept)
				return result;
		}
		value = describe_file(&h, sha, req->path, &value_len, &rc);
	}
	if (!value) {
		if (rc == KHUB_ENOTFOUND)
			return respond_entry_not_found(req, sha, req->path);
		return respond_error(req, 500, NULL, "cannot read file");
	}
	struct file_meta meta;
	memcpy(&meta, value, sizeof(meta));
	if (meta.is_dir) {
		free(value);
		return respond_entry_not_found(req, sha, req->path);
	}
	if (meta.is_lfs) {
		int frc;
		int usable = lfs_usable(req, &h, sha, req->path, &meta, value, value_len, &frc, &result);
		if (usable <= 0 || usable == LFS_WAITING)
			free(value);
		if (usable == LFS_WAITING)
			return result;
		if (usable < 0)
			return respond_db_unavailable(req);
		if (usable == 0 && (frc == KHUB_EIO || frc == KHUB_EINVAL))
			return respond_lazy_fetch_failed(req, frc);
		if (usable == 0)
			return respond_error(req, 404, "EntryNotFound",
					     "the content of %s (LFS object %s) is not available in this repo",
					     req->path, meta.lfs_oid);
	}

	uint64_t from = 0, to = meta.size ? meta.size - 1 : 0;
	int ranged = http_range_parse(request_header(req, "Range"), meta.size, &from, &to);
	int empty_probe = 0;
	if (ranged < 0 && meta.size == 0) {
		/* No range of an empty file is satisfiable, but the JS client's
		 * `Range: bytes=0-0` probe (fileDownloadInfo, WebBlob.create)
		 * throws on anything but 2xx and takes the size from
		 * Content-Range: answer the whole (empty) file and say its size. */
		ranged = 0;
		empty_probe = 1;
	}
	if (ranged < 0) {
		free(value);
		char cr[48];
		snprintf(cr, sizeof(cr), "bytes */%" PRIu64, meta.size);
		struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
		MHD_add_response_header(resp, "Content-Range", cr);
		MHD_add_response_header(resp, "X-Repo-Commit", sha);
		return respond(req, 416, resp);
	}
	uint64_t count = meta.size ? to - from + 1 : 0;

	struct MHD_Response *resp = NULL;
	uint64_t head_size;
	if (meta.is_lfs && req->method == METHOD_HEAD && !meta.stored &&
	    lfs_store_stat(api_ctx.lfs, meta.lfs_oid, &head_size) == 0 && head_size == meta.size) {
		/* objects are never removed (a garbage collector must empty
		 * the response cache): the next HEAD needs no stat */
		meta.stored = 1;
		remember_meta(&h, sha, req->path, &meta, value, value_len);
	}
	int bodiless = req->method == METHOD_HEAD && (!meta.is_lfs || meta.stored);
	if (bodiless) {
		/* HEAD: the size is known, no body is sent: no need to read the
		 * blob or open the object (a callback response announces the
		 * size; libmicrohttpd never reads a HEAD body; its buffer is
		 * allocated and zeroed with the response, so it is one byte, not
		 * a page) */
		resp = MHD_create_response_from_callback(count, 1, no_body_for_head, NULL, NULL);
	} else if (meta.is_lfs) {
		int fd;
		uint64_t stored;
		int have = lfs_store_open_object(api_ctx.lfs, meta.lfs_oid, &fd, &stored) == 0;
		if (!have && h.record.mirrored && api_ctx.lazy_fetch) {
			/* a variant outside the mirror's eager selection: fetch it now */
			int frc;
			if (lazy_fetch_background(req, &h, sha, req->path, &meta, &frc, &result) < 0) {
				free(value);
				return result;
			}
			if (frc == KHUB_EIO || frc == KHUB_EINVAL) {
				free(value);
				return respond_lazy_fetch_failed(req, frc);
			}
			have = lfs_store_open_object(api_ctx.lfs, meta.lfs_oid, &fd, &stored) == 0;
		}
		if (!have || stored != meta.size) {
			if (have)
				close(fd);
			free(value);
			return respond_error(req, 404, "EntryNotFound",
					     "the content of %s (LFS object %s) is not stored on this server",
					     req->path, meta.lfs_oid);
		}
		resp = MHD_create_response_from_fd_at_offset64(count, fd, from);
	} else if (meta.cached_body == meta.size) {
		resp = MHD_create_response_from_buffer(count, value + sizeof(meta) + from, MHD_RESPMEM_MUST_COPY);
	} else {
		char *data;
		size_t len;
		if (repo_read_blob(h.git, meta.oid, (size_t)-1, &data, &len) < 0) {
			free(value);
			return respond_error(req, 500, NULL, "cannot read file");
		}
		resp = MHD_create_response_from_buffer(count, data + from, MHD_RESPMEM_MUST_COPY);
		free(data);
	}
	if (!resp) {
		free(value);
		return respond_error(req, 500, NULL, "cannot build response");
	}
	add_file_headers(resp, &meta, sha, req->path, for_page);
	free(value);
	if (empty_probe)
		MHD_add_response_header(resp, "Content-Range", "bytes */0");
	if (ranged > 0) {
		char cr[80];
		snprintf(cr, sizeof(cr), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, from, to, meta.size);
		MHD_add_response_header(resp, "Content-Range", cr);
	}
	req->bytes_out = req->method == METHOD_HEAD ? 0 : count;
	if (!for_page)
		download_stats_note(req, &h, sha, ranged > 0);
	if (plain_head && bodiless && !ranged && !empty_probe) {
		char *key = describe_key(&h, sha, req->path);
		result = respond_and_memo(req, key, 200, resp);
		free(key);
		return result;
	}
	return respond(req, ranged > 0 ? 206 : 200, resp);
}

static enum MHD_Result handle_resolve(struct request *req)
{
	return resolve_file(req, 0);
}

enum MHD_Result resolve_for_page(struct request *req)
{
	return resolve_file(req, 1);
}

const struct route resolve_routes[] = {
	{ METHOD_GET | METHOD_HEAD, "/{tprefix}/{ns}/{name}/resolve/{rev}/{path*}", handle_resolve, 0, 0,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/{tprefix}/{ns}/{name}/raw/{rev}/{path*}", handle_resolve, 0, 0,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/{ns}/{name}/resolve/{rev}/{path*}", handle_resolve, 0, REPO_MODEL,
	  NULL, ACCESS_REPO_READ },
	{ METHOD_GET | METHOD_HEAD, "/{ns}/{name}/raw/{rev}/{path*}", handle_resolve, 0, REPO_MODEL,
	  NULL, ACCESS_REPO_READ },
	{ 0, NULL, NULL, 0, 0 },
};
