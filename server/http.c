/* http.c -- the libmicrohttpd daemons (one per HTTP loop, http_loop.c), raw (undecoded) URLs,
 * timeouts and connection limits (per client address too; the header and
 * body deadlines are conn_guard.c), unambiguous request framing and
 * targets, request bodies decided from the headers and bounded (each by
 * max_body_bytes, all together by body_buffer_max_mb), the one access
 * check of every request (the route's access column, api/repo_access.c),
 * a request id on every log line, and one access-log line per request. */
#include "server/server.h"
#include "api/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static uint32_t request_id_prefix;
static atomic_uint_fast64_t request_counter;

/* The id of a request: the process's random prefix (8 hex digits) and a
 * counter (at least 8), as "%08x%08llx" would write them, formatted by hand:
 * this runs for every request. */
static void format_request_id(char *out, uint64_t counter)
{
	static const char hex[] = "0123456789abcdef";
	char digits[16];
	int n = 0;
	do
		digits[n++] = hex[counter & 15];
	while ((counter >>= 4) > 0);
	while (n < 8)
		digits[n++] = '0';
	for (int i = 7; i >= 0; i--)
		*out++ = hex[(request_id_prefix >> (4 * i)) & 15];
	while (n > 0)
		*out++ = digits[--n];
	*out = '\0';
}

/* The next request number: each HTTP thread takes a block of them from the
 * shared counter, so that threads on different cores do not pass its cache
 * line between them on every request (numbers stay unique; across threads
 * they are not in arrival order). */
#define REQUEST_NUMBER_BLOCK 256

static uint64_t next_request_number(void)
{
	static __thread uint64_t next, end;
	if (next == end) {
		next = atomic_fetch_add(&request_counter, REQUEST_NUMBER_BLOCK);
		end = next + REQUEST_NUMBER_BLOCK;
	}
	return next++;
}

/* Dotted quad, as inet_ntop writes it (by hand for the same reason). */
static void format_ipv4(char *out, const struct in_addr *addr)
{
	const unsigned char *b = (const unsigned char *)&addr->s_addr;
	for (int i = 0; i < 4; i++) {
		unsigned v = b[i];
		if (v >= 100)
			*out++ = (char)('0' + v / 100);
		if (v >= 10)
			*out++ = (char)('0' + v / 10 % 10);
		*out++ = (char)('0' + v % 10);
		*out++ = i < 3 ? '.' : '\0';
	}
}

static enum http_method parse_method(const char *m)
{
	static const struct { const char *name; enum http_method method; } methods[] = {
		{ "GET", METHOD_GET }, { "HEAD", METHOD_HEAD }, { "POST", METHOD_POST },
		{ "PUT", METHOD_PUT }, { "DELETE", METHOD_DELETE }, { "OPTIONS", METHOD_OPTIONS },
	};
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (strcmp(m, methods[i].name) == 0)
			return methods[i].method;
	return 0;
}

/* Leave %HH escapes alone: the router decodes each path segment itself and
 * request_query() decodes argument values. */
static size_t keep_escaped(void *cls, struct MHD_Connection *c, char *s)
{
	return strlen(s);
}

/* ---- the shared bound on buffered request bodies ------------------------- */

/* Bytes of request bodies held in memory by all requests together (a
 * Content-Length is counted whole before its first byte is read, a chunked
 * body as it comes), at most body_buffer_max_mb; a body that would pass it
 * is refused 503 with Retry-After. One body is always let in when nothing
 * else is held, so a max_body_bytes above the bound still works. */
static atomic_size_t body_buffer_total;

static int body_buffer_reserve(struct request *req, size_t bytes)
{
	size_t limit = (size_t)config.body_buffer_max_mb << 20;
	size_t held = atomic_load(&body_buffer_total);
	do {
		if (held > 0 && held + bytes > limit)
			return -1;
	} while (!atomic_compare_exchange_weak(&body_buffer_total, &held, held + bytes));
	req->body_reserved += bytes;
	return 0;
}

static void body_buffer_release(struct request *req)
{
	if (req->body_reserved)
		atomic_fetch_sub(&body_buffer_total, req->body_reserved);
	req->body_reserved = 0;
}

/* Each thread keeps the last request it freed for its next one: a request
 * is large (its path segments), and allocating one per request costs malloc
 * a consolidation of its small-chunk lists every time. The spare is freed
 * when its thread ends. */
