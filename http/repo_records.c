/* repo_records.c -- repo records cached for every request thread, so a
 * warm request never waits on the database for a repo it has seen lately:
 * records past their TTL are refreshed by one background thread; while
 * the database is down, records seen within outage_cache_s are served. */
#include "http/http.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct cached_record {
	struct repo_record record;
	int found;
	uint64_t fetched_usec;
	_Atomic int refreshing;	/* one thread refreshes; the others use this copy */
};

/* Requests only read the cache: a read lock, so that they never wait for
 * one another (one mutex taken by every request of eight threads made the
 * read path's tail: a holder preempted on a busy core parks them all).
 * Entries are replaced or freed under the write lock only. */
static struct hashmap record_cache;
static pthread_rwlock_t record_lock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_once_t record_cache_once = PTHREAD_ONCE_INIT;

static void record_cache_init(void)
{
	hashmap_init(&record_cache);
}
static atomic_uint_fast64_t cache_generation = 1;

void repo_cache_invalidate(void)
{
	atomic_fetch_add(&cache_generation, 1);
	pthread_once(&record_cache_once, record_cache_init);
	pthread_rwlock_wrlock(&record_lock);
	hashmap_release(&record_cache, free);
	hashmap_init(&record_cache);
	pthread_rwlock_unlock(&record_lock);
}

uint64_t repo_cache_generation(void)
{
	return atomic_load(&cache_generation);
}

/* "type/ns/name", lowercased, cut at size; by hand, as it runs for every
 * request. */
static void record_key(char *key, size_t size, enum repo_type type, const char *ns, const char *name)
{
	char type_digits[4] = { (char)('0' + (int)type % 10), '/', '\0' };
	const char *parts[] = { type_digits, ns, "/", name };
	size_t n = 0;
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		for (const char *p = parts[i]; *p && n < size - 1; p++)
			key[n++] = (char)tolower((unsigned char)*p);
	key[n] = '\0';
}

/* Records past their TTL are refreshed by one background thread, so no
 * request waits on the database for a repo it has seen recently (a worker
 * blocked on a query stalls every connection it serves). */
struct refresh_job {
	struct refresh_job *next;
	char key[2 * REPO_NAME_MAX + 16];
	enum repo_type type;
	char ns[REPO_NAME_MAX + 1], name[REPO_NAME_MAX + 1];
};

static struct refresh_job *refresh_queue;	/* under refresh_lock */
static pthread_mutex_t refresh_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t refresh_wakeup = PTHREAD_COND_INITIALIZER;
static int refresher_running;	/* under refresh_lock */

static void store_record(const char *key, int rc, const struct repo_record *rec, uint64_t fetched)
{
	struct cached_record *c = xcalloc(1, sizeof(*c));
	c->found = rc == 0;
	if (rc == 0)
		c->record = *rec;
	c->fetched_usec = fetched;
	pthread_once(&record_cache_once, record_cache_init);
	pthread_rwlock_wrlock(&record_lock);
	free(hashmap_put(&record_cache, key, c));
	pthread_rwlock_unlock(&record_lock);
}

static void *refresher(void *arg)
{
	(void)arg;
	log_set_request_id("repo-cache");
	for (;;) {
		pthread_mutex_lock(&refresh_lock);
		while (!refresh_queue)
			pthread_cond_wait(&refresh_wakeup, &refresh_lock);
		struct refresh_job *job = refresh_queue;
		refresh_queue = job->next;
		pthread_mutex_unlock(&refresh_lock);
		struct repo_record rec;
		uint64_t now = monotonic_coarse_usec(), gen = atomic_load(&cache_generation);
		int rc = db_repo_get(job->type, job->ns, job->name, &rec);
		if (gen != atomic_load(&cache_generation)) {
			/* a write invalidated the cache meanwhile: what we read may
			 * predate it; the next request looks it up afresh */
		} else if (rc == KHUB_EDB) {
			pthread_rwlock_rdlock(&record_lock);
			struct cached_record *old = hashmap_get(&record_cache, job->key);
			if (old)
				atomic_store(&old->refreshing, 0);	/* try again on the next request */
			pthread_rwlock_unlock(&record_lock);
		} else {
			store_record(job->key, rc, &rec, now);
		}
		free(job);
	}
	return NULL;
}

/* Hand the refresher (started on first use) the record under key: 0, or
 * -1 when the thread cannot be started (logged once; tried again next
 * time): the caller then looks the record up itself. */
static int queue_refresh(const char *key, enum repo_type type, const char *ns, const char *name)
{
	static int warned;	/* under refresh_lock */
	pthread_mutex_lock(&refresh_lock);
	if (!refresher_running) {
		pthread_t t;
		int err = pthread_create(&t, NULL, refresher, NULL);
		if (err == 0) {
			pthread_detach(t);
			refresher_running = 1;
		} else if (!warned++) {
			log_error("repo cache: cannot start the refresher thread (%s): requests look records up "
				  "themselves", strerror(err));
		}
	}
	if (refresher_running) {
		struct refresh_job *job = xcalloc(1, sizeof(*job));
		snprintf(job->key, sizeof(job->key), "%s", key);
		job->type = type;
		snprintf(job->ns, sizeof(job->ns), "%s", ns);
		snprintf(job->name, sizeof(job->name), "%s", name);
		job->next = refresh_queue;
		refresh_queue = job;
		pthread_cond_signal(&refresh_wakeup);
	}
	int rc = refresher_running ? 0 : -1;
	pthread_mutex_unlock(&refresh_lock);
	return rc;
}

