/* db_listen.c -- the coordination session of a khub node sharing its
 * database with other nodes: one connection of its own (outside the pool,
 * application_name khub-coordination) on which one thread LISTENs on
 * khub_cache (the triggers of sql/0021_cache_notify.sql send the name of a
 * cache there in the writing transaction) and hands each name to the
 * server's drop function, and on which background jobs take their per-round
 * locks (db_job_round), so that a job never pins a pooled connection. After
 * every (re)connect it drops every cache ("*"): notifications sent while it
 * was away are lost. */
#include "storage/db/db_internal.h"

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
static atomic_int listen_stopping, listen_running;
static atomic_uint_fast64_t listen_connects;

/* The session, shared by the listener and the job threads: every libpq
 * call on it is made under coord_lock; coord_session counts connects, so a
 * job lock taken on an earlier session (gone with it) is not released on a
 * later one. */
static pthread_mutex_t coord_lock = PTHREAD_MUTEX_INITIALIZER;
static PGconn *coord_conn;
static uint64_t coord_session;

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

/* A connection listening on khub_cache, or NULL with why. */
static PGconn *listen_connect(char *why, size_t size)
{
	const char *keys[] = { "dbname", "application_name", NULL };
	const char *values[] = { listen_conninfo, "khub-coordination", NULL };
	PGconn *conn = PQconnectdbParams(keys, values, 1);
	if (PQstatus(conn) != CONNECTION_OK) {
		snprintf(why, size, "%s", PQerrorMessage(conn));
		PQfinish(conn);
		return NULL;
	}
	db_notices_to_log(conn);
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

/* Hand every queued notification to the drop function (under coord_lock:
 * a job's query may have read them off the socket). */
static void listen_dispatch(PGconn *conn)
{
	PGnotify *n;
	while ((n = PQnotifies(conn)) != NULL) {
		log_debug("cache coherence: %s changed (NOTIFY from pid %d)", n->extra, n->be_pid);
		listen_drop(n->extra);
		PQfreemem(n);
	}
}

/* Read what arrived, or check a connection that was silent for a while (a
 * dead server or a cut network shows here rather than never); 0 while
 * the connection is fine. */
static int listen_step(PGconn *conn, int readable)
{
	pthread_mutex_lock(&coord_lock);
	int ok = 1;
	if (readable) {
		ok = PQconsumeInput(conn);
	} else {
		PGresult *res = PQexec(conn, "SELECT 1");
		ok = PQresultStatus(res) == PGRES_TUPLES_OK;
		PQclear(res);
	}
	listen_dispatch(conn);
	ok = ok && PQstatus(conn) == CONNECTION_OK;
	pthread_mutex_unlock(&coord_lock);
	return ok ? 0 : -1;
}

/* Serve one connection until it breaks or the thread stops. With nothing
 * on the socket, consuming still dispatches what a job's query read off
 * it: at the next poll timeout at the latest. */
static void listen_serve(PGconn *conn)
{
	uint64_t heard = now_ms();
	while (!atomic_load(&listen_stopping)) {
		struct pollfd pfd = { .fd = PQsocket(conn), .events = POLLIN };
		int n = poll(&pfd, 1, LISTEN_POLL_MS);
		if (n < 0)
			continue;
		int silent = n == 0 && now_ms() - heard >= LISTEN_PING_MS;
		if (listen_step(conn, !silent) < 0)
			return;
		if (n > 0 || silent)
			heard = now_ms();
	}
}

static void coord_set(PGconn *conn)
{
	pthread_mutex_lock(&coord_lock);
	coord_conn = conn;
	if (conn)
		coord_session++;
	pthread_mutex_unlock(&coord_lock);
}

/* Connect (at most once) and serve: 0 when it served a connection. */
static int listen_round(int *outage_logged)
{
	char why[256];
	PGconn *conn = listen_connect(why, sizeof(why));
	if (!conn) {
		if (!(*outage_logged)++)
			log_warn("cache coherence: cannot listen for other nodes' writes (%s); caches fall back to "
				 "their TTL until the database answers", why);
		return -1;
	}
	if (*outage_logged)
		log_info("cache coherence: listening again; dropping every cache");
	*outage_logged = 0;
	coord_set(conn);
	listen_drop("*");	/* what was missed while away */
	atomic_fetch_add(&listen_connects, 1);
	listen_serve(conn);
	coord_set(NULL);
	PQfinish(conn);
	if (!atomic_load(&listen_stopping))
		log_warn("cache coherence: the coordination connection broke; reconnecting");
	return 0;
}

static void *listen_main(void *arg)
{
	(void)arg;
	log_set_request_id("listen");
	long backoff_ms = 100;
	int outage_logged = 0;
	while (!atomic_load(&listen_stopping)) {
		if (listen_round(&outage_logged) == 0) {
			backoff_ms = 100;
			continue;
		}
		sleep_ms(backoff_ms);
		backoff_ms = backoff_ms * 2 > LISTEN_BACKOFF_MAX_MS ? LISTEN_BACKOFF_MAX_MS : backoff_ms * 2;
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
	/* background jobs start next: give them the session to lock on */
	for (int i = 0; i < 100 && !db_listen_connected(); i++)
		sleep_ms(20);
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
	pthread_mutex_lock(&coord_lock);
	int up = coord_conn != NULL;
	pthread_mutex_unlock(&coord_lock);
	return up;
}

uint64_t db_listen_connects(void)
{
	return atomic_load(&listen_connects);
}

/* ---- per-round job locks ------------------------------------------------------ */

/* fn ("pg_try_advisory_lock" or "pg_advisory_unlock") of (DB_LOCK_JOB,
 * job) on the session: 0 with *got, KHUB_EDB without a session. When
 * session is not 0 it must still be the current one (else 0, nothing
 * done: the lock ended with its session). */
static int coord_lock_call(const char *fn, enum db_job job, uint64_t *session, int *got)
{
	char k[16], i[16], sql[80];
	snprintf(k, sizeof(k), "%d", (int)DB_LOCK_JOB);
	snprintf(i, sizeof(i), "%d", (int)job);
	snprintf(sql, sizeof(sql), "SELECT %s($1::int, $2::int)", fn);
	const char *params[2] = { k, i };
	int rc = 0;
	*got = 0;
	pthread_mutex_lock(&coord_lock);
	if (!coord_conn) {
		rc = KHUB_EDB;
	} else if (*session == 0 || *session == coord_session) {
		*session = coord_session;
		PGresult *res = PQexecParams(coord_conn, sql, 2, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) == PGRES_TUPLES_OK)
			*got = PQgetvalue(res, 0, 0)[0] == 't';
		else
			rc = KHUB_EDB;
		PQclear(res);
	}
	pthread_mutex_unlock(&coord_lock);
	return rc;
}

int db_job_round(enum db_job job, void (*round)(void *arg), void *arg)
{
	uint64_t session = 0;
	int got = 0;
	int rc = coord_lock_call("pg_try_advisory_lock", job, &session, &got);
	if (rc < 0)
		return rc;
	if (!got)
		return 1;
	round(arg);
	coord_lock_call("pg_advisory_unlock", job, &session, &got);
	return 0;
}
