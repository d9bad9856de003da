/* http.h -- khub's HTTP layer: the request a handler sees, the route
 * rows the router matches, the helpers handlers answer with, and the
 * machinery requests share (waiting without a thread, background work,
 * cached answers, the cache of repo records). It includes nothing from
 * api/ or web/: they sit on top of it, and server/ drives it. */
#ifndef KHUB_HTTP_H
#define KHUB_HTTP_H

#include <microhttpd.h>
#include <jansson.h>

#include "common/common.h"
#include "storage/git/repo.h"
#include "storage/db/db.h"

struct request;

/* One header of an answer: name and value, borrowed (see struct answer). */
struct answer_header {
	const char *name, *value;
};
/* The page headers http_ctx.page_headers may add, at most. */
#define PAGE_HEADERS_MAX 8

/* What the server tells the HTTP layer (set once at start-up). */
struct http_context {
	const char *public_url;		/* "" = derive from the Host header */
	long max_body_bytes;		/* a buffered body, at most */
	long repo_cache_ttl_ms;		/* a repo record is refreshed after this */
	/* While the database is down, a token or repo record looked up less
	 * than this long ago is still honoured, for reads only. */
	long outage_cache_s;
	/* Routes flagged ROUTE_PAGE (set by the server to the web module's;
	 * NULL = none): the headers every page answer carries, and the HTML
	 * page that answers an error respond_error would answer in JSON (so the
	 * access checks shared with the API answer a page in HTML): 0 when it
	 * answered (*result set), -1 to answer in JSON (the UI's JSON paths). */
	size_t (*page_headers)(struct request *req, struct answer_header out[PAGE_HEADERS_MAX]);
	int (*page_error)(struct request *req, int status, const char *message, enum MHD_Result *result);
	/* Called right after park.c resumed conn from its own thread (set by
	 * the server; NULL = none): the event loop that holds conn must run
	 * its daemon again, which libmicrohttpd's wake-up alone does not
	 * ensure when the daemon is run from outside (server/http_loop.c). */
	void (*resumed)(struct MHD_Connection *conn);
	/* 1 while this node drains (SIGUSR1 .. SIGUSR2): /api/health answers
	 * 503 so that the load balancer sends it nothing new, while requests
	 * keep being served. Read and written with __atomic builtins. */
	int draining;
	/* trusted_proxies, parsed (set once at start-up; NULL = trust none):
	 * requests from these peers get the client's address from the
	 * forwarding headers (http/client_addr.c). */
	const struct trusted_proxies *trusted_proxies;
};

extern struct http_context http_ctx;

/* ---- requests and the route rows ------------------------------------------ */

enum http_method {
	METHOD_GET = 1, METHOD_HEAD = 2, METHOD_POST = 4, METHOD_PUT = 8, METHOD_DELETE = 16,
	METHOD_OPTIONS = 32,
};

#define MAX_SEGMENTS 128
/* An address's text (IPv6 as inet_ntop writes it) and its NUL. */
#define CLIENT_ADDR_MAX 64

/* A repo opened for a request: its record, its git store and what the
 * caller may do with it. */
struct repo_handle {
	struct repo_record record;
	git_repository *git;		/* borrowed from a per-thread cache */
	enum role role;			/* what the caller may do */
};

/* Who may call a route: every row of every table says it, and the server
 * checks it once, before the handler runs (server/http.c; stream routes
 * before their body is read). 0 is no value: a row without one stops the
 * server at start-up (router_check_tables). The token scope each needs is
 * access_min_scope(): everything that writes needs a write or admin token. */
