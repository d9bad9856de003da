/* park.c -- let a request wait without holding a server thread: its
 * connection is suspended and resumed later (after a delay, when the
 * thing it waits for is released, or when a file descriptor it waits on
 * is ready), and its handler (or its response's reader) is then called
 * again. Used for a repo's write lock, background jobs and git's pipes;
 * one thread does the resuming, except request_wake_now (a producer
 * thread resuming its reader itself: one hop fewer per wait). */
#include "http/http.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct parked {
	struct parked *next;
	struct MHD_Connection *conn;
	char key[PARK_KEY_MAX];
	uint64_t wake_usec;
	int fd;			/* -1, or resume as soon as it is ready */
	short events;		/* POLLIN or POLLOUT */
};

static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static struct parked *parked_list;
static pthread_mutex_t parker_start_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int parker_running;
static int changed_fd = -1;	/* eventfd: the list changed, look again */
static int closing;		/* request_wake_all was called: the server stops */
/* When the parker's poll times out at the latest (UINT64_MAX: never): a
 * new entry due later and without a descriptor needs no poke (it is seen
 * then), which spares the parker a wake-up per stream wait. */
static uint64_t parker_wakes_at;

/* Tell the parker the list changed; under park_lock or not. */
static void parker_poke(void)
{
	uint64_t one = 1;
	ssize_t n = write(changed_fd, &one, sizeof(one));
	(void)n;	/* a full counter already means "look again" */
}

/* Mark the entries whose fd is ready as due; under park_lock. The entries
 * are still on the list: only the parker takes them off. */
static void mark_ready(struct pollfd *fds, struct parked **owners, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i].revents)
			owners[i]->wake_usec = 0;
}

/* Resume the entries of list, taken off parked_list; not under park_lock. */
static void resume_parked(struct parked *list)
{
	while (list) {
		struct parked *p = list;
		list = p->next;
		MHD_resume_connection(p->conn);
		if (http_ctx.resumed)
			http_ctx.resumed(p->conn);
		free(p);
	}
}

static void *parker(void *arg)
{
	(void)arg;
	log_set_request_id("park");
	struct pollfd *fds = NULL;
	struct parked **owners = NULL;
	size_t cap = 0;
	pthread_mutex_lock(&park_lock);
	for (;;) {
		uint64_t now = monotonic_usec(), next = UINT64_MAX;
		struct parked *due = NULL, **pp = &parked_list;
		while (*pp) {
			struct parked *p = *pp;
			if (p->wake_usec <= now) {
				*pp = p->next;
				p->next = due;
				due = p;
			} else {
				if (p->wake_usec < next)
					next = p->wake_usec;
				pp = &p->next;
			}
		}
		if (due) {
			pthread_mutex_unlock(&park_lock);
			resume_parked(due);
			pthread_mutex_lock(&park_lock);
			continue;
		}
		/* wait for a change, a ready fd or the next deadline */
		size_t with_fd = 0;
		for (struct parked *p = parked_list; p; p = p->next)
			with_fd += p->fd >= 0;
		if (with_fd + 1 > cap) {
			cap = (with_fd + 1) * 2;
			fds = xrealloc(fds, cap * sizeof(*fds));
			owners = xrealloc(owners, cap * sizeof(*owners));
		}
		size_t n = 1;
		fds[0] = (struct pollfd){ changed_fd, POLLIN, 0 };
		for (struct parked *p = parked_list; p; p = p->next)
			if (p->fd >= 0) {
				fds[n] = (struct pollfd){ p->fd, p->events, 0 };
				owners[n++] = p;
			}
		uint64_t wait_ms = next == UINT64_MAX ? 0 : (next - now + 999) / 1000;
		int timeout = next == UINT64_MAX ? -1 : wait_ms > 60000 ? 60000 : (int)wait_ms;
		parker_wakes_at = timeout < 0 ? UINT64_MAX : now + (uint64_t)timeout * 1000u;
		pthread_mutex_unlock(&park_lock);
		int rc = poll(fds, n, timeout);
		if (rc > 0 && fds[0].revents) {
			uint64_t count;
			ssize_t got = read(changed_fd, &count, sizeof(count));
			(void)got;
		}
		pthread_mutex_lock(&park_lock);
		if (rc > 0)
			mark_ready(fds + 1, owners + 1, n - 1);
	}
	return NULL;
}

