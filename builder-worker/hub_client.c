/* hub_client.c -- khub-worker's HTTP client (libcurl): JSON calls, the
 * source download and the output upload of docs/build-farm.md, each carrying
 * the worker token. One client per thread; no retry here (callers decide). */
#include "builder-worker/daemon_internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define REPLY_BODY_LIMIT (1024 * 1024)	/* JSON answers and error bodies */

struct hub_client {
	CURL *curl;
	const char *url;
	char *auth_header;
};

int hub_global_init(void)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

void hub_global_cleanup(void)
{
	curl_global_cleanup();
}

struct hub_client *hub_client_new(const char *url, const char *token)
{
	struct hub_client *hc = xcalloc(1, sizeof(*hc));
	hc->curl = curl_easy_init();
	if (!hc->curl) {
		free(hc);
		return NULL;
	}
	hc->url = url;
	hc->auth_header = xasprintf("Authorization: Bearer %s", token);
	return hc;
}

void hub_client_free(struct hub_client *hc)
{
	if (!hc)
		return;
	curl_easy_cleanup(hc->curl);
	/* the header held the token: do not leave it in freed memory */
	explicit_bzero(hc->auth_header, strlen(hc->auth_header));
	free(hc->auth_header);
	free(hc);
}

void hub_reply_release(struct hub_reply *r)
{
	if (!r)
		return;
	strbuf_release(&r->body);
	r->status = 0;
	r->error[0] = '\0';
}

struct sink {
	struct strbuf *body;	/* the answer, bounded */
	FILE *file;		/* or a file, for a 200 download */
	uint64_t written, limit;
	long *status_seen;
	CURL *curl;
	int over_limit;
};

static size_t sink_write(char *data, size_t size, size_t n, void *ctx)
{
	struct sink *s = ctx;
	size_t len = size * n;
	long status = 0;
	curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
	if (s->file && status == 200) {
		if (s->written + len > s->limit) {
			s->over_limit = 1;
			return 0;
		}
		if (fwrite(data, 1, len, s->file) != len)
			return 0;
		s->written += len;
		return len;
	}
	if (s->body->len + len > REPLY_BODY_LIMIT) {
		s->over_limit = 1;
		return 0;
	}
	strbuf_add(s->body, data, len);
	return len;
}

struct source {
	const char *data;
	size_t len, pos;
	FILE *file;
};

/* libcurl rewinds a body it must send again (a reused connection the
 * server had closed, a redirect). */
static int source_seek(void *ctx, curl_off_t offset, int origin)
{
	struct source *src = ctx;
	if (origin != SEEK_SET || offset < 0)
		return CURL_SEEKFUNC_CANTSEEK;
	if (src->file)
		return fseeko(src->file, (off_t)offset, SEEK_SET) == 0 ? CURL_SEEKFUNC_OK : CURL_SEEKFUNC_FAIL;
	if ((size_t)offset > src->len)
		return CURL_SEEKFUNC_FAIL;
	src->pos = (size_t)offset;
	return CURL_SEEKFUNC_OK;
}

static size_t source_read(char *buf, size_t size, size_t n, void *ctx)
{
	struct source *src = ctx;
	size_t want = size * n;
	if (src->file)
		return fread(buf, 1, want, src->file);
	size_t left = src->len - src->pos;
	if (want > left)
		want = left;
	memcpy(buf, src->data + src->pos, want);
	src->pos += want;
	return want;
}

/* Every connection to khub is close-on-exec from its first instant
 * (SOCK_CLOEXEC, not a flag set after): another thread may be forking a
 * build at that moment, and build code must never hold a connection that
 * carries the worker's token (docs/worker-build.md, Isolation). */
static curl_socket_t open_cloexec_socket(void *ctx, curlsocktype purpose, struct curl_sockaddr *a)
{
	(void)ctx, (void)purpose;
	int fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
	return fd < 0 ? CURL_SOCKET_BAD : fd;
}

