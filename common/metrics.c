/* metrics.c -- request counters and latency histograms by key (the server
 * keys them by route pattern), kept per thread so that the request path
 * takes no lock and writes no cache line another thread writes, summed
 * when /metrics is scraped; and the Prometheus text format's helpers. */
#include "common.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Latency bucket bounds (le), in microseconds; one more bucket: +Inf. */
static const uint64_t bucket_usec[] = {
	1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 30000000,
};
#define BUCKETS (sizeof(bucket_usec) / sizeof(bucket_usec[0]) + 1)
/* Distinct statuses a key counts on its own per thread; the rest are "other". */
#define STATUS_SLOTS 8

/* One key's figures in one thread's shard. Only the owning thread writes
 * (relaxed loads and stores: plain moves), scrapes read. */
struct key_stats {
	_Atomic uint64_t bytes, sum_usec;
	_Atomic uint64_t buckets[BUCKETS];	/* per bucket, not cumulative */
	_Atomic int status[STATUS_SLOTS];	/* 0 = slot free */
	_Atomic uint64_t count[STATUS_SLOTS + 1];	/* the last: statuses past the slots */
};

struct shard {
	struct shard *next;
	struct key_stats keys[];
};

static char **key_names;	/* [nkeys], owned */
static size_t nkeys;
static pthread_mutex_t shards_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shard *shards;	/* every shard made; never freed (a thread's figures outlive it) */
static struct shard *retired;	/* shards of ended threads, for new threads to carry on */
static pthread_key_t shard_key;
static pthread_once_t shard_key_once = PTHREAD_ONCE_INIT;
static __thread struct shard *thread_shard;

