/* lfs.c -- the git-lfs batch API ({prefix}{ns}/{name}.git/info/lfs/objects/batch)
 * for upload and download, and the self-authenticating URLs it hands out:
 * HF clients PUT with no Authorization, so each action URL carries its own
 * short-lived HMAC signature over (action, oid, size, expiry). */
#include "api/api.h"

#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LFS_JSON "application/vnd.git-lfs+json"
#define MAX_BATCH_OBJECTS 10000

/* "expiry.hmac" for action, oid, size. */
static void sign_url_token(const char *action, const char *oid, uint64_t size, time_t expires, char out[100])
{
	char msg[200], mac_hex[65];
	unsigned char mac[32];
	unsigned int mac_len = 0;
	snprintf(msg, sizeof(msg), "%s\n%s\n%" PRIu64 "\n%lld", action, oid, size, (long long)expires);
	HMAC(EVP_sha256(), api_ctx.url_secret, sizeof(api_ctx.url_secret), (const unsigned char *)msg, strlen(msg),
	     mac, &mac_len);
	hex_encode(mac, 32, mac_hex);
	snprintf(out, 100, "%lld.%s", (long long)expires, mac_hex);
}

static int check_url_token(const char *action, const char *token, const char *oid, uint64_t size)
{
	char *dot;
	long long expires = strtoll(token, &dot, 10);
	if (*dot != '.' || expires < time(NULL))
		return -1;
	char want[100];
	sign_url_token(action, oid, size, (time_t)expires, want);
	size_t n = strlen(want);
	return strlen(token) == n && CRYPTO_memcmp(want, token, n) == 0 ? 0 : -1;
}

/* The action, repo id, oid and size are all signed: a URL works for one
 * object of one repo. */
static char *action_url(struct request *req, const char *action, int64_t repo_id, const char *oid, uint64_t size)
{
	char token[100], signed_action[64];
	snprintf(signed_action, sizeof(signed_action), "%s/%" PRId64, action, repo_id);
	sign_url_token(signed_action, oid, size, time(NULL) + api_ctx.lfs_url_ttl, token);
	return xasprintf("%s/api/lfs/%s/%s/%s/%" PRIu64 "/%" PRId64, request_base_url(req), action, token, oid, size,
			 repo_id);
}

