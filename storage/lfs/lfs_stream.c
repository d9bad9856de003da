/* lfs_stream.c -- a read of an LFS object handed from the backend's thread
 * (the producer: lfs_s3.c) to whoever serves it (the consumer: the HTTP
 * layer) through a bounded buffer: the producer blocks while it is full,
 * so memory stays flat whatever the sizes and a slow client slows the
 * fetch; the consumer never blocks: it arms the stream and waits, and the
 * producer calls the consumer's waker from its own thread when there is
 * something worth a look (no thread in between, no descriptor). In a
 * verified read the body's last byte is held back until the producer gave
 * its verdict, so a read whose content does not hash to its oid never
 * completes; any other read (a range) completes with its last byte. Streams
 * alive at once (a buffer each, and a thread for as long as it fetches)
 * are bounded per process: past the bound a new one is refused at once. */
#include "storage/lfs/lfs_backend.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct lfs_stream {
	pthread_mutex_t lock;
	pthread_cond_t space;		/* the consumer took bytes, or left */
	int refs;			/* the producer and the consumer */
	void (*wake)(void *arg);	/* the consumer's waker (lfs_stream_on_ready) */
	void *wake_arg;			/* owned: freed with the stream */
	char *buf;			/* ring of cap bytes: len of them from head */
	size_t cap, head, len;
	uint64_t count, delivered;	/* the body's length, bytes handed out */
	int verified;			/* hold the last byte back until the verdict */
	int state;			/* 1 awaited, 0 flowing, < 0 failed */
	int seen_state;			/* the state the consumer last saw */
	int finished;			/* the producer ended (state: its verdict) */
	int consumer_gone;
	int consumer_waits;		/* the consumer is armed: wake it */
	uint64_t waits_since;		/* monotonic_usec() when it began to */
};

static atomic_long streams_alive, streams_refused;

/* A slot for one more stream under max (0: no bound), or 0. */
static int stream_slot_take(long max)
{
	long now = atomic_fetch_add(&streams_alive, 1) + 1;
	if (max <= 0 || now <= max)
		return 1;
	atomic_fetch_sub(&streams_alive, 1);
	atomic_fetch_add(&streams_refused, 1);
	return 0;
}

int lfs_stream_new(uint64_t count, size_t cap, long max, int verified, struct lfs_stream **out)
{
	*out = NULL;
	if (!stream_slot_take(max))
		return KHUB_EBUSY;
	struct lfs_stream *s = xcalloc(1, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->space, NULL);
	s->refs = 2;
	s->cap = cap;
	s->buf = xmalloc(cap);
	s->count = count;
	s->verified = verified;
	s->state = s->seen_state = 1;
	*out = s;
	return 0;
}

void lfs_stream_counts(long *alive, uint64_t *refused)
{
	*alive = atomic_load(&streams_alive);
	*refused = (uint64_t)atomic_load(&streams_refused);
}

static void stream_unref(struct lfs_stream *s)
{
	pthread_mutex_lock(&s->lock);
	int left = --s->refs;
	pthread_mutex_unlock(&s->lock);
	if (left)
		return;
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->space);
	free(s->wake_arg);
	free(s->buf);
	free(s);
	atomic_fetch_sub(&streams_alive, 1);	/* its slot: buffer freed, producer done */
}

/* What a partly filled buffer must hold before the waiting consumer is
 * woken (fewer wake-ups), unless it waited this long (a store that trickles). */
#define WAKE_USEC 20000

static size_t deliverable(const struct lfs_stream *s);

/* Whether the armed consumer has something worth a wake-up: the state it
 * saw changed, the producer ended, or bytes to hand out (a quarter of the
 * buffer, or any after WAKE_USEC). Under s->lock. */
static int worth_waking(const struct lfs_stream *s)
{
	if (s->state != s->seen_state || s->finished)
		return 1;
	size_t n = deliverable(s);
	return n && (n >= s->cap / 4 || s->delivered + n == s->count || monotonic_usec() - s->waits_since > WAKE_USEC);
}

/* Disarm the consumer when it waits for what is there now; under s->lock.
 * 1: call wake_consumer once the lock is released. */
static int take_waiter(struct lfs_stream *s)
{
	if (!s->consumer_waits || !worth_waking(s))
		return 0;
	s->consumer_waits = 0;
	return 1;
}

/* The waker and its argument live as long as the stream, which the
 * producer holds while it calls this: safe after the consumer left. */
static void wake_consumer(struct lfs_stream *s)
{
	if (s->wake)
		s->wake(s->wake_arg);
}

void lfs_stream_on_ready(struct lfs_stream *s, void (*wake)(void *arg), void *arg)
{
	pthread_mutex_lock(&s->lock);
	free(s->wake_arg);
	s->wake = wake;
	s->wake_arg = arg;
	pthread_mutex_unlock(&s->lock);
}

