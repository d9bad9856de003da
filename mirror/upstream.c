/* upstream.c -- talking to an upstream hub over HTTP with libcurl: JSON
 * requests and resumable, verified LFS downloads, with a request-rate
 * limit, retries with backoff, and Retry-After / RateLimit honoured on 429. */
#include "mirror/mirror.h"
#include "config.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_JSON_BODY (64u << 20)

struct upstream_client {
	const struct mirror_upstream *up;
	char *token;
	char *git_header;
	git_strarray git_headers;
	pthread_mutex_t lock;
	uint64_t next_slot_usec;
	atomic_uint_fast64_t requests;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct upstream_client *upstream_client_new(const struct mirror_upstream *up, const char *token)
{
	pthread_once(&curl_once, curl_init_once);
	struct upstream_client *c = xcalloc(1, sizeof(*c));
	c->up = up;
	pthread_mutex_init(&c->lock, NULL);
	if (token && token[0]) {
		c->token = xstrdup(token);
		c->git_header = xasprintf("Authorization: Bearer %s", token);
		c->git_headers.strings = &c->git_header;
		c->git_headers.count = 1;
	}
	return c;
}

void upstream_client_free(struct upstream_client *c)
{
	if (!c)
		return;
	free(c->token);
	free(c->git_header);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

const git_strarray *upstream_git_headers(struct upstream_client *c)
{
	return c->git_headers.count ? &c->git_headers : NULL;
}

uint64_t upstream_requests(const struct upstream_client *c)
{
	return atomic_load(&c->requests);
}

/* Space requests out to at most `rate` per second across threads. */
static void rate_wait(struct upstream_client *c)
{
	atomic_fetch_add(&c->requests, 1);
	if (c->up->rate <= 0)
		return;
	uint64_t gap = (uint64_t)(1e6 / c->up->rate), now = monotonic_usec(), slot;
	pthread_mutex_lock(&c->lock);
	slot = c->next_slot_usec > now ? c->next_slot_usec : now;
	c->next_slot_usec = slot + gap;
	pthread_mutex_unlock(&c->lock);
	if (slot > now)
		usleep((useconds_t)(slot - now));
}

struct response_meta {
	long retry_after;	/* seconds, -1 when absent */
	char *next_link;
};

static size_t on_header(char *buffer, size_t size, size_t nitems, void *userdata)
{
	struct response_meta *m = userdata;
	size_t n = size * nitems;
	char line[2048];
	size_t len = n < sizeof(line) - 1 ? n : sizeof(line) - 1;
	memcpy(line, buffer, len);
	line[len] = '\0';
	if (strncmp(line, "HTTP/", 5) == 0) {	/* a new response (after a redirect) */
		m->retry_after = -1;
		free(m->next_link);
		m->next_link = NULL;
	} else if (strncasecmp(line, "Retry-After:", 12) == 0) {
		m->retry_after = strtol(line + 12, NULL, 10);
	} else if (strncasecmp(line, "RateLimit:", 10) == 0) {
		/* "api";r=0;t=55 : t = seconds until the window resets */
		const char *t = strstr(line, ";t=");
		if (t && m->retry_after < 0)
			m->retry_after = strtol(t + 3, NULL, 10);
	} else if (strncasecmp(line, "Link:", 5) == 0 && strstr(line, "rel=\"next\"")) {
		char *lt = strchr(line, '<'), *gt = lt ? strchr(lt, '>') : NULL;
		if (lt && gt) {
			free(m->next_link);
			m->next_link = xstrndup(lt + 1, (size_t)(gt - lt - 1));
		}
	}
	return n;
}

static size_t on_json_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct strbuf *sb = userdata;
	size_t n = size * nmemb;
	if (sb->len + n > MAX_JSON_BODY)
		return 0;
	strbuf_add(sb, ptr, n);
	return n;
}

static void set_common(struct upstream_client *c, CURL *h, const char *url)
{
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 15L);
	/* a stalled transfer (under 1 KiB/s for 60 s) is abandoned and resumed */
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "khub-mirror/" PACKAGE_VERSION);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024);
	if (c->token) {
		/* sent to the upstream host only, never to a redirect's other host */
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
		curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, c->token);
	}
}