enum route_access {
	ACCESS_UNSET = 0,
	ACCESS_PUBLIC,		/* anyone, anonymous included (the handler may ask more: /metrics) */
	ACCESS_SIGNED_IN,	/* a valid token of any scope, else 401 */
	ACCESS_REPO_READ,	/* req->repo opened for reading: private repos RepoNotFound */
	ACCESS_REPO_CONTRIBUTE,	/* signed in, sees the repo (req->repo), write-scoped token:
				 * pull requests and benchmark uploads */
	ACCESS_REPO_WRITE,	/* req->repo with the write role, not a mirror */
	ACCESS_REPO_MANAGE,	/* req->repo's settings: the write role in its namespace, as on the Hub */
	ACCESS_NAMESPACE_CREATE,	/* a write token (anonymous 401, read-only 403);
				 * the handler checks the namespace named in the
				 * body (create) or the path (an org's members) */
	ACCESS_NAMESPACE_WRITE,	/* a write token; the handler checks the repo named
				 * in the body (move, delete). Anonymous callers
				 * get 401 RepoNotFound from the headers, as for a
				 * repo they cannot see: before the body is read */
	ACCESS_SITE_ADMIN,	/* a site admin's write- or admin-scoped token */
	ACCESS_SIGNED_URL,	/* signed /api/lfs/... URLs carry their own HMAC; Authorization unread */
	ACCESS_GIT,		/* git and git-lfs: the handler decides per service or operation */
	ACCESS_WORKER,		/* a build worker's token (scope "worker"), which no other
				 * route accepts (403); the handler checks the job's lease */
	ACCESS_COUNT
};

struct request {
	struct MHD_Connection *conn;
	enum http_method method;
	const char *method_name;
	char request_id[32];
	uint64_t start_usec;
	/* The client's address, computed once when the request starts: the
	 * TCP peer (peer_addr), or, when the peer is a trusted proxy, the
	 * address it forwarded (request_set_client_addr). Everything about
	 * "who, from where" uses it: the audit log, download counting, the
	 * access log, git's REMOTE_ADDR. Connection limits
	 * (max_connections_per_ip) count the peer. */
	char remote_addr[CLIENT_ADDR_MAX];
	char peer_addr[CLIENT_ADDR_MAX];

	char *log_path;			/* the raw path, for the access log */
	/* The raw path split on '/', each segment percent-decoded. */
	char *path_copy;
	char *segv[MAX_SEGMENTS];
	size_t segc;

	/* Filled by the router from the route pattern. */
	const struct route *route;
	enum repo_type type;		/* from {type}, {tprefix} or the route */
	const char *ns, *name, *org;
	int name_in_git_url;		/* {gname}: a ".git" suffix is dropped */
	char *rev;			/* owned */
	char *path;			/* owned; "" when absent */
	const char *args[4];		/* {arg} segments, in order */
	size_t nargs;

	/* The caller, from Authorization (anonymous when absent). A request
	 * with either flag set is answered by the server before any handler
	 * runs (routes with ROUTE_NO_AUTH never read Authorization). */
	struct principal principal;
	int bad_token;			/* a token was sent but is unknown, expired or revoked: 401 */
	int auth_unavailable;		/* the database could not say who the caller is: 503 */
	/* the principal is a cached lookup honoured while the database is down
	 * (outage_cache_s): reads only, anything else answers 503 */
	int auth_stale;

	/* The repo of a ACCESS_REPO_* route, opened by the server before the
	 * handler runs (points to repo_storage; NULL for other routes). */
	struct repo_handle *repo;
	struct repo_handle repo_storage;

	/* State of a streaming route (owned by its stream_ops). */
	void *stream_state;
	int stream_stopped;
	size_t stream_left;		/* bytes of the last piece not taken (parked) */
	/* What a handler keeps between the calls of a parked request (owned;
	 * handler_state_free(handler_state) when the request ends). */
	void *handler_state;
	void (*handler_state_free)(void *state);

	/* Waiting without a thread (http/park.c): set while suspended. */
	int parked;
	unsigned park_rounds;
	uint64_t wait_started_usec;	/* first try for a busy lock */
	uint64_t work_job_id;		/* the background job it waits for (http/work_queue.c) */
	uint64_t work_wait_started_usec;

