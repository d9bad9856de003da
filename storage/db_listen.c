/* db_listen.c -- cache coherence between khub nodes sharing one database:
 * one thread per serving process, on a connection of its own, LISTENs on
 * khub_cache (the triggers of sql/0021_cache_notify.sql send the name of
 * a cache there in the writing transaction) and hands each name to the
 * server's drop function. After every (re)connect it drops every cache
 * ("*"): notifications sent while it was away are lost. */
#include "storage/db_internal.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LISTEN_POLL_MS 250		/* how soon a stop is seen */
#define LISTEN_PING_MS 5000		/* a silent connection is checked this often */
#define LISTEN_BACKOFF_MAX_MS 2000

static char *listen_conninfo;
static void (*listen_drop)(const char *cache);
static pthread_t listen_thread;
static atomic_int listen_stopping, listen_running, listen_connected;
static atomic_uint_fast64_t listen_connects;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* A connection listening on khub_cache, or NULL (why logged once per
 * outage by the caller). */
static PGconn *listen_connect(char *why, size_t size)
{
	PGconn *conn = PQconnectdb(listen_conninfo);
	if (PQstatus(conn) != CONNECTION_OK) {
		snprintf(why, size, "%s", PQerrorMessage(conn));
		PQfinish(conn);
		return NULL;
	}
	PGresult *res = PQexec(conn, "LISTEN khub_cache");
	int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
	if (!ok)
		snprintf(why, size, "%s", PQerrorMessage(conn));
	PQclear(res);
	if (!ok) {
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

/* Hand every queued notification to the drop function. */
static void listen_dispatch(PGconn *conn)
{
	PGnotify *n;
	while ((n = PQnotifies(conn)) != NULL) {
		log_debug("cache coherence: %s changed (NOTIFY from pid %d)", n->extra, n->be_pid);
		listen_drop(n->extra);
		PQfreemem(n);
	}
}

/* A query on a connection that was silent for a while: a dead server or a
 * cut network shows here rather than never. 0 when alive. */
static int listen_ping(PGconn *conn)
{
	PGresult *res = PQexec(conn, "SELECT 1");
	int ok = PQresultStatus(res) == PGRES_TUPLES_OK;
	PQclear(res);
	return ok ? 0 : -1;
}

/* Serve one connection until it breaks or the thread stops. */
static void listen_serve(PGconn *conn)
{
	uint64_t heard = now_ms();
	while (!atomic_load(&listen_stopping)) {
		struct pollfd pfd = { .fd = PQsocket(conn), .events = POLLIN };
		int n = poll(&pfd, 1, LISTEN_POLL_MS);
		if (n < 0)
			continue;
		if (n > 0) {
			if (!PQconsumeInput(conn))
				return;
			heard = now_ms();
		} else if (now_ms() - heard >= LISTEN_PING_MS) {
			if (listen_ping(conn) < 0)
				return;
			heard = now_ms();
		}
		listen_dispatch(conn);
		if (PQstatus(conn) != CONNECTION_OK)
			return;
	}
}

static void *listen_main(void *arg)
{
	(void)arg;
	log_set_request_id("listen");
	long backoff_ms = 100;
	int outage_logged = 0;
	while (!atomic_load(&listen_stopping)) {
		char why[256];
		PGconn *conn = listen_connect(why, sizeof(why));
		if (!conn) {
			if (!outage_logged++)
				log_warn("cache coherence: cannot listen for other nodes' writes (%s); caches fall back to "
					 "their TTL until the database answers", why);
			sleep_ms(backoff_ms);
			backoff_ms = backoff_ms * 2 > LISTEN_BACKOFF_MAX_MS ? LISTEN_BACKOFF_MAX_MS : backoff_ms * 2;
			continue;
		}
		if (outage_logged)
			log_info("cache coherence: listening again; dropping every cache");
		outage_logged = 0;
		backoff_ms = 100;
		listen_drop("*");	/* what was missed while away */
		atomic_store(&listen_connected, 1);
		atomic_fetch_add(&listen_connects, 1);
		listen_serve(conn);
		atomic_store(&listen_connected, 0);
		PQfinish(conn);
		if (!atomic_load(&listen_stopping))
			log_warn("cache coherence: the listening connection broke; reconnecting");
	}
	return NULL;
}

void db_listen_start(const char *conninfo, void (*drop)(const char *cache))
{
	free(listen_conninfo);
	listen_conninfo = xstrdup(conninfo);
	listen_drop = drop;
	atomic_store(&listen_stopping, 0);
	if (pthread_create(&listen_thread, NULL, listen_main, NULL) != 0)
		fatal("cannot start the cache coherence listener");
	atomic_store(&listen_running, 1);
}

void db_listen_stop(void)
{
	if (!atomic_exchange(&listen_running, 0))
		return;
	atomic_store(&listen_stopping, 1);
	pthread_join(listen_thread, NULL);
	free(listen_conninfo);
	listen_conninfo = NULL;
}

int db_listen_connected(void)
{
	return atomic_load(&listen_connected);
}

uint64_t db_listen_connects(void)
{
	return atomic_load(&listen_connects);
}
