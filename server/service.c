/* service.c -- khub serve as a systemd service: the signals serve waits
 * for, and readiness, reload and stop notifications (sd_notify) for a
 * Type=notify unit (deploy: debian/khub.service, docs/operations.md). */
#include "server/server.h"

#include <pthread.h>
#include <signal.h>
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
 * embedded PostgreSQL is started without it (storage/db_embedded.c), so
 * the only sender the unit hears is this process. */
static void notify(const char *state)
{
	int rc = sd_notify(0, state);
	if (rc < 0)
		log_warn("cannot tell systemd '%s': %s", state, strerror(-rc));
}

void service_notify_ready(void)
{
	char state[400];
	snprintf(state, sizeof(state), "READY=1\nSTATUS=listening on %s", config.listen);
	notify(state);
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
	notify("STOPPING=1");
}