	/* Body for routes that ask for it (bounded by max_body_bytes, and
	 * for all requests together by body_buffer_max_mb: server/http.c). */
	struct strbuf body;
	int body_too_large;
	int body_over_buffer;		/* the shared bound was reached: 503 */
	long long body_announced;	/* the headers' Content-Length; -1 chunked; 0 no body */
	size_t body_reserved;		/* bytes of the shared bound this request holds */
	json_t *json;			/* ROUTE_JSON: the body, parsed (owned; decref'd when the request ends) */

	char **owned;			/* freed when the request ends */
	size_t nowned;

	int status;			/* set when a response is queued */
	int close_connection;		/* answer with Connection: close */
	void *memo;			/* the response_memo slot whose answer it holds */
	int responded;
	uint64_t bytes_out;
};

typedef enum MHD_Result (*route_handler)(struct request *req);

/* Route flags */
#define ROUTE_BODY 1		/* buffer the request body before calling */
#define ROUTE_NO_AUTH 2		/* Authorization is not read (health, signed LFS URLs) */
#define ROUTE_GIT 4		/* git and git-lfs clients: a 401 challenges Basic */
#define ROUTE_HANDLER_ACCESS 8	/* the handler asks more than the access column
				 * (documented at its table); t0056 tests it by hand */
#define ROUTE_PAGE 16		/* a web UI page (web/): the caller comes from the
				 * session cookie, never Authorization; no CORS
				 * headers; errors are answered as HTML pages */
#define ROUTE_JSON 32		/* the body is a JSON object (implies ROUTE_BODY):
				 * the server parses it after the access check,
				 * before the handler runs, into req->json (an
				 * empty body is {}); anything else is answered
				 * 400 {"error": "invalid JSON body: ..."} */

/* Routes whose bodies may be larger than memory (commits, LFS uploads) get
 * the body as it arrives; the handler runs once it has all been read. */
struct stream_ops {
	/* Accept the body (0) or refuse it after queuing an answer (-1; the
	 * connection is then closed without reading the body). */
	int (*begin)(struct request *req);
	/* A piece of the body; -1 stops the feeding (the rest is drained and
	 * the handler decides what to answer). It may take only part of it:
	 * it then parks the request and sets req->stream_left to the bytes it
	 * did not take, which come again once the request resumes. */
	int (*data)(struct request *req, const char *data, size_t len);
	/* Always called when the request ends, answered or not. */
	void (*cleanup)(struct request *req);
};

/* Pattern segments: literals, {type} (models|datasets|spaces|kernels),
 * {tprefix} (datasets|spaces|kernels), {ns}, {name}, {org}, {rev} (one
 * segment, or refs/{heads,tags,convert}/X and refs/pr/N sent unencoded),
 * {gname} (a repo name as in a git remote URL: a ".git" suffix is
 * dropped), {arg} (any one segment, kept in args[]), {path*} (every remaining
 * segment, may be empty). */
struct route {
	unsigned methods;
	const char *pattern;
	route_handler handler;
	unsigned flags;
	enum repo_type fixed_type;	/* used when the pattern names no type */
	const struct stream_ops *stream;	/* NULL: buffered (ROUTE_BODY, ROUTE_JSON) or no body */
	enum route_access access;	/* the least any call needs */
	/* Routes whose needs depend on the request (a commit to a pull
	 * request needs less than one to a branch) name what this one needs;
	 * never less than access. NULL: access. */
	enum route_access (*access_for)(struct request *req);
};

/* ---- described answers (http/answer.c) ------------------------------------ */

/* What a handler answers, described; http/ builds the libmicrohttpd response
 * from it (answer_send), adds the headers every answer carries and queues
 * it. No file outside http/ makes, heads or queues a response itself (t0004).
 * A handler fills one on its stack:
 *
 *	struct answer a;
 *	answer_init(&a, 200);
 *	answer_header(&a, "Content-Type", "text/csv; charset=utf-8");
 *	answer_body_take(&a, text, len);
 *	return answer_send(req, &a);
 *
 * Header names and values, and a copied body, are borrowed: they must live
 * until answer_send (answer_headerf copies its value). The headers go out in
 * the order they were added, before Date, X-Request-Id and the route's fixed
 * headers (respond_add_fixed_headers). */
