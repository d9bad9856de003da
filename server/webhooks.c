/* webhooks.c -- delivering repo webhooks (docs/webhooks.md): one thread of
 * khub serve claims due deliveries from the durable queue in PostgreSQL
 * (storage/db/webhooks.h: one node per delivery), POSTs each body signed with
 * its hook's secret (HMAC-SHA256) with libcurl -- short timeouts, no
 * redirects, the answer read to a bound, loopback and private addresses
 * refused when connecting unless webhooks_allow_private -- and logs the
 * attempt: delivered on a 2xx answer, else due again after the next delay
 * of webhook_retry_delays, failed after the last. Never on a request
 * thread; a delivery pending at a restart is taken up again. */
#include "server/server.h"
#include "config.h"
#include "storage/db/webhooks.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* The answer's bytes read at most (the rest is not waited for). */
#define ANSWER_MAX (64 * 1024)
/* An attempt in flight is another node's to take again after this (it
 * ends well before: webhook_timeout_s at most 300). */
#define ATTEMPT_LEASE_S 600
/* Settled deliveries (and their log) are kept this long, pruned hourly. */
#define KEEP_DAYS 30
#define PRUNE_EVERY_USEC (3600ULL * 1000000)

static struct bg_thread deliverer = BG_THREAD_INIT;

struct attempt {
	size_t answer_bytes;
	int refused;			/* the address was refused */
	char refused_addr[64];
};

void webhook_sign(const char *secret, const char *body, size_t len, char out[WEBHOOK_SIGNATURE_MAX])
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned mac_len = 0;
	HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)body, len, mac, &mac_len);
	memcpy(out, "sha256=", 7);
	for (unsigned i = 0; i < mac_len; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", mac[i]);
}

long webhook_retry_delay(int attempt)
{
	char *list = xstrdup(config.webhook_retry_delays), *save = NULL;
	long delay = -1;
	int n = 1;
	for (char *item = strtok_r(list, ", ", &save); item; item = strtok_r(NULL, ", ", &save), n++)
		if (n == attempt && jobs_parse_interval(item, &delay) < 0)
			delay = -1;
	free(list);
	return delay;
}

/* Every connection is checked where it goes (after DNS: a name that
 * resolves to a private address is refused as the address would be). */
static curl_socket_t open_socket(void *ctx, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct attempt *at = ctx;
	const struct sockaddr *sa = &a->addr;
	(void)purpose;
	const unsigned char *bytes = sa->sa_family == AF_INET
		? (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr
		: (const unsigned char *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
	if ((sa->sa_family != AF_INET && sa->sa_family != AF_INET6) ||
	    (!config.webhooks_allow_private && net_address_reserved(sa->sa_family, bytes))) {
		at->refused = 1;
		if (sa->sa_family == AF_INET || sa->sa_family == AF_INET6)
			inet_ntop(sa->sa_family, bytes, at->refused_addr, sizeof(at->refused_addr));
		return CURL_SOCKET_BAD;
	}
	int fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
	return fd < 0 ? CURL_SOCKET_BAD : fd;
}

static size_t answer_sink(char *data, size_t size, size_t n, void *ctx)
{
	struct attempt *at = ctx;
	(void)data;
	at->answer_bytes += size * n;
	return at->answer_bytes > ANSWER_MAX ? 0 : size * n;	/* past the bound: stop reading */
}

static struct curl_slist *header_add(struct curl_slist *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static struct curl_slist *header_add(struct curl_slist *h, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	return curl_slist_append(h, line);
}

/* The request's headers (the caller frees them with curl_slist_free_all). */
static struct curl_slist *delivery_headers(const struct db_webhook_delivery *d)
{
	char sig[WEBHOOK_SIGNATURE_MAX];
	struct curl_slist *h = NULL;
	webhook_sign(d->secret, d->payload, strlen(d->payload), sig);
	h = header_add(h, "Content-Type: application/json");
	h = header_add(h, "Expect:");
	h = header_add(h, "X-Khub-Signature-256: %s", sig);
	h = header_add(h, "X-Khub-Event: %s", d->event);
	h = header_add(h, "X-Khub-Delivery: %lld", (long long)d->id);
	h = header_add(h, "X-Khub-Webhook-Id: %lld", (long long)d->webhook_id);
	return header_add(h, "X-Khub-Attempt: %d", d->attempt);
}

/* One POST: the answer's status (0: none) and, when it failed, why. */
static long post(const struct db_webhook_delivery *d, char *why, size_t why_size)
{
	struct attempt at = { 0 };
	char errbuf[CURL_ERROR_SIZE] = "";
	long status = 0;
	CURL *c = curl_easy_init();
	if (!c) {
		snprintf(why, why_size, "cannot start a transfer");
		return 0;
	}
	struct curl_slist *headers = delivery_headers(d);
	curl_easy_setopt(c, CURLOPT_URL, d->url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_USERAGENT, "khub-webhooks/" PACKAGE_VERSION);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, d->payload);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, config.webhook_timeout_s);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, config.webhook_timeout_s);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &at);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, answer_sink);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &at);
	CURLcode rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (at.refused)
		snprintf(why, why_size, "refused: %s is a loopback, private, link-local or reserved address "
			 "(webhooks_allow_private is 0)", at.refused_addr[0] ? at.refused_addr : "the address");
	else if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && status > 0))
		snprintf(why, why_size, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
	else if (status < 200 || status > 299)
		snprintf(why, why_size, "answered HTTP %ld", status);
	curl_slist_free_all(headers);
	curl_easy_cleanup(c);
	return status;
}