static pthread_key_t spare_request_key;
static pthread_once_t spare_request_once = PTHREAD_ONCE_INIT;

static void spare_request_key_create(void)
{
	pthread_key_create(&spare_request_key, free);
}

static struct request *request_new(void)
{
	pthread_once(&spare_request_once, spare_request_key_create);
	struct request *req = pthread_getspecific(spare_request_key);
	if (!req)
		return xcalloc(1, sizeof(*req));
	pthread_setspecific(spare_request_key, NULL);
	memset(req, 0, sizeof(*req));
	return req;
}

static void request_free(struct request *req)
{
	response_memo_release(req);
	free(req->log_path);
	if (req->route && req->route->stream && req->route->stream->cleanup)
		req->route->stream->cleanup(req);
	if (req->handler_state && req->handler_state_free)
		req->handler_state_free(req->handler_state);
	free(req->path_copy);
	free(req->rev);
	free(req->path);
	strbuf_release(&req->body);
	body_buffer_release(req);
	json_decref(req->json);
	for (size_t i = 0; i < req->nowned; i++)
		free(req->owned[i]);
	free(req->owned);
	if (!pthread_getspecific(spare_request_key))
		pthread_setspecific(spare_request_key, req);
	else
		free(req);
}

static enum MHD_Result respond_preflight(struct request *req)
{
	struct answer a;
	answer_init(&a, 204);
	answer_header(&a, "Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, DELETE, OPTIONS");
	answer_header(&a, "Access-Control-Allow-Headers",
		      "Authorization, Content-Type, Range, Accept, X-Request-Id, Git-Protocol");
	answer_header(&a, "Access-Control-Max-Age", "86400");
	return answer_send(req, &a);
}

struct framing {
	int content_lengths, transfer_encodings;
	const char *content_length, *transfer_encoding;
	int content_length_differs;
};

static enum MHD_Result count_framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
					    const char *value)
{
	struct framing *f = cls;
	(void)kind;
	if (!value)
		value = "";
	if (strcasecmp(key, "Content-Length") == 0) {
		if (f->content_lengths++ && strcmp(f->content_length, value) != 0)
			f->content_length_differs = 1;
		f->content_length = value;
	} else if (strcasecmp(key, "Transfer-Encoding") == 0) {
		f->transfer_encodings++;
		f->transfer_encoding = value;
	}
	return MHD_YES;
}

/* Header values as libmicrohttpd 0.9.75 leaves them: in its read buffer,
 * in the order received, each ended by a NUL written over its line end
 * (CR, LF: both become NUL). A NUL inside a value ends the C string early
 * and hides the rest of the line, so the bytes from one value's end to the
 * next header's name (and from the last one to the end of the headers)
 * must all be NUL. */
struct header_scan {
	const char *prev_end;	/* the end of the previous value, NULL before the first */
	const char *why;
};

/* 1 when the bytes from one value's end to what follows hide something:
 * a plausible gap (a line's end, 16 KiB at most) that is not all NUL. A gap
 * that is not plausible is a layout this check does not know: no verdict. */
static int gap_hides_bytes(const char *from, const char *to)
{
	if (to < from || to - from > 16 * 1024)
		return 0;
	for (const char *p = from; p < to; p++)
		if (*p)
			return 1;
	return 0;
}

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
				   const char *value, size_t value_size)
{
	struct header_scan *scan = cls;
	(void)kind;
	/* "Content-Length : 60": libmicrohttpd 0.9.75 keeps the space in the
	 * name, so the header frames nothing and the body would be read as
	 * the next request (RFC 9112 5.1: answer 400) */
	if (key_size > 0 && strcspn(key, " \t") < key_size) {
		scan->why = "whitespace between a header's name and its colon";
		return MHD_NO;
	}
	for (size_t i = 0; value && i < value_size; i++) {
		unsigned char c = (unsigned char)value[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f) {
			scan->why = "a control character (CR, LF, NUL...) in a header value";
			return MHD_NO;
		}
	}
	if (scan->prev_end && gap_hides_bytes(scan->prev_end, key)) {
		scan->why = "a NUL byte or a folded line (obs-fold) in a header value";
		return MHD_NO;
	}
	scan->prev_end = value ? value + value_size : key + key_size;
	return MHD_YES;
}

/* NULL when every header value is clean, else why not. headers_end: the
 * end of the request's headers in libmicrohttpd's buffer. */
