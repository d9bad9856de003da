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

int upstream_fetch_lfs(struct upstream_client *c, const char *url, const char *oid, uint64_t size,
		       struct lfs_store *lfs, int prove, uint64_t *transferred)
{
	char *part = xasprintf("%s/mirror-%s.part", lfs_store_tmp_dir(lfs), oid);
	char *lock = xasprintf("%s/mirror-%s.lock", lfs_store_tmp_dir(lfs), oid);
	int rc = KHUB_EIO, corrupt = 0;
	/* One fetcher per object (threads of a server answering several first
	 * requests, a pulling process, a second one): the others wait here and
	 * then find the object stored. flock locks open file descriptions, so
	 * threads of one process exclude each other too. */
	int lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock_fd < 0 || flock(lock_fd, LOCK_EX) < 0) {
		if (lock_fd >= 0)
			close(lock_fd);
		free(lock);
		free(part);
		return KHUB_EIO;
	}
	int stored = lfs_store_stat(lfs, oid, NULL) == 0;
	if (stored && !prove) {
		close(lock_fd);
		free(lock);
		free(part);
		return 0;
	}
	/* a proof starts from nothing: no byte may come from an earlier
	 * download (possibly from another upstream) */
	if (stored)
		unlink(part);
	CURL *h = curl_easy_init();
	EVP_MD_CTX *sha = EVP_MD_CTX_new();
	uint64_t have = 0;
	/* the sha256 is computed as bytes arrive; a resumed file's prefix is
	 * hashed once here */
	if (hash_prefix(part, sha, &have) < 0 || have > size) {
		unlink(part);
		EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
		have = 0;
	}
	int failures = 0, rounds = 0;
	for (;;) {
		if (++rounds > 4 * (c->up->max_retries + 4)) {	/* never spin forever */
			rc = KHUB_EIO;
			break;
		}
		if (have > size) {
			unlink(part);
			EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
			have = 0;
		}
		if (have == size) {
			char got[65];
			EVP_MD_CTX *copy = EVP_MD_CTX_new();
			EVP_MD_CTX_copy_ex(copy, sha);
			sha256_final_hex(copy, got);
			EVP_MD_CTX_free(copy);
			if (strcmp(got, oid) == 0) {
				rc = lfs_store_adopt_hashed(lfs, part, oid);
				break;
			}
			log_warn("upstream %s: content hashes to %s, not %s: refused", url, got, oid);
			unlink(part);
			EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
			have = 0;
			/* fetch again, but give up when the upstream keeps sending bad bytes */
			if (++corrupt >= 2)
				break;
			continue;
		}
		if (failures > c->up->max_retries) {
			rc = KHUB_EIO;
			break;
		}
		int fd = open(part, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd < 0) {
			rc = KHUB_EIO;
			break;
		}
		struct download d = { fd, have, 0, 0, h, 0, sha, 0 };
		struct response_meta meta = { -1, NULL };
		char range[48];
		curl_easy_reset(h);
		set_common(c, h, url);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_file_body);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, &d);
		curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(h, CURLOPT_HEADERDATA, &meta);
		if (have > 0) {
			snprintf(range, sizeof(range), "%llu-", (unsigned long long)have);
			curl_easy_setopt(h, CURLOPT_RANGE, range);
		}
		rate_wait(c);
		CURLcode cc = curl_easy_perform(h);
		long status = 0;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		close(fd);
		free(meta.next_link);
		*transferred += d.written;
		have = d.have + d.written;
		if (cc == CURLE_OK && (status == 200 || status == 206) && d.written > 0)
			continue;	/* complete or not, the check at the top decides */
		if (cc == CURLE_OK && status == 416) {
			unlink(part);
			EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
			have = 0;
			failures++;
			continue;
		}
		if (cc == CURLE_OK && !retryable(status) && status != 200 && status != 206) {
			log_warn("upstream %s: HTTP %ld", url, status);
			rc = status == 404 ? KHUB_ENOTFOUND : KHUB_EIO;
			break;
		}
		if (++failures > c->up->max_retries)
			continue;	/* reported at the top */
		long wait = backoff(&meta, failures - 1);
		log_warn("upstream %s: %s after %llu bytes; resuming in %ld s", url,
			 cc != CURLE_OK ? curl_easy_strerror(cc) : "busy or failing",
			 (unsigned long long)(have + d.written), wait);
		sleep((unsigned)wait);
	}
	if (corrupt >= 2 && rc != 0)
		rc = KHUB_EINVAL;
	curl_easy_cleanup(h);
	EVP_MD_CTX_free(sha);
	if (rc == 0)
		unlink(lock);	/* waiters holding the old inode find the object stored */
	close(lock_fd);
	free(lock);
	free(part);
	return rc;
}
