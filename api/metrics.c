/* metrics.c -- the server's own figures in /metrics: requests by route
 * pattern (counted per thread by common/metrics.c), the database pool, the
 * work queues, the LFS store's size (added up from its listing, local or
 * S3, by a background thread every metrics_lfs_scan_s, never per scrape), the build queue, mirror lag and
 * air-gap imports. The route /metrics and who may read it: mirror_admin.c. */
#include "api/metrics.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Route rows by address, each with the index of its pattern's counters
 * (rows sharing a pattern share them); set once before the first request. */
struct route_key {
	const struct route *route;
	size_t key;
};
static struct route_key *route_keys;
static size_t nroute_keys;
static size_t unmatched_key;	/* requests no route matched */

static int by_address(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const struct route_key *)a)->route, y = (uintptr_t)((const struct route_key *)b)->route;
	return x < y ? -1 : x > y;
}

/* The distinct patterns of every table's rows, in table order. */
static void register_routes(const struct route *const *const *groups, size_t ngroups)
{
	size_t n = 0, npatterns = 0;
	for (size_t g = 0; g < ngroups; g++)
		for (size_t t = 0; groups[g][t]; t++)
			for (const struct route *r = groups[g][t]; r->pattern; r++)
				n++;
	const char **patterns = xcalloc(n + 1, sizeof(char *));
	route_keys = xcalloc(n ? n : 1, sizeof(*route_keys));
	for (size_t g = 0; g < ngroups; g++)
		for (size_t t = 0; groups[g][t]; t++)
			for (const struct route *r = groups[g][t]; r->pattern; r++) {
				size_t k = 0;
				while (k < npatterns && strcmp(patterns[k], r->pattern) != 0)
					k++;
				if (k == npatterns)
					patterns[npatterns++] = r->pattern;
				route_keys[nroute_keys++] = (struct route_key){ r, k };
			}
	qsort(route_keys, nroute_keys, sizeof(*route_keys), by_address);
	unmatched_key = npatterns;
	patterns[npatterns++] = "unmatched";
	reqstats_init(patterns, npatterns);
	free(patterns);
}

void metrics_request_done(const struct request *req, uint64_t usec)
{
	size_t key = unmatched_key;
	if (req->route && nroute_keys) {
		struct route_key probe = { req->route, 0 };
		const struct route_key *found = bsearch(&probe, route_keys, nroute_keys, sizeof(*route_keys),
							by_address);
		if (found)
			key = found->key;
	}
	reqstats_record(key, req->status, req->bytes_out, usec);
}

/* ---- the LFS store's size ------------------------------------------------ */

static struct bg_thread lfs_scanner = BG_THREAD_INIT;
static char *lfs_root_dir;
static long lfs_scan_seconds;
static _Atomic uint64_t lfs_bytes, lfs_objects;
static _Atomic int64_t lfs_scanned_at;	/* when the last complete scan ended; 0: none yet */
static atomic_int lfs_scan_abort;	/* shutdown: a walk under way ends now */

struct lfs_tally {
	uint64_t bytes, objects;
};

static int tally_object(const struct lfs_listed *o, void *ctx)
{
	struct lfs_tally *tally = ctx;
	if (atomic_load_explicit(&lfs_scan_abort, memory_order_relaxed))
		return KHUB_EIO;
	tally->bytes += o->size;
	tally->objects++;
	return 0;
}

/* One scan of the store as configured (local files, or the S3 bucket's
 * listing); one that fails (shutdown, the bucket unreachable) keeps the
 * last complete figure. */
static void lfs_scan(void)
{
	struct lfs_tally tally = { 0, 0 };
	struct lfs_store *store = lfs_store_open(lfs_root_dir);
	int rc = store ? lfs_store_list(store, tally_object, &tally) : KHUB_EIO;
	lfs_store_close(store);
	if (rc < 0) {
		log_debug("metrics: the LFS store's listing failed; keeping the last figure");
		return;
	}
	atomic_store(&lfs_bytes, tally.bytes);
	atomic_store(&lfs_objects, tally.objects);
	atomic_store(&lfs_scanned_at, (int64_t)time(NULL));
}

