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
 * key, the file's description key (http/response_memo.c): 1 with *result
 * set and the download counted, 0 when none is kept. */
static int respond_kept_head(struct request *req, const struct repo_handle *h, const char *sha, const char *key,
			     enum MHD_Result *result)
{
	if (!respond_memo(req, key, result))
		return 0;
	download_stats_note(req, h, sha, 0);
	return 1;
}

/* What resolve_file works out, step by step, for one answer. */
struct file_answer {
	struct repo_handle h;
	int for_page;			/* the web UI's page route */
	int plain_head;			/* HEAD without Range: its answer is kept whole */
	char sha[41];
	char *value;			/* the file's description (owned) */
	size_t value_len;
	struct file_meta meta;		/* copied from value */
	uint64_t from, to, count;	/* the bytes sent */
	int ranged;			/* 1: a satisfiable Range (206) */
	int empty_probe;		/* Range on an empty file: answered whole */
	int bodiless;			/* HEAD: the size is known, nothing is read */
	int redirected;			/* GET answered 302 to a presigned object URL */
};

/* The file's description: from the response cache for a 40-hex revision,
 * else resolved and described (a plain HEAD kept by this thread answers
 * at once). 0 with fa->value and fa->meta (a file), -1 when answered. */
static int file_describe(struct request *req, struct file_answer *fa, enum MHD_Result *result)
{
	const char *why;
	int rc = 0;
	/* A 40-hex revision whose file description is cached was resolved
	 * before (the key holds the repo id and the sha): no lookup. */
	if (strlen(req->rev) == 40 && is_lower_hex(req->rev, 40)) {
		char *key = describe_key(&fa->h, req->rev, req->path);
		int kept = fa->plain_head && respond_kept_head(req, &fa->h, req->rev, key, result);
		if (!kept)
			fa->value = response_cache_get(key, &fa->value_len);
		free(key);
		if (kept)
			return -1;
		if (fa->value)
			memcpy(fa->sha, req->rev, 41);
	}
	if (!fa->value) {
		if (repo_resolve_or_respond(req, &fa->h, req->rev, fa->sha, result) < 0)
			return -1;
		if (repo_path_validate(req->path, &why) < 0) {
			*result = respond_entry_not_found(req, fa->sha, req->path);
			return -1;
		}
		if (fa->plain_head && strcmp(fa->sha, req->rev) != 0) {
			char *key = describe_key(&fa->h, fa->sha, req->path);
			int kept = respond_kept_head(req, &fa->h, fa->sha, key, result);
			free(key);
			if (kept)
				return -1;
		}
		fa->value = describe_file(&fa->h, fa->sha, req->path, &fa->value_len, &rc);
	}
	if (!fa->value) {
		*result = rc == KHUB_ENOTFOUND ? respond_entry_not_found(req, fa->sha, req->path)
					       : respond_error(req, 500, NULL, "cannot read file");
		return -1;
	}
	memcpy(&fa->meta, fa->value, sizeof(fa->meta));
	if (fa->meta.is_dir) {
		*result = respond_entry_not_found(req, fa->sha, req->path);
		return -1;
	}
	return 0;
}

/* An LFS file's content must be usable in this repo (lfs_usable): 0, or
 * -1 when answered (parked for a lazy fetch included). */
static int file_lfs_check(struct request *req, struct file_answer *fa, enum MHD_Result *result)
{
	if (!fa->meta.is_lfs)
		return 0;
	int frc;
	int usable = lfs_usable(req, &fa->h, fa->sha, req->path, &fa->meta, fa->value, fa->value_len, &frc, result);
	if (usable == LFS_WAITING)
		return -1;
	if (usable < 0)
		*result = respond_db_unavailable(req);
	else if (usable == 0 && (frc == KHUB_EIO || frc == KHUB_EINVAL))
		*result = respond_lazy_fetch_failed(req, frc);
	else if (usable == 0)
		*result = respond_error(req, 404, "EntryNotFound",
					"the content of %s (LFS object %s) is not available in this repo", req->path,
					fa->meta.lfs_oid);
	return usable == 1 ? 0 : -1;
}

/* The bytes asked for (Range): 0 with from, to, count, ranged, or -1 with
 * 416 answered. */
