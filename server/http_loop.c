/* http_loop.c -- khub's HTTP event loops: one libmicrohttpd daemon per loop
 * in external-epoll mode, each run by a thread of ours, and the admission
 * rules (max_connections, max_connections_per_ip) applied once for all of
 * them when a connection is accepted.
 *
 * Why not libmicrohttpd's own thread pool: its epoll loop (MHD_epoll,
 * 0.9.75 to 1.0.1) drains the kernel in rounds of 128 events and, when a
 * round returns exactly 128, waits again with the full timeout (up to the
 * connection timeout, 60 s) before it serves the 128 connections it was just
 * told about. A thread holding more than about 128 busy keep-alive
 * connections then stalls until some other connection stirs: 512 clients on
 * 2 threads fell from 140 k to 400 requests/s. Here the daemon only ever
 * runs with a zero timeout (MHD_run) and the waiting is ours, on the
 * daemon's epoll descriptor, for as long as MHD_get_timeout allows (0 while
 * it has connections ready). That also lets the thread count follow the
 * CPUs, as nginx's workers do, instead of 4 per CPU to dilute the stall. */
#include "server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct pending_conn {
	int fd;
	socklen_t len;
	struct sockaddr_storage peer;
};

struct http_loop {
	struct MHD_Daemon *daemon;
	pthread_t thread;
	int epoll_fd;			/* the daemon's epoll descriptor and wake_fd */
	int wake_fd;			/* eventfd: new connections, or stop */
	pthread_mutex_t lock;		/* guards pending */
	struct pending_conn *pending;
	size_t pending_count, pending_cap;
	_Atomic long open;		/* connections it holds (for the acceptor's choice) */
	atomic_int queued;		/* pending_count > 0, readable without the lock */
	_Atomic uint64_t turn_usec;	/* monotonic time of its latest turn (the watchdog reads it) */
};

static struct http_loop *loops;
static long loop_count;
static atomic_int stopping;

/* Admission: connections open in all, and per client address. */
static pthread_mutex_t admit_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hashmap per_address;	/* address text -> (intptr_t) count */
static long open_total;
static long limit_total, limit_per_address;

static void address_key(const struct sockaddr *sa, char *key, size_t len)
{
	if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, key, (socklen_t)len);
	else if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, key, (socklen_t)len);
	else
		snprintf(key, len, "family-%d", sa->sa_family);
}

/* Count one more connection from peer: 0, or -1 when a limit refuses it. */
static int admit(const struct sockaddr *peer)
{
	char key[INET6_ADDRSTRLEN + 16];
	address_key(peer, key, sizeof(key));
	int refused = 0;
	pthread_mutex_lock(&admit_lock);
	intptr_t from_here = (intptr_t)hashmap_get(&per_address, key);
	if (open_total >= limit_total || (limit_per_address > 0 && from_here >= limit_per_address)) {
		refused = 1;
	} else {
		open_total++;
		hashmap_put(&per_address, key, (void *)(from_here + 1));
	}
	pthread_mutex_unlock(&admit_lock);
	return refused ? -1 : 0;
}

static void release(const struct sockaddr *peer)
{
	char key[INET6_ADDRSTRLEN + 16];
	address_key(peer, key, sizeof(key));
	pthread_mutex_lock(&admit_lock);
	intptr_t from_here = (intptr_t)hashmap_get(&per_address, key);
	if (from_here <= 1)
		hashmap_remove(&per_address, key);
	else
		hashmap_put(&per_address, key, (void *)(from_here - 1));
	if (open_total > 0)
		open_total--;
	pthread_mutex_unlock(&admit_lock);
}

/* The loop holding the fewest connections. */
static struct http_loop *least_busy_loop(void)
{
	struct http_loop *best = &loops[0];
	for (long i = 1; i < loop_count; i++)
		if (atomic_load_explicit(&loops[i].open, memory_order_relaxed) <
		    atomic_load_explicit(&best->open, memory_order_relaxed))
			best = &loops[i];
	return best;
}

