/* resolve.c -- HEAD/GET /{prefix}{ns}/{name}/resolve/{rev}/{path}: file
 * bytes with X-Repo-Commit, the Hub's ETag rule (git blob sha1 for regular
 * files, sha256 for LFS), real sizes on HEAD, and single Range requests.
 * LFS bodies go out with sendfile from the object store, only when the
 * object is linked to the repo being read (lfs_repo_objects).
 *
 * One request is a pipeline of named steps (resolve_file), each of which
 * goes on (0) or has answered (-1), filling one described answer (struct
 * answer) that http/ builds and queues at the end:
 *
 *   resolve_memo_lookup   40-hex rev: this thread's kept plain-HEAD answer, or the cached description
 *   resolve_revision      rev -> commit sha, path checked (then the kept HEAD at that sha)
 *   resolve_entry         the file's description at sha (response cache; small bodies with it)
 *   resolve_lfs_link      an LFS object must be linked to this repo (+ a mirror's lazy fetch)
 *   resolve_range         Range -> from, to, count; 416
 *   resolve_redirect      lfs_s3_redirect: a GET answered 302 to a presigned URL
 *   resolve_body          HEAD: the size only; LFS: the object (sendfile, or S3 streamed,
 *                         parked); else the blob (cached with the description when small)
 *   resolve_headers       ETag, X-Linked-*, types, Content-Disposition, Content-Range, status,
 *                         and the memo key of a plain HEAD
 *   count_download        the Hub's download count (not for the web UI's page route)
 *   answer_send           (http/answer.c) the response built, headed, kept, queued */
#include "api/api.h"

#include <inttypes.h>
#include <stddef.h>
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

/* What the steps of one request work out, and the answer they describe. */
struct resolve {
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
	char *location;			/* its URL (owned) */
	char *blob;			/* a blob read for this answer (owned) */
	char *memo_key;			/* a plain HEAD's answer is kept under it (owned) */
	struct answer a;
};

/* Step 1. A 40-hex revision whose file description is cached was resolved
 * before (the key holds the repo id and the sha): no lookup; a plain HEAD
 * its thread keeps answers at once. 0 (r->value set when cached), -1 when
 * answered. */
static int resolve_memo_lookup(struct request *req, struct resolve *r, enum MHD_Result *result)
{
	if (strlen(req->rev) != 40 || !is_lower_hex(req->rev, 40))
		return 0;
	char *key = describe_key(&r->h, req->rev, req->path);
	int kept = r->plain_head && respond_kept_head(req, &r->h, req->rev, key, result);
	if (!kept)
		r->value = response_cache_get(key, &r->value_len);
	free(key);
	if (kept)
		return -1;
	if (r->value)
		memcpy(r->sha, req->rev, 41);
	return 0;
}

/* Step 2 (when step 1 found nothing). The revision to its commit sha, the
 * path checked; a plain HEAD kept under that sha answers at once. 0, or -1
 * when answered. */
static int resolve_revision(struct request *req, struct resolve *r, enum MHD_Result *result)
{
	const char *why;
	if (r->value)
		return 0;
	if (repo_resolve_or_respond(req, &r->h, req->rev, r->sha, result) < 0)
		return -1;
	if (repo_path_validate(req->path, &why) < 0) {
		*result = respond_entry_not_found(req, r->sha, req->path);
		return -1;
	}
	if (r->plain_head && strcmp(r->sha, req->rev) != 0) {
		char *key = describe_key(&r->h, r->sha, req->path);
		int kept = respond_kept_head(req, &r->h, r->sha, key, result);
		free(key);
		if (kept)
			return -1;
	}
	return 0;
}

/* Step 3. The file's description at sha (through the response cache): 0
 * with r->value and r->meta (a file), -1 when answered. */
static int resolve_entry(struct request *req, struct resolve *r, enum MHD_Result *result)
{
	int rc = 0;
	if (!r->value)
		r->value = describe_file(&r->h, r->sha, req->path, &r->value_len, &rc);
	if (!r->value) {
		*result = rc == KHUB_ENOTFOUND ? respond_entry_not_found(req, r->sha, req->path)
					       : respond_error(req, 500, NULL, "cannot read file");
		return -1;
	}
	memcpy(&r->meta, r->value, sizeof(r->meta));
	if (r->meta.is_dir) {
		*result = respond_entry_not_found(req, r->sha, req->path);
		return -1;
	}
	return 0;
}

/* Step 4. An LFS file's content must be usable in this repo (lfs_usable;
 * a mirror fetches it lazily): 0, or -1 when answered (parked for a lazy
 * fetch included). */