static void lfs_scan_round(void *arg)
{
	(void)arg;
	lfs_scan();
}

static void *lfs_scan_loop(void *arg)
{
	(void)arg;
	log_set_request_id("metrics");
	pthread_mutex_lock(&lfs_scanner.lock);
	while (!lfs_scanner.stopping) {
		pthread_mutex_unlock(&lfs_scanner.lock);
		db_job_round(DB_JOB_LFS_SCAN, lfs_scan_round, NULL);	/* one node walks the shared store at a time */
		pthread_mutex_lock(&lfs_scanner.lock);
		struct timespec ts = clock_after_usec(CLOCK_REALTIME, (uint64_t)lfs_scan_seconds * 1000000u);
		while (!lfs_scanner.stopping && pthread_cond_timedwait(&lfs_scanner.wake, &lfs_scanner.lock, &ts) == 0)
			;
	}
	pthread_mutex_unlock(&lfs_scanner.lock);
	return NULL;
}

void metrics_start(const struct route *const *const *groups, size_t ngroups, const char *lfs_root, long scan_s)
{
	register_routes(groups, ngroups);
	if (!lfs_root)
		return;
	lfs_root_dir = xstrdup(lfs_root);
	lfs_scan_seconds = scan_s > 0 ? scan_s : 300;
	bg_thread_start(&lfs_scanner, lfs_scan_loop, "LFS store scan for /metrics");
}

void metrics_stop(void)
{
	atomic_store(&lfs_scan_abort, 1);	/* a big store's walk must not hold up the exit */
	bg_thread_stop(&lfs_scanner);
	free(lfs_root_dir);
	lfs_root_dir = NULL;
}

/* ---- the scrape ----------------------------------------------------------- */

static void gauge(struct strbuf *sb, const char *name, const char *type, const char *help, double value)
{
	prom_family(sb, name, type, help);
	prom_sample(sb, name, value);
}

static void write_db_pool(struct strbuf *sb)
{
	long open = 0, in_use = 0, size = 0;
	uint64_t waits = 0, timeouts = 0;
	db_pool_stats(&open, &in_use);
	db_pool_waits(&size, &waits, &timeouts);
	gauge(sb, "khub_db_pool_size", "gauge", "database connections the pool may open (db_pool_size)", (double)size);
	gauge(sb, "khub_db_pool_open", "gauge", "database connections open now", (double)open);
	gauge(sb, "khub_db_pool_in_use", "gauge", "database connections borrowed now", (double)in_use);
	gauge(sb, "khub_db_pool_waits_total", "counter", "borrows that waited for a free connection", (double)waits);
	gauge(sb, "khub_db_pool_wait_timeouts_total", "counter",
	      "borrows that found no free connection within db_pool_wait_ms (answered 503)", (double)timeouts);
}

static void write_work_queues(struct strbuf *sb)
{
	static const struct { const char *name, *help; size_t offset; } columns[] = {
		{ "khub_work_queue_depth", "background jobs waiting for a thread",
		  offsetof(struct work_pool_depth, queued) },
		{ "khub_work_queue_running", "background jobs running", offsetof(struct work_pool_depth, running) },
		{ "khub_work_queue_max", "background jobs that may wait (more: 503)",
		  offsetof(struct work_pool_depth, max_queued) },
		{ "khub_work_queue_threads", "background threads", offsetof(struct work_pool_depth, threads) },
	};
	struct work_pool_depth depth[WORK_POOLS];
	const char *names[WORK_POOLS];
	for (int p = 0; p < WORK_POOLS; p++)
		names[p] = work_pool_depth((enum work_pool_id)p, &depth[p]);
	for (size_t c = 0; c < sizeof(columns) / sizeof(columns[0]); c++) {
		prom_family(sb, columns[c].name, "gauge", columns[c].help);
		for (int p = 0; p < WORK_POOLS; p++)
			strbuf_addf(sb, "%s{pool=\"%s\"} %zu\n", columns[c].name, names[p],
				    *(const size_t *)(const void *)((const char *)&depth[p] + columns[c].offset));
	}
}