/* The common part of every call: URL, token, timeouts, the answer's sink. */
static int perform(struct hub_client *hc, const char *method, const char *path,
		   struct curl_slist *headers, struct sink *sink, struct source *src, curl_off_t upload_len,
		   long timeout_s, struct hub_reply *r)
{
	CURL *c = hc->curl;
	char *url = xasprintf("%s%s", hc->url, path);
	char errbuf[CURL_ERROR_SIZE] = "";
	int ret = 0;

	r->status = 0;
	r->error[0] = '\0';
	strbuf_reset(&r->body);
	curl_easy_reset(c);
	headers = curl_slist_append(headers, hc->auth_header);
	headers = curl_slist_append(headers, "Expect:");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_cloexec_socket);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
	/* a stalled transfer ends; a long but moving one (a big output) does not */
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, timeout_s > 60 ? timeout_s : 60L);
	if (timeout_s > 0)
		curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, sink);
	sink->curl = c;
	if (strcmp(method, "PUT") == 0 || strcmp(method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, source_seek);
		curl_easy_setopt(c, CURLOPT_SEEKDATA, src);
	}
	if (strcmp(method, "PUT") == 0) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, source_read);
		curl_easy_setopt(c, CURLOPT_READDATA, src);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, upload_len);
	} else if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, source_read);
		curl_easy_setopt(c, CURLOPT_READDATA, src);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, upload_len);
	} else if (strcmp(method, "GET") != 0) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	}

	CURLcode rc = curl_easy_perform(c);
	fds_set_cloexec_from(3);	/* libcurl's own descriptors (its wakeup socketpair) have no flag */
	if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && sink->over_limit))
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	if (rc != CURLE_OK) {
		if (sink->over_limit)
			snprintf(r->error, sizeof(r->error), "the answer is over the size limit");
		else
			snprintf(r->error, sizeof(r->error), "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
		r->status = 0;
		ret = -1;
	}
	curl_slist_free_all(headers);
	free(url);
	return ret;
}

int hub_call(struct hub_client *hc, const char *method, const char *path, const void *body,
	     size_t body_len, const char *content_type, long timeout_s, struct hub_reply *r)
{
	struct source src = { .data = body ? body : "", .len = body ? body_len : 0 };
	struct sink sink = { .body = &r->body };
	struct curl_slist *headers = NULL;
	char *ct = xasprintf("Content-Type: %s", content_type ? content_type : "application/json");
	if (strcmp(method, "GET") != 0)
		headers = curl_slist_append(headers, ct);
	headers = curl_slist_append(headers, "Accept: application/json");
	free(ct);
	return perform(hc, method, path, headers, &sink, &src, (curl_off_t)src.len, timeout_s, r);
}

int hub_download(struct hub_client *hc, const char *path, const char *dest, uint64_t limit,
		 struct hub_reply *r)
{
	FILE *f = fopen(dest, "wbxe");
	if (!f) {
		snprintf(r->error, sizeof(r->error), "%s: %s", dest, strerror(errno));
		r->status = 0;
		return -1;
	}
	struct source src = { .data = "" };
	struct sink sink = { .body = &r->body, .file = f, .limit = limit };
	int ret = perform(hc, "GET", path, NULL, &sink, &src, 0, 0, r);
	if (fclose(f) != 0 && ret == 0) {
		snprintf(r->error, sizeof(r->error), "%s: %s", dest, strerror(errno));
		r->status = 0;
		ret = -1;
	}
	return ret;
}

int hub_upload(struct hub_client *hc, const char *path, const char *src_path, struct hub_reply *r)
{
	FILE *f = fopen(src_path, "rbe");
	if (!f) {
		snprintf(r->error, sizeof(r->error), "%s: %s", src_path, strerror(errno));
		r->status = 0;
		return -1;
	}
	fseeko(f, 0, SEEK_END);
	off_t size = ftello(f);
	rewind(f);
	struct source src = { .file = f };
	struct sink sink = { .body = &r->body };
	struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/x-tar");
	int ret = perform(hc, "PUT", path, headers, &sink, &src, (curl_off_t)size, 0, r);
	fclose(f);
	return ret;
}

json_t *hub_reply_json(const struct hub_reply *r)
{
	if (!r->body.len)
		return NULL;
	json_t *j = json_loadb(r->body.buf, r->body.len, 0, NULL);
	if (j && !json_is_object(j)) {
		json_decref(j);
		return NULL;
	}
	return j;
}

const char *hub_reply_error(struct hub_reply *r)
{
	if (r->status == 0)
		return r->error;
	json_t *j = hub_reply_json(r);
	const char *e = j ? json_string_value(json_object_get(j, "error")) : NULL;
	if (e)
		snprintf(r->error, sizeof(r->error), "%ld %s", r->status, e);
	else
		snprintf(r->error, sizeof(r->error), "%ld %.*s", r->status,
			 (int)(r->body.len > 200 ? 200 : r->body.len), r->body.buf ? r->body.buf : "");
	json_decref(j);
	return r->error;
}

int hub_reply_retryable(const struct hub_reply *r)
{
	return r->status == 0 || r->status == 408 || r->status == 429 || r->status >= 500;
}
