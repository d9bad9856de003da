/* lfs_s3.c -- the LFS store's S3 backend: verified objects go to
 * objects/ab/cd/{oid} in a bucket (requests signed by libcurl's SigV4;
 * multipart above part_bytes); reads are streamed from a thread per read
 * (lfs_stream.c; at most streams_max alive, more are refused), the whole
 * object hashed on the way (a damaged one is
 * moved to quarantine/lfs/ in the bucket), or fetched whole and
 * re-verified (open_object, for the CLI's copies); GET URLs presigned by
 * hand (SigV4 query form). */
#include "storage/lfs/lfs_backend.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct s3 {
	char *base;		/* URL up to the bucket's root, no trailing slash */
	char *host;		/* Host header value the signature covers */
	char *path_prefix;	/* "/bucket" (path style) or "" */
	char *bucket, *region, *sigv4, *userpwd, *access_key, *secret_key, *tmp_dir;
	long part_bytes;
	long streams_max;	/* streamed reads alive at once (process-wide) */
	atomic_int refs;	/* the store and each stream's thread */
};

#define STREAM_BUFFER ((size_t)2 << 20)	/* per streamed read */

static _Atomic uint64_t s3_damaged_total;

/* One request's inputs and outputs. */
struct s3_call {
	const char *method;
	char *url;
	const char *payload_sha;	/* x-amz-content-sha256 */
	const char *meta_sha;		/* x-amz-meta-sha256 to set (PUT, initiate) */
	int in_fd;			/* upload from in_fd at in_off, in_len bytes */
	off_t in_off;
	uint64_t in_len;
	const char *in_buf;		/* or from memory */
	int out_fd;			/* download to out_fd (hashing into sha), */
	EVP_MD_CTX *sha;		/* or, with out_fd -1 and sha, only hash */
	uint64_t received;		/* bytes of a 2xx body downloaded or hashed */
	struct strbuf body;		/* or collect a small answer, */
	size_t body_max;		/* up to 64 KiB unless this says more */
	CURL *curl;
	long status;
	uint64_t length;		/* Content-Length answered */
	int64_t last_modified;		/* Last-Modified answered, unix time; 0: none */
	char got_meta[65], etag[80];
	uint64_t total;			/* the object's size (Content-Range, or Content-Length of a 200) */
	const char *range;		/* CURLOPT_RANGE ("from-to") or NULL */
	const char *extra[3];		/* more header lines, NULL-terminated */
	/* or hand the body to sink (streamed reads); it returns len, or 0 to stop */
	size_t (*sink)(struct s3_call *c, const char *buf, size_t len);
	void *sink_arg;
	int stopped;			/* the sink stopped the transfer on purpose */
};

static const char empty_sha[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

static int read_credentials_file(const char *path, char **ak, char **sk)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		log_error("lfs s3: cannot read %s: %s", path, strerror(errno));
		return KHUB_EIO;
	}
	char line[512], key[64], val[400];
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, " %63[a-z_] = %399s", key, val) != 2)
			continue;
		if (strcmp(key, "aws_access_key_id") == 0 && !*ak)
			*ak = xstrdup(val);
		else if (strcmp(key, "aws_secret_access_key") == 0 && !*sk)
			*sk = xstrdup(val);
	}
	fclose(f);
	return *ak && *sk ? 0 : KHUB_EINVAL;
}

static int load_credentials(struct s3 *s, const char *file)
{
	if (file && file[0])
		return read_credentials_file(file, &s->access_key, &s->secret_key);
	const char *ak = getenv("AWS_ACCESS_KEY_ID"), *sk = getenv("AWS_SECRET_ACCESS_KEY");
	if (!ak || !sk || !ak[0] || !sk[0])
		return KHUB_EINVAL;
	s->access_key = xstrdup(ak);
	s->secret_key = xstrdup(sk);
	return 0;
}

/* The store and every streamed read hold s; the last to let go frees it. */
static void s3_close(void *priv)
{
	struct s3 *s = priv;
	if (!s || atomic_fetch_sub(&s->refs, 1) > 1)
		return;
	free(s->base), free(s->host), free(s->path_prefix), free(s->bucket), free(s->region), free(s->sigv4);
	free(s->userpwd), free(s->access_key), free(s->secret_key), free(s->tmp_dir);
	free(s);
}