static enum MHD_Result lfs_error(struct request *req, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* git-lfs reads {"message"}; HF clients the usual {"error"}. */
static enum MHD_Result lfs_error(struct request *req, int status, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *body = json_pack("{s:s, s:s}", "message", msg, "error", msg);
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	struct answer a;
	answer_init(&a, status);
	answer_header(&a, "Content-Type", LFS_JSON);
	if (status == 503)
		answer_header(&a, "Retry-After", "5");
	if (status == 401) {
		answer_header(&a, "LFS-Authenticate", "Basic realm=\"khub\"");
		answer_header(&a, "WWW-Authenticate", "Basic realm=\"khub\"");
	}
	answer_body_take(&a, text, strlen(text));
	return answer_send(req, &a);
}

/* The batch's operation, objects and transfers: 0 with *upload and
 * *objects (borrowed from doc), or -1 with the LFS error answered. */
static int batch_parse(struct request *req, json_t *doc, int *upload, json_t **objects, enum MHD_Result *result)
{
	const char *operation = json_string_value(json_object_get(doc, "operation"));
	json_t *transfers = json_object_get(doc, "transfers");
	*objects = json_object_get(doc, "objects");
	*upload = operation && strcmp(operation, "upload") == 0;
	if (!operation || (!*upload && strcmp(operation, "download") != 0) || !json_is_array(*objects)) {
		*result = lfs_error(req, 422, "want {\"operation\": \"upload\"|\"download\", \"objects\": [...]}");
		return -1;
	}
	if (json_array_size(*objects) > MAX_BATCH_OBJECTS) {
		*result = lfs_error(req, 413, "at most %d objects per batch", MAX_BATCH_OBJECTS);
		return -1;
	}
	if (transfers && json_is_array(transfers) && json_array_size(transfers) > 0) {
		int basic = 0;
		size_t i;
		json_t *t;
		json_array_foreach(transfers, i, t)
			basic |= json_is_string(t) && strcmp(json_string_value(t), "basic") == 0;
		if (!basic) {
			*result = lfs_error(req, 422, "khub speaks the basic transfer only");
			return -1;
		}
	}
	return 0;
}

/* The repo, opened for the operation: uploads need write access, except
 * for a pull request (no ref): anyone who can read the repo may open one.
 * Downloads need read. 0, or -1 answered. */
static int batch_open_repo(struct request *req, json_t *doc, int upload, struct repo_handle *h,
			   enum MHD_Result *result)
{
	const char *ref_name = json_string_value(json_object_get(json_object_get(doc, "ref"), "name"));
	int for_pr = upload && (!json_object_get(doc, "ref") || (ref_name && strncmp(ref_name, "refs/pr/", 8) == 0));
	if (!req->principal.user_id && upload) {
		*result = lfs_error(req, 401, "Authentication required: use a token as the password");
		return -1;
	}
	int rc = upload ? repo_open_for_write(req, h, for_pr ? ROLE_READ : ROLE_WRITE, result)
			: repo_open_for_read(req, h, result);
	if (rc < 0)
		return -1;
	if (for_pr && req->principal.scope == ROLE_READ) {
		*result = lfs_error(req, 403, "a read-only token cannot upload");
		return -1;
	}
	if (upload && h->record.mirrored) {
		*result = lfs_error(req, 403, "a mirrored repo is read-only");
		return -1;
	}
	return 0;
}

/* One object's answer: its upload (with verify) or download action, or
 * its error. NULL with *failed KHUB_EDB when the database failed,
 * KHUB_EIO when the LFS store could not be asked (S3 unreachable). */
static json_t *batch_object(struct request *req, const struct repo_handle *h, json_t *o, int upload, int *failed)
{
	const char *oid = json_string_value(json_object_get(o, "oid"));
	json_t *size_v = json_object_get(o, "size");
	json_t *item = json_object();
	json_object_set_new(item, "oid", json_string(oid ? oid : ""));
	json_object_set(item, "size", size_v ? size_v : json_integer(0));
	if (!oid || !is_lower_hex(oid, 64) || !json_is_integer(size_v) || json_integer_value(size_v) < 0) {
		json_object_set_new(item, "error", json_pack("{s:i, s:s}", "code", 422, "message",
							     "oid must be 64 lowercase hex and size a non-negative integer"));
		return item;
	}
	uint64_t size = (uint64_t)json_integer_value(size_v), stored;
	/* present for this repo = stored and linked to it; an object only
	 * another repo uploaded must be uploaded again (which proves the
	 * caller has the bytes) */
	int src = lfs_store_stat(api_ctx.lfs, oid, &stored);
	int linked = src == 0 ? db_lfs_linked(h->record.id, oid) : 0;
	if (linked < 0 || src == KHUB_EIO) {
		*failed = linked < 0 ? KHUB_EDB : KHUB_EIO;
		json_decref(item);
		return NULL;
	}
	int present = linked == 1;
	if (upload && !present) {
		char *put = action_url(req, "upload", h->record.id, oid, size);
		char *verify = action_url(req, "verify", h->record.id, oid, size);
		json_object_set_new(item, "authenticated", json_true());
		json_object_set_new(item, "actions", json_pack("{s:{s:s, s:{}, s:i}, s:{s:s, s:{}, s:i}}",
			"upload", "href", put, "header", "expires_in", (int)api_ctx.lfs_url_ttl,
			"verify", "href", verify, "header", "expires_in", (int)api_ctx.lfs_url_ttl));
		free(put);
		free(verify);
	} else if (!upload && (!present || stored != size)) {
		json_object_set_new(item, "error", json_pack("{s:i, s:s}", "code", 404, "message",
							     "Object does not exist on the server"));
	} else if (!upload) {
		char *get = action_url(req, "download", h->record.id, oid, size);
		json_object_set_new(item, "authenticated", json_true());
		json_object_set_new(item, "actions", json_pack("{s:{s:s, s:{}, s:i}}", "download", "href", get,
							       "header", "expires_in", (int)api_ctx.lfs_url_ttl));
		free(get);
	}
	return item;
}

static enum MHD_Result handle_batch(struct request *req)
{
	struct repo_handle h;
	enum MHD_Result result;
	json_t *objects, *o;
	int upload;
	size_t i;
	if (batch_parse(req, req->json, &upload, &objects, &result) < 0 ||
	    batch_open_repo(req, req->json, upload, &h, &result) < 0)
		return result;
	json_t *out = json_array();
	json_array_foreach(objects, i, o) {
		int failed = 0;
		json_t *item = batch_object(req, &h, o, upload, &failed);
		if (!item) {
			json_decref(out);
			return failed == KHUB_EDB ? respond_db_unavailable(req)
						  : lfs_error(req, 503, "the LFS store could not be reached, retry later");
		}
		json_array_append_new(out, item);
	}
	json_t *body = json_pack("{s:s, s:o, s:s}", "transfer", "basic", "objects", out, "hash_algo", "sha256");
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	struct answer a;
	answer_init(&a, 200);
	answer_header(&a, "Content-Type", LFS_JSON);
	answer_body_take(&a, text, strlen(text));
	return answer_send(req, &a);
}

/* ---- PUT /api/lfs/upload/{token}/{oid}/{size}/{repo} ---------------------------------- */

struct upload_state {
	struct lfs_writer *writer;
	uint64_t expected_size;
	uint64_t received;
	int64_t repo_id;
	int64_t inflight;	/* the lfs_inflight row keeping khub gc away (0: none or handed to the job) */
	int write_error;	/* KHUB_ENOSPC or KHUB_EIO: the server failed, not the client */
};

static int parse_action_args(struct request *req, const char *action, uint64_t *size, int64_t *repo_id)
{
	const char *token = req->args[0], *oid = req->args[1];
	char *end, *end2, signed_action[64];
	unsigned long long n = strtoull(req->args[2], &end, 10);
	long long id = strtoll(req->args[3], &end2, 10);
	if (*end || *end2 || !is_lower_hex(oid, 64))
		return -1;
	*size = n;
	*repo_id = id;
	snprintf(signed_action, sizeof(signed_action), "%s/%lld", action, id);
	return check_url_token(signed_action, token, oid, n);
}

static int upload_begin(struct request *req)
{
	struct upload_state *st = xcalloc(1, sizeof(*st));
	req->stream_state = st;
	if (parse_action_args(req, "upload", &st->expected_size, &st->repo_id) < 0) {
		lfs_error(req, 403, "this upload URL is invalid or has expired; ask the batch API for a new one");
		return -1;
	}
	/* named in flight until linked: khub gc must not remove the object
	 * (stored already for another repo, or once this one stores it) */
	if (db_lfs_inflight_begin(req->args[1], &st->inflight) < 0) {
		respond_db_unavailable(req);
		return -1;
	}
	/* always written and verified, even when another repo stored the same
	 * object: the upload is what proves the caller has the bytes */
	if (!(st->writer = lfs_writer_begin(api_ctx.lfs))) {
		lfs_error(req, 503, "the object store is unavailable");
		return -1;
	}
	return 0;
}

static int upload_data(struct request *req, const char *data, size_t len)
{
	struct upload_state *st = req->stream_state;
	st->received += len;
	if (st->received > st->expected_size)
		return -1;	/* more than announced: refused at the end */
	int rc = st->writer ? lfs_writer_write(st->writer, data, len) : 0;
	if (rc < 0)
		st->write_error = rc;	/* the rest is drained; answered at the end */
	return rc;
}

/* A failure of ours while storing: 507 when the disk is full, else 500. */
static enum MHD_Result upload_storage_error(struct request *req, int rc)
{
	if (rc == KHUB_ENOSPC)
		return respond_storage_full(req, "LFS objects");
	return respond_error(req, 500, NULL, "cannot store the object: %s", khub_strerror(rc));
}

static void upload_cleanup(struct request *req)
{
	struct upload_state *st = req->stream_state;
	if (!st)
		return;
	lfs_writer_abort(st->writer);
	db_lfs_inflight_end(st->inflight);
	free(st);
	req->stream_state = NULL;
}

/* The slow end of an upload (fsync, rename into place, the repo link),
 * on the work queue: a large object's fsync must not stall the other
 * connections of a server thread. */
struct upload_job {
	struct lfs_writer *writer;	/* sealed; NULL once installed */
	int64_t repo_id;
	int64_t inflight;		/* ended once linked (or by upload_job_free) */
	char oid[65];
};

static int upload_job_run(void *arg)
{
	struct upload_job *job = arg;
	if (!job || !job->writer)
		return KHUB_EIO;	/* a rerun without the content: nothing to store */
	char oid[65];
	uint64_t size;
	int rc = lfs_writer_commit(job->writer, job->oid, oid, &size);
	job->writer = NULL;	/* stored, or removed, by commit */
	if (rc < 0)
		return rc;
	rc = db_lfs_link(job->repo_id, job->oid) < 0 ? KHUB_EDB : 0;
	db_lfs_inflight_end(job->inflight);	/* the link keeps it now */
	job->inflight = 0;
	return rc;
}

static void upload_job_free(void *arg)
{
	struct upload_job *job = arg;
	if (!job)
		return;
	lfs_writer_abort(job->writer);
	db_lfs_inflight_end(job->inflight);
	free(job);
}

static enum MHD_Result handle_upload(struct request *req)
{
	struct upload_state *st = req->stream_state;
	const char *oid = req->args[1];
	enum MHD_Result result;
	struct upload_job *job = NULL;
	if (st->write_error)
		return upload_storage_error(req, st->write_error);
	if (st->received != st->expected_size)
		return lfs_error(req, 400, "received %" PRIu64 " bytes, the batch announced %" PRIu64, st->received,
				 st->expected_size);
	if (st->writer) {	/* first call: check the content, hand it to the job */
		char got[65];
		uint64_t size;
		int rc = lfs_writer_seal(st->writer, got, &size);
		if (rc < 0 || strcmp(got, oid) != 0) {
			lfs_writer_abort(st->writer);
			st->writer = NULL;
			return rc < 0 ? upload_storage_error(req, rc)
				      : lfs_error(req, 400, "content hashes to %s, not %s; nothing was stored", got, oid);
		}
		job = xcalloc(1, sizeof(*job));
		job->writer = st->writer;
		job->repo_id = st->repo_id;
		job->inflight = st->inflight;
		st->inflight = 0;
		snprintf(job->oid, sizeof(job->oid), "%s", oid);
		st->writer = NULL;
	}
	/* without a writer (called again once the job ended) the key finds
	 * the job this request waits for */
	char key[96];
	snprintf(key, sizeof(key), "lfs-upload/%s", req->request_id);
	int job_rc = 0;
	int rc = work_queue_run(req, key, upload_job_run, job, upload_job_free, &job_rc, &result);
	if (rc != 0)
		return result;	/* parked, or 503 (queue full, past work_wait_ms) */
	if (job_rc == KHUB_EDB)
		return respond_db_unavailable(req);
	if (job_rc < 0)
		return upload_storage_error(req, job_rc);
	struct answer a;
	answer_init(&a, 200);
	answer_header(&a, "ETag", "\"stored\"");
	return answer_send(req, &a);
}

static const struct stream_ops upload_stream_ops = { upload_begin, upload_data, upload_cleanup };

/* ---- verify and download ---------------------------------------------------------- */

static enum MHD_Result handle_verify(struct request *req)
{
	uint64_t size, stored;
	int64_t repo_id;
	if (parse_action_args(req, "verify", &size, &repo_id) < 0)
		return lfs_error(req, 403, "this verify URL is invalid or has expired");
	int linked = db_lfs_linked(repo_id, req->args[1]);
	if (linked < 0)
		return respond_db_unavailable(req);
	int src = lfs_store_stat(api_ctx.lfs, req->args[1], &stored);
	if (src == KHUB_EIO)	/* the store failed to answer: not an answer that it lacks the object */
		return lfs_error(req, 503, "the LFS store could not be reached, retry later");
	if (src < 0 || stored != size || !linked)
		return lfs_error(req, 404, "object %s is not stored (or has another size)", req->args[1]);
	return respond_json_text(req, 200, "{}", 2);
}

static enum MHD_Result handle_download(struct request *req)
{
	uint64_t size, from = 0, to;
	int64_t repo_id;
	if (parse_action_args(req, "download", &size, &repo_id) < 0)
		return lfs_error(req, 403, "this download URL is invalid or has expired");
	/* the batch checked the link when it signed this URL; checked again,
	 * cheaply, so that no path hands out bytes of an unlinked object */
	int linked = db_lfs_linked(repo_id, req->args[1]);
	if (linked < 0)
		return lfs_error(req, 503, "database unavailable");
	if (!linked)
		return lfs_error(req, 404, "object %s is not stored", req->args[1]);
	to = size ? size - 1 : 0;
	int ranged = http_range_parse(request_header(req, "Range"), size, &from, &to);
	if (ranged < 0)
		return lfs_error(req, 416, "range not satisfiable");
	uint64_t count = size ? to - from + 1 : 0;
	struct answer a;
	answer_init(&a, ranged > 0 ? 206 : 200);
	int orc = answer_lfs_object(req, &a, api_ctx.lfs, req->args[1], size, from, count);
	if (orc == 1)
		return MHD_YES;	/* parked until the store answers */
	if (orc == KHUB_EBUSY)	/* lfs_s3_streams_max reads under way: none started */
		return lfs_error(req, 503, "too many LFS reads under way on this server, retry later");
	if (orc == KHUB_EIO && lfs_store_remote(api_ctx.lfs))	/* S3 unreachable or failing: passing */
		return lfs_error(req, 503, "the LFS store could not be reached for object %s, retry later",
				 req->args[1]);
	if (orc == KHUB_EIO || orc == KHUB_EINVAL)	/* damaged (quarantined) or unreadable: never those bytes */
		return lfs_error(req, 502, "the LFS store could not give object %s intact (see the server log)",
				 req->args[1]);
	if (orc < 0)
		return lfs_error(req, 404, "object %s is not stored", req->args[1]);
	answer_headerf(&a, "ETag", "\"%s\"", req->args[1]);
	answer_header(&a, "Content-Type", "application/octet-stream");
	answer_header(&a, "Accept-Ranges", "bytes");
	if (ranged > 0)
		answer_headerf(&a, "Content-Range", "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, from, to, size);
	return answer_send(req, &a);
}

/* The batch is ACCESS_GIT: the operation in its body decides (download:
 * read; upload: write, or read and a write token for a pull request, i.e.
 * no ref or refs/pr/N). */
const struct route lfs_routes[] = {
	{ METHOD_POST, "/{tprefix}/{ns}/{gname}/info/lfs/objects/batch", handle_batch, ROUTE_JSON | ROUTE_GIT, 0, NULL,
	  ACCESS_GIT },
	{ METHOD_POST, "/{ns}/{gname}/info/lfs/objects/batch", handle_batch, ROUTE_JSON | ROUTE_GIT, REPO_MODEL, NULL,
	  ACCESS_GIT },
	/* The action URLs carry their own signature: an Authorization header
	 * (git-lfs may send the one it used for the batch) is not read. */
	{ METHOD_PUT, "/api/lfs/upload/{arg}/{arg}/{arg}/{arg}", handle_upload, ROUTE_NO_AUTH, 0, &upload_stream_ops,
	  ACCESS_SIGNED_URL },
	{ METHOD_POST, "/api/lfs/verify/{arg}/{arg}/{arg}/{arg}", handle_verify, ROUTE_BODY | ROUTE_NO_AUTH, 0, NULL,
	  ACCESS_SIGNED_URL },
	{ METHOD_GET | METHOD_HEAD, "/api/lfs/download/{arg}/{arg}/{arg}/{arg}", handle_download, ROUTE_NO_AUTH, 0,
	  NULL, ACCESS_SIGNED_URL },
	{ 0, NULL, NULL, 0, 0, NULL },
};