static void shard_retire(void *p)
{
	struct shard *s = p;
	pthread_mutex_lock(&shards_lock);
	/* off the live list, onto the retired one: still summed by scrapes */
	for (struct shard **pp = &shards; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	s->next = retired;
	retired = s;
	pthread_mutex_unlock(&shards_lock);
}

static void shard_key_create(void)
{
	pthread_key_create(&shard_key, shard_retire);
}

void reqstats_init(const char *const *keys, size_t n)
{
	if (key_names)
		return;	/* once per process: shards are sized by it */
	key_names = xcalloc(n ? n : 1, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		key_names[i] = xstrdup(keys[i]);
	nkeys = n;
	pthread_once(&shard_key_once, shard_key_create);
}

/* Whole cache lines of its own: no two threads' shards share one. */
static struct shard *shard_new(void)
{
	size_t size = (sizeof(struct shard) + nkeys * sizeof(struct key_stats) + 63) / 64 * 64;
	struct shard *s = aligned_alloc(64, size);
	if (!s) {
		fputs("khub: out of memory\n", stderr);	/* as xmalloc */
		abort();
	}
	memset(s, 0, size);
	return s;
}

/* This thread's shard: made (or taken over from an ended thread) on its
 * first request, under the lock that scrapes take; after that no lock. */
static struct shard *my_shard(void)
{
	if (thread_shard)
		return thread_shard;
	pthread_mutex_lock(&shards_lock);
	struct shard *s = retired;
	if (s)
		retired = s->next;
	else
		s = shard_new();
	s->next = shards;
	shards = s;
	pthread_mutex_unlock(&shards_lock);
	pthread_setspecific(shard_key, s);
	thread_shard = s;
	return s;
}

static void add_relaxed(_Atomic uint64_t *v, uint64_t n)
{
	atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + n, memory_order_relaxed);
}

static size_t status_slot(struct key_stats *k, int status)
{
	for (size_t i = 0; i < STATUS_SLOTS; i++) {
		int s = atomic_load_explicit(&k->status[i], memory_order_relaxed);
		if (s == status)
			return i;
		if (s == 0) {
			/* the status is seen before its count moves */
			atomic_store_explicit(&k->status[i], status, memory_order_release);
			return i;
		}
	}
	return STATUS_SLOTS;
}

void reqstats_record(size_t key, int status, uint64_t bytes, uint64_t usec)
{
	if (key >= nkeys)
		return;
	struct key_stats *k = &my_shard()->keys[key];
	size_t b = 0;
	while (b < BUCKETS - 1 && usec > bucket_usec[b])
		b++;
	add_relaxed(&k->buckets[b], 1);
	add_relaxed(&k->sum_usec, usec);
	add_relaxed(&k->bytes, bytes);
	/* status 0 (no answer) gets a slot like any other: -1 marks it */
	add_relaxed(&k->count[status_slot(k, status ? status : -1)], 1);
}

void prom_label_value(struct strbuf *sb, const char *v)
{
	for (; *v; v++) {
		if (*v == '"' || *v == '\\')
			strbuf_add(sb, "\\", 1);
		if (*v == '\n')
			strbuf_add(sb, "\\n", 2);
		else
			strbuf_add(sb, v, 1);
	}
}

void prom_family(struct strbuf *sb, const char *name, const char *type, const char *help)
{
	strbuf_addf(sb, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void prom_sample(struct strbuf *sb, const char *name, double value)
{
	strbuf_addf(sb, "%s %.15g\n", name, value);
}

/* The figures of one key, summed over the shards. */
#define STATUSES_KEPT 32
struct key_sum {
	uint64_t bytes, sum_usec, buckets[BUCKETS], other;
	struct { int status; uint64_t count; } st[STATUSES_KEPT];
	size_t nst;
};

static void sum_status(struct key_sum *sum, int status, uint64_t count)
{
	for (size_t i = 0; i < sum->nst; i++)
		if (sum->st[i].status == status) {
			sum->st[i].count += count;
			return;
		}
	if (sum->nst == STATUSES_KEPT) {
		sum->other += count;
		return;
	}
	sum->st[sum->nst].status = status;
	sum->st[sum->nst++].count = count;
}

static void sum_key(struct key_sum *sum, const struct key_stats *k)
{
	sum->bytes += atomic_load_explicit(&k->bytes, memory_order_relaxed);
	sum->sum_usec += atomic_load_explicit(&k->sum_usec, memory_order_relaxed);
	for (size_t b = 0; b < BUCKETS; b++)
		sum->buckets[b] += atomic_load_explicit(&k->buckets[b], memory_order_relaxed);
	for (size_t i = 0; i < STATUS_SLOTS; i++) {
		int status = atomic_load_explicit(&k->status[i], memory_order_acquire);
		uint64_t n = atomic_load_explicit(&k->count[i], memory_order_relaxed);
		if (status && n)
			sum_status(sum, status, n);
	}
	sum->other += atomic_load_explicit(&k->count[STATUS_SLOTS], memory_order_relaxed);
}

static void route_labels(struct strbuf *sb, const char *name, size_t key)
{
	strbuf_addf(sb, "%s{route=\"", name);
	prom_label_value(sb, key_names[key]);
	strbuf_adds(sb, "\"");
}

static void write_requests(struct strbuf *sb, const struct key_sum *sums)
{
	prom_family(sb, "khub_http_requests_total", "counter",
		    "HTTP requests answered, by route pattern and status (status 0: the client left unanswered)");
	for (size_t k = 0; k < nkeys; k++) {
		for (size_t i = 0; i < sums[k].nst; i++) {
			route_labels(sb, "khub_http_requests_total", k);
			strbuf_addf(sb, ",status=\"%d\"} %" PRIu64 "\n", sums[k].st[i].status < 0 ? 0 : sums[k].st[i].status,
				    sums[k].st[i].count);
		}
		if (sums[k].other) {
			route_labels(sb, "khub_http_requests_total", k);
			strbuf_addf(sb, ",status=\"other\"} %" PRIu64 "\n", sums[k].other);
		}
	}
	prom_family(sb, "khub_http_response_bytes_total", "counter", "response body bytes sent, by route pattern");
	for (size_t k = 0; k < nkeys; k++)
		if (sums[k].nst || sums[k].other) {
			route_labels(sb, "khub_http_response_bytes_total", k);
			strbuf_addf(sb, "} %" PRIu64 "\n", sums[k].bytes);
		}
}

static void write_histograms(struct strbuf *sb, const struct key_sum *sums)
{
	prom_family(sb, "khub_http_request_duration_seconds", "histogram",
		    "time from a request's headers read to its end (answer sent or client gone), by route pattern");
	for (size_t k = 0; k < nkeys; k++) {
		uint64_t cumulative = 0;
		for (size_t b = 0; b < BUCKETS; b++)
			cumulative += sums[k].buckets[b];
		if (!cumulative)
			continue;
		cumulative = 0;
		for (size_t b = 0; b < BUCKETS; b++) {
			cumulative += sums[k].buckets[b];
			route_labels(sb, "khub_http_request_duration_seconds_bucket", k);
			if (b < BUCKETS - 1)
				strbuf_addf(sb, ",le=\"%g\"} %" PRIu64 "\n", (double)bucket_usec[b] / 1e6, cumulative);
			else
				strbuf_addf(sb, ",le=\"+Inf\"} %" PRIu64 "\n", cumulative);
		}
		route_labels(sb, "khub_http_request_duration_seconds_sum", k);
		strbuf_addf(sb, "} %.6f\n", (double)sums[k].sum_usec / 1e6);
		route_labels(sb, "khub_http_request_duration_seconds_count", k);
		strbuf_addf(sb, "} %" PRIu64 "\n", cumulative);
	}
}

void reqstats_write(struct strbuf *sb)
{
	struct key_sum *sums = xcalloc(nkeys ? nkeys : 1, sizeof(*sums));
	pthread_mutex_lock(&shards_lock);
	const struct shard *lists[] = { shards, retired };
	for (size_t l = 0; l < 2; l++)
		for (const struct shard *s = lists[l]; s; s = s->next)
			for (size_t k = 0; k < nkeys; k++)
				sum_key(&sums[k], &s->keys[k]);
	pthread_mutex_unlock(&shards_lock);
	write_requests(sb, sums);
	write_histograms(sb, sums);
	free(sums);
}
