/* park.c -- let a request wait without holding a server thread: its
 * connection is suspended and resumed later (after a delay, or when the
 * thing it waits for is released), and its handler is then called again.
 * Used for a repo's write lock; one thread does all the resuming. */
#include "api/api.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct parked {
	struct parked *next;
	struct MHD_Connection *conn;
	char key[PARK_KEY_MAX];
	uint64_t wake_usec;
};

static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_changed = PTHREAD_COND_INITIALIZER;
static struct parked *parked_list;
static pthread_once_t parker_once = PTHREAD_ONCE_INIT;
static int closing;		/* request_wake_all was called: the server stops */

static void *parker(void *arg)
{
	(void)arg;
	log_set_request_id("park");
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
			while (due) {
				struct parked *p = due;
				due = p->next;
				MHD_resume_connection(p->conn);
				free(p);
			}
			pthread_mutex_lock(&park_lock);
			continue;
		}
		if (next == UINT64_MAX) {
			pthread_cond_wait(&park_changed, &park_lock);
		} else {
			struct timespec ts = clock_after_usec(CLOCK_MONOTONIC, next - now);
			pthread_cond_timedwait(&park_changed, &park_lock, &ts);
		}
	}
	return NULL;
}

static void start_parker(void)
{
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_destroy(&park_changed);
	pthread_cond_init(&park_changed, &attr);
	pthread_condattr_destroy(&attr);
	pthread_t t;
	pthread_create(&t, NULL, parker, NULL);
	pthread_detach(t);
}

void request_park(struct request *req, const char *key, unsigned wait_ms)
{
	pthread_once(&parker_once, start_parker);
	struct parked *p = xcalloc(1, sizeof(*p));
	p->conn = req->conn;
	snprintf(p->key, sizeof(p->key), "%s", key);
	p->wake_usec = monotonic_usec() + (uint64_t)wait_ms * 1000u;
	req->parked = 1;
	req->park_rounds++;
	MHD_suspend_connection(req->conn);
	pthread_mutex_lock(&park_lock);
	p->next = parked_list;
	parked_list = p;
	pthread_cond_signal(&park_changed);
	pthread_mutex_unlock(&park_lock);
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
	if (any)
		pthread_cond_signal(&park_changed);
	pthread_mutex_unlock(&park_lock);
}

void request_wake_all(void)
{
	pthread_mutex_lock(&park_lock);
	closing = 1;
	for (struct parked *p = parked_list; p; p = p->next)
		p->wake_usec = 0;
	pthread_cond_signal(&park_changed);
	pthread_mutex_unlock(&park_lock);
}

int request_park_closing(void)
{
	pthread_mutex_lock(&park_lock);
	int c = closing;
	pthread_mutex_unlock(&park_lock);
	return c;
}