/* base, host and path prefix from the endpoint and addressing style. */
static int split_endpoint(struct s3 *s, const struct lfs_s3_settings *cfg)
{
	const char *e = cfg->endpoint, *hp = strstr(e, "://");
	if (!hp || !cfg->bucket[0] || strchr(cfg->bucket, '/'))
		return KHUB_EINVAL;
	hp += 3;
	size_t hlen = strcspn(hp, "/");
	if (cfg->path_style) {
		s->host = xstrndup(hp, hlen);
		s->path_prefix = xasprintf("/%s", cfg->bucket);
		s->base = xasprintf("%.*s%s", (int)(hp - e + hlen), e, s->path_prefix);
	} else {
		s->host = xasprintf("%s.%.*s", cfg->bucket, (int)hlen, hp);
		s->path_prefix = xstrdup("");
		s->base = xasprintf("%.*s%s", (int)(hp - e), e, s->host);
	}
	return 0;
}

void *lfs_s3_open(const struct lfs_s3_settings *cfg, const char *tmp_dir)
{
	struct s3 *s = xcalloc(1, sizeof(*s));
	atomic_init(&s->refs, 1);
	if (!cfg->endpoint || split_endpoint(s, cfg) < 0) {
		log_error("lfs s3: lfs_s3_endpoint '%s' / lfs_s3_bucket '%s' unusable (want http(s)://host[:port] "
			  "and a bucket name)", cfg->endpoint ? cfg->endpoint : "", cfg->bucket ? cfg->bucket : "");
		s3_close(s);
		return NULL;
	}
	if (load_credentials(s, cfg->credentials_file) < 0) {
		log_error("lfs s3: no credentials (lfs_s3_credentials_file, or AWS_ACCESS_KEY_ID and "
			  "AWS_SECRET_ACCESS_KEY in the environment)");
		s3_close(s);
		return NULL;
	}
	s->bucket = xstrdup(cfg->bucket);
	s->region = xstrdup(cfg->region && cfg->region[0] ? cfg->region : "us-east-1");
	s->sigv4 = xasprintf("aws:amz:%s:s3", s->region);
	s->userpwd = xasprintf("%s:%s", s->access_key, s->secret_key);
	s->tmp_dir = xstrdup(tmp_dir);
	s->part_bytes = cfg->part_bytes >= 5L << 20 ? cfg->part_bytes : 64L << 20;
	s->streams_max = cfg->streams_max;
	return s;
}

static char *object_url(struct s3 *s, const char *oid, const char *query)
{
	return xasprintf("%s/objects/%.2s/%.2s/%s%s%s", s->base, oid, oid + 2, oid, query ? "?" : "",
			 query ? query : "");
}

/* A time the answer gives (Last-Modified's RFC 1123 form, a listing's
 * ISO 8601 one), UTC; 0 when it does not parse. */
static int64_t parse_time(const char *text, const char *format)
{
	struct tm tm = { 0 };
	return strptime(text, format, &tm) ? (int64_t)timegm(&tm) : 0;
}

static size_t on_header(char *buf, size_t size, size_t n, void *arg)
{
	struct s3_call *c = arg;
	size_t len = size * n;
	char line[256];
	snprintf(line, sizeof(line), "%.*s", (int)(len < sizeof(line) - 1 ? len : sizeof(line) - 1), buf);
	line[strcspn(line, "\r\n")] = '\0';
	unsigned long long v;
	if (strncasecmp(line, "content-length:", 15) == 0 && sscanf(line + 15, " %llu", &v) == 1)
		c->length = v;
	else if (strncasecmp(line, "content-range:", 14) == 0 && sscanf(line + 14, " bytes %*u-%*u/%llu", &v) == 1)
		c->total = v;
	else if (strncasecmp(line, "x-amz-meta-sha256:", 18) == 0)
		sscanf(line + 18, " %64s", c->got_meta);
	else if (strncasecmp(line, "etag:", 5) == 0)
		sscanf(line + 5, " %79s", c->etag);
	else if (strncasecmp(line, "last-modified:", 14) == 0)
		c->last_modified = parse_time(line + 14, " %a, %d %b %Y %H:%M:%S");
	return len;
}

