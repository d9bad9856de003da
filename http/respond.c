/* respond.c -- how every handler answers: common headers, JSON bodies, the
 * Hub's error shapes, and reading query arguments, headers and JSON bodies. */
#include "http/http.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct http_context http_ctx;

/* The Date header, formatted once a second per thread: libmicrohttpd's own
 * (turned off in server/http.c) calls gmtime_r for every answer, and glibc
 * takes one process-wide lock in it, which eight threads on two cores
 * queue on behind a preempted holder. */
const char *http_date_now(void)
{
	static __thread char text[32];
	static __thread time_t formatted_at = -1;
	time_t now = time(NULL);
	if (now != formatted_at) {
		struct tm tm;
		gmtime_r(&now, &tm);
		strftime(text, sizeof(text), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		formatted_at = now;
	}
	return text;
}

static const char cors_expose[] =
	"X-Repo-Commit,X-Request-Id,X-Error-Code,X-Error-Message,X-Total-Count,ETag,Link,"
	"Accept-Ranges,Content-Range,X-Linked-Size,X-Linked-ETag";

void respond_add_fixed_headers(struct request *req, struct MHD_Response *resp)
{
	/* Pages are read with a session cookie: no other origin may read them
	 * (the API ignores the cookie, so its blanket CORS exposes nothing). */
	if (req->route && (req->route->flags & ROUTE_PAGE)) {
		if (http_ctx.page_headers) {
			struct answer_header h[PAGE_HEADERS_MAX];
			size_t n = http_ctx.page_headers(req, h);
			for (size_t i = 0; i < n; i++)
				MHD_add_response_header(resp, h[i].name, h[i].value);
		}
	} else {
		MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
		MHD_add_response_header(resp, "Access-Control-Expose-Headers", cors_expose);
	}
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	if (req->close_connection)
		MHD_add_response_header(resp, "Connection", "close");
}

enum MHD_Result respond_queue(struct request *req, int status, struct MHD_Response *resp)
{
	req->status = status;
	req->responded = 1;
	return MHD_queue_response(req->conn, (unsigned)status, resp);
}

enum MHD_Result respond(struct request *req, int status, struct MHD_Response *resp)
{
	MHD_add_response_header(resp, "Date", http_date_now());
	MHD_add_response_header(resp, "X-Request-Id", req->request_id);
	respond_add_fixed_headers(req, resp);
	enum MHD_Result r = respond_queue(req, status, resp);
	MHD_destroy_response(resp);
	return r;
}

enum MHD_Result respond_json_text(struct request *req, int status, const char *text, size_t len)
{
	struct answer a;
	answer_init(&a, status);
	answer_header(&a, "Content-Type", "application/json; charset=utf-8");
	answer_body_copy(&a, text, len);
	return answer_send(req, &a);
}

/* Bodies up to this size are also kept whole per thread (response_memo.c):
 * 16 per thread, so the memory stays small. */
#define MEMO_BODY_MAX (64 * 1024)

/* Send a (a 200 JSON body), kept whole under memo_key when it names
 * immutable content and is small (NULL: answered only). */
static enum MHD_Result send_maybe_memo(struct request *req, const char *memo_key, struct answer *a)
{
	if (memo_key && a->len <= MEMO_BODY_MAX)
		answer_memo(a, memo_key);
	return answer_send(req, a);
}

/* A page of a listing as kept in the response cache: with_total, a first
 * line that is the X-Total-Count; then the next page's absolute URL (empty
 * on the last page) and a line break; then the JSON body. Takes value. */
static enum MHD_Result listing_page(struct request *req, char *value, size_t len, int with_total,
				    const char *memo_key)
{
	char *total = NULL, *link = value;
	char *nl = memchr(value, '\n', len);
	if (nl && with_total) {
		*nl = '\0';
		total = value;
		link = nl + 1;
		nl = memchr(link, '\n', len - (size_t)(link - value));
	}
	if (!nl) {
		free(value);
		return respond_error(req, 500, NULL, "corrupt cached listing page");
	}
	*nl = '\0';
	const char *body = nl + 1;
	size_t body_len = len - (size_t)(body - value);
	struct answer a;
	answer_init(&a, 200);
	answer_header(&a, "Content-Type", "application/json; charset=utf-8");
	if (total)
		answer_header(&a, "X-Total-Count", total);
	if (link[0])
		answer_headerf(&a, "Link", "<%s>; rel=\"next\"", link);
	answer_body_copy(&a, body, body_len);
	enum MHD_Result r = send_maybe_memo(req, memo_key, &a);
	free(value);
	return r;
}

enum MHD_Result respond_listing_page(struct request *req, char *value, size_t len, int with_total)
{
	return listing_page(req, value, len, with_total, NULL);
}

/* Answer what the response cache keeps under key, if it keeps anything: 1
 * (answered, *result set) or 0. A JSON body, or a listing page as above.
 * The keys of the response cache name immutable content (a repo id and a
 * commit sha, and what else the answer depends on), so the answer built
 * from it is also kept whole per thread under the same key and queued
 * again next time (http/response_memo.c): no copy, no header building. */

/* The kept answer for key (1, *result set), else the response cache's
 * text for it (0, *text the caller's), else -1. */
static int cached_answer(struct request *req, const char *key, enum MHD_Result *result, char **text, size_t *len)
{
	if (respond_memo(req, key, result))
		return 1;
	*text = response_cache_get(key, len);
	return *text ? 0 : -1;
}

int respond_cached_json(struct request *req, const char *key, enum MHD_Result *result)
{
	char *cached;
	size_t len;
	int rc = cached_answer(req, key, result, &cached, &len);
	if (rc != 0)
		return rc > 0;
	struct answer a;
	answer_init(&a, 200);
	answer_header(&a, "Content-Type", "application/json; charset=utf-8");
	answer_body_take(&a, cached, len);
	*result = send_maybe_memo(req, key, &a);
	return 1;
}

int respond_cached_listing(struct request *req, const char *key, int with_total, enum MHD_Result *result)
{
	char *cached;
	size_t len;
	int rc = cached_answer(req, key, result, &cached, &len);
	if (rc != 0)
		return rc > 0;
	*result = listing_page(req, cached, len, with_total, key);
	return 1;
}

/* Close a page being built (page holds the lines above and the items after
 * "["), keep it in the response cache under key and answer it. */
enum MHD_Result respond_new_listing_page(struct request *req, const char *key, struct strbuf *page,
					 int with_total)
{
	strbuf_adds(page, "]");
	response_cache_put(key, page->buf, page->len);
	size_t len;
	char *value = strbuf_detach(page, &len);
	return respond_listing_page(req, value, len, with_total);
}

enum MHD_Result respond_json(struct request *req, int status, json_t *body)
{
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!text)
		return respond_error(req, 500, NULL, "cannot encode response");
	enum MHD_Result r = respond_json_text(req, status, text, strlen(text));
	free(text);
	return r;
}