static int resolve_lfs_link(struct request *req, struct resolve *r, enum MHD_Result *result)
{
	if (!r->meta.is_lfs)
		return 0;
	int frc;
	int usable = lfs_usable(req, &r->h, r->sha, req->path, &r->meta, r->value, r->value_len, &frc, result);
	if (usable == LFS_WAITING)
		return -1;
	if (usable < 0)
		*result = respond_db_unavailable(req);
	else if (usable == 0 && (frc == KHUB_EIO || frc == KHUB_EINVAL))
		*result = respond_lazy_fetch_failed(req, frc);
	else if (usable == 0)
		*result = respond_error(req, 404, "EntryNotFound",
					"the content of %s (LFS object %s) is not available in this repo", req->path,
					r->meta.lfs_oid);
	return usable == 1 ? 0 : -1;
}

/* Step 5. The bytes asked for (Range): 0 with from, to, count, ranged, or
 * -1 with 416 answered. */
static int resolve_range(struct request *req, struct resolve *r, enum MHD_Result *result)
{
	uint64_t size = r->meta.size;
	r->from = 0;
	r->to = size ? size - 1 : 0;
	r->ranged = http_range_parse(request_header(req, "Range"), size, &r->from, &r->to);
	if (r->ranged < 0 && size == 0) {
		/* No range of an empty file is satisfiable, but the JS client's
		 * `Range: bytes=0-0` probe (fileDownloadInfo, WebBlob.create)
		 * throws on anything but 2xx and takes the size from
		 * Content-Range: answer the whole (empty) file and say its size. */
		r->ranged = 0;
		r->empty_probe = 1;
	}
	if (r->ranged < 0) {
		r->a.status = 416;
		answer_headerf(&r->a, "Content-Range", "bytes */%" PRIu64, size);
		answer_header(&r->a, "X-Repo-Commit", r->sha);
		*result = answer_send(req, &r->a);
		return -1;
	}
	r->count = size ? r->to - r->from + 1 : 0;
	return 0;
}

/* Step 6. lfs_s3_redirect: a GET of an LFS object the store holds is
 * answered 302 to a presigned URL (the object store serves the bytes and
 * the Range). Never fails: without a URL the bytes go out from here. */
static void resolve_redirect(struct request *req, struct resolve *r)
{
	uint64_t stored;
	if (!r->meta.is_lfs || !api_ctx.lfs_redirect || req->method != METHOD_GET || r->for_page)
		return;
	if (lfs_store_stat(api_ctx.lfs, r->meta.lfs_oid, &stored) == 0 && stored == r->meta.size &&
	    lfs_store_presign(api_ctx.lfs, r->meta.lfs_oid, api_ctx.lfs_url_ttl, &r->location) == 0) {
		answer_redirect(&r->a, 302, r->location);
		r->redirected = 1;
	}
}

/* Step 7b. An LFS file's body from the store (a mirror fetches a variant
 * outside its eager selection now): 0 with the answer's body, -1 when
 * answered (parked until the store answers included). */
static int resolve_lfs_body(struct request *req, struct resolve *r, enum MHD_Result *result)
{
	int frc;
	const struct file_meta *m = &r->meta;
	int orc = answer_lfs_object(req, &r->a, api_ctx.lfs, m->lfs_oid, m->size, r->from, r->count);
	if (orc == KHUB_ENOTFOUND && r->h.record.mirrored && api_ctx.lazy_fetch) {
		if (lazy_fetch_background(req, &r->h, r->sha, req->path, m, &frc, result) < 0)
			return -1;
		if (frc == KHUB_EIO || frc == KHUB_EINVAL) {
			*result = respond_lazy_fetch_failed(req, frc);
			return -1;
		}
		orc = answer_lfs_object(req, &r->a, api_ctx.lfs, m->lfs_oid, m->size, r->from, r->count);
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
					      "retry later", req->path, m->lfs_oid);
		return -1;
	}
	/* the store failed (local: a file that changed and no longer hashes
	 * to its oid, now quarantined, or an unreadable one): never those
	 * bytes */
	if (orc == KHUB_EIO || orc == KHUB_EINVAL) {
		*result = respond_error(req, 502, NULL, "the LFS store could not give %s intact (see the server log)",
					m->lfs_oid);
		return -1;
	}
	if (orc < 0) {
		*result = respond_error(req, 404, "EntryNotFound",
					"the content of %s (LFS object %s) is not stored on this server", req->path,
					m->lfs_oid);
		return -1;
	}
	return 0;
}

/* Step 7. The body: none for a HEAD whose size is known, the LFS object,
 * or the blob (kept with the description when small). 0, or -1 when
 * answered. */