static const char *header_values_refused(struct MHD_Connection *conn, const char *headers_end)
{
	struct header_scan scan = { NULL, NULL };
	MHD_get_connection_values_n(conn, MHD_HEADER_KIND, scan_header, &scan);
	if (!scan.why && scan.prev_end && headers_end && gap_hides_bytes(scan.prev_end, headers_end))
		scan.why = "a NUL byte in a header value";
	return scan.why;
}

/* Refuse what a proxy in front could frame differently from us (request
 * smuggling): differing Content-Lengths, Content-Length with
 * Transfer-Encoding, and any transfer coding but chunked (which
 * libmicrohttpd would wait on until the timeout). The connection is closed
 * after the answer, so bytes after the headers are never read as a request.
 * 0, or -1 with the answer queued and *result set. */
static int refuse_bad_framing(struct request *req, const char *request_line, enum MHD_Result *result)
{
	struct framing f = { 0 };
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
	const char *why = header_values_refused(req->conn, ci && ci->header_size ? request_line + ci->header_size : NULL);
	if (why) {
		req->close_connection = 1;
		*result = respond_error(req, 400, NULL, "%s", why);
		return -1;
	}
	MHD_get_connection_values(req->conn, MHD_HEADER_KIND, count_framing_header, &f);
	if (f.content_length_differs) {
		req->close_connection = 1;
		*result = respond_error(req, 400, NULL, "conflicting Content-Length headers");
		return -1;
	}
	if (f.content_lengths && f.transfer_encodings) {
		req->close_connection = 1;
		*result = respond_error(req, 400, NULL, "both Content-Length and Transfer-Encoding");
		return -1;
	}
	if (f.transfer_encodings > 1 || (f.transfer_encodings && strcasecmp(f.transfer_encoding, "chunked") != 0)) {
		req->close_connection = 1;
		*result = respond_error(req, 501, NULL, "Transfer-Encoding %s is not supported (only chunked)",
					f.transfer_encoding);
		return -1;
	}
	/* libmicrohttpd refused a Content-Length that is not digits (and
	 * strtoll caps one too large) */
	req->body_announced = f.transfer_encodings ? -1 : f.content_lengths ? strtoll(f.content_length, NULL, 10) : 0;
	return 0;
}

static int has_control(const char *s, size_t n)
{
	for (size_t i = 0; s && i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return 1;
	return 0;
}

static enum MHD_Result argument_has_control(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
					    const char *value, size_t value_size)
{
	(void)kind;
	if (has_control(key, key_size) || has_control(value, value_size)) {
		*(int *)cls = 1;
		return MHD_NO;
	}
	return MHD_YES;
}

/* A request target with a control character (CR, ESC, DEL...) in its path
 * or its query (kept raw: keep_escaped): refused, never routed or logged
 * as sent. */
static int target_has_control(struct MHD_Connection *conn, const char *url)
{
	int found = has_control(url, strlen(url));
	if (!found)
		MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND, argument_has_control, &found);
	return found;
}

static enum MHD_Result dispatch(struct request *req)
{
	enum MHD_Result r;
	if (req->route->flags & ROUTE_PAGE)
		return web_dispatch(req);	/* its own answers for sessions, same access check */
	if (auth_refuse(req) < 0)
		return MHD_YES;
	/* Stream routes were checked before their body was read; the others
	 * on every call (a parked handler may resume on another thread, whose
	 * git handles are its own). */
	if (!req->route->stream && access_check(req, &r) < 0)
		return r;
	/* A JSON body is read once the caller may call the route: a caller
	 * who may not is answered 401, 403 or 404 whatever it sent. */
	if ((req->route->flags & ROUTE_JSON) && request_json_parse(req, &r) < 0)
		return r;
	req->parked = 0;
	r = req->route->handler(req);
	if (req->parked && !req->responded)
		return MHD_YES;	/* suspended: the handler runs again when resumed */
	if (!req->responded)
		r = respond_error(req, 500, NULL, "handler gave no answer");
	return r;
}

/* A new request: its id, start time, method and client address (behind a
 * trusted proxy, the one it forwarded). */