static enum MHD_Result respond_error_v(struct request *req, int status, const char *code,
				       const char *extra_header, const char *extra_value,
				       const char *fmt, va_list ap)
{
	struct strbuf msg = STRBUF_INIT, body = STRBUF_INIT;
	strbuf_vaddf(&msg, fmt, ap);
	enum MHD_Result page_result;
	if (req->route && (req->route->flags & ROUTE_PAGE) && http_ctx.page_error &&
	    http_ctx.page_error(req, status, msg.buf, &page_result) == 0) {
		if (status >= 500)
			log_error("%d %s", status, msg.buf);
		strbuf_release(&msg);
		return page_result;
	}
	strbuf_adds(&body, "{\"error\":");
	strbuf_add_json_quoted(&body, msg.buf);
	strbuf_adds(&body, "}");
	struct answer a;
	answer_init(&a, status);
	answer_header(&a, "Content-Type", "application/json; charset=utf-8");
	/* Header values must stay on one line. */
	for (char *p = msg.buf; *p; p++)
		if (*p == '\r' || *p == '\n')
			*p = ' ';
	answer_header(&a, "X-Error-Message", msg.buf);
	if (code)
		answer_header(&a, "X-Error-Code", code);
	if (extra_header)
		answer_header(&a, extra_header, extra_value);
	/* Every 503 is temporary (database, lock, upstream): say when to retry. */
	if ((status == 503 || status == 429) && !(extra_header && strcasecmp(extra_header, "Retry-After") == 0))
		answer_header(&a, "Retry-After", "2");
	if (status == 401 && !(extra_header && strcmp(extra_header, "WWW-Authenticate") == 0))
		answer_header(&a, "WWW-Authenticate", "Bearer realm=\"Authentication required\", charset=\"UTF-8\"");
	if (status >= 500)
		log_error("%d %s", status, msg.buf);
	size_t len;
	char *text = strbuf_detach(&body, &len);
	answer_body_take(&a, text, len);
	enum MHD_Result r = answer_send(req, &a);
	strbuf_release(&msg);
	return r;
}

enum MHD_Result respond_error(struct request *req, int status, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	enum MHD_Result r = respond_error_v(req, status, code, NULL, NULL, fmt, ap);
	va_end(ap);
	return r;
}