static int file_range(struct request *req, struct file_answer *fa, enum MHD_Result *result)
{
	uint64_t size = fa->meta.size;
	fa->from = 0;
	fa->to = size ? size - 1 : 0;
	fa->ranged = http_range_parse(request_header(req, "Range"), size, &fa->from, &fa->to);
	if (fa->ranged < 0 && size == 0) {
		/* No range of an empty file is satisfiable, but the JS client's
		 * `Range: bytes=0-0` probe (fileDownloadInfo, WebBlob.create)
		 * throws on anything but 2xx and takes the size from
		 * Content-Range: answer the whole (empty) file and say its size. */
		fa->ranged = 0;
		fa->empty_probe = 1;
	}
	if (fa->ranged < 0) {
		char cr[48];
		snprintf(cr, sizeof(cr), "bytes */%" PRIu64, size);
		struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
		MHD_add_response_header(resp, "Content-Range", cr);
		MHD_add_response_header(resp, "X-Repo-Commit", fa->sha);
		*result = respond(req, 416, resp);
		return -1;
	}
	fa->count = size ? fa->to - fa->from + 1 : 0;
	return 0;
}

/* An LFS file's body from the store (a mirror fetches a variant outside
 * its eager selection now): 0 with *resp, -1 when answered. */
static int file_lfs_body(struct request *req, struct file_answer *fa, struct MHD_Response **resp,
			 enum MHD_Result *result)
{
	int frc;
	uint64_t stored;
	char *url;
	/* lfs_s3_redirect: the object store serves the bytes (and the Range) */
	if (api_ctx.lfs_redirect && req->method == METHOD_GET && !fa->for_page &&
	    lfs_store_stat(api_ctx.lfs, fa->meta.lfs_oid, &stored) == 0 && stored == fa->meta.size &&
	    lfs_store_presign(api_ctx.lfs, fa->meta.lfs_oid, api_ctx.lfs_url_ttl, &url) == 0) {
		*resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
		MHD_add_response_header(*resp, "Location", url);
		free(url);
		fa->redirected = 1;
		return 0;
	}
	int orc = http_lfs_object_response(req, api_ctx.lfs, fa->meta.lfs_oid, fa->meta.size, fa->from, fa->count,
					   resp);
	if (orc == KHUB_ENOTFOUND && fa->h.record.mirrored && api_ctx.lazy_fetch) {
		if (lazy_fetch_background(req, &fa->h, fa->sha, req->path, &fa->meta, &frc, result) < 0)
			return -1;
		if (frc == KHUB_EIO || frc == KHUB_EINVAL) {
			*result = respond_lazy_fetch_failed(req, frc);
			return -1;
		}
		orc = http_lfs_object_response(req, api_ctx.lfs, fa->meta.lfs_oid, fa->meta.size, fa->from,
					       fa->count, resp);
	}
	if (orc == 1) {	/* parked until the store answers */
		*result = MHD_YES;
		return -1;
	}
	if (orc == KHUB_EBUSY) {	/* lfs_s3_streams_max reads under way: none started */
		*result = respond_unavailable(req, "too many LFS reads under way on this server, retry later");
		return -1;
	}
	/* a remote store (S3) that could not be reached or failed: a passing
	 * outage, never an answer that the object is missing */
	if (orc == KHUB_EIO && lfs_store_remote(api_ctx.lfs)) {
		*result = respond_unavailable(req, "the LFS store could not be reached for %s (LFS object %s); "
					      "retry later", req->path, fa->meta.lfs_oid);
		return -1;
	}
	/* the store failed (local: a file that changed and no longer hashes
	 * to its oid, now quarantined, or an unreadable one): never those
	 * bytes */
	if (orc == KHUB_EIO || orc == KHUB_EINVAL) {
		*result = respond_error(req, 502, NULL,
					"the LFS store could not give %s intact (see the server log)", fa->meta.lfs_oid);
		return -1;
	}
	if (orc < 0) {
		*result = respond_error(req, 404, "EntryNotFound",
					"the content of %s (LFS object %s) is not stored on this server", req->path,
					fa->meta.lfs_oid);
		return -1;
	}
	return 0;
}

/* The response with its body (none for a HEAD whose size is known): 0
 * with *resp, -1 when answered. */
