/* object_body.c -- answers whose body is an LFS object from the store,
 * without a server thread waiting on the store: a local object is a file
 * body (file_body.c); an S3 one is streamed (storage's lfs_stream): the
 * request waits parked until the store answers, then the body is handed on
 * as it arrives, the connection parked whenever the buffer is empty. A
 * read that fails, or a whole object that does not hash to its oid, ends
 * the transfer before its last byte: the client sees a short body. */
#include "http/http.h"
#include "storage/lfs/lfs.h"

#include <stdatomic.h>
#include <unistd.h>

#define STREAM_BLOCK ((size_t)256 * 1024)	/* what libmicrohttpd asks per call */
#define STREAM_PARK_MS 30000u			/* then look again (the store's own timeouts end a stall) */

/* A streamed read, from the wait for the store's answer to the body's
 * end: the stream (closed with this) and the key its reader parks under. */
struct stream_body {
	struct lfs_stream *s;
	struct MHD_Connection *conn;
	const char *key;	/* the stream's waker argument: owned by the stream */
};

static void wake_reader(void *key)
{
	request_wake_now(key);
}

/* Park conn until the stream has something worth a look: the producer's
 * thread resumes it (lfs_stream_on_ready), no thread polls for it. */
static void park_on_stream(struct stream_body *b)
{
	if (park_connection(b->conn, b->key, -1, 0, STREAM_PARK_MS) == 0 && lfs_stream_arm(b->s))
		request_wake_now(b->key);	/* it came meanwhile: look again now */
}

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream_body *b = cls;
	(void)pos;
	ssize_t n = lfs_stream_read(b->s, buf, max);
	if (n > 0)
		return n;
	if (n == LFS_STREAM_END)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (n < 0 || request_park_closing())
		return MHD_CONTENT_READER_END_WITH_ERROR;	/* closes the connection: a short body */
	park_on_stream(b);
	return 0;	/* called again once resumed */
}

static void free_stream_body(void *cls)
{
	struct stream_body *b = cls;
	lfs_stream_close(b->s);
	free(b);
}

/* Not streamed (a local store, an empty object, a HEAD). */
static int unstreamed_answer(struct request *req, struct answer *a, struct lfs_store *store, const char *oid,
			     uint64_t size, uint64_t from, uint64_t count)
{
	uint64_t stored;
	int fd;
	if (req->method == METHOD_HEAD) {
		int rc = lfs_store_stat(store, oid, &stored);
		if (rc < 0 || stored != size)
			return rc < 0 ? rc : KHUB_ENOTFOUND;
		answer_body_size_only(a, count);
		return 0;
	}
	int rc = lfs_store_open_object(store, oid, &fd, &stored);
	if (rc < 0)
		return rc;
	if (stored != size) {
		close(fd);
		return KHUB_ENOTFOUND;
	}
	answer_body_file(a, fd, from, count);
	return 0;
}

/* The store answered the stream kept in req->handler_state: its body, or
 * the failure (the stream closed either way). */
static int stream_answered(struct request *req, struct answer *a, struct stream_body *b, int state,
			   uint64_t count)
{
	req->handler_state = NULL;
	req->handler_state_free = NULL;
	if (state < 0) {
		free_stream_body(b);
		return state;
	}
	answer_body_reader(a, count, STREAM_BLOCK, read_stream, b, free_stream_body);
	return 0;
}

/* A new streamed read's body, its waker set: the key is unique per
 * stream, so a late wake-up never resumes another request. */
static struct stream_body *stream_body_new(struct request *req, struct lfs_stream *s)
{
	static atomic_uint_fast64_t streams;
	char *key = xmalloc(PARK_KEY_MAX);
	park_key(key, "lfs-read", atomic_fetch_add(&streams, 1));
	struct stream_body *b = xcalloc(1, sizeof(*b));
	b->s = s;
	b->conn = req->conn;
	b->key = key;
	lfs_stream_on_ready(s, wake_reader, key);
	return b;
}

int answer_lfs_object(struct request *req, struct answer *a, struct lfs_store *store, const char *oid,
		      uint64_t size, uint64_t from, uint64_t count)
{
	struct stream_body *b;
	if (req->handler_state && req->handler_state_free == free_stream_body) {
		b = req->handler_state;	/* this request's, started by an earlier call */
	} else {
		/* a HEAD has no body; a handler_state not ours is left alone */
		struct lfs_stream *s = NULL;
		int rc = req->method == METHOD_HEAD || req->handler_state ? KHUB_EINVAL
						    : lfs_store_stream_open(store, oid, size, from, count, &s);
		if (rc == KHUB_EINVAL)
			return unstreamed_answer(req, a, store, oid, size, from, count);
		if (rc < 0)
			return rc;
		b = stream_body_new(req, s);
		req->handler_state = b;
		req->handler_state_free = free_stream_body;
	}
	int state = lfs_stream_state(b->s);
	if (state == 1 && request_park_closing())
		state = KHUB_EIO;
	if (state != 1)
		return stream_answered(req, a, b, state, count);
	request_park(req, b->key, STREAM_PARK_MS);
	if (req->parked && lfs_stream_arm(b->s))
		request_wake_now(b->key);	/* answered meanwhile: look again now */
	return 1;
}
