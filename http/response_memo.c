/* response_memo.c -- whole answers kept per HTTP thread and queued again:
 * a HEAD of a file at a commit, or an answer the response cache keeps (a
 * tree page, a revision at a sha), differs from the last one only in Date
 * and X-Request-Id. libmicrohttpd copies every header into three allocations
 * and frees them with the response; for a HEAD, whose answer is 13
 * headers, that was a third of khub's own CPU per request.
 *
 * A response is rewritten (Date, X-Request-Id) only while no connection
 * holds it: an entry is busy from the queue to the end of the request that
 * took it (response_memo_release). Keys name immutable content (repo id,
 * commit sha, path), so entries are never stale; the caller checks access
 * before every lookup. Slots are per thread (no lock on the hot path) and
 * live until response_memo_shutdown, after the daemon stopped, so a
 * release never touches freed memory. */
#include "http/http.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MEMO_SLOTS 16

struct memo_slot {
	uint64_t hash;
	char *key;			/* NULL: empty */
	struct MHD_Response *resp;	/* one reference held by the slot */
	int status;
	size_t bytes;			/* its body's length (req->bytes_out) */
	int page;			/* made for a web page route (its fixed headers differ) */
	int busy;			/* a request holds resp */
	uint64_t last_use;
	char *date;			/* the Date and X-Request-Id resp carries: */
	char *request_id;		/* libmicrohttpd's strings (set_header) */
};

struct memo_thread {
	struct memo_slot slots[MEMO_SLOTS];
	uint64_t uses;
	struct memo_thread *next;	/* in all_threads */
};

static __thread struct memo_thread *this_thread;
static struct memo_thread *all_threads;
static pthread_mutex_t all_threads_lock = PTHREAD_MUTEX_INITIALIZER;

static struct memo_thread *thread_memo(void)
{
	if (!this_thread) {
		this_thread = xcalloc(1, sizeof(*this_thread));
		pthread_mutex_lock(&all_threads_lock);
		this_thread->next = all_threads;
		all_threads = this_thread;
		pthread_mutex_unlock(&all_threads_lock);
	}
	return this_thread;
}

/* Set header name of s->resp to value. *stored is the value string
 * libmicrohttpd keeps for it (NULL: none yet): a value of the same length
 * (a Date, a request id) is written over it in place -- libmicrohttpd copies
 * the string into a connection's buffer when a connection takes the
 * response, and none holds this one -- which saves the three allocations,
 * the frees and the list walks of a delete and an add per request. */
static void set_header(struct MHD_Response *resp, const char *name, char **stored, const char *value)
{
	size_t len = strlen(value);
	if (*stored && strlen(*stored) == len) {
		memcpy(*stored, value, len);
		return;
	}
	if (*stored)
		MHD_del_response_header(resp, name, *stored);
	MHD_add_response_header(resp, name, value);
	/* libmicrohttpd hands back its own copy, which lives as long as the
	 * header: writable memory it allocated, const only in its API */
	*stored = (char *)MHD_get_response_header(resp, name);
}

/* The per-request headers, rewritten when the slot is reused. */
static void stamp(struct memo_slot *s, struct request *req)
{
	const char *date = http_date_now();
	if (!s->date || strcmp(s->date, date) != 0)
		set_header(s->resp, "Date", &s->date, date);
	set_header(s->resp, "X-Request-Id", &s->request_id, req->request_id);
}

/* Whether req's route is a web page: its answers carry the page headers,
 * the API's CORS ones (respond_add_fixed_headers), so one is never queued
 * for the other. */
static int is_page(const struct request *req)
{
	return req->route && (req->route->flags & ROUTE_PAGE);
}

static enum MHD_Result queue(struct request *req, struct memo_slot *s)
{
	s->busy = 1;
	s->last_use = ++this_thread->uses;
	req->memo = s;
	req->bytes_out = s->bytes;
	stamp(s, req);
	return respond_queue(req, s->status, s->resp);
}

int respond_memo(struct request *req, const char *key, enum MHD_Result *result)
{
	if (req->close_connection)
		return 0;
	struct memo_thread *t = thread_memo();
	uint64_t hash = hash_string(key);
	for (int i = 0; i < MEMO_SLOTS; i++) {
		struct memo_slot *s = &t->slots[i];
		if (s->key && s->hash == hash && !s->busy && s->page == is_page(req) && strcmp(s->key, key) == 0) {
			*result = queue(req, s);
			return 1;
		}
	}
	return 0;
}

enum MHD_Result respond_and_memo(struct request *req, const char *key, int status, struct MHD_Response *resp)
{
	if (req->close_connection)
		return respond(req, status, resp);
	struct memo_thread *t = thread_memo();
	struct memo_slot *victim = NULL;
	for (int i = 0; i < MEMO_SLOTS; i++) {
		struct memo_slot *s = &t->slots[i];
		if (s->busy)
			continue;
		if (!s->key) {
			victim = s;
			break;
		}
		if (!victim || s->last_use < victim->last_use)
			victim = s;
	}
	if (!victim)
		return respond(req, status, resp);	/* every slot is on the wire */
	if (victim->key) {
		free(victim->key);
		MHD_destroy_response(victim->resp);
	}
	memset(victim, 0, sizeof(*victim));
	victim->key = xstrdup(key);
	victim->hash = hash_string(key);
	victim->resp = resp;
	victim->status = status;
	victim->bytes = req->bytes_out;
	victim->page = is_page(req);
	respond_add_fixed_headers(req, resp);
	return queue(req, victim);
}

void response_memo_release(struct request *req)
{
	struct memo_slot *s = req->memo;
	if (s)
		s->busy = 0;
	req->memo = NULL;
}

void response_memo_shutdown(void)
{
	pthread_mutex_lock(&all_threads_lock);
	while (all_threads) {
		struct memo_thread *t = all_threads;
		all_threads = t->next;
		for (int i = 0; i < MEMO_SLOTS; i++) {
			if (t->slots[i].key) {
				free(t->slots[i].key);
				MHD_destroy_response(t->slots[i].resp);
			}
		}
		free(t);
	}
	pthread_mutex_unlock(&all_threads_lock);
}