static struct request *request_start(struct MHD_Connection *conn, const char *url, const char *method)
{
	struct request *req = request_new();
	req->conn = conn;
	req->start_usec = monotonic_usec();
	req->method_name = method;
	req->method = parse_method(method);
	format_request_id(req->request_id, next_request_number());
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (ci && ci->client_addr) {
		if (ci->client_addr->sa_family == AF_INET)
			format_ipv4(req->peer_addr, &((struct sockaddr_in *)ci->client_addr)->sin_addr);
		else if (ci->client_addr->sa_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ci->client_addr)->sin6_addr, req->peer_addr,
				  sizeof(req->peer_addr));
	}
	request_set_client_addr(req);	/* a trusted proxy's X-Forwarded-For */
	log_set_request_id(req->request_id);
	req->log_path = xstrdup(url);
	conn_guard_request_begin(conn);
	return req;
}

/* A body the headers announce, for a route that buffers it: everything
 * that can refuse it is decided now, before its first byte is read and
 * before libmicrohttpd sends 100 Continue (it sends none once an answer is
 * queued): who calls (401, 403, 404), its size (413) and room in the shared
 * bound (503). Then the body_timeout deadline runs until it is all in. */
static enum MHD_Result body_admit(struct request *req)
{
	enum MHD_Result r;
	/* a page's database outage is answered as a page, after the body */
	if (!req->auth_unavailable && access_check(req, &r) < 0)
		return r;
	if (req->body_announced > config.max_body_bytes)
		return respond_error(req, 413, NULL, "request body larger than %ld bytes", config.max_body_bytes);
	if (req->body_announced > 0) {
		if (body_buffer_reserve(req, (size_t)req->body_announced) < 0)
			return respond_unavailable(req, "too many request bodies are being received; retry later");
		strbuf_grow(&req->body, (size_t)req->body_announced);
	}
	conn_guard_body_begin(req->conn);
	return MHD_YES;
}

/* Who calls, from the session cookie (pages) or Authorization. A token
 * that is not one, or an outage: answered at once when a body follows
 * (none of it is read), else by dispatch. 0 to go on, -1 when done. */
static int request_identify(struct request *req)
{
	if (req->route->flags & ROUTE_PAGE) {
		web_identify(req);	/* the session cookie; Authorization is never read */
		return 0;
	}
	if (req->route->flags & ROUTE_NO_AUTH)
		return 0;
	auth_identify(req);
	if (!req->bad_token && !req->auth_unavailable)
		return 0;
	if (!req->body_announced || auth_refuse(req) == 0)
		req->stream_stopped = 1;	/* no handler runs; dispatch answers */
	return -1;
}

/* The first call, headers read: refuse bad framing and targets, find the
 * route, learn who calls, and decide on the body before reading any of it
 * (stream routes: accept it; others: body_admit). An answer queued now
 * closes the connection once sent: libmicrohttpd reads no more of it. */
static enum MHD_Result request_route(struct request *req, const char *url, const char *method)
{
	enum MHD_Result refused;
	/* the request line starts libmicrohttpd's buffer of the headers */
	if (refuse_bad_framing(req, method, &refused) < 0)
		return refused;
	if (target_has_control(req->conn, url)) {
		req->close_connection = 1;
		return respond_error(req, 400, NULL, "a control character in the request target");
	}
	if (!req->method)
		return respond_error(req, 405, NULL, "method %s is not supported", method);
	int rc = router_match(req, url);
	if (rc == KHUB_EINVAL)
		return respond_error(req, 400, NULL, "malformed path");
	if (rc == KHUB_EPERM)
		return respond_error(req, 405, NULL, "method %s is not allowed here", method);
	if (rc < 0)
		return respond_error(req, 404, NULL, "no such endpoint: %s %s", method, url);
	if (req->method == METHOD_OPTIONS)
		return respond_preflight(req);
	if (request_identify(req) < 0)
		return MHD_YES;
	if (!req->route->stream)
		return req->body_announced ? body_admit(req) : MHD_YES;
	if (access_check(req, &refused) < 0)
		return refused;
	if (req->route->stream->begin(req) < 0)
		return req->responded ? MHD_YES : respond_error(req, 500, NULL, "request refused");
	return MHD_YES;
}

/* A piece of the body: to a stream route, or kept (up to max_body_bytes,
 * within the shared bound; past either the rest is read and dropped, and
 * the body deadline bounds how long that goes on). */