static size_t on_body(char *buf, size_t size, size_t n, void *arg)
{
	struct s3_call *c = arg;
	size_t len = size * n;
	if (!c->status)
		curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &c->status);
	if (c->sink)
		return c->sink(c, buf, len);
	if (c->status / 100 == 2 && (c->out_fd >= 0 || c->sha)) {
		if (c->sha)
			EVP_DigestUpdate(c->sha, buf, len);
		c->received += len;
		return c->out_fd >= 0 && write_all(c->out_fd, buf, len) < 0 ? 0 : len;
	}
	if (c->body.len < (c->body_max ? c->body_max : 65536))
		strbuf_add(&c->body, buf, len);
	return len;
}

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
	struct s3_call *c = arg;
	size_t want = size * n;
	if (want > c->in_len)
		want = (size_t)c->in_len;
	if (c->in_buf) {
		memcpy(buf, c->in_buf, want);
		c->in_buf += want;
	} else {
		ssize_t got = pread(c->in_fd, buf, want, c->in_off);
		if (got < 0)
			return CURL_READFUNC_ABORT;
		want = (size_t)got;
		c->in_off += got;
	}
	c->in_len -= want;
	return want;
}

static struct curl_slist *call_headers(const struct s3_call *c)
{
	char h[160];
	struct curl_slist *l = NULL;
	snprintf(h, sizeof(h), "x-amz-content-sha256: %s", c->payload_sha ? c->payload_sha : "UNSIGNED-PAYLOAD");
	l = curl_slist_append(l, h);
	if (c->meta_sha) {
		snprintf(h, sizeof(h), "x-amz-meta-sha256: %s", c->meta_sha);
		l = curl_slist_append(l, h);
	}
	for (int i = 0; c->extra[i]; i++)
		l = curl_slist_append(l, c->extra[i]);
	return l;
}

/* Send c; 0 with c->status set (any HTTP status), KHUB_EIO when no answer. */
static int s3_perform(struct s3 *s, struct s3_call *c)
{
	CURL *curl = c->curl = curl_easy_init();
	if (!curl)
		return KHUB_EIO;
	struct curl_slist *hdrs = call_headers(c);
	curl_easy_setopt(curl, CURLOPT_URL, c->url);
	curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, s->sigv4);
	curl_easy_setopt(curl, CURLOPT_USERPWD, s->userpwd);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	/* no "Expect:" header to switch 100-continue off: curl 7.88 would sign it empty */
	curl_easy_setopt(curl, CURLOPT_EXPECT_100_TIMEOUT_MS, 200L);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 30L);
	curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 120L);
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(curl, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, c);
	if (c->range)
		curl_easy_setopt(curl, CURLOPT_RANGE, c->range);
	if (c->sink)	/* streamed: fewer, larger hand-overs than curl's 16 KiB */
		curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 512L * 1024);
	if (strcmp(c->method, "HEAD") == 0) {
		curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
	} else if (c->in_fd >= 0 || c->in_buf) {
		curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)c->in_len);
		curl_easy_setopt(curl, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(curl, CURLOPT_READDATA, c);
	}
	if (strcmp(c->method, "GET") != 0 && strcmp(c->method, "HEAD") != 0)
		curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, c->method);
	CURLcode cc = curl_easy_perform(curl);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &c->status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(curl);
	if (cc != CURLE_OK) {
		if (!c->stopped)
			log_error("lfs s3: %s %s: %s", c->method, c->url, curl_easy_strerror(cc));
		return KHUB_EIO;
	}
	return 0;
}

static void call_init(struct s3_call *c, const char *method, char *url)
{
	memset(c, 0, sizeof(*c));
	c->method = method;
	c->url = url;
	c->in_fd = c->out_fd = -1;
	c->payload_sha = empty_sha;
	strbuf_init(&c->body);
}

static void call_done(struct s3_call *c)
{
	free(c->url);
	strbuf_release(&c->body);
}

static int call_failed(struct s3_call *c)
{
	log_error("lfs s3: %s %s: HTTP %ld %.*s", c->method, c->url, c->status, (int)(c->body.len > 300 ? 300 : c->body.len),
		  c->body.buf ? c->body.buf : "");
	return KHUB_EIO;
}

/* An object counts only when khub put it there: its x-amz-meta-sha256 is
 * the oid (anything else at the key is not ours to serve). */
static int s3_stat(void *priv, const char *oid, uint64_t *size, int64_t *mtime)
{
	struct s3 *s = priv;
	struct s3_call c;
	call_init(&c, "HEAD", object_url(s, oid, NULL));
	int rc = s3_perform(s, &c);
	if (rc == 0 && c.status == 404)
		rc = KHUB_ENOTFOUND;
	else if (rc == 0 && c.status != 200)
		rc = call_failed(&c);
	else if (rc == 0 && strcmp(c.got_meta, oid) != 0)
		rc = KHUB_ENOTFOUND;
	if (rc == 0 && size)
		*size = c.length;
	if (rc == 0 && mtime)
		*mtime = c.last_modified;
	call_done(&c);
	return rc;
}