/* The parker runs from the first park on: 0, or -1 when it cannot be
 * started (out of descriptors or threads: logged, tried again next time).
 * Called from request threads: a failure is the request's, never fatal. */
static int start_parker(void)
{
	if (atomic_load(&parker_running))
		return 0;
	pthread_mutex_lock(&parker_start_lock);
	int err = 0;
	if (!atomic_load(&parker_running)) {
		if (changed_fd < 0)
			changed_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		pthread_t t;
		if (changed_fd < 0)
			log_error("park: cannot create the parker's eventfd: %s", strerror(err = errno));
		else if ((err = pthread_create(&t, NULL, parker, NULL)) != 0)
			log_error("park: cannot start the parker thread: %s", strerror(err));
		else {
			pthread_detach(t);
			atomic_store(&parker_running, 1);
		}
	}
	pthread_mutex_unlock(&parker_start_lock);
	return err ? -1 : 0;
}

int park_connection(struct MHD_Connection *conn, const char *key, int fd, short events, unsigned wait_ms)
{
	if (start_parker() < 0)
		return -1;
	struct parked *p = xcalloc(1, sizeof(*p));
	p->conn = conn;
	snprintf(p->key, sizeof(p->key), "%s", key ? key : "");
	p->wake_usec = monotonic_usec() + (uint64_t)wait_ms * 1000u;
	p->fd = fd;
	p->events = events;
	MHD_suspend_connection(conn);
	pthread_mutex_lock(&park_lock);
	p->next = parked_list;
	parked_list = p;
	int poke = fd >= 0 || p->wake_usec < parker_wakes_at;
	pthread_mutex_unlock(&park_lock);
	if (poke)
		parker_poke();
	return 0;
}

/* The request cannot wait (no parker): answered 503 instead, so that its
 * handler's MHD_YES ends it rather than leaving it suspended for ever. */
static void park_failed(struct request *req)
{
	req->parked = 0;
	if (!req->responded)
		respond_unavailable(req, "the server cannot make this request wait now");
}

void request_park(struct request *req, const char *key, unsigned wait_ms)
{
	req->parked = 1;
	req->park_rounds++;
	if (park_connection(req->conn, key, -1, 0, wait_ms) < 0)
		park_failed(req);
}

void request_park_fd(struct request *req, int fd, short events, unsigned wait_ms)
{
	req->parked = 1;
	req->park_rounds++;
	if (park_connection(req->conn, NULL, fd, events, wait_ms) < 0)
		park_failed(req);
}

void park_key(char out[PARK_KEY_MAX], const char *kind, uint64_t n)
{
	snprintf(out, PARK_KEY_MAX, "%s:%" PRIu64, kind, n);
}

void request_wake(const char *key)
{
	int any = 0;
	pthread_mutex_lock(&park_lock);
	for (struct parked *p = parked_list; p; p = p->next)
		if (strcmp(p->key, key) == 0) {
			p->wake_usec = 0;
			any = 1;
		}
	pthread_mutex_unlock(&park_lock);
	if (any)
		parker_poke();
}

/* Only entries without a descriptor: the parker's poll set refers to the
 * others while it waits. Whoever takes an entry off the list resumes it:
 * exactly once, here or in the parker. */
void request_wake_now(const char *key)
{
	struct parked *found = NULL, **pp = &parked_list;
	pthread_mutex_lock(&park_lock);
	while (*pp) {
		struct parked *p = *pp;
		if (p->fd < 0 && strcmp(p->key, key) == 0) {
			*pp = p->next;
			p->next = found;
			found = p;
		} else {
			pp = &p->next;
		}
	}
	pthread_mutex_unlock(&park_lock);
	resume_parked(found);
}

void request_wake_all(void)
{
	pthread_mutex_lock(&park_lock);
	closing = 1;
	for (struct parked *p = parked_list; p; p = p->next)
		p->wake_usec = 0;
	pthread_mutex_unlock(&park_lock);
	if (changed_fd >= 0)
		parker_poke();
}

int request_park_closing(void)
{
	pthread_mutex_lock(&park_lock);
	int c = closing;
	pthread_mutex_unlock(&park_lock);
	return c;
}