static int resolve_body(struct request *req, struct resolve *r, enum MHD_Result *result)
{
	uint64_t head_size;
	if (r->redirected)
		return 0;
	if (r->meta.is_lfs && req->method == METHOD_HEAD && !r->meta.stored &&
	    lfs_store_stat(api_ctx.lfs, r->meta.lfs_oid, &head_size) == 0 && head_size == r->meta.size) {
		/* objects are never removed (a garbage collector must empty
		 * the response cache): the next HEAD needs no stat */
		r->meta.stored = 1;
		remember_meta(&r->h, r->sha, req->path, &r->meta, r->value, r->value_len);
	}
	r->bodiless = req->method == METHOD_HEAD && (!r->meta.is_lfs || r->meta.stored);
	if (r->bodiless) {
		/* the size is known: no blob read, no object opened */
		answer_body_size_only(&r->a, r->count);
		return 0;
	}
	if (r->meta.is_lfs)
		return resolve_lfs_body(req, r, result);
	if (r->meta.cached_body == r->meta.size) {
		answer_body_copy(&r->a, r->value + sizeof(r->meta) + r->from, r->count);
		return 0;
	}
	size_t len;
	if (repo_read_blob(r->h.git, r->meta.oid, (size_t)-1, &r->blob, &len) < 0) {
		*result = respond_error(req, 500, NULL, "cannot read file");
		return -1;
	}
	answer_body_copy(&r->a, r->blob + r->from, r->count);
	return 0;
}

/* Step 8. The file's headers, the status, and whether the answer is kept
 * (a plain HEAD's, for the next one). */
static void resolve_headers(struct request *req, struct resolve *r)
{
	const struct file_meta *m = &r->meta;
	struct answer *a = &r->a;
	const char *etag = m->is_lfs ? m->lfs_oid : m->oid;
	answer_header(a, "X-Repo-Commit", r->sha);
	answer_headerf(a, "ETag", "\"%s\"", etag);
	if (m->is_lfs) {
		answer_headerf(a, "X-Linked-Etag", "\"%s\"", etag);
		answer_headerf(a, "X-Linked-Size", "%" PRIu64, m->size);
	}
	answer_header(a, "Accept-Ranges", "bytes");
	const struct page_file_type *shown = r->for_page ? page_file_type_for(req->path) : NULL;
	answer_header(a, "Content-Type", shown ? shown->type : content_type_for(req->path));
	if (shown)	/* beside the page's own CSP (http_ctx.page_headers): both apply */
		answer_header(a, "Content-Security-Policy", "sandbox; default-src 'none'; "
			      "img-src 'self'; style-src 'unsafe-inline'");
	else		/* a page answer's Cache-Control comes with the page headers */
		answer_header(a, "Cache-Control", "private, max-age=0, must-revalidate");
	const char *base = strrchr(req->path, '/');
	struct strbuf name = STRBUF_INIT;
	strbuf_add_urlencoded(&name, base ? base + 1 : req->path, 0);
	answer_headerf(a, "Content-Disposition", "%s; filename*=UTF-8''%s",
		       !shown || shown->shown_inline ? "inline" : "attachment", name.buf ? name.buf : "");
	strbuf_release(&name);
	if (r->empty_probe)
		answer_header(a, "Content-Range", "bytes */0");
	if (r->ranged > 0 && !r->redirected)
		answer_headerf(a, "Content-Range", "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, r->from, r->to, m->size);
	if (!r->redirected)
		a->status = r->ranged > 0 ? 206 : 200;
	if (r->plain_head && r->bodiless && !r->ranged && !r->empty_probe) {
		r->memo_key = describe_key(&r->h, r->sha, req->path);
		answer_memo(a, r->memo_key);
	}
}

/* Step 9. The Hub's download count (never for the web UI's page route). */
static void count_download(struct request *req, const struct resolve *r)
{
	if (!r->for_page)
		download_stats_note(req, &r->h, r->sha, r->ranged > 0);
}

/* The file answer, as the pipeline at the top of this file; for_page: the
 * web UI's page route (the session's caller, page headers), which never
 * counts a download and keeps no HEAD answer. */
static enum MHD_Result resolve_file(struct request *req, int for_page)
{
	struct resolve r;
	enum MHD_Result result;
	/* the answer last and not zeroed: answer_init sets what it reads */
	memset(&r, 0, offsetof(struct resolve, a));
	r.h = *req->repo;
	r.for_page = for_page;
	answer_init(&r.a, 200);
	/* A plain HEAD's answer is kept whole (http/response_memo.c) under
	 * the file's key: only Date and X-Request-Id change between two. */
	r.plain_head = !for_page && req->method == METHOD_HEAD && !request_header(req, "Range");
	if (resolve_memo_lookup(req, &r, &result) == 0 && resolve_revision(req, &r, &result) == 0 &&
	    resolve_entry(req, &r, &result) == 0 && resolve_lfs_link(req, &r, &result) == 0 &&
	    resolve_range(req, &r, &result) == 0) {
		resolve_redirect(req, &r);
		if (resolve_body(req, &r, &result) == 0) {
			resolve_headers(req, &r);
			count_download(req, &r);
			result = answer_send(req, &r.a);
		}
	}
	answer_release(&r.a);
	free(r.value);
	free(r.location);
	free(r.blob);
	free(r.memo_key);
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