/* Fetch into an unlinked temp file, hashing: only content whose sha256 is
 * the oid is handed out. */
static int s3_open_object(void *priv, const char *oid, int *fd, uint64_t *size)
{
	struct s3 *s = priv;
	char *path = xasprintf("%s/fetch-XXXXXX", s->tmp_dir);
	int f = mkostemp(path, O_CLOEXEC);
	if (f < 0) {
		free(path);
		return KHUB_EIO;
	}
	unlink(path);
	free(path);
	struct s3_call c;
	call_init(&c, "GET", object_url(s, oid, NULL));
	c.out_fd = f;
	c.sha = EVP_MD_CTX_new();
	EVP_DigestInit_ex(c.sha, EVP_sha256(), NULL);
	int rc = s3_perform(s, &c);
	char got[65] = "";
	sha256_final_hex(c.sha, got);
	struct stat st;
	if (rc == 0 && c.status == 404)
		rc = KHUB_ENOTFOUND;
	else if (rc == 0 && c.status != 200)
		rc = call_failed(&c);
	else if (rc == 0 && strcmp(got, oid) != 0) {
		log_error("lfs s3: object %s came back with sha256 %s: not served", oid, got);
		rc = KHUB_EIO;
	}
	if (rc == 0 && (fstat(f, &st) < 0 || lseek(f, 0, SEEK_SET) < 0))
		rc = KHUB_EIO;
	EVP_MD_CTX_free(c.sha);
	call_done(&c);
	if (rc < 0) {
		close(f);
		return rc;
	}
	*fd = f;
	if (size)
		*size = (uint64_t)st.st_size;
	return 0;
}

/* One PUT; S3 checks the body against x-amz-content-sha256 = the oid. */
static int put_whole(struct s3 *s, int fd, uint64_t size, const char *oid)
{
	struct s3_call c;
	call_init(&c, "PUT", object_url(s, oid, NULL));
	c.payload_sha = oid;
	c.meta_sha = oid;
	c.in_fd = fd;
	c.in_len = size;
	int rc = s3_perform(s, &c);
	if (rc == 0 && c.status != 200)
		rc = call_failed(&c);
	call_done(&c);
	return rc;
}

/* The text between <tag> and </tag> in xml, or NULL; the caller frees. */
static char *xml_value(const char *xml, const char *tag)
{
	char *open = xasprintf("<%s>", tag), *close = xasprintf("</%s>", tag);
	const char *a = xml ? strstr(xml, open) : NULL, *b = a ? strstr(a, close) : NULL;
	char *v = b ? xstrndup(a + strlen(open), (size_t)(b - a - (long)strlen(open))) : NULL;
	free(open);
	free(close);
	return v;
}

/* A small request with an in-memory body; its answer in c (caller: call_done). */
static int small_call(struct s3 *s, struct s3_call *c, const char *method, char *url, const char *body)
{
	char sha[65];
	call_init(c, method, url);
	c->in_buf = body ? body : "";
	c->in_len = body ? strlen(body) : 0;
	sha256_hex(c->in_buf, (size_t)c->in_len, sha);
	c->payload_sha = sha;
	int rc = s3_perform(s, c);
	c->payload_sha = NULL;
	if (rc == 0 && c->status != 200)
		rc = call_failed(c);
	strbuf_add(&c->body, "", 1);
	return rc;
}

/* Upload every part; appends <Part> entries to parts. */
static int put_parts(struct s3 *s, int fd, uint64_t size, const char *oid, const char *upload_id, struct strbuf *parts)
{
	int rc = 0;
	for (uint64_t off = 0, n = 1; rc == 0 && off < size; off += (uint64_t)s->part_bytes, n++) {
		char *q = xasprintf("partNumber=%" PRIu64 "&uploadId=%s", n, upload_id);
		struct s3_call c;
		call_init(&c, "PUT", object_url(s, oid, q));
		free(q);
		c.payload_sha = NULL;	/* UNSIGNED-PAYLOAD: the whole was verified before */
		c.in_fd = fd;
		c.in_off = (off_t)off;
		c.in_len = size - off < (uint64_t)s->part_bytes ? size - off : (uint64_t)s->part_bytes;
		rc = s3_perform(s, &c);
		if (rc == 0 && (c.status != 200 || !c.etag[0]))
			rc = call_failed(&c);
		else if (rc == 0)
			strbuf_addf(parts, "<Part><PartNumber>%" PRIu64 "</PartNumber><ETag>%s</ETag></Part>", n,
				       c.etag);
		call_done(&c);
	}
	return rc;
}