static void write_lfs_store(struct strbuf *sb)
{
	gauge(sb, "khub_lfs_store_bytes", "gauge", "bytes of the LFS store's objects at the last scan",
	      (double)atomic_load(&lfs_bytes));
	gauge(sb, "khub_lfs_store_objects", "gauge", "LFS objects in the store at the last scan",
	      (double)atomic_load(&lfs_objects));
	gauge(sb, "khub_lfs_store_scan_timestamp_seconds", "gauge",
	      "when the last complete scan of the LFS store ended (0: none yet; every metrics_lfs_scan_s)",
	      (double)atomic_load(&lfs_scanned_at));
}

/* Streamed S3 reads: alive now, refused at the bound. */
static void write_lfs_streams(struct strbuf *sb)
{
	long streams;
	uint64_t refused;
	lfs_stream_counts(&streams, &refused);
	gauge(sb, "khub_lfs_s3_streams", "gauge",
	      "streamed S3 reads alive now (a thread while it fetches, a 2 MiB buffer; at most lfs_s3_streams_max)",
	      (double)streams);
	gauge(sb, "khub_lfs_s3_streams_refused_total", "counter",
	      "LFS reads refused 503 because lfs_s3_streams_max streamed reads were alive", (double)refused);
}

/* This node's checks of local objects: before serving, and the scrub. */
static void write_lfs_integrity(struct strbuf *sb)
{
	struct lfs_integrity_stats s;
	lfs_integrity_stats(&s);
	gauge(sb, "khub_lfs_rehashed_total", "counter",
	      "LFS objects re-hashed before serving because their file changed since verified (or had no record)",
	      (double)s.rehashed);
	gauge(sb, "khub_lfs_damaged_on_read_total", "counter",
	      "LFS objects found damaged before serving (quarantined, answered 502)", (double)s.damaged_on_read);
	gauge(sb, "khub_lfs_s3_damaged_on_read_total", "counter",
	      "S3 objects whose streamed bytes did not hash to their oid (transfer cut short, moved to quarantine/lfs/)",
	      (double)s.s3_damaged_on_read);
	gauge(sb, "khub_lfs_scrub_objects_total", "counter", "LFS objects re-hashed by the scrub on this node",
	      (double)s.scrub_objects);
	gauge(sb, "khub_lfs_scrub_bytes_total", "counter", "bytes re-hashed by the scrub on this node",
	      (double)s.scrub_bytes);
	gauge(sb, "khub_lfs_scrub_damaged_total", "counter", "LFS objects the scrub found damaged and quarantined",
	      (double)s.scrub_damaged);
	gauge(sb, "khub_lfs_scrub_completed_timestamp_seconds", "gauge",
	      "when this node's last complete scrub pass ended (0: none; scrub_mb_per_s, schedule_scrub)",
	      (double)s.scrub_completed_at);
}

static void write_mirror_lag(struct strbuf *sb, const struct db_metrics *m)
{
	double max = 0;
	prom_family(sb, "khub_mirror_lag_seconds", "gauge",
		    "seconds since the last successful pull of a mirrored repo (never pulled: absent)");
	for (size_t i = 0; i < m->nmirrors; i++) {
		strbuf_adds(sb, "khub_mirror_lag_seconds{repo=\"");
		prom_label_value(sb, m->mirrors[i].repo);
		strbuf_adds(sb, "\",selection=\"");
		prom_label_value(sb, m->mirrors[i].selection);
		strbuf_addf(sb, "\"} %.3f\n", m->mirrors[i].lag_s);
		if (m->mirrors[i].lag_s > max)
			max = m->mirrors[i].lag_s;
	}
	gauge(sb, "khub_mirror_lag_max_seconds", "gauge", "the largest khub_mirror_lag_seconds (0: no mirror)", max);
}