static enum MHD_Result respond_error_with(struct request *req, int status, const char *code,
					  const char *header, const char *value, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	enum MHD_Result r = respond_error_v(req, status, code, header, value, fmt, ap);
	va_end(ap);
	return r;
}

enum MHD_Result respond_db_unavailable(struct request *req)
{
	return respond_error_with(req, 503, NULL, "Retry-After", "5", "database unavailable, retry later");
}

enum MHD_Result respond_storage_full(struct request *req, const char *what)
{
	return respond_error(req, 507, NULL, "insufficient storage: the disk holding %s is full", what);
}

/* What each khub_err answers (docs/api.md, "Errors"). No row carries an
 * X-Error-Code: the Hub sends one only for what is missing by name, and the
 * helpers below that name it (RepoNotFound, RevisionNotFound, EntryNotFound)
 * send it. A lost compare-and-swap is a 409 here; the commit API answers the
 * Hub's 412 itself. */
static const struct err_status {
	enum khub_err rc;
	int status;
} err_statuses[] = {
	{ KHUB_ENOTFOUND, 404 },
	{ KHUB_EINVAL, 400 },
	{ KHUB_EEXIST, 409 },
	{ KHUB_ECONFLICT, 409 },
	{ KHUB_EIO, 500 },
	{ KHUB_EDB, 503 },	/* respond_db_unavailable's body and Retry-After */
	{ KHUB_ETOOBIG, 413 },
	{ KHUB_EPERM, 403 },
	{ KHUB_ENOTDIR, 400 },
	{ KHUB_ENOSPC, 507 },	/* respond_storage_full's body */
	{ KHUB_EBUSY, 503 },	/* with Retry-After (respond_error_v) */
};

int khub_err_http_status(int rc)
{
	for (size_t i = 0; i < sizeof(err_statuses) / sizeof(err_statuses[0]); i++)
		if (err_statuses[i].rc == rc)
			return err_statuses[i].status;
	return 500;
}

enum MHD_Result respond_err(struct request *req, int rc, const char *fmt, ...)
{
	if (rc == KHUB_EDB)
		return respond_db_unavailable(req);
	if (rc == KHUB_ENOSPC)
		return respond_storage_full(req, "the repository");
	va_list ap;
	va_start(ap, fmt);
	enum MHD_Result r = respond_error_v(req, khub_err_http_status(rc), NULL, NULL, NULL, fmt, ap);
	va_end(ap);
	return r;
}

enum MHD_Result respond_invalid_token(struct request *req)
{
	int git = req->route && (req->route->flags & ROUTE_GIT);
	return respond_error_with(req, 401, NULL, git ? "WWW-Authenticate" : NULL, git ? "Basic realm=\"khub\"" : NULL,
				  "Invalid credentials in Authorization header");
}

enum MHD_Result respond_unavailable(struct request *req, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	enum MHD_Result r = respond_error_v(req, 503, NULL, "Retry-After", "5", fmt, ap);
	va_end(ap);
	return r;
}

enum MHD_Result respond_too_many(struct request *req, long retry_after_seconds, const char *fmt, ...)
{
	char seconds[24];
	snprintf(seconds, sizeof(seconds), "%ld", retry_after_seconds);
	va_list ap;
	va_start(ap, fmt);
	enum MHD_Result r = respond_error_v(req, 429, NULL, "Retry-After", seconds, fmt, ap);
	va_end(ap);
	return r;
}

enum MHD_Result respond_repo_not_found(struct request *req)
{
	/* The Hub answers 401 to anonymous callers and 404 to signed-in ones;
	 * both carry RepoNotFound and say nothing about whether it exists. */
	int status = req->principal.user_id ? 404 : 401;
	return respond_error(req, status, "RepoNotFound",
			     "Repository not found. Check the repo id and your access token.");
}

enum MHD_Result respond_revision_not_found(struct request *req, const char *rev)
{
	return respond_error(req, 404, "RevisionNotFound", "Invalid rev id: %s", rev);
}

enum MHD_Result respond_entry_not_found(struct request *req, const char *sha, const char *path)
{
	return respond_error_with(req, 404, "EntryNotFound", "X-Repo-Commit", sha,
				  "%s does not exist at revision %s", path, sha);
}

const char *request_query(struct request *req, const char *key)
{
	const char *raw = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, key);
	if (!raw || !strchr(raw, '%'))
		return raw;
	char *copy = request_own(req, xstrdup(raw));
	return percent_decode_inplace(copy) < 0 ? NULL : copy;
}