/* Initiate, upload the parts, complete (the object appears whole at its
 * key only then); abort on any failure. */
static int put_multipart(struct s3 *s, int fd, uint64_t size, const char *oid)
{
	struct s3_call c, init;
	char *id = NULL;
	/* "uploads=", not "uploads": curl 7.88 signs the query as written */
	call_init(&init, "POST", object_url(s, oid, "uploads="));
	init.meta_sha = oid;
	init.in_buf = "";
	int rc = s3_perform(s, &init);
	strbuf_add(&init.body, "", 1);
	if (rc == 0 && (init.status != 200 || !(id = xml_value(init.body.buf, "UploadId"))))
		rc = call_failed(&init);
	call_done(&init);
	if (rc < 0)
		return rc;
	struct strbuf parts;
	strbuf_init(&parts);
	strbuf_adds(&parts, "<CompleteMultipartUpload>");
	rc = put_parts(s, fd, size, oid, id, &parts);
	strbuf_adds(&parts, "</CompleteMultipartUpload>");
	char *q = xasprintf("uploadId=%s", id);
	if (rc == 0) {
		rc = small_call(s, &c, "POST", object_url(s, oid, q), parts.buf);
		if (rc == 0 && strstr(c.body.buf, "<Error>"))
			rc = call_failed(&c);
		call_done(&c);
	}
	if (rc < 0) {
		small_call(s, &c, "DELETE", object_url(s, oid, q), NULL);
		call_done(&c);
	}
	free(q);
	free(id);
	strbuf_release(&parts);
	return rc;
}

static int s3_install(void *priv, int fd, const char *tmp_path, const char *oid)
{
	struct s3 *s = priv;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return KHUB_EIO;
	uint64_t size = (uint64_t)st.st_size;
	int rc = size > (uint64_t)s->part_bytes ? put_multipart(s, fd, size, oid) : put_whole(s, fd, size, oid);
	if (rc == 0)
		unlink(tmp_path);
	else
		errno = EIO;
	return rc;
}

static void hmac256(const void *key, size_t klen, const char *msg, unsigned char out[32])
{
	unsigned int n = 32;
	HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &n);
}

/* SigV4's signature of string_to_sign for date (YYYYMMDD), hex. */
static void sign_v4(struct s3 *s, const char *date, const char *string_to_sign, char out[65])
{
	unsigned char k[32];
	char *secret = xasprintf("AWS4%s", s->secret_key);
	hmac256(secret, strlen(secret), date, k);
	free(secret);
	hmac256(k, 32, s->region, k);
	hmac256(k, 32, "s3", k);
	hmac256(k, 32, "aws4_request", k);
	hmac256(k, 32, string_to_sign, k);
	hex_encode(k, 32, out);
}

/* A presigned GET (SigV4 query form, only the Host header signed). */
static int s3_presign(void *priv, const char *oid, long ttl, char **url)
{
	struct s3 *s = priv;
	char stamp[17], date[9], hash[65], sig[65];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	memcpy(date, stamp, 8);
	date[8] = '\0';
	char *path = xasprintf("%s/objects/%.2s/%.2s/%s", s->path_prefix, oid, oid + 2, oid);
	char *query = xasprintf("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%s%%2F%s%%2F%s%%2Fs3%%2Faws4_request"
				"&X-Amz-Date=%s&X-Amz-Expires=%ld&X-Amz-SignedHeaders=host",
				s->access_key, date, s->region, stamp, ttl);
	char *canonical = xasprintf("GET\n%s\n%s\nhost:%s\n\nhost\nUNSIGNED-PAYLOAD", path, query, s->host);
	sha256_hex(canonical, strlen(canonical), hash);
	char *sts = xasprintf("AWS4-HMAC-SHA256\n%s\n%s/%s/s3/aws4_request\n%s", stamp, date, s->region, hash);
	sign_v4(s, date, sts, sig);
	*url = xasprintf("%s/objects/%.2s/%.2s/%s?%s&X-Amz-Signature=%s", s->base, oid, oid + 2, oid, query, sig);
	free(path), free(query), free(canonical), free(sts);
	return 0;
}