static enum MHD_Result request_body_piece(struct request *req, const char *data, size_t *size)
{
	if (req->route && req->route->stream) {
		req->parked = 0;
		req->stream_left = 0;
		if (!req->stream_stopped && req->route->stream->data(req, data, *size) < 0)
			req->stream_stopped = 1;
		/* a parked stream gets the rest again when it resumes */
		*size = req->parked && !req->stream_stopped ? req->stream_left : 0;
		return MHD_YES;
	}
	if (!req->body_too_large && !req->body_over_buffer) {
		size_t want = req->body.len + *size;
		if (want > (size_t)config.max_body_bytes)
			req->body_too_large = 1;
		else if (want > req->body_reserved && body_buffer_reserve(req, want - req->body_reserved) < 0)
			req->body_over_buffer = 1;
		else
			strbuf_add(&req->body, data, *size);
		if (req->body_too_large || req->body_over_buffer) {
			strbuf_release(&req->body);
			body_buffer_release(req);
		}
	}
	*size = 0;
	return MHD_YES;
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *conn, const char *url,
				      const char *method, const char *version, const char *upload_data,
				      size_t *upload_data_size, void **con_cls)
{
	struct request *req = *con_cls;
	if (!req) {
		*con_cls = req = request_start(conn, url, method);
		return request_route(req, url, method);
	}
	log_set_request_id(req->request_id);
	if (*upload_data_size)
		return request_body_piece(req, upload_data, upload_data_size);
	if (req->body_announced)
		conn_guard_body_end(conn);	/* all of it is in */
	if (req->responded)
		return MHD_YES;
	if (req->body_too_large)
		return respond_error(req, 413, NULL, "request body larger than %ld bytes", config.max_body_bytes);
	if (req->body_over_buffer)
		return respond_unavailable(req, "too many request bodies are being received; retry later");
	return dispatch(req);
}

/* The access log's line, JSON (log_format = json): the route's pattern,
 * never the path (it may carry a signed URL's signature or a query). */
static void log_request_json(enum log_level level, const struct request *req, uint64_t usec, const char *end)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_adds(&sb, "\"msg\":\"request\",\"method\":");
	strbuf_add_json_quoted(&sb, req->method_name ? req->method_name : "");
	strbuf_adds(&sb, ",\"route\":");
	if (req->route)
		strbuf_add_json_quoted(&sb, req->route->pattern);
	else
		strbuf_adds(&sb, "null");
	strbuf_addf(&sb, ",\"status\":%d,\"bytes\":%llu,\"duration_ms\":%.3f,\"remote_addr\":", req->status,
		    (unsigned long long)req->bytes_out, (double)usec / 1000.0);
	strbuf_add_json_quoted(&sb, req->remote_addr);
	if (strcmp(req->remote_addr, req->peer_addr) != 0) {
		strbuf_adds(&sb, ",\"proxy\":");
		strbuf_add_json_quoted(&sb, req->peer_addr);
	}
	strbuf_adds(&sb, ",\"user\":");
	if (req->principal.user_id && !req->principal.worker_id)
		strbuf_add_json_quoted(&sb, req->principal.name);
	else
		strbuf_adds(&sb, "null");
	if (req->principal.worker_id) {
		strbuf_adds(&sb, ",\"worker\":");
		strbuf_add_json_quoted(&sb, req->principal.name);
	}
	strbuf_adds(&sb, ",\"repo\":");
	if (req->route && req->ns && req->name) {
		struct strbuf repo = STRBUF_INIT;
		strbuf_addf(&repo, "%s/%s", req->ns, req->name);
		strbuf_add_json_quoted(&sb, repo.buf);
		strbuf_release(&repo);
	} else {
		strbuf_adds(&sb, "null");
	}
	if (*end)
		strbuf_addf(&sb, ",\"end\":\"%s\"", end);
	log_write_fields(level, sb.buf);
	strbuf_release(&sb);
}

static void log_request(const struct request *req, uint64_t usec, enum MHD_RequestTerminationCode toe)
{
	enum log_level level = req->status >= 500 ? LOG_LEVEL_ERROR : LOG_LEVEL_INFO;
	if (log_threshold < LOG_LEVEL_INFO && req->status < 500)
		return;
	if (log_is_json()) {
		log_request_json(level, req, usec, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" :
						   toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "timeout" : "aborted");
		return;
	}
	const char *how = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" :
			  toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? " (timed out)" : " (aborted)";
	log_write(level, "%s %s %s %d %llu bytes %llu us%s %s=%s", req->remote_addr, req->method_name,
		  req->log_path ? req->log_path : "-", req->status, (unsigned long long)req->bytes_out,
		  (unsigned long long)usec, how, req->principal.worker_id ? "worker" : "user",
		  req->principal.user_id || req->principal.worker_id ? req->principal.name : "-");
}