static int retryable(long status)
{
	return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

/* Seconds to wait before attempt+1. */
static long backoff(const struct response_meta *m, int attempt)
{
	if (m->retry_after >= 0)
		return m->retry_after > 300 ? 300 : m->retry_after;
	long d = 1L << (attempt < 5 ? attempt : 5);
	return d > 30 ? 30 : d;
}

int upstream_get_json(struct upstream_client *c, const char *url, json_t **out, long *status, char **next)
{
	struct strbuf body = STRBUF_INIT;
	struct response_meta meta = { -1, NULL };
	int rc = KHUB_EIO;
	*out = NULL;
	*status = 0;
	if (next)
		*next = NULL;
	CURL *h = curl_easy_init();
	for (int attempt = 0; attempt <= c->up->max_retries; attempt++) {
		strbuf_reset(&body);
		curl_easy_reset(h);
		set_common(c, h, url);
		curl_easy_setopt(h, CURLOPT_TIMEOUT, c->up->request_timeout > 0 ? c->up->request_timeout : 120L);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_json_body);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
		curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(h, CURLOPT_HEADERDATA, &meta);
		rate_wait(c);
		CURLcode cc = curl_easy_perform(h);
		*status = 0;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
		if (cc == CURLE_OK && !retryable(*status))
			break;
		if (attempt == c->up->max_retries)
			break;
		long wait = backoff(&meta, attempt);
		log_warn("upstream %s: %s; retrying in %ld s", url,
			 cc != CURLE_OK ? curl_easy_strerror(cc) : "busy or failing", wait);
		sleep((unsigned)wait);
	}
	if (*status >= 200 && *status < 300) {
		json_error_t err;
		*out = json_loadb(body.buf ? body.buf : "", body.len, 0, &err);
		rc = *out ? 0 : KHUB_EINVAL;
		if (next && meta.next_link) {
			*next = meta.next_link;
			meta.next_link = NULL;
		}
	} else if (*status == 404 || *status == 401) {
		rc = KHUB_ENOTFOUND;
	}
	free(meta.next_link);
	strbuf_release(&body);
	curl_easy_cleanup(h);
	return rc;
}

struct download {
	int fd;
	uint64_t have;		/* bytes in the part file before this attempt */
	uint64_t written;	/* bytes written in this attempt */
	int decided;		/* first body byte seen: 206 appends, 200 restarts */
	CURL *h;
	int failed;
	EVP_MD_CTX *sha;	/* sha256 of every byte in the part file so far */
	uint64_t flushed;	/* bytes of this attempt handed to writeback */
};

/* Hash what a part file already holds (a resumed download). */
static int hash_prefix(const char *path, EVP_MD_CTX *sha, uint64_t *have)
{
	EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
	*have = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char *buf = xmalloc(1 << 20);
	ssize_t n;
	while ((n = read(fd, buf, 1 << 20)) > 0) {
		EVP_DigestUpdate(sha, buf, (size_t)n);
		*have += (uint64_t)n;
	}
	free(buf);
	close(fd);
	return n < 0 ? -1 : 0;
}

static size_t on_file_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct download *d = userdata;
	size_t n = size * nmemb;
	if (!d->decided) {
		long code = 0;
		curl_easy_getinfo(d->h, CURLINFO_RESPONSE_CODE, &code);
		if (code == 200 && d->have > 0) {	/* range ignored: start over */
			if (ftruncate(d->fd, 0) < 0 || lseek(d->fd, 0, SEEK_SET) < 0)
				return 0;
			d->have = 0;
			EVP_DigestInit_ex(d->sha, EVP_sha256(), NULL);
		} else if (code != 200 && code != 206) {
			return n;	/* an error body: drop it */
		}
		d->decided = 1;
	}
	EVP_DigestUpdate(d->sha, ptr, n);
	if (write_all(d->fd, ptr, n) < 0) {
		d->failed = 1;
		return 0;
	}
	d->written += n;
	/* start writeback as we go, so the fsync before the rename has little
	 * left to do */
	if (d->written - d->flushed >= (8u << 20)) {
		sync_file_range(d->fd, (off64_t)(d->have + d->flushed), (off64_t)(d->written - d->flushed),
				SYNC_FILE_RANGE_WRITE);
		d->flushed = d->written;
	}
	return n;
}

/* One object's download into its part file. */
struct lfs_fetch {
	struct upstream_client *c;
	const char *url, *oid;
	uint64_t size, have;		/* have: bytes in the part file, hashed into sha */
	const char *part;
	EVP_MD_CTX *sha;
	CURL *h;
	int failures, corrupt;
	uint64_t *transferred;
};

/* Forget the partial download: the next request starts from nothing. */
static void fetch_restart(struct lfs_fetch *f)
{
	unlink(f->part);
	EVP_DigestInit_ex(f->sha, EVP_sha256(), NULL);
	f->have = 0;
}

/* 1 when the whole object is here and hashes to its oid; otherwise the
 * download starts over. */
static int fetch_verified(struct lfs_fetch *f)
{
	char got[65];
	EVP_MD_CTX *copy = EVP_MD_CTX_new();
	EVP_MD_CTX_copy_ex(copy, f->sha);
	sha256_final_hex(copy, got);
	EVP_MD_CTX_free(copy);
	if (strcmp(got, f->oid) == 0)
		return 1;
	log_warn("upstream %s: content hashes to %s, not %s: refused", f->url, got, f->oid);
	fetch_restart(f);
	f->corrupt++;
	return 0;
}

/* One request for the bytes from f->have on (a Range when resuming): 0 to
 * go on (the caller's loop decides what next), or a final error. */
