/* conn_guard.c -- the header-completion deadline: a connection must finish a
 * request's headers within header_timeout seconds of opening or of its
 * previous request ending, however slowly it trickles bytes in; and the
 * body deadline: a body khub keeps in memory must all arrive within
 * body_timeout seconds of its headers. libmicrohttpd's own timeout is an
 * idle timeout (every byte resets it), so a watchdog thread shuts down the
 * sockets of connections past a deadline (a late body is answered 408
 * first); libmicrohttpd then sees end-of-file and closes them itself. And the one
 * answer to a request libmicrohttpd refuses before khub sees it (its own
 * answer is written twice: server.h). */
#include "server/server.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	_Atomic uint64_t body_since_usec;	/* a kept body's headers came; 0: none being read */
	struct MHD_Connection *conn;
	/* Written by the connection's thread, read by any thread's logger
	 * walk (under the mutex, but written without it): atomics. */
	_Atomic unsigned long owner;	/* thread_token() of the thread that read the request line */
	_Atomic int reading_headers;	/* request line read, khub not yet called */
};

/* A number for the calling thread, never 0 (pthread_t is not atomic). */
static unsigned long thread_token(void)
{
	static atomic_ulong next_token = 1;
	static _Thread_local unsigned long token;
	if (!token)
		token = atomic_fetch_add(&next_token, 1);
	return token;
}

/* One mutex for the list (connections opening and closing) and the
 * watchdog's walk. libmicrohttpd sends the CLOSED notification (which
 * unlinks the entry under this mutex) before it closes the socket (daemon.c
 * of 0.9.75: MHD_cleanup_connections, and the path of a connection that
 * fails to start), so a shutdown() made under the mutex never hits a reused
 * descriptor. */
static struct bg_thread guard = BG_THREAD_INIT;
static struct dlist guards;
static uint64_t guard_timeout_usec, body_timeout_usec;	/* 0: no deadline */

static void answer_once(struct guarded_conn *g, unsigned status, const char *why, int how);

/* 1 when a deadline of limit_usec from since has passed (since 0: none runs). */
static int overdue(uint64_t since, uint64_t now, uint64_t limit_usec)
{
	return limit_usec && since && now >= since && now - since > limit_usec;
}

/* Drop g when it is past its deadline: the headers' between requests, the
 * body's (answered 408 first) while a kept body is read. */
static void guard_check(struct guarded_conn *g, uint64_t now)
{
	if (g->fd < 0)
		return;
	if (!atomic_load(&g->in_request)) {
		if (!overdue(atomic_load(&g->since_usec), now, guard_timeout_usec))
			return;
		log_info("connection fd %d: no complete request headers in %llu s, dropped", g->fd,
			 (unsigned long long)(guard_timeout_usec / 1000000));
		shutdown(g->fd, SHUT_RDWR);
		g->fd = -1;	/* once is enough */
		return;
	}
	if (!overdue(atomic_load(&g->body_since_usec), now, body_timeout_usec))
		return;
	log_info("connection fd %d: request body not complete in %llu s (body_timeout), answered 408 and dropped",
		 g->fd, (unsigned long long)(body_timeout_usec / 1000000));
	answer_once(g, 408, "request body not received within body_timeout", SHUT_RDWR);
}

static void *guard_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&guard.lock);
	while (!guard.stopping) {
		struct timespec until = clock_after_usec(CLOCK_REALTIME, 250 * 1000);
		pthread_cond_timedwait(&guard.wake, &guard.lock, &until);
		uint64_t now = monotonic_coarse_usec();
		for (struct dlist_node *n = guards.first; n; n = n->next)
			guard_check(dlist_item(n, struct guarded_conn, link), now);
	}
	pthread_mutex_unlock(&guard.lock);
	return NULL;
}

void conn_guard_start(long header_timeout_s, long body_timeout_s)
{
	guard_timeout_usec = header_timeout_s > 0 ? (uint64_t)header_timeout_s * 1000000 : 0;
	body_timeout_usec = body_timeout_s > 0 ? (uint64_t)body_timeout_s * 1000000 : 0;
	if (!guard_timeout_usec && !body_timeout_usec)
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
		g->conn = conn;
		g->since_usec = monotonic_coarse_usec();
		pthread_mutex_lock(&guard.lock);
		dlist_append(&guards, &g->link);
		pthread_mutex_unlock(&guard.lock);
		*socket_context = g;
		return;
	}
	http_loops_connection_closed(conn);
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
	/* the deadline is in seconds: the kernel's tick is precise enough,
	 * and release stores are plain stores (the watchdog's loads pair) */
	if (!in_request)
		atomic_store_explicit(&g->since_usec, monotonic_coarse_usec(), memory_order_release);
	atomic_store_explicit(&g->in_request, in_request, memory_order_release);
}

void conn_guard_request_begin(struct MHD_Connection *conn)
{
	struct guarded_conn *g = guard_of(conn);
	if (g)
		atomic_store_explicit(&g->reading_headers, 0, memory_order_release);
	guard_set_in_request(conn, 1);
}