/* ---- what fsck, gc and /metrics need ---------------------------------------- */

/* Stream the object through sha256, keeping nothing: its bytes as stored,
 * whatever its mark says. */
static int s3_hash(void *priv, const char *oid, char got[65], uint64_t *size)
{
	struct s3 *s = priv;
	struct s3_call c;
	call_init(&c, "GET", object_url(s, oid, NULL));
	c.sha = EVP_MD_CTX_new();
	EVP_DigestInit_ex(c.sha, EVP_sha256(), NULL);
	int rc = s3_perform(s, &c);
	sha256_final_hex(c.sha, got);
	if (rc == 0 && c.status == 404)
		rc = KHUB_ENOTFOUND;
	else if (rc == 0 && c.status != 200)
		rc = call_failed(&c);
	if (size)
		*size = c.received;
	EVP_MD_CTX_free(c.sha);
	call_done(&c);
	return rc;
}

static int delete_key(struct s3 *s, char *url)
{
	struct s3_call c;
	call_init(&c, "DELETE", url);
	int rc = s3_perform(s, &c);
	if (rc == 0 && c.status != 204 && c.status != 200 && c.status != 404)
		rc = call_failed(&c);
	call_done(&c);
	return rc;
}

static int s3_remove(void *priv, const char *oid)
{
	struct s3 *s = priv;
	return delete_key(s, object_url(s, oid, NULL));
}

/* Does the key of oid still hold what was read (its ETag is etag)? */
static int still_holds(struct s3 *s, const char *oid, const char *etag)
{
	struct s3_call c;
	call_init(&c, "HEAD", object_url(s, oid, NULL));
	int same = s3_perform(s, &c) == 0 && c.status == 200 && etag[0] && strcmp(c.etag, etag) == 0;
	call_done(&c);
	return same;
}

/* Move a damaged object out of the way: a server-side copy to
 * quarantine/lfs/{oid}.{time}, then the key deleted, so that the next read
 * finds nothing (a mirror fetches it again) instead of serving it once more.
 * etag (or NULL: whatever it holds, as fsck --repair found it): the key is
 * deleted only if it still holds what was read, so a repaired object stays.
 * (No x-amz-copy-source-if-match: curl 7.88 signs it out of order.) */
static int quarantine_key(struct s3 *s, const char *oid, const char *etag)
{
	char src[400], *dest = xasprintf("%s/quarantine/lfs/%s.%ld", s->base, oid, (long)time(NULL));
	snprintf(src, sizeof(src), "x-amz-copy-source: /%s/objects/%.2s/%.2s/%s", s->bucket, oid, oid + 2, oid);
	struct s3_call c;
	call_init(&c, "PUT", dest);
	c.in_buf = "";
	c.extra[0] = src;
	int rc = s3_perform(s, &c);
	strbuf_add(&c.body, "", 1);
	if (rc == 0 && (c.status != 200 || strstr(c.body.buf, "<Error>")))
		rc = call_failed(&c);
	call_done(&c);
	if (rc == 0 && etag && !still_holds(s, oid, etag))
		rc = KHUB_ECONFLICT;
	if (rc == 0)
		rc = s3_remove(s, oid);
	if (rc == 0)
		log_warn("lfs s3: object %s moved to quarantine/lfs/ in the bucket", oid);
	else
		log_error("lfs s3: object %s could not be moved to quarantine (%s); it stays", oid,
			  rc == KHUB_ECONFLICT ? "it changed since it was read" : "see above");
	return rc;
}

static int s3_quarantine(void *priv, const char *oid)
{
	return quarantine_key(priv, oid, NULL);
}

