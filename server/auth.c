/* auth.c -- turn an Authorization header into a principal. Bearer tokens
 * (API clients) and Basic with the token as password (git, git-lfs) are
 * both accepted; lookups of user tokens are cached briefly by the token's
 * SHA-256, build workers' are not. While the database is down, a token
 * looked up within outage_cache_s is still honoured, for reads only
 * (req->auth_stale). */
#include "server/server.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct cached_principal {
	struct principal principal;
	int found;
	uint64_t fetched_usec;
};

static struct hashmap token_cache;
static pthread_mutex_t token_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t token_ttl_usec;
/* Bumped by auth_cache_clear: a lookup that raced with a clear (it read
 * the row before another node's revocation committed) is not cached. */
static atomic_uint_fast64_t token_generation = 1;

void auth_cache_init(long ttl_ms)
{
	token_ttl_usec = (uint64_t)ttl_ms * 1000u;
	hashmap_init(&token_cache);
}

void auth_cache_clear(void)
{
	pthread_mutex_lock(&token_lock);
	atomic_fetch_add(&token_generation, 1);
	if (token_cache.buckets) {
		hashmap_release(&token_cache, free);
		hashmap_init(&token_cache);
	}
	pthread_mutex_unlock(&token_lock);
}

/* While the database is down: the principal of a token looked up less than
 * outage_cache_s ago, unless it expired meanwhile (revocations empty the
 * cache through NOTIFY while the database is up; none can happen while it
 * is down). 0 with *out, else KHUB_EDB. */
static int lookup_during_outage(const char *key, uint64_t now, struct principal *out)
{
	uint64_t grace = (uint64_t)http_ctx.outage_cache_s * 1000000u;
	int rc = KHUB_EDB;
	pthread_mutex_lock(&token_lock);
	struct cached_principal *c = hashmap_get(&token_cache, key);
	if (c && c->found && now - c->fetched_usec < grace &&
	    (c->principal.token_expires_at == 0 || c->principal.token_expires_at > time(NULL))) {
		*out = c->principal;
		rc = 0;
	}
	pthread_mutex_unlock(&token_lock);
	if (rc == 0)
		outage_cache_count(OUTAGE_CACHE_TOKEN);
	return rc;
}

static void cache_store(const char *key, int rc, const struct principal *p, uint64_t now, uint64_t generation)
{
	struct cached_principal *c = xcalloc(1, sizeof(*c));
	c->found = rc == 0;
	if (rc == 0)
		c->principal = *p;
	c->fetched_usec = now;
	pthread_mutex_lock(&token_lock);
	if (token_cache.count > 100000) {	/* bounded: drop everything */
		hashmap_release(&token_cache, free);
		hashmap_init(&token_cache);
	}
	if (generation == atomic_load(&token_generation))
		free(hashmap_put(&token_cache, key, c));
	else
		free(c);
	pthread_mutex_unlock(&token_lock);
}

/* The token's principal: from the cache while fresh, else the database;
 * *stale is set when the database is down and the cache answered anyway
 * (lookup_during_outage). */
static int lookup_cached(const char *token, struct principal *out, int *stale)
{
	*stale = 0;
	/* Worker tokens are looked up every time: a rotated or removed one
	 * stops at once (workers call rarely; users' tokens are the load). */
	if (strncmp(token, "khw_", 4) == 0)
		return db_token_lookup(token, out);
	char key[65];
	sha256_hex(token, strlen(token), key);
	uint64_t now = monotonic_usec();
	pthread_mutex_lock(&token_lock);
	struct cached_principal *c = hashmap_get(&token_cache, key);
	if (c && now - c->fetched_usec < token_ttl_usec) {
		int found = c->found;
		if (found)
			*out = c->principal;
		pthread_mutex_unlock(&token_lock);
		return found ? 0 : KHUB_ENOTFOUND;
	}
	uint64_t generation = atomic_load(&token_generation);
	pthread_mutex_unlock(&token_lock);

	struct principal p;
	int rc = db_token_lookup(token, &p);
	if (rc == KHUB_EDB) {
		rc = db_is_down(NULL) ? lookup_during_outage(key, now, out) : rc;
		*stale = rc == 0;
		return rc;
	}
	cache_store(key, rc, &p, now, generation);
	if (rc == 0)
		*out = p;
	return rc;
}

static char *token_from_basic(const char *b64)
{
	size_t len = strlen(b64);
	if (len == 0 || len > 4096)
		return NULL;
	unsigned char *out = xmalloc(len + 1);
	int n = EVP_DecodeBlock(out, (const unsigned char *)b64, (int)len);
	if (n < 0) {
		free(out);
		return NULL;
	}
	while (len > 0 && b64[len - 1] == '=') {	/* DecodeBlock counts padding */
		len--;
		n--;
	}
	out[n] = '\0';
	char *colon = strchr((char *)out, ':');
	char *token = colon ? xstrdup(colon + 1) : NULL;
	free(out);
	return token;
}

void auth_identify(struct request *req)
{
	memset(&req->principal, 0, sizeof(req->principal));
	const char *h = request_header(req, "Authorization");
	if (!h)
		return;
	char *token = NULL;
	if (strncasecmp(h, "Bearer ", 7) == 0)
		token = xstrdup(h + 7);
	else if (strncasecmp(h, "Basic ", 6) == 0)
		token = token_from_basic(h + 6);
	if (!token || !token[0] || strlen(token) > 512) {
		req->bad_token = 1;
		free(token);
		return;
	}
	int rc = lookup_cached(token, &req->principal, &req->auth_stale);
	if (rc < 0) {
		memset(&req->principal, 0, sizeof(req->principal));
		/* an outage is not an answer: git credential helpers erase a
		 * password that got a 401 */
		if (rc == KHUB_EDB)
			req->auth_unavailable = 1;
		else
			req->bad_token = 1;
	}
	free(token);
}

int auth_refuse(struct request *req)
{
	if (req->auth_unavailable) {
		respond_db_unavailable(req);
		return -1;
	}
	if (req->bad_token) {
		respond_invalid_token(req);
		return -1;
	}
	return 0;
}