void conn_guard_request_end(struct MHD_Connection *conn)
{
	conn_guard_body_end(conn);
	guard_set_in_request(conn, 0);
}

void conn_guard_body_begin(struct MHD_Connection *conn)
{
	struct guarded_conn *g = guard_of(conn);
	if (g)
		atomic_store_explicit(&g->body_since_usec, monotonic_coarse_usec() | 1, memory_order_release);
}

void conn_guard_body_end(struct MHD_Connection *conn)
{
	struct guarded_conn *g = guard_of(conn);
	if (g)
		atomic_store_explicit(&g->body_since_usec, 0, memory_order_release);
}

void *conn_guard_request_line(void *cls, const char *uri, struct MHD_Connection *conn)
{
	(void)cls;
	(void)uri;
	struct guarded_conn *g = guard_of(conn);
	if (g) {
		atomic_store_explicit(&g->owner, thread_token(), memory_order_release);
		atomic_store_explicit(&g->reading_headers, 1, memory_order_release);
	}
	return NULL;	/* the request is made at its first access_handler call */
}

/* The connection whose complete headers libmicrohttpd is parsing on this
 * thread now: one of this thread's that read a request line, has all its
 * headers (libmicrohttpd has moved on to the next state of every other
 * connection with complete headers) and was not handed to khub. NULL
 * unless exactly one. headers_incomplete: headers too large for the
 * connection's memory (431) are refused before they are complete, so any
 * connection of this thread still reading its headers counts (the refused
 * one among them: its request line was read). Not for a request line too
 * long (414): that connection never read one, and the only candidate
 * would be another client's.
 * Called with guard.lock held. */
static struct guarded_conn *parsing_headers_here(int headers_incomplete)
{
	struct guarded_conn *found = NULL;
	int n = 0;
	for (struct dlist_node *d = guards.first; d; d = d->next) {
		struct guarded_conn *g = dlist_item(d, struct guarded_conn, link);
		if (!atomic_load(&g->reading_headers) || g->fd < 0 || atomic_load(&g->owner) != thread_token())
			continue;
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(g->conn,
									      MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
		if (headers_incomplete || (ci && ci->header_size > 0)) {
			found = g;
			n++;
		}
	}
	return n == 1 ? found : NULL;
}

/* Answer status once on g's socket (JSON, as khub answers every error),
 * then shut down how (SHUT_WR: libmicrohttpd's own answer fails to go out
 * and it closes the connection; SHUT_RDWR: it also reads end-of-file). */
static void answer_once(struct guarded_conn *g, unsigned status, const char *why, int how)
{
	char body[256], head[512];
	int blen = snprintf(body, sizeof(body), "{\"error\":\"%s\"}", why);
	int hlen = snprintf(head, sizeof(head), "HTTP/1.1 %u %s\r\nDate: %s\r\nContent-Type: application/json; "
			    "charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n"
			    "Content-Length: %d\r\n\r\n", status, MHD_get_reason_phrase_for(status), http_date_now(),
			    blen);
	if (send(g->fd, head, (size_t)hlen, MSG_NOSIGNAL) == hlen)
		(void)send(g->fd, body, (size_t)blen, MSG_NOSIGNAL);
	shutdown(g->fd, how);
	g->fd = -1;	/* the watchdog leaves it alone */
	atomic_store(&g->reading_headers, 0);
}

/* Why libmicrohttpd refused a request with status, from the page it
 * would have sent (NULL: none). */
static const char *refusal_reason(unsigned status, const char *page)
{
	if (status == 431)
		return "request headers larger than connection_memory_kb allows";
	if (status == 414)
		return "request line larger than connection_memory_kb allows";
	if (page && strstr(page, "Content-Length"))
		return status == 413 ? "Content-Length too large" : "malformed Content-Length (one value, digits only)";
	if (page && strstr(page, "Host"))
		return "an HTTP/1.1 request needs a Host header";
	return "malformed request";
}

void conn_guard_mhd_log(void *cls, const char *fmt, va_list ap)
{
	static const char refused[] = "Error processing request (HTTP response code is ";
	(void)cls;
	char text[512];
	va_list copy;
	va_copy(copy, ap);
	vsnprintf(text, sizeof(text), fmt, copy);
	va_end(copy);
	text[strcspn(text, "\n")] = '\0';
	if (strncmp(fmt, refused, sizeof(refused) - 1) != 0) {
		log_debug("libmicrohttpd: %s", text);
		return;
	}
	unsigned status = va_arg(ap, unsigned);
	const char *page = va_arg(ap, const char *);
	const char *why = refusal_reason(status, page);
	pthread_mutex_lock(&guard.lock);
	/* headers too large are refused before they are complete */
	struct guarded_conn *g = parsing_headers_here(status == 431);
	if (g)
		answer_once(g, status, why, SHUT_WR);
	pthread_mutex_unlock(&guard.lock);
	log_info("libmicrohttpd refused a request: %u %s (%s)", status, why,
		 g ? "answered once by khub" : "answered by libmicrohttpd");
}
