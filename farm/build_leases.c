/* build_leases.c -- the build farm's lease timer: a thread of khub serve
 * that puts running jobs whose lease lapsed (their worker died or lost
 * touch) back in the queue, or fails them after build_max_attempts, and
 * takes back running jobs whose worker's scope no longer covers their repo
 * (farm/build_states.c's lapse and take_back), so what GET /api/builds/{id}, the admin workers list and the web UI show is true
 * without waiting for a claim. Claims still expire leases in their own
 * transaction, so a job is never held past its lease by a slow timer. */
#include "farm/farm.h"

#include <inttypes.h>
#include <pthread.h>

/* After the first lease lapses, how long the timer waits on top (the
 * database compares with its own clock, to the microsecond). */
#define LAPSE_SLACK_MS 20

static struct bg_thread timer = BG_THREAD_INIT;
static long timer_check_ms;
static uint64_t expired_total;	/* __atomic */

/* One round: expire what lapsed; the milliseconds until the next round. */
static long timer_round(int *failing)
{
	int n = build_jobs_expire_leases(), back = n < 0 ? 0 : build_jobs_take_back();
	long next_ms = -1;
	if (n < 0 || back < 0 || db_build_next_lease_expiry(&next_ms) < 0) {
		if (!*failing)
			log_warn("build leases: cannot check for lapsed leases (database unavailable); trying every %ld ms",
				 timer_check_ms);
		*failing = 1;
		return timer_check_ms;
	}
	if (*failing)
		log_info("build leases: checking again");
	*failing = 0;
	if (n > 0) {
		__atomic_add_fetch(&expired_total, (uint64_t)n, __ATOMIC_RELAXED);
		log_info("build leases: %d running jobs lost their lease (queued again with a backoff, or failed at their "
			 "last attempt)", n);
		farm_queue_changed();
	}
	if (back > 0) {
		log_info("build leases: %d running jobs taken back from workers whose scope no longer covers their repo",
			 back);
		farm_queue_changed();
	}
	/* a lease taken meanwhile (claims, other processes) lasts at least
	 * build_lease_seconds: seen by the round after check_ms */
	if (next_ms >= 0 && next_ms + LAPSE_SLACK_MS < timer_check_ms)
		return next_ms + LAPSE_SLACK_MS;
	return timer_check_ms;
}

/* One round under the job lock, so that nodes sharing the database never
 * expire the same leases at once; a node that finds it taken waits. */
struct lease_round {
	int *failing;
	long next_ms;
};

static void lease_round(void *arg)
{
	struct lease_round *r = arg;
	r->next_ms = timer_round(r->failing);
}

static void *timer_loop(void *arg)
{
	(void)arg;
	log_set_request_id("leases");
	int failing = 0;
	/* The first round comes one interval after start: a lease that lapsed
	 * while the server was down is expired by the first claim anyway, and
	 * starting takes no database connection of its own. */
	long wait_ms = timer_check_ms;
	pthread_mutex_lock(&timer.lock);
	while (!timer.stopping) {
		struct timespec ts = clock_after_usec(CLOCK_REALTIME, (uint64_t)wait_ms * 1000u);
		pthread_cond_timedwait(&timer.wake, &timer.lock, &ts);
		if (timer.stopping)
			break;
		pthread_mutex_unlock(&timer.lock);
		struct lease_round r = { &failing, timer_check_ms };
		if (db_job_round(DB_JOB_BUILD_LEASES, lease_round, &r) < 0)
			log_debug("build leases: the job lock is out of reach (database unavailable)");
		wait_ms = r.next_ms;
		pthread_mutex_lock(&timer.lock);
	}
	pthread_mutex_unlock(&timer.lock);
	return NULL;
}

void build_lease_timer_start(long check_ms)
{
	timer_check_ms = check_ms > 0 ? check_ms : 1000;
	bg_thread_start(&timer, timer_loop, "build lease timer");
}

void build_lease_timer_stop(void)
{
	bg_thread_stop(&timer);
}

uint64_t build_leases_expired(void)
{
	return __atomic_load_n(&expired_total, __ATOMIC_RELAXED);
}

void build_metrics_add(struct strbuf *sb)
{
	uint64_t made, hits;
	build_source_stats(&made, &hits);
	strbuf_addf(sb, "# HELP khub_build_source_tars_made_total build source tars made (one per repo and commit "
			"however many workers asked at once)\n# TYPE khub_build_source_tars_made_total counter\n"
			"khub_build_source_tars_made_total %" PRIu64 "\n", made);
	strbuf_addf(sb, "# HELP khub_build_source_cache_hits_total build source requests served from the tar cache\n"
			"# TYPE khub_build_source_cache_hits_total counter\nkhub_build_source_cache_hits_total %" PRIu64
			"\n", hits);
	strbuf_addf(sb, "# HELP khub_build_leases_expired_total running build jobs whose lease the timer found lapsed\n"
			"# TYPE khub_build_leases_expired_total counter\nkhub_build_leases_expired_total %" PRIu64 "\n",
		    build_leases_expired());
}
