/* service.c -- khub serve as a systemd service: the signals serve waits
 * for, and readiness, reload and stop notifications (sd_notify) for a
 * Type=notify unit (deploy: debian/khub.service, docs/operations.md). */
#include "server/server.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

void service_block_signals(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* sd_notify keeps $NOTIFY_SOCKET for the later notifications; the
 * embedded PostgreSQL is started without it (storage/db/db_embedded.c), so
 * the only sender the unit hears is this process. */
static void notify(const char *state)
{
	int rc = sd_notify(0, state);
	if (rc < 0)
		log_warn("cannot tell systemd '%s': %s", state, strerror(-rc));
}

/* ---- the watchdog (WatchdogSec=) ------------------------------------------------ */

static pthread_t watchdog_thread;
static pthread_once_t watchdog_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t watchdog_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watchdog_cond = PTHREAD_COND_INITIALIZER;
static int watchdog_running, watchdog_stop;
static uint64_t watchdog_usec;

/* Alive: every HTTP loop turned within the half interval (at least 2 s:
 * an idle loop turns once a second). Told once per stall and recovery. */
static int loops_alive(int *told_stall)
{
	uint64_t limit = watchdog_usec / 2 > 2000000 ? watchdog_usec / 2 : 2000000;
	long which = 0;
	uint64_t oldest = http_loops_oldest_turn_usec(&which), now = monotonic_usec();
	int alive = oldest == 0 || now - oldest <= limit;
	if (!alive && !*told_stall)
		log_error("watchdog: HTTP loop %ld has not turned for %.1f s: WATCHDOG=1 withheld (systemd restarts "
			  "khub after WatchdogSec=)", which, (double)(now - oldest) / 1e6);
	else if (alive && *told_stall)
		log_info("watchdog: every HTTP loop turns again: WATCHDOG=1 resumed");
	*told_stall = !alive;
	return alive;
}

static void *watchdog_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "khub-watchdog");
	int told_stall = 0;
	pthread_mutex_lock(&watchdog_lock);
	while (!watchdog_stop) {
		pthread_mutex_unlock(&watchdog_lock);
		if (loops_alive(&told_stall))
			notify("WATCHDOG=1");
		pthread_mutex_lock(&watchdog_lock);
		struct timespec until = clock_after_usec(CLOCK_REALTIME, watchdog_usec / 2);	/* the cond's clock */
		while (!watchdog_stop && pthread_cond_timedwait(&watchdog_cond, &watchdog_lock, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&watchdog_lock);
	return NULL;
}

static void watchdog_start(void)
{
	uint64_t usec = 0;
	if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
		return;
	watchdog_usec = usec;
	if (pthread_create(&watchdog_thread, NULL, watchdog_main, NULL) != 0) {
		log_warn("watchdog: cannot start its thread; systemd's WatchdogSec= will restart khub");
		return;
	}
	watchdog_running = 1;
	log_info("watchdog: WATCHDOG=1 every %.1f s while the HTTP loops turn (WatchdogSec=%.1f)",
		 (double)usec / 2e6, (double)usec / 1e6);
}

static void watchdog_stop_thread(void)
{
	if (!watchdog_running)
		return;
	pthread_mutex_lock(&watchdog_lock);
	watchdog_stop = 1;
	pthread_cond_signal(&watchdog_cond);
	pthread_mutex_unlock(&watchdog_lock);
	pthread_join(watchdog_thread, NULL);
	watchdog_running = 0;
}

void service_notify_ready(void)
{
	char state[400];
	snprintf(state, sizeof(state), "READY=1\nSTATUS=listening on %s", config.listen);
	notify(state);
	pthread_once(&watchdog_once, watchdog_start);
}

void service_notify_reloading(void)
{
	/* MONOTONIC_USEC lets systemd (253 and later) match the READY=1 that
	 * ends this reload; older ones ignore it */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	char state[80];
	snprintf(state, sizeof(state), "RELOADING=1\nMONOTONIC_USEC=%llu",
		 (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000);
	notify(state);
}

void service_notify_stopping(void)
{
	watchdog_stop_thread();
	notify("STOPPING=1");
}