static void request_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			      enum MHD_RequestTerminationCode toe)
{
	struct request *req = *con_cls;
	if (!req)
		return;
	conn_guard_request_end(conn);
	log_set_request_id(req->request_id);
	uint64_t usec = monotonic_usec() - req->start_usec;
	metrics_request_done(req, usec);
	log_request(req, usec, toe);
	log_set_request_id(NULL);
	request_free(req);
	*con_cls = NULL;
}

/* One HTTP loop's daemon: external-epoll mode, no listening socket of its
 * own (server/acceptor.c accepts), connection limits left to the loops'
 * admission (http_loop.c), which counts them for all loops at once. */
static struct MHD_Daemon *start_loop_daemon(void *arg)
{
	(void)arg;
	unsigned flags = MHD_USE_EPOLL | MHD_USE_TURBO | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME |
			 MHD_USE_ITC | MHD_USE_NO_LISTEN_SOCKET |
			 MHD_USE_SUPPRESS_DATE_NO_CLOCK;	/* Date: http/respond.c */
	return MHD_start_daemon(
		flags, 0, NULL, NULL, access_handler, NULL,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)config.connection_timeout,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)config.max_connections,
		MHD_OPTION_NOTIFY_CONNECTION, conn_guard_notify, NULL,
		MHD_OPTION_URI_LOG_CALLBACK, conn_guard_request_line, NULL,
		MHD_OPTION_EXTERNAL_LOGGER, conn_guard_mhd_log, NULL,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)config.connection_memory_kb * 1024,
		MHD_OPTION_UNESCAPE_CALLBACK, keep_escaped, NULL,
		MHD_OPTION_NOTIFY_COMPLETED, request_completed, NULL,
		/* SIGPIPE is ignored (http_serve): without this, a daemon run by
		 * threads it did not start gives up sendfile for pread + send */
		MHD_OPTION_SIGPIPE_HANDLED_BY_APP, (int)1,
		MHD_OPTION_END);
}

int http_serve(const struct http_hooks *hooks)
{
	struct sockaddr_storage addr;
	socklen_t addr_len;
	const struct route *unchecked = router_row_without_access();
	if (unchecked)
		fatal("route %s has no access value (api/api.h enum route_access)", unchecked->pattern);
	if (config_parse_listen(config.listen, &addr, &addr_len) < 0)
		fatal("listen: cannot parse '%s' (want host:port)", config.listen);
	RAND_bytes((unsigned char *)&request_id_prefix, sizeof(request_id_prefix));
	char threads_why[320];
	long threads = config_http_threads(threads_why, sizeof(threads_why));
	unsigned port = 0;
	if (acceptor_listen(&addr, addr_len, 1024, &port) < 0)
		fatal("cannot listen on %s: %s", config.listen, strerror(errno));

	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	sigaddset(&stop, SIGUSR1);
	sigaddset(&stop, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	signal(SIGPIPE, SIG_IGN);

	const struct route *const *const route_groups[] = { router_tables, router_page_tables };
	metrics_start(route_groups, 2, api_ctx.lfs_root, config.metrics_lfs_scan_s);
	conn_guard_start(config.header_timeout, config.body_timeout);
	const struct http_loop_options loop_options = {
		.start = start_loop_daemon,
		.max_connections = config.max_connections,
		.max_connections_per_ip = config.max_connections_per_ip,
	};
	http_ctx.resumed = http_loops_resumed;
	if (http_loops_start(threads, &loop_options) < 0)
		fatal("cannot start the HTTP server on %s: %s", config.listen, strerror(errno));
	acceptor_start();
	log_info("khub listening on %s (port %u, %ld threads; %s)", config.listen, port, threads, threads_why);

	if (hooks->ready)
		hooks->ready();

	int sig = 0;
	while (sigwait(&stop, &sig) == 0 && (sig == SIGHUP || sig == SIGUSR1 || sig == SIGUSR2)) {
		if (sig == SIGHUP && hooks->reload)
			hooks->reload();
		else if (sig != SIGHUP && hooks->drain)
			hooks->drain(sig == SIGUSR1);
	}
	log_info("signal %d: shutting down", sig);
	if (hooks->stopping)
		hooks->stopping();
	acceptor_stop();
	request_wake_all();	/* parked requests answer before the loops stop */
	usleep(100000);
	http_loops_stop();
	response_memo_shutdown();
	conn_guard_stop();
	metrics_stop();
	return 0;
}