static int file_body(struct request *req, struct file_answer *fa, struct MHD_Response **resp,
		     enum MHD_Result *result)
{
	uint64_t head_size;
	if (fa->meta.is_lfs && req->method == METHOD_HEAD && !fa->meta.stored &&
	    lfs_store_stat(api_ctx.lfs, fa->meta.lfs_oid, &head_size) == 0 && head_size == fa->meta.size) {
		/* objects are never removed (a garbage collector must empty
		 * the response cache): the next HEAD needs no stat */
		fa->meta.stored = 1;
		remember_meta(&fa->h, fa->sha, req->path, &fa->meta, fa->value, fa->value_len);
	}
	fa->bodiless = req->method == METHOD_HEAD && (!fa->meta.is_lfs || fa->meta.stored);
	if (fa->bodiless) {
		/* HEAD: the size is known, no body is sent: no need to read the
		 * blob or open the object (a callback response announces the
		 * size; libmicrohttpd never reads a HEAD body; its buffer is
		 * allocated and zeroed with the response, so it is one byte, not
		 * a page) */
		*resp = MHD_create_response_from_callback(fa->count, 1, no_body_for_head, NULL, NULL);
	} else if (fa->meta.is_lfs) {
		if (file_lfs_body(req, fa, resp, result) < 0)
			return -1;
	} else if (fa->meta.cached_body == fa->meta.size) {
		*resp = MHD_create_response_from_buffer(fa->count, fa->value + sizeof(fa->meta) + fa->from,
							MHD_RESPMEM_MUST_COPY);
	} else {
		char *data;
		size_t len;
		if (repo_read_blob(fa->h.git, fa->meta.oid, (size_t)-1, &data, &len) < 0) {
			*result = respond_error(req, 500, NULL, "cannot read file");
			return -1;
		}
		*resp = MHD_create_response_from_buffer(fa->count, data + fa->from, MHD_RESPMEM_MUST_COPY);
		free(data);
	}
	if (!*resp) {
		*result = respond_error(req, 500, NULL, "cannot build response");
		return -1;
	}
	return 0;
}

/* The file's headers, the download counted, and the answer (a plain HEAD's
 * kept for the next one); takes resp. */
static enum MHD_Result file_send(struct request *req, struct file_answer *fa, struct MHD_Response *resp)
{
	add_file_headers(resp, &fa->meta, fa->sha, req->path, fa->for_page);
	if (fa->empty_probe)
		MHD_add_response_header(resp, "Content-Range", "bytes */0");
	if (fa->ranged > 0 && !fa->redirected) {
		char cr[80];
		snprintf(cr, sizeof(cr), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, fa->from, fa->to, fa->meta.size);
		MHD_add_response_header(resp, "Content-Range", cr);
	}
	if (fa->redirected) {
		if (!fa->for_page)
			download_stats_note(req, &fa->h, fa->sha, fa->ranged > 0);
		return respond(req, 302, resp);
	}
	req->bytes_out = req->method == METHOD_HEAD ? 0 : fa->count;
	if (!fa->for_page)
		download_stats_note(req, &fa->h, fa->sha, fa->ranged > 0);
	if (fa->plain_head && fa->bodiless && !fa->ranged && !fa->empty_probe) {
		char *key = describe_key(&fa->h, fa->sha, req->path);
		enum MHD_Result result = respond_and_memo(req, key, 200, resp);
		free(key);
		return result;
	}
	return respond(req, fa->ranged > 0 ? 206 : 200, resp);
}

/* The file answer; for_page: the web UI's page route (the session's
 * caller, page headers), which never counts a download and keeps no HEAD
 * answer. */
static enum MHD_Result resolve_file(struct request *req, int for_page)
{
	struct file_answer fa = { .h = *req->repo, .for_page = for_page };
	struct MHD_Response *resp = NULL;
	enum MHD_Result result;
	/* A plain HEAD's answer is kept whole (http/response_memo.c) under
	 * the file's key: only Date and X-Request-Id change between two. */
	fa.plain_head = !for_page && req->method == METHOD_HEAD && !request_header(req, "Range");
	if (file_describe(req, &fa, &result) == 0 && file_lfs_check(req, &fa, &result) == 0 &&
	    file_range(req, &fa, &result) == 0 && file_body(req, &fa, &resp, &result) == 0)
		result = file_send(req, &fa, resp);
	free(fa.value);
	return result;
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