int lfs_stream_arm(struct lfs_stream *s)
{
	pthread_mutex_lock(&s->lock);
	int ready = worth_waking(s);
	if (!ready && !s->consumer_waits) {
		s->consumer_waits = 1;
		s->waits_since = monotonic_usec();
	}
	pthread_mutex_unlock(&s->lock);
	return ready;
}

void lfs_stream_answer(struct lfs_stream *s, int state)
{
	pthread_mutex_lock(&s->lock);
	if (s->state == 1)
		s->state = state;
	int wake = take_waiter(s);
	pthread_mutex_unlock(&s->lock);
	if (wake)
		wake_consumer(s);
}

/* The producer writes only to the free part of the ring and the consumer
 * reads only from the filled part: the copies run outside the lock, which
 * guards the indices alone. */
int lfs_stream_put(struct lfs_stream *s, const char *data, size_t len)
{
	pthread_mutex_lock(&s->lock);
	while (len && !s->consumer_gone) {
		if (s->len == s->cap) {
			pthread_cond_wait(&s->space, &s->lock);
			continue;
		}
		size_t tail = (s->head + s->len) % s->cap;
		size_t n = s->cap - s->len;
		if (n > s->cap - tail)
			n = s->cap - tail;
		if (n > len)
			n = len;
		pthread_mutex_unlock(&s->lock);
		memcpy(s->buf + tail, data, n);
		pthread_mutex_lock(&s->lock);
		s->len += n;
		data += n;
		len -= n;
		if (take_waiter(s)) {	/* woken outside the lock */
			pthread_mutex_unlock(&s->lock);
			wake_consumer(s);
			pthread_mutex_lock(&s->lock);
		}
	}
	int gone = s->consumer_gone;
	pthread_mutex_unlock(&s->lock);
	return gone ? -1 : 0;
}

void lfs_stream_finish(struct lfs_stream *s, int verdict)
{
	pthread_mutex_lock(&s->lock);
	if (s->state == 1)
		s->state = verdict < 0 ? verdict : 0;
	else if (s->state == 0 && verdict < 0)
		s->state = verdict;	/* a failure after the answer: kept as answered otherwise */
	s->finished = 1;
	int wake = take_waiter(s);	/* not armed: it looks again before it waits */
	pthread_mutex_unlock(&s->lock);
	if (wake)
		wake_consumer(s);
	stream_unref(s);
}

int lfs_stream_state(struct lfs_stream *s)
{
	pthread_mutex_lock(&s->lock);
	int state = s->seen_state = s->state;
	if (state == 1 && s->finished)
		state = KHUB_EIO;
	pthread_mutex_unlock(&s->lock);
	return state;
}

/* What may be handed out now: all that is buffered, less the body's last
 * byte while a verified read has no verdict. Under s->lock. */
static size_t deliverable(const struct lfs_stream *s)
{
	size_t n = s->len;
	if (s->verified && !s->finished && s->count && s->delivered + n >= s->count)
		n = (size_t)(s->count - 1 - s->delivered);
	return n;
}

ssize_t lfs_stream_read(struct lfs_stream *s, char *out, size_t max)
{
	pthread_mutex_lock(&s->lock);
	s->seen_state = s->state;
	ssize_t rc = 0;
	size_t n = deliverable(s), head = s->head;
	if (s->state < 0)
		rc = s->state;
	else if (!n && (s->finished || (!s->verified && s->delivered == s->count)))
		rc = s->delivered == s->count ? LFS_STREAM_END : KHUB_EIO;
	else if (!n && !s->consumer_waits) {
		s->consumer_waits = 1;
		s->waits_since = monotonic_usec();
	}
	pthread_mutex_unlock(&s->lock);
	if (rc || !n)
		return rc;
	n = n < max ? n : max;
	size_t first = s->cap - head < n ? s->cap - head : n;
	memcpy(out, s->buf + head, first);
	memcpy(out + first, s->buf, n - first);
	pthread_mutex_lock(&s->lock);
	s->head = (s->head + n) % s->cap;
	s->len -= n;
	s->delivered += n;
	pthread_cond_signal(&s->space);
	pthread_mutex_unlock(&s->lock);
	return (ssize_t)n;
}

int lfs_stream_consumer_gone(struct lfs_stream *s)
{
	pthread_mutex_lock(&s->lock);
	int gone = s->consumer_gone;
	pthread_mutex_unlock(&s->lock);
	return gone;
}

void lfs_stream_close(struct lfs_stream *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->consumer_gone = 1;
	pthread_cond_signal(&s->space);
	pthread_mutex_unlock(&s->lock);
	stream_unref(s);
}