static int fetch_request(struct lfs_fetch *f)
{
	int fd = open(f->part, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return KHUB_EIO;
	struct download d = { fd, f->have, 0, 0, f->h, 0, f->sha, 0 };
	struct response_meta meta = { -1, NULL };
	char range[48];
	curl_easy_reset(f->h);
	set_common(f->c, f->h, f->url);
	curl_easy_setopt(f->h, CURLOPT_WRITEFUNCTION, on_file_body);
	curl_easy_setopt(f->h, CURLOPT_WRITEDATA, &d);
	curl_easy_setopt(f->h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(f->h, CURLOPT_HEADERDATA, &meta);
	if (f->have > 0) {
		snprintf(range, sizeof(range), "%llu-", (unsigned long long)f->have);
		curl_easy_setopt(f->h, CURLOPT_RANGE, range);
	}
	rate_wait(f->c);
	CURLcode cc = curl_easy_perform(f->h);
	long status = 0;
	curl_easy_getinfo(f->h, CURLINFO_RESPONSE_CODE, &status);
	close(fd);
	free(meta.next_link);
	*f->transferred += d.written;
	f->have = d.have + d.written;
	if (cc == CURLE_OK && (status == 200 || status == 206) && d.written > 0)
		return 0;	/* complete or not, the caller's check decides */
	if (cc == CURLE_OK && status == 416) {
		fetch_restart(f);
		f->failures++;
		return 0;
	}
	if (cc == CURLE_OK && !retryable(status) && status != 200 && status != 206) {
		log_warn("upstream %s: HTTP %ld", f->url, status);
		return status == 404 ? KHUB_ENOTFOUND : KHUB_EIO;
	}
	if (++f->failures > f->c->up->max_retries)
		return 0;	/* reported by the caller */
	long wait = backoff(&meta, f->failures - 1);
	log_warn("upstream %s: %s after %llu bytes; resuming in %ld s", f->url,
		 cc != CURLE_OK ? curl_easy_strerror(cc) : "busy or failing", (unsigned long long)f->have, wait);
	sleep((unsigned)wait);
	return 0;
}

/* Download until the part file holds the verified object: 0, or
 * KHUB_EINVAL when the upstream keeps sending bad bytes, KHUB_EIO, ... */
static int fetch_until_verified(struct lfs_fetch *f)
{
	/* the sha256 is computed as bytes arrive; a resumed file's prefix is
	 * hashed once here */
	if (hash_prefix(f->part, f->sha, &f->have) < 0 || f->have > f->size)
		fetch_restart(f);
	for (int rounds = 1; rounds <= 4 * (f->c->up->max_retries + 4); rounds++) {	/* never spin forever */
		if (f->have > f->size)
			fetch_restart(f);
		if (f->have == f->size) {
			if (fetch_verified(f))
				return 0;
			if (f->corrupt >= 2)	/* fetched again, bad again: give up */
				return KHUB_EINVAL;
			continue;
		}
		if (f->failures > f->c->up->max_retries)
			return KHUB_EIO;
		int rc = fetch_request(f);
		if (rc < 0)
			return rc;
	}
	return KHUB_EIO;
}

int upstream_fetch_lfs(struct upstream_client *c, const char *url, const char *oid, uint64_t size,
		       struct lfs_store *lfs, int64_t link_repo_id, uint64_t *transferred)
{
	char *part = xasprintf("%s/mirror-%s.part", lfs_store_tmp_dir(lfs), oid);
	char *lock = xasprintf("%s/mirror-%s.lock", lfs_store_tmp_dir(lfs), oid);
	int rc = KHUB_EIO;
	/* One fetcher per object (threads of a server answering several first
	 * requests, a pulling process, a second one): the others wait here and
	 * then find the object stored. flock locks open file descriptions, so
	 * threads of one process exclude each other too. */
	int lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock_fd < 0 || flock(lock_fd, LOCK_EX) < 0)
		goto cleanup;
	int stored = lfs_store_stat(lfs, oid, NULL) == 0;
	if (stored && !link_repo_id) {
		rc = 0;
		goto cleanup;
	}
	/* a proof starts from nothing: no byte may come from an earlier
	 * download (possibly from another upstream) */
	if (stored)
		unlink(part);
	struct lfs_fetch f = { c, url, oid, size, 0, part, EVP_MD_CTX_new(), curl_easy_init(), 0, 0, transferred };
	rc = fetch_until_verified(&f);
	if (rc == 0)
		rc = repo_import_add_lfs(lfs, link_repo_id, part, oid);
	curl_easy_cleanup(f.h);
	EVP_MD_CTX_free(f.sha);
	if (rc == 0)
		unlink(lock);	/* waiters holding the old inode find the object stored */
cleanup:
	if (lock_fd >= 0)
		close(lock_fd);
	free(lock);
	free(part);
	return rc;
}