/* XML's five entities decoded in place. */
static void xml_unescape(char *t)
{
	static const struct { const char *entity; char c; } map[] = {
		{ "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' }, { "&apos;", '\'' },
	};
	char *w = t;
	for (const char *r = t; *r;) {
		size_t k = 0;
		while (k < 5 && strncmp(r, map[k].entity, strlen(map[k].entity)) != 0)
			k++;
		*w++ = k < 5 ? map[k].c : *r;
		r += k < 5 ? strlen(map[k].entity) : 1;
	}
	*w = '\0';
}

/* One <Contents> entry of a listing, told to fn. */
static int list_entry(const char *xml, int (*fn)(const struct lfs_listed *o, void *arg), void *arg)
{
	char *key = xml_value(xml, "Key"), *size = xml_value(xml, "Size"), *when = xml_value(xml, "LastModified");
	int rc = 0;
	if (key && size) {
		xml_unescape(key);
		const char *name = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;
		struct lfs_listed o = { .name = name, .where = key, .size = strtoull(size, NULL, 10),
					.mtime = when ? parse_time(when, "%Y-%m-%dT%H:%M:%S") : 0 };
		o.well_placed = is_lower_hex(name, 64) && strlen(key) == 14 + 64 && strncmp(key, "objects/", 8) == 0 &&
				strncmp(key + 8, name, 2) == 0 && key[10] == '/' && strncmp(key + 11, name + 2, 2) == 0;
		rc = fn(&o, arg);
	}
	free(key), free(size), free(when);
	return rc < 0 ? rc : 0;
}

/* One page of ListObjectsV2 after token (NULL: the first); *next: the
 * next page's token, NULL after the last. */
static int list_page(struct s3 *s, const char *token, char **next, int (*fn)(const struct lfs_listed *o, void *arg),
		     void *arg)
{
	struct strbuf q;
	struct s3_call c;
	strbuf_init(&q);
	/* sorted and encoded: curl 7.88 signs the query as written */
	if (token) {
		strbuf_adds(&q, "continuation-token=");
		strbuf_add_urlencoded(&q, token, 0);
		strbuf_adds(&q, "&");
	}
	strbuf_adds(&q, "list-type=2&max-keys=1000&prefix=objects%2F");
	call_init(&c, "GET", xasprintf("%s/?%s", s->base, q.buf));
	c.body_max = 16 << 20;	/* 1000 entries are about 250 KB */
	strbuf_release(&q);
	int rc = s3_perform(s, &c);
	strbuf_add(&c.body, "", 1);
	if (rc == 0 && (c.status != 200 || !strstr(c.body.buf, "<ListBucketResult")))
		rc = call_failed(&c);
	const char *p = c.body.buf;
	while (rc == 0 && p && (p = strstr(p, "<Contents>"))) {
		const char *end = strstr(p, "</Contents>");
		char *entry = end ? xstrndup(p, (size_t)(end - p)) : NULL;
		rc = entry ? list_entry(entry, fn, arg) : KHUB_EIO;
		free(entry);
		p = end;
	}
	char *truncated = rc == 0 ? xml_value(c.body.buf, "IsTruncated") : NULL;
	*next = truncated && strcmp(truncated, "true") == 0 ? xml_value(c.body.buf, "NextContinuationToken") : NULL;
	if (*next)
		xml_unescape(*next);
	else if (truncated && strcmp(truncated, "true") == 0)
		rc = call_failed(&c);	/* truncated without a way on */
	free(truncated);
	call_done(&c);
	return rc;
}

static int s3_list(void *priv, int (*fn)(const struct lfs_listed *o, void *arg), void *arg)
{
	struct s3 *s = priv;
	char *token = NULL;
	int rc;
	do {
		char *next = NULL;
		rc = list_page(s, token, &next, fn, arg);
		free(token);
		token = next;
	} while (rc == 0 && token);
	free(token);
	return rc;
}

/* ---- streamed reads ------------------------------------------------------ */

/* One streamed read, owned by its thread. */
struct s3_stream {
	struct s3 *s;
	struct lfs_stream *st;
	struct s3_call c;
	char oid[65], range[48];
	uint64_t size, count, got;
	EVP_MD_CTX *sha;	/* the whole object: hashed on the way */
	int answered;
};

/* What the store's answer means for the read: 0 (bytes follow), or
 * KHUB_ENOTFOUND (absent, not khub's, or another size), KHUB_EIO. */
static int stream_answer_state(struct s3_stream *x)
{
	struct s3_call *c = &x->c;
	long want = x->sha ? 200 : 206;
	uint64_t total = c->status == 200 ? c->length : c->total;
	if (c->status == 404 || c->status == 416)
		return KHUB_ENOTFOUND;
	if (c->status != want) {
		log_error("lfs s3: GET %s: HTTP %ld", c->url, c->status);
		return KHUB_EIO;
	}
	if (strcmp(c->got_meta, x->oid) != 0 || total != x->size || c->length != x->count)
		return KHUB_ENOTFOUND;
	return 0;
}

static size_t stream_sink(struct s3_call *c, const char *buf, size_t len)
{
	struct s3_stream *x = c->sink_arg;
	if (!x->answered) {
		x->answered = 1;
		int state = stream_answer_state(x);
		lfs_stream_answer(x->st, state);
		if (state < 0) {
			c->stopped = 1;
			return 0;
		}
	}
	if (x->sha)
		EVP_DigestUpdate(x->sha, buf, len);
	x->got += len;
	if (lfs_stream_put(x->st, buf, len) < 0) {
		c->stopped = 1;	/* the reader left */
		return 0;
	}
	return len;
}

/* The read's outcome once curl is done: 0, or a negative khub_err; a
 * whole object that does not hash to its oid is quarantined. */
static int stream_verdict(struct s3_stream *x, int rc)
{
	if (!x->answered) {
		x->answered = 1;
		int state = rc < 0 ? KHUB_EIO : stream_answer_state(x);
		lfs_stream_answer(x->st, state);
		if (state < 0)
			return state;
	}
	if (rc < 0 || x->got != x->count) {
		if (!lfs_stream_consumer_gone(x->st))
			log_error("lfs s3: GET %s: %" PRIu64 " of %" PRIu64 " bytes, transfer aborted", x->c.url,
				  x->got, x->count);
		return KHUB_EIO;
	}
	if (!x->sha)
		return 0;
	char got[65];
	sha256_final_hex(x->sha, got);
	if (strcmp(got, x->oid) == 0)
		return 0;
	atomic_fetch_add(&s3_damaged_total, 1);
	log_error("lfs s3: object %s came back with sha256 %s: transfer aborted before its last byte", x->oid, got);
	quarantine_key(x->s, x->oid, x->c.etag);
	return KHUB_EINVAL;
}

static void *stream_main(void *arg)
{
	struct s3_stream *x = arg;
	log_set_request_id("s3-read");
	pthread_setname_np(pthread_self(), "khub-s3-read");
	int rc = s3_perform(x->s, &x->c);
	lfs_stream_finish(x->st, stream_verdict(x, rc));
	EVP_MD_CTX_free(x->sha);
	call_done(&x->c);
	s3_close(x->s);
	free(x);
	return NULL;
}

static int s3_stream(void *priv, const char *oid, uint64_t size, uint64_t from, uint64_t count,
		     struct lfs_stream **out)
{
	struct s3 *s = priv;
	if (!count)
		return KHUB_EINVAL;	/* nothing to stream: open_object */
	struct s3_stream *x = xcalloc(1, sizeof(*x));
	int whole = from == 0 && count == size;	/* hashed on the way: verified */
	int rc = lfs_stream_new(count, STREAM_BUFFER, s->streams_max, whole, &x->st);
	if (rc < 0) {
		free(x);
		return rc;	/* KHUB_EBUSY: the bound of reads alive, no thread started */
	}
	x->s = s;
	memcpy(x->oid, oid, 65);
	x->size = size;
	x->count = count;
	call_init(&x->c, "GET", object_url(s, oid, NULL));
	x->c.sink = stream_sink;
	x->c.sink_arg = x;
	if (whole) {
		x->sha = EVP_MD_CTX_new();
		EVP_DigestInit_ex(x->sha, EVP_sha256(), NULL);
	} else {
		snprintf(x->range, sizeof(x->range), "%" PRIu64 "-%" PRIu64, from, from + count - 1);
		x->c.range = x->range;
	}
	*out = x->st;
	atomic_fetch_add(&s->refs, 1);
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, stream_main, x);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		log_error("lfs s3: cannot start a read thread: %s", strerror(rc));
		lfs_stream_finish(x->st, KHUB_EIO);	/* the consumer sees the failure */
		EVP_MD_CTX_free(x->sha);
		call_done(&x->c);
		s3_close(s);
		free(x);
	}
	return 0;
}

uint64_t lfs_s3_damaged_count(void)
{
	return atomic_load(&s3_damaged_total);
}

const struct lfs_backend lfs_s3_backend = {
	.info = { .name = "s3", .remote = 1, .presigns = 1 },
	.stat = s3_stat,
	.open_object = s3_open_object,
	.install = s3_install,
	.presign = s3_presign,
	.list = s3_list,
	.hash = s3_hash,
	.remove = s3_remove,
	.quarantine = s3_quarantine,
	.stream = s3_stream,
	.close = s3_close,
};