enum answer_body {
	ANSWER_EMPTY,		/* no body (Content-Length: 0) */
	ANSWER_BUFFER,		/* len bytes at data */
	ANSWER_SIZE_ONLY,	/* a HEAD: announces count bytes, reads none */
	ANSWER_FILE,		/* count bytes of fd from offset, by sendfile (http/file_body.c) */
	ANSWER_READER,		/* count bytes (MHD_SIZE_UNKNOWN: until it ends) from reader */
};
enum answer_data_owner { ANSWER_DATA_COPY, ANSWER_DATA_TAKE, ANSWER_DATA_STATIC };
#define ANSWER_HEADERS_MAX 24
#define ANSWER_TEXT_MAX 1024

struct answer {
	int status;
	struct answer_header headers[ANSWER_HEADERS_MAX];
	size_t nheaders;
	enum answer_body body;
	const char *data;		/* ANSWER_BUFFER */
	size_t len;
	enum answer_data_owner data_owner;
	int fd;				/* ANSWER_FILE (owned until sent) */
	uint64_t offset, count;		/* ANSWER_FILE, ANSWER_SIZE_ONLY, ANSWER_READER */
	MHD_ContentReaderCallback reader;	/* ANSWER_READER */
	void *reader_cls;		/* owned until sent: reader_free(reader_cls) */
	MHD_ContentReaderFreeCallback reader_free;
	size_t block;
	/* Kept whole per HTTP thread under this key and queued again for the
	 * next request with it (respond_memo; only Date and X-Request-Id are
	 * stamped anew): for content named by the key alone. NULL: not kept. */
	const char *memo_key;
	int identity;			/* never gzipped (answer_identity) */
	/* answer_headerf's values: here, else allocated (owned[]) */
	char text[ANSWER_TEXT_MAX];
	size_t text_used;
	char *owned[ANSWER_HEADERS_MAX];
	size_t nowned;
};

/* An answer with status, no header and no body. */
void answer_init(struct answer *a, int status);
/* A header (name and value borrowed until answer_send); the value
 * formatted and kept by the answer. */