/* Each request thread's front for the shared cache: the records it looked
 * up last, each valid exactly while the shared entry it was copied from is
 * fresh (the same generation, under the TTL), so that a warm lookup takes
 * no lock and writes no memory another core reads (the read lock is a
 * write to one shared word: on every request of every thread, a cache line
 * passed from core to core). */
#define FRONT_SLOTS 8

struct front_entry {
	char key[2 * REPO_NAME_MAX + 16];	/* "": empty */
	struct repo_record record;
	int found;
	uint64_t fetched_usec;		/* the shared entry's */
	uint64_t generation;
};

static __thread struct front_entry front[FRONT_SLOTS];
static __thread unsigned front_next;

static struct front_entry *front_find(const char *key, uint64_t gen, uint64_t now, uint64_t ttl)
{
	for (int i = 0; i < FRONT_SLOTS; i++) {
		struct front_entry *f = &front[i];
		if (f->generation == gen && now - f->fetched_usec < ttl && strcmp(f->key, key) == 0)
			return f;
	}
	return NULL;
}

static void front_keep(const char *key, const struct cached_record *c, uint64_t generation)
{
	struct front_entry *f = &front[front_next++ % FRONT_SLOTS];
	snprintf(f->key, sizeof(f->key), "%s", key);
	f->record = c->record;
	f->found = c->found;
	f->fetched_usec = c->fetched_usec;
	f->generation = generation;
}

static atomic_uint_fast64_t outage_hits[OUTAGE_CACHE_COUNT];

void outage_cache_count(enum outage_cache cache)
{
	atomic_fetch_add(&outage_hits[cache], 1);
}

uint64_t outage_cache_hits(enum outage_cache cache)
{
	return atomic_load(&outage_hits[cache]);
}

/* While the database is down: what was looked up less than outage_cache_s
 * ago (writes need the database anyway). 0 with *out, KHUB_ENOTFOUND, or
 * KHUB_EDB when the cache has nothing that recent. */
static int lookup_during_outage(const char *key, uint64_t now, struct repo_record *out)
{
	uint64_t grace = (uint64_t)http_ctx.outage_cache_s * 1000000u;
	int rc = KHUB_EDB;
	pthread_rwlock_rdlock(&record_lock);
	struct cached_record *c = hashmap_get(&record_cache, key);
	if (c && now - c->fetched_usec < grace) {
		rc = c->found ? 0 : KHUB_ENOTFOUND;
		if (c->found)
			*out = c->record;
	}
	pthread_rwlock_unlock(&record_lock);
	if (rc != KHUB_EDB)
		outage_cache_count(OUTAGE_CACHE_REPO);
	return rc;
}

int repo_record_lookup(enum repo_type type, const char *ns, const char *name, struct repo_record *out)
{
	char key[2 * REPO_NAME_MAX + 16];
	uint64_t now = monotonic_coarse_usec(), ttl = (uint64_t)http_ctx.repo_cache_ttl_ms * 1000u;
	record_key(key, sizeof(key), type, ns, name);
	/* read before the shared cache's lock: an invalidation after it
	 * makes the front entry kept below stale at once */
	uint64_t gen = atomic_load_explicit(&cache_generation, memory_order_acquire);
	struct front_entry *f = front_find(key, gen, now, ttl);
	if (f) {
		if (f->found)
			*out = f->record;
		return f->found ? 0 : KHUB_ENOTFOUND;
	}

	pthread_once(&record_cache_once, record_cache_init);
	pthread_rwlock_rdlock(&record_lock);
	struct cached_record *c = hashmap_get(&record_cache, key);
	/* A record too old to trust (the refresher is stuck or the database
	 * is down) is looked up again by the request itself, as is one past
	 * its TTL when there is no refresher thread. */
	int stale = c && now - c->fetched_usec >= ttl;
	if (c && now - c->fetched_usec < 30 * ttl + 30000000) {
		if (stale && !atomic_exchange(&c->refreshing, 1) && queue_refresh(key, type, ns, name) < 0) {
			atomic_store(&c->refreshing, 0);
			pthread_rwlock_unlock(&record_lock);
			goto look_up;
		}
		int found = c->found;
		if (found)
			*out = c->record;
		if (now - c->fetched_usec < ttl)
			front_keep(key, c, gen);
		pthread_rwlock_unlock(&record_lock);
		return found ? 0 : KHUB_ENOTFOUND;
	}
	pthread_rwlock_unlock(&record_lock);

look_up:;
	struct repo_record rec;
	int rc = db_repo_get(type, ns, name, &rec);
	if (rc == KHUB_EDB)
		return db_is_down(NULL) ? lookup_during_outage(key, now, out) : rc;
	store_record(key, rc, &rec, now);
	if (rc == 0)
		*out = rec;
	return rc;
}
