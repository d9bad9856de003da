/* conn_guard.c -- the header-completion deadline: a connection must finish a
 * request's headers within header_timeout seconds of opening or of its
 * previous request ending, however slowly it trickles bytes in.
 * libmicrohttpd's own timeout is an idle timeout (every byte resets it), so
 * a watchdog thread shuts down the sockets of connections past the deadline;
 * libmicrohttpd then sees end-of-file and closes them itself. */
#include "server/server.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

struct guarded_conn {
	struct dlist_node link;	/* in guards */
	int fd;
	/* Set by the connection's own thread at each request's start and end,
	 * read by the watchdog: atomics, so that requests never take the
	 * mutex (eight threads taking one mutex twice a request made the
	 * read path's tail: a holder preempted on a busy core parks them all). */
	_Atomic uint64_t since_usec;	/* opened, or the previous request ended */
	_Atomic int in_request;		/* headers complete, request not yet ended */
};

/* One mutex for the list (connections opening and closing) and the
 * watchdog's walk. libmicrohttpd sends the CLOSED notification (which
 * unlinks the entry under this mutex) before it closes the socket (daemon.c
 * of 0.9.75: MHD_cleanup_connections, and the path of a connection that
 * fails to start), so a shutdown() made under the mutex never hits a reused
 * descriptor. */
static struct bg_thread guard = BG_THREAD_INIT;
static struct dlist guards;
static uint64_t guard_timeout_usec;

static void *guard_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&guard.lock);
	while (!guard.stopping) {
		struct timespec until = clock_after_usec(CLOCK_REALTIME, 250 * 1000);
		pthread_cond_timedwait(&guard.wake, &guard.lock, &until);
		uint64_t now = monotonic_usec();
		for (struct dlist_node *n = guards.first; n; n = n->next) {
			struct guarded_conn *g = dlist_item(n, struct guarded_conn, link);
			uint64_t since = atomic_load(&g->since_usec);
			if (atomic_load(&g->in_request) || g->fd < 0 || now < since || now - since <= guard_timeout_usec)
				continue;
			log_info("connection fd %d: no complete request headers in %llu s, dropped", g->fd,
				 (unsigned long long)(guard_timeout_usec / 1000000));
			shutdown(g->fd, SHUT_RDWR);
			g->fd = -1;	/* once is enough */
		}
	}
	pthread_mutex_unlock(&guard.lock);
	return NULL;
}

void conn_guard_start(long header_timeout_s)
{
	guard_timeout_usec = (uint64_t)header_timeout_s * 1000000;
	if (header_timeout_s <= 0)
		return;
	bg_thread_start(&guard, guard_main, "connection watchdog");
}

void conn_guard_stop(void)
{
	bg_thread_stop(&guard);
}

void conn_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
		       enum MHD_ConnectionNotificationCode toe)
{
	(void)cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		struct guarded_conn *g = xcalloc(1, sizeof(*g));
		g->fd = ci ? ci->connect_fd : -1;
		g->since_usec = monotonic_usec();
		pthread_mutex_lock(&guard.lock);
		dlist_append(&guards, &g->link);
		pthread_mutex_unlock(&guard.lock);
		*socket_context = g;
		return;
	}
	struct guarded_conn *g = *socket_context;
	if (!g)
		return;
	pthread_mutex_lock(&guard.lock);
	dlist_unlink(&guards, &g->link);
	pthread_mutex_unlock(&guard.lock);
	free(g);
	*socket_context = NULL;
}

static struct guarded_conn *guard_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

/* A request on conn began (1) or ended (0): the header deadline runs only
 * between requests, from the end of the last one. */
static void guard_set_in_request(struct MHD_Connection *conn, int in_request)
{
	struct guarded_conn *g = guard_of(conn);
	if (!g)
		return;
	if (!in_request)
		atomic_store(&g->since_usec, monotonic_usec());
	atomic_store(&g->in_request, in_request);
}

void conn_guard_request_begin(struct MHD_Connection *conn)
{
	guard_set_in_request(conn, 1);
}

void conn_guard_request_end(struct MHD_Connection *conn)
{
	guard_set_in_request(conn, 0);
}