static void deliver_one(const struct db_webhook_delivery *d)
{
	char why[512] = "";
	uint64_t t0 = monotonic_usec();
	long status = post(d, why, sizeof(why));
	int64_t ms = (int64_t)((monotonic_usec() - t0) / 1000);
	int ok = why[0] == '\0';
	long retry = ok ? 0 : webhook_retry_delay(d->attempt);
	if (db_webhook_attempt_done(d, ok, (int)status, ms, ok ? NULL : why, retry) < 0)
		log_error("webhooks: delivery %lld attempt %d: cannot record it (it is tried again later)",
			  (long long)d->id, d->attempt);
	if (ok)
		log_info("webhooks: delivery %lld (%s) to hook %lld: HTTP %ld in %lld ms", (long long)d->id, d->event,
			 (long long)d->webhook_id, status, (long long)ms);
	else
		log_warn("webhooks: delivery %lld (%s) to hook %lld, attempt %d: %s; %s", (long long)d->id, d->event,
			 (long long)d->webhook_id, d->attempt, why, retry < 0 ? "given up" : "tried again later");
}

static int stopping(void)
{
	pthread_mutex_lock(&deliverer.lock);
	int s = deliverer.stopping;
	pthread_mutex_unlock(&deliverer.lock);
	return s;
}

static void *deliver_loop(void *arg)
{
	uint64_t next_prune = 0;
	(void)arg;
	log_set_request_id("webhooks");
	pthread_mutex_lock(&deliverer.lock);
	while (!deliverer.stopping) {
		struct timespec ts = clock_after_usec(CLOCK_REALTIME, (uint64_t)config.webhook_poll_ms * 1000u);
		while (!deliverer.stopping && pthread_cond_timedwait(&deliverer.wake, &deliverer.lock, &ts) == 0)
			;
		pthread_mutex_unlock(&deliverer.lock);
		if (monotonic_usec() >= next_prune) {
			if (db_webhook_prune(KEEP_DAYS) < 0)
				log_warn("webhooks: cannot prune old deliveries (tried again in an hour)");
			next_prune = monotonic_usec() + PRUNE_EVERY_USEC;
		}
		struct db_webhook_delivery d;
		while (!stopping() && db_webhook_claim(ATTEMPT_LEASE_S, &d) == 0) {
			deliver_one(&d);
			db_webhook_delivery_release(&d);
		}
		pthread_mutex_lock(&deliverer.lock);
	}
	pthread_mutex_unlock(&deliverer.lock);
	db_thread_done();
	return NULL;
}

void webhooks_start(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	bg_thread_start(&deliverer, deliver_loop, "webhook delivery thread");
}

void webhooks_stop(void)
{
	bg_thread_stop(&deliverer);
}