void answer_header(struct answer *a, const char *name, const char *value);
void answer_headerf(struct answer *a, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The body: len bytes copied at answer_send (data borrowed until then),
 * taken (malloc'd; the answer frees it), or static (never freed). */
void answer_body_copy(struct answer *a, const void *data, size_t len);
void answer_body_take(struct answer *a, char *data, size_t len);
void answer_body_static(struct answer *a, const char *data, size_t len);
/* A HEAD's: Content-Length count, nothing read. */
void answer_body_size_only(struct answer *a, uint64_t count);
/* count bytes of fd from offset; takes fd (closed with the response, or
 * by answer_release when never sent). */
void answer_body_file(struct answer *a, int fd, uint64_t offset, uint64_t count);
/* Bytes from reader as libmicrohttpd asks for them, block at a time; takes
 * cls (free_cls(cls) when the response ends, or by answer_release). */
void answer_body_reader(struct answer *a, uint64_t size, size_t block, MHD_ContentReaderCallback reader, void *cls,
			MHD_ContentReaderFreeCallback free_cls);
/* status (302, 303) with Location: location (borrowed). */
void answer_redirect(struct answer *a, int status, const char *location);
/* Send the body as it is: answer_compress leaves it alone (answers whose
 * bytes clients read as they were before compression existed). */
void answer_identity(struct answer *a);
/* Keep the answer whole under key (borrowed until answer_send). */
void answer_memo(struct answer *a, const char *key);
/* Build, head and queue the answer (req->bytes_out from its body), then
 * release it; 500 when no response could be made. */
enum MHD_Result answer_send(struct request *req, struct answer *a);
/* Free what an answer not sent owns (its body, formatted values). */
void answer_release(struct answer *a);

/* ---- gzip (http/compress.c) ---------------------------------------------- */

/* 1 when the request's Accept-Encoding allows gzip (q=0 refuses it). */
int http_accepts_gzip(struct request *req);
/* len bytes gzipped: 0 with *out (malloc'd, the caller's) and *out_len, or -1. */
int http_gzip(const void *data, size_t len, char **out, size_t *out_len);
/* Called by answer_send: a 200 HTML, JSON, CSS, JavaScript or plain-text
 * body built in memory, of 1 KiB or more, with no ETag, range or memo key
 * and not answer_identity's, gets Vary: Accept-Encoding, and is gzipped when the client allows it. */
void answer_compress(struct request *req, struct answer *a);

/* ---- answering (http/respond.c) ------------------------------------------ */

/* Add the headers every answer carries (Date, request id, CORS) and queue
 * it; takes resp. http/ only: handlers answer with struct answer (t0004). */
enum MHD_Result respond(struct request *req, int status, struct MHD_Response *resp);
/* The parts of respond: the headers that are the same for every request of
 * a route (CORS or the page headers, nosniff, Connection: close), and
 * queueing (req->status, req->responded; resp stays the caller's). */
void respond_add_fixed_headers(struct request *req, struct MHD_Response *resp);
enum MHD_Result respond_queue(struct request *req, int status, struct MHD_Response *resp);
/* The Date header's value now (formatted once a second per thread). */
const char *http_date_now(void);

/* Answers kept whole per HTTP thread (http/response_memo.c), for content
 * named by key alone (repo id, commit sha, path), checked for access by the
 * caller first. respond_memo: 1 with the kept answer queued (*result set),
 * 0 when this thread keeps none free for key. respond_and_memo: answers
 * like respond (takes resp) and keeps the answer for the next request.
 * response_memo_release: the request ended (server/http.c, always);
 * response_memo_shutdown: once the HTTP threads are gone. */
int respond_memo(struct request *req, const char *key, enum MHD_Result *result);
enum MHD_Result respond_and_memo(struct request *req, const char *key, int status, struct MHD_Response *resp);
void response_memo_release(struct request *req);
void response_memo_shutdown(void);
/* A response whose body is count bytes of the file fd from offset
 * (http/file_body.c): libmicrohttpd owns fd once it returns one (it
 * closes fd with the response; on NULL the caller still owns fd), and sends
 * it with sendfile, 2 MiB a call. Every file body goes through here (t0185
 * checks): answer_body_file's. */
struct MHD_Response *http_file_response(int fd, uint64_t offset, uint64_t count);
/* a's body: count bytes from `from` of the LFS object oid (size bytes) in
 * store (http/object_body.c), without holding the thread while the store
 * answers: a file body (local), or a streamed one (S3: the request waits
 * parked until the store answered; a read that fails, or a whole object
 * that does not hash to its oid, is cut short before its last byte). A
 * HEAD only checks the object is there (ANSWER_SIZE_ONLY). 0 with a's body
 * set; 1 when the request was parked (return MHD_YES: the handler runs
 * again and must call this again, with the same arguments, before anything
 * else that parks); KHUB_ENOTFOUND (absent, or another size) or KHUB_EIO
 * (the store failed, or a damaged local object, now quarantined), with a
 * unchanged and nothing answered. */
struct lfs_store;
int answer_lfs_object(struct request *req, struct answer *a, struct lfs_store *store, const char *oid,
		      uint64_t size, uint64_t from, uint64_t count);
/* JSON body; takes ownership of body (json_decref'd). */
enum MHD_Result respond_json(struct request *req, int status, json_t *body);
/* Preformatted JSON text (copied). */
enum MHD_Result respond_json_text(struct request *req, int status, const char *text, size_t len);
/* Listing pages as the response cache keeps them ("[total\n]link\nJSON");
 * both take the page. */
enum MHD_Result respond_listing_page(struct request *req, char *value, size_t len, int with_total);
enum MHD_Result respond_new_listing_page(struct request *req, const char *key, struct strbuf *page,
					 int with_total);
/* What the response cache keeps under key, answered: 1 (*result set) or 0
 * when it keeps nothing there. */
int respond_cached_json(struct request *req, const char *key, enum MHD_Result *result);
int respond_cached_listing(struct request *req, const char *key, int with_total, enum MHD_Result *result);
/* {"error": msg}, X-Error-Message, and X-Error-Code when code is not NULL. */
enum MHD_Result respond_error(struct request *req, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* 503 {"error": "database unavailable, retry later"} with Retry-After: for
 * every database failure, so no client takes an outage for an answer. */
enum MHD_Result respond_db_unavailable(struct request *req);
/* 507 with a JSON error naming storage (logged): the disk is full. */
enum MHD_Result respond_storage_full(struct request *req, const char *what);
/* The status a khub_err answers (one table in http/respond.c): 404, 400, 409,
 * 500, 503, 413, 403, 507; 500 for anything not in the table (rc >= 0 too). */
int khub_err_http_status(int rc);
/* Answers rc with its status from that table and {"error": fmt…}; a database
 * failure answers as respond_db_unavailable, a full disk as
 * respond_storage_full(req, "the repository") (fmt unused for both). Callers
 * whose answer is not the table's (RepoNotFound, the commit API's 412, a
 * full disk that holds something else) answer those first. */
enum MHD_Result respond_err(struct request *req, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* 401 {"error": "Invalid credentials in Authorization header"} (the Hub's
 * answer to an unknown, expired or revoked token), challenging Basic on
 * ROUTE_GIT routes so git and git-lfs ask for credentials. */
enum MHD_Result respond_invalid_token(struct request *req);
/* 503 with Retry-After: a passing failure (the database), never the
 * client's fault: clients retry instead of giving up. */
enum MHD_Result respond_unavailable(struct request *req, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* 429 with Retry-After: retry_after_seconds: the caller has too much
 * going on (a queue limit), not a failure. */
enum MHD_Result respond_too_many(struct request *req, long retry_after_seconds, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Standard Hub answers. */
enum MHD_Result respond_repo_not_found(struct request *req);
enum MHD_Result respond_revision_not_found(struct request *req, const char *rev);
enum MHD_Result respond_entry_not_found(struct request *req, const char *sha, const char *path);

/* A query argument, percent-decoded (the server keeps the URL raw). The
 * string lives as long as the request. NULL when absent. */
const char *request_query(struct request *req, const char *key);
/* true/1/yes → 1, false/0/no → 0, absent → dflt. */
int request_query_bool(struct request *req, const char *key, int dflt);
/* Keep ptr (malloc'd) until the request ends; returns it. */
char *request_own(struct request *req, char *ptr);
const char *request_header(struct request *req, const char *name);
/* "http://host:port" for absolute links; static per thread. */
const char *request_base_url(struct request *req);

/* Parse a Range header ("bytes=a-b", "bytes=a-", "bytes=-n") against a
 * size: 0 = absent or ignored (multi-range, malformed), 1 = satisfiable,
 * filling [from, to], -1 = unsatisfiable (answer 416). */
int http_range_parse(const char *header, uint64_t size, uint64_t *from, uint64_t *to);

/* One CSV field (RFC 4180: quoted when it holds a comma, quote or line
 * break), then "," or, for the last field of a row, "\r\n". */
void strbuf_add_csv_field(struct strbuf *sb, const char *s, int last);

/* ---- the client's address behind proxies (http/client_addr.c) --------------- */

/* The proxies whose X-Forwarded-For and Forwarded headers are believed
 * (the configuration's trusted_proxies): addresses and CIDR ranges. */
struct trusted_proxies {
	struct net_range *ranges;	/* owned */
	size_t n;
};
/* Trusted entries read from the right of a forwarding header, at most:
 * more gives the peer. */
#define FORWARDED_HOPS_MAX 16
/* A comma- or space-separated list of addresses and CIDR ranges into tp
 * (empty: none): 0, or -1 with the bad entry in why (tp then empty).
 * trusted_proxies_release frees what tp holds. */
int trusted_proxies_parse(const char *list, struct trusted_proxies *tp, char *why, size_t why_size);
void trusted_proxies_release(struct trusted_proxies *tp);
/* 1 when the address text addr is in tp (NULL: none). */
int trusted_proxies_contains(const struct trusted_proxies *tp, const char *addr);
/* The client's address of a request whose TCP peer is peer (address text)
 * into out: when peer is in tp, the right-most address of X-Forwarded-For
 * (xff: every line of it joined by ", "; NULL when absent), or without one
 * of Forwarded's for= (forwarded, the same), that is not itself in tp (all
 * of them are: the left-most). Otherwise, and whenever the entries read
 * are malformed (not an address, "unknown", more than FORWARDED_HOPS_MAX
 * trusted), peer. Returns 1 when out came from a header, else 0. */
int client_addr_resolve(const struct trusted_proxies *tp, const char *peer, const char *xff,
			const char *forwarded, char out[CLIENT_ADDR_MAX]);
/* req->remote_addr from req->peer_addr, the request's headers and
 * http_ctx.trusted_proxies (server/http.c, as the request starts). */
void request_set_client_addr(struct request *req);

/* ---- waiting without a thread (http/park.c) -------------------------------- */

/* Suspend the request's connection; its handler runs again after wait_ms,
 * or sooner when request_wake(key) is called. The handler then returns
 * MHD_YES without answering. When the request cannot wait (the parker
 * thread cannot be started: logged) it is answered 503 instead and
 * req->parked stays 0. */
void request_park(struct request *req, const char *key, unsigned wait_ms);
/* The same, woken when fd is ready for events (POLLIN, POLLOUT), hangs up
 * or fails, or after wait_ms. Also usable from a response's content reader
 * (which then returns 0: libmicrohttpd calls it again once resumed). */
void request_park_fd(struct request *req, int fd, short events, unsigned wait_ms);
/* The connection-level form of both (key NULL or fd -1 when unused): 0,
 * or -1 when it cannot wait (nothing suspended; the caller answers). */
int park_connection(struct MHD_Connection *conn, const char *key, int fd, short events, unsigned wait_ms);
void request_wake(const char *key);
/* The same, resumed from the calling thread at once rather than by the
 * parker (a producer thread waking its reader); only requests parked
 * without a descriptor. Any thread; a key nobody waits on is a no-op. */
void request_wake_now(const char *key);
/* The key of what waiters wait for: "kind:n" ("work:12"). */
#define PARK_KEY_MAX 48
void park_key(char out[PARK_KEY_MAX], const char *kind, uint64_t n);
/* Resume every parked request now (shutdown). */
void request_wake_all(void);
/* 1 once request_wake_all was called: answer instead of parking again. */
int request_park_closing(void);

/* ---- slow work off the request threads (http/work_queue.c) ----------------- */

/* A job: runs on a worker thread (its own database connection), returns 0
 * or a negative error. */
typedef int (*work_fn)(void *arg);
/* Start `threads` workers; at most queue_max jobs wait for one (more: 503),
 * a request waits at most wait_ms for its job (then 503). Without a start
 * (CLI roles), work_queue_run runs the job in the caller. */
void work_queue_start(long threads, long queue_max, long wait_ms);
/* The queues: MAIN for everything by default; FETCH for work that waits on
 * servers khub does not run (external git sources), so that a stalled
 * stranger never holds the threads commits need; PLAN for reading an
 * author's build.toml (seconds when hostile), for the same reason. */
enum work_pool_id { WORK_POOL_MAIN, WORK_POOL_FETCH, WORK_POOL_PLAN, WORK_POOLS };
/* Start a pool's threads, as work_queue_start (which starts MAIN). */
void work_pool_start(enum work_pool_id id, long threads, long queue_max, long wait_ms);
/* Drop queued jobs of every pool and let running ones finish, waiting at
 * most wait_ms (after the last request): 0, or -1 when some still run (then leave what
 * they use, such as the LFS store, open). */
int work_queue_stop(unsigned wait_ms);
/* Run fn(arg) in the background under key: one job per key, a request for
 * a key whose job is queued or running joins it. Returns 1 when the request
 * was parked (return *result, MHD_YES: the handler runs again once the job
 * ended, so everything before this call must be safe to repeat), 0 when the
 * job this request waited for has ended (*job_rc its result: check what it
 * was to produce; a finished job is run again for a request that did not
 * wait on it), -1 when 503 with Retry-After was queued (queue full, or
 * waited past wait_ms). Takes ownership of arg: free_arg(arg) is called
 * (also when the request joins a job or is refused). */
int work_queue_run(struct request *req, const char *key, work_fn fn, void *arg, void (*free_arg)(void *),
		   int *job_rc, enum MHD_Result *result);
/* work_queue_run on another pool (its own threads, queue and wait). */
int work_pool_run(enum work_pool_id id, struct request *req, const char *key, work_fn fn, void *arg,
		  void (*free_arg)(void *), int *job_rc, enum MHD_Result *result);
/* The same for a job whose end the request must see (a commit: a 503
 * while it might still land would be retried and land twice): no
 * work_wait_ms deadline, and at shutdown the request waits for it on its
 * thread. -1 only when the queue is full (nothing was started). */
int work_queue_run_to_end(struct request *req, const char *key, work_fn fn, void *arg, void (*free_arg)(void *),
			  int *job_rc, enum MHD_Result *result);
/* A pool's figures now, for /metrics; returns its name ("work", "fetch"). */
struct work_pool_depth {
	size_t queued, running, max_queued, threads;
};
const char *work_pool_depth(enum work_pool_id id, struct work_pool_depth *out);

/* ---- JSON bodies (http/respond.c) ----------------------------------------- */

/* An optional string member of a JSON body: absent or null leaves *out
 * NULL; -1 when it has another type. *out points into doc. */
int json_optional_string(json_t *doc, const char *key, const char **out);
/* The same for a boolean member: *out 0 when absent or null. */
int json_optional_bool(json_t *doc, const char *key, int *out);
/* Parse the buffered body as a JSON object (an empty body is {}) into
 * req->json, once: 0, or -1 with 400 (413 when it was too large) queued.
 * The server calls it for ROUTE_JSON routes. */
int request_json_parse(struct request *req, enum MHD_Result *result);
/* The same for handlers that check more before reading the body (an
 * answer that must come first): a new reference to req->json, which the
 * caller decrefs, or NULL with the answer queued. */
json_t *request_json_body(struct request *req, enum MHD_Result *result);

/* ---- in-memory cache of responses for immutable commit shas --------------- */

void response_cache_init(size_t max_bytes);
/* Copy of a cached value (caller frees) or NULL. */
char *response_cache_get(const char *key, size_t *len);
void response_cache_put(const char *key, const char *value, size_t len);

/* ---- repo records (http/repo_records.c) ------------------------------------ */

/* The record of type/ns/name from a cache shared by every request thread:
 * a record older than repo_cache_ttl_ms is refreshed by one background
 * thread while requests go on using it, one much older is looked up again
 * by the caller. 0 with *out, KHUB_ENOTFOUND, or KHUB_EDB. */
int repo_record_lookup(enum repo_type type, const char *ns, const char *name, struct repo_record *out);
/* Forget every cached record (a repo was created, moved or deleted). */
void repo_cache_invalidate(void);
/* Lookups a cache answered because the database is down (outage_cache_s),
 * by cache, for /metrics. */
enum outage_cache { OUTAGE_CACHE_TOKEN, OUTAGE_CACHE_REPO, OUTAGE_CACHE_COUNT };
void outage_cache_count(enum outage_cache cache);
uint64_t outage_cache_hits(enum outage_cache cache);
/* Changes at each repo_cache_invalidate: caches of what records name (git
 * handles) drop what they hold when it moved. */
uint64_t repo_cache_generation(void);

#endif