void http_loops_add(int fd, const struct sockaddr *peer, socklen_t len)
{
	if (atomic_load(&stopping) || admit(peer) < 0) {
		close(fd);	/* a limit: closed unanswered, as libmicrohttpd did */
		return;
	}
	struct http_loop *loop = least_busy_loop();
	atomic_fetch_add_explicit(&loop->open, 1, memory_order_relaxed);
	pthread_mutex_lock(&loop->lock);
	if (loop->pending_count == loop->pending_cap) {
		loop->pending_cap = loop->pending_cap ? loop->pending_cap * 2 : 64;
		loop->pending = xrealloc(loop->pending, loop->pending_cap * sizeof(*loop->pending));
	}
	struct pending_conn *p = &loop->pending[loop->pending_count++];
	p->fd = fd;
	p->len = len <= sizeof(p->peer) ? len : sizeof(p->peer);
	memcpy(&p->peer, peer, p->len);
	atomic_store_explicit(&loop->queued, 1, memory_order_relaxed);
	pthread_mutex_unlock(&loop->lock);
	uint64_t one = 1;
	if (write(loop->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("http loop: cannot wake a loop: %s", strerror(errno));
}

/* Hand the connections the acceptor queued for this loop to its daemon
 * (libmicrohttpd's add is not thread-safe in external mode: only the
 * loop's own thread may call it). */
static void take_pending(struct http_loop *loop)
{
	uint64_t count;
	if (read(loop->wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		log_warn("http loop: reading its wake-up: %s", strerror(errno));
	pthread_mutex_lock(&loop->lock);
	size_t n = loop->pending_count;
	struct pending_conn batch[64];
	if (n == 0) {	/* woken to stop, or a wake-up the last turn already served */
		pthread_mutex_unlock(&loop->lock);
		return;
	}
	if (n > 64)
		n = 64;	/* the rest on the next turn: the eventfd is written again below */
	memcpy(batch, loop->pending, n * sizeof(*batch));
	memmove(loop->pending, loop->pending + n, (loop->pending_count - n) * sizeof(*batch));
	loop->pending_count -= n;
	int more = loop->pending_count > 0;
	atomic_store_explicit(&loop->queued, more, memory_order_relaxed);
	pthread_mutex_unlock(&loop->lock);
	if (more) {
		uint64_t one = 1;
		if (write(loop->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			log_warn("http loop: cannot wake itself: %s", strerror(errno));
	}
	for (size_t i = 0; i < n; i++) {
		/* libmicrohttpd closes the socket itself when it refuses it */
		if (MHD_add_connection(loop->daemon, batch[i].fd, (struct sockaddr *)&batch[i].peer, batch[i].len) !=
		    MHD_YES) {
			release((struct sockaddr *)&batch[i].peer);
			atomic_fetch_sub_explicit(&loop->open, 1, memory_order_relaxed);
		}
	}
}

/* Whether the acceptor queued connections for loop (read without the
 * lock: a stale answer is corrected by the eventfd on the next wait). */
static int has_pending(struct http_loop *loop)
{
	return atomic_load_explicit(&loop->queued, memory_order_relaxed) != 0;
}

static void *loop_main(void *arg)
{
	struct http_loop *loop = arg;
	char name[16];
	snprintf(name, sizeof(name), "khub-http-%d", (int)((loop - loops) % 1000));
	pthread_setname_np(pthread_self(), name);
	while (!atomic_load(&stopping)) {
		atomic_store_explicit(&loop->turn_usec, monotonic_usec(), memory_order_relaxed);
		/* 0 while the daemon has connections ready (its eready list),
		 * else until its next connection timeout; at most a second, so
		 * that a lost wake-up costs no more than that */
		MHD_UNSIGNED_LONG_LONG timeout = 1000;
		if (MHD_get_timeout(loop->daemon, &timeout) != MHD_YES || timeout > 1000)
			timeout = 1000;
		if (timeout == 0 && !has_pending(loop)) {
			/* busy (a large body going out 128 KiB a turn, or many
			 * requests): the daemon polls its own descriptors with a
			 * zero timeout; asking the kernel here too is a system
			 * call per turn for nothing */
			MHD_run(loop->daemon);
			continue;
		}
		struct epoll_event events[2];
		int n = epoll_wait(loop->epoll_fd, events, 2, (int)timeout);
		if (n < 0 && errno != EINTR) {
			log_error("http loop: epoll_wait: %s", strerror(errno));
			break;
		}
		int woken = 0;
		for (int i = 0; i < n; i++)
			woken |= events[i].data.ptr == loop;
		if (woken || has_pending(loop))
			take_pending(loop);	/* also clears the eventfd */
		MHD_run(loop->daemon);	/* never blocks: it polls with a zero timeout */
	}
	return NULL;
}

uint64_t http_loops_oldest_turn_usec(long *which)
{
	uint64_t oldest = 0;
	for (long i = 0; i < loop_count; i++) {
		uint64_t t = atomic_load_explicit(&loops[i].turn_usec, memory_order_relaxed);
		if (i == 0 || t < oldest) {
			oldest = t;
			*which = i;
		}
	}
	return oldest;
}

/* Run the daemon of the loop holding conn again, soon: libmicrohttpd's
 * resume marks conn and signals the daemon's own wake-up, which a run that
 * is already past its resume step consumes without resuming; the loop
 * would then sleep until the daemon's next timeout (up to a second here) --
 * once per parked request: a mirror's pull of 200 repos through parked git
 * requests took 207 s instead of 25. */
void http_loops_resumed(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *d = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_DAEMON);
	for (long i = 0; d && i < loop_count; i++)
		if (loops[i].daemon == d->daemon) {
			uint64_t one = 1;
			if (write(loops[i].wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
				log_warn("http loop: cannot wake a loop for a resumed request: %s", strerror(errno));
			return;
		}
}

void http_loops_connection_closed(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *addr = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const union MHD_ConnectionInfo *d = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_DAEMON);
	if (addr && addr->client_addr)
		release(addr->client_addr);
	for (long i = 0; d && i < loop_count; i++)
		if (loops[i].daemon == d->daemon)
			atomic_fetch_sub_explicit(&loops[i].open, 1, memory_order_relaxed);
}

/* One loop: its daemon (started with opts), its eventfd and epoll set. */
static int loop_open(struct http_loop *loop, const struct http_loop_options *opts)
{
	pthread_mutex_init(&loop->lock, NULL);
	loop->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	loop->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	loop->daemon = opts->start(opts->arg);
	if (loop->wake_fd < 0 || loop->epoll_fd < 0 || !loop->daemon)
		return -1;
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(loop->daemon, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info)
		return -1;
	struct epoll_event daemon_ready = { .events = EPOLLIN, .data.ptr = NULL };
	struct epoll_event woken = { .events = EPOLLIN, .data.ptr = loop };
	if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, info->epoll_fd, &daemon_ready) < 0 ||
	    epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, loop->wake_fd, &woken) < 0)
		return -1;
	return 0;
}

int http_loops_start(long count, const struct http_loop_options *opts)
{
	hashmap_init(&per_address);
	limit_total = opts->max_connections;
	limit_per_address = opts->max_connections_per_ip;
	loops = xcalloc((size_t)count, sizeof(*loops));
	loop_count = count;
	for (long i = 0; i < count; i++) {
		loops[i].wake_fd = loops[i].epoll_fd = -1;
		loops[i].turn_usec = monotonic_usec();
		if (loop_open(&loops[i], opts) < 0)
			return -1;
	}
	for (long i = 0; i < count; i++)
		if (pthread_create(&loops[i].thread, NULL, loop_main, &loops[i]) != 0)
			fatal("cannot start an HTTP loop thread");
	return 0;
}

void http_loops_stop(void)
{
	atomic_store(&stopping, 1);
	for (long i = 0; i < loop_count; i++) {
		uint64_t one = 1;
		if (write(loops[i].wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			log_warn("http loop: cannot wake a loop to stop: %s", strerror(errno));
	}
	for (long i = 0; i < loop_count; i++) {
		pthread_join(loops[i].thread, NULL);
		for (size_t k = 0; k < loops[i].pending_count; k++)
			close(loops[i].pending[k].fd);
		MHD_stop_daemon(loops[i].daemon);	/* closes its connections in this thread */
		close(loops[i].epoll_fd);
		close(loops[i].wake_fd);
		pthread_mutex_destroy(&loops[i].lock);
		free(loops[i].pending);
	}
	free(loops);
	loops = NULL;
	loop_count = 0;
	pthread_mutex_lock(&admit_lock);
	hashmap_release(&per_address, NULL);
	pthread_mutex_unlock(&admit_lock);
}