static void write_db_figures(struct strbuf *sb, const struct db_metrics *m)
{
	gauge(sb, "khub_build_queue_depth", "gauge", "build jobs queued (not yet claimed by a worker)",
	      (double)m->builds_queued);
	gauge(sb, "khub_build_queue_oldest_age_seconds", "gauge", "age of the oldest queued build job (0: none)",
	      m->build_queued_oldest_s);
	gauge(sb, "khub_builds_running", "gauge", "build jobs a worker holds", (double)m->builds_running);
	gauge(sb, "khub_build_running_oldest_age_seconds", "gauge",
	      "time since the longest-running build job started (0: none)", m->build_running_oldest_s);
	gauge(sb, "khub_sync_imports_total", "counter", "air-gap bundles imported (khub sync import)",
	      (double)m->sync_imports_done);
	gauge(sb, "khub_sync_imports_applying", "gauge", "air-gap imports begun and not finished",
	      (double)m->sync_imports_applying);
	gauge(sb, "khub_sync_import_last_timestamp_seconds", "gauge", "when the last air-gap import finished (0: never)",
	      m->sync_import_last);
	write_mirror_lag(sb, m);
}

void metrics_write_database_state(struct strbuf *sb)
{
	time_t since = 0;
	int down = db_is_down(&since);
	gauge(sb, "khub_database_up", "gauge",
	      "1 while the database answers; 0 while it is down (reads are served from git and the caches, writes "
	      "answer 503)", down ? 0 : 1);
	gauge(sb, "khub_database_down_seconds", "gauge", "how long the database has been down (0: it answers)",
	      down ? difftime(time(NULL), since) : 0);
	gauge(sb, "khub_database_outages_total", "counter", "times this node saw the database go down",
	      (double)db_outages());
	prom_family(sb, "khub_outage_cache_hits_total", "counter",
		    "lookups answered from a cache because the database was down (outage_cache_s)");
	strbuf_addf(sb, "khub_outage_cache_hits_total{cache=\"token\"} %" PRIu64 "\n",
		    outage_cache_hits(OUTAGE_CACHE_TOKEN));
	strbuf_addf(sb, "khub_outage_cache_hits_total{cache=\"repo\"} %" PRIu64 "\n",
		    outage_cache_hits(OUTAGE_CACHE_REPO));
}

/* The scheduled jobs as the database has them: the same on every node. */
static void write_jobs(struct strbuf *sb)
{
	static const struct { const char *name, *type, *help; } fam[] = {
		{ "khub_job_last_success_timestamp_seconds", "gauge",
		  "when the scheduled job last succeeded on any node (0: never; schedule_NAME)" },
		{ "khub_job_last_duration_seconds", "gauge", "how long the job's last finished run took (0: none)" },
		{ "khub_job_failures_total", "counter", "failed runs of the job on all nodes" },
		{ "khub_job_running", "gauge", "1 while a run of the job is under way on some node" },
	};
	struct db_sched_job *rows = NULL;
	size_t n = 0;
	if (db_sched_jobs_list(&rows, &n) < 0)
		return;
	for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
		prom_family(sb, fam[f].name, fam[f].type, fam[f].help);
		for (size_t i = 0; i < n; i++) {
			const struct db_sched_job *j = &rows[i];
			double v = f == 0 ? j->last_success_at
				 : f == 1 ? (j->last_duration_ms < 0 ? 0 : (double)j->last_duration_ms / 1000.0)
				 : f == 2 ? (double)j->failures
					  : (double)j->running;
			strbuf_addf(sb, "%s{job=\"", fam[f].name);
			prom_label_value(sb, j->name);
			strbuf_addf(sb, "\"} %.3f\n", v);
		}
	}
	free(rows);
}

void metrics_write(struct strbuf *sb)
{
	struct db_metrics m;
	int have_db = db_metrics_read(&m) == 0;	/* the database's figures only while it answers */
	metrics_write_database_state(sb);
	reqstats_write(sb);
	write_db_pool(sb);
	write_work_queues(sb);
	write_lfs_store(sb);
	write_lfs_integrity(sb);
	write_lfs_streams(sb);
	if (have_db) {
		write_db_figures(sb, &m);
		write_jobs(sb);
		db_metrics_release(&m);
	}
}