char *request_own(struct request *req, char *ptr)
{
	req->owned = xrealloc(req->owned, (req->nowned + 1) * sizeof(*req->owned));
	req->owned[req->nowned++] = ptr;
	return ptr;
}

int request_query_bool(struct request *req, const char *key, int dflt)
{
	const char *v = request_query(req, key);
	if (!v)
		return dflt;
	if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "True") == 0 || strcmp(v, "yes") == 0)
		return 1;
	if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0 || strcmp(v, "False") == 0 || strcmp(v, "no") == 0)
		return 0;
	return dflt;
}

const char *request_header(struct request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

const char *request_base_url(struct request *req)
{
	static __thread char base[300];
	if (http_ctx.public_url && http_ctx.public_url[0]) {
		snprintf(base, sizeof(base), "%s", http_ctx.public_url);
		return base;
	}
	const char *host = request_header(req, "Host");
	const char *proto = request_header(req, "X-Forwarded-Proto");
	if (!host || !host[0] || strpbrk(host, " /\\\"<>"))
		host = "localhost";
	snprintf(base, sizeof(base), "%s://%s",
		 proto && strcmp(proto, "https") == 0 ? "https" : "http", host);
	return base;
}

void strbuf_add_csv_field(struct strbuf *sb, const char *s, int last)
{
	if (strpbrk(s, ",\"\r\n")) {
		strbuf_add(sb, "\"", 1);
		for (; *s; s++) {
			if (*s == '"')
				strbuf_add(sb, "\"", 1);
			strbuf_add(sb, s, 1);
		}
		strbuf_add(sb, "\"", 1);
	} else {
		strbuf_adds(sb, s);
	}
	strbuf_adds(sb, last ? "\r\n" : ",");
}

/* Parse "bytes=a-b", "bytes=a-" or "bytes=-n" against size. 0 = no range
 * (or one we ignore), 1 = satisfiable range, -1 = unsatisfiable. */
int http_range_parse(const char *h, uint64_t size, uint64_t *from, uint64_t *to)
{
	if (!h || strncmp(h, "bytes=", 6) != 0 || strchr(h, ','))
		return 0;
	const char *p = h + 6;
	char *end;
	if (*p == '-') {
		unsigned long long n = strtoull(p + 1, &end, 10);
		if (*end || end == p + 1)
			return 0;
		if (n == 0 || size == 0)
			return -1;
		*from = n >= size ? 0 : size - n;
		*to = size - 1;
		return 1;
	}
	unsigned long long a = strtoull(p, &end, 10);
	if (end == p || *end != '-')
		return 0;
	p = end + 1;
	unsigned long long b = size ? size - 1 : 0;
	if (*p) {
		b = strtoull(p, &end, 10);
		if (*end)
			return 0;
		if (b >= size)
			b = size ? size - 1 : 0;
	}
	if (a >= size || a > b)
		return -1;
	*from = a;
	*to = b;
	return 1;
}


/* A member of doc, NULL when absent or null. */
static json_t *json_optional_member(json_t *doc, const char *key)
{
	json_t *v = json_object_get(doc, key);
	return json_is_null(v) ? NULL : v;
}

int json_optional_string(json_t *doc, const char *key, const char **out)
{
	json_t *v = json_optional_member(doc, key);
	*out = json_string_value(v);	/* NULL unless a string */
	return !v || json_is_string(v) ? 0 : -1;
}

int json_optional_bool(json_t *doc, const char *key, int *out)
{
	json_t *v = json_optional_member(doc, key);
	*out = json_is_true(v);
	return !v || json_is_boolean(v) ? 0 : -1;
}

int request_json_parse(struct request *req, enum MHD_Result *result)
{
	if (req->json)
		return 0;	/* a parked handler's request, called again */
	if (req->body_too_large) {
		*result = respond_error(req, 413, NULL, "request body larger than %ld bytes", http_ctx.max_body_bytes);
		return -1;
	}
	if (req->body.len == 0) {
		req->json = json_object();
		return 0;
	}
	json_error_t err;
	json_t *doc = json_loadb(req->body.buf, req->body.len, JSON_REJECT_DUPLICATES, &err);
	if (!doc || !json_is_object(doc)) {
		json_decref(doc);
		*result = respond_error(req, 400, NULL, "invalid JSON body: %s", doc ? "not an object" : err.text);
		return -1;
	}
	req->json = doc;
	return 0;
}

json_t *request_json_body(struct request *req, enum MHD_Result *result)
{
	return request_json_parse(req, result) < 0 ? NULL : json_incref(req->json);
}
