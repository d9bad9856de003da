/* object_body.c -- answers whose body is an LFS object from the store,
 * without a server thread waiting on the store: a local object is a file
 * body (file_body.c); an S3 one is streamed (storage's lfs_stream): the
 * request waits parked until the store answers, then the body is handed on
 * as it arrives, the connection parked whenever the buffer is empty. A
 * read that fails, or a whole object that does not hash to its oid, ends
 * the transfer before its last byte: the client sees a short body. */
#include "http/http.h"
#include "storage/lfs.h"

#include <poll.h>
#include <unistd.h>

#define STREAM_BLOCK ((size_t)256 * 1024)	/* what libmicrohttpd asks per call */
#define STREAM_PARK_MS 30000u			/* then look again (the store's own timeouts end a stall) */

struct stream_body {
	struct lfs_stream *s;
	struct MHD_Connection *conn;
};

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
	park_connection(b->conn, NULL, lfs_stream_fd(b->s), POLLIN, STREAM_PARK_MS);
	return 0;	/* called again once resumed */
}

static void free_stream_body(void *cls)
{
	struct stream_body *b = cls;
	lfs_stream_close(b->s);
	free(b);
}

static void free_pending(void *state)
{
	lfs_stream_close(state);
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
static int stream_answered(struct request *req, struct answer *a, struct lfs_stream *s, int state,
			   uint64_t count)
{
	req->handler_state = NULL;
	req->handler_state_free = NULL;
	if (state < 0) {
		lfs_stream_close(s);
		return state;
	}
	struct stream_body *b = xcalloc(1, sizeof(*b));
	b->s = s;
	b->conn = req->conn;
	answer_body_reader(a, count, STREAM_BLOCK, read_stream, b, free_stream_body);
	return 0;
}

int answer_lfs_object(struct request *req, struct answer *a, struct lfs_store *store, const char *oid,
		      uint64_t size, uint64_t from, uint64_t count)
{
	struct lfs_stream *s = NULL;
	if (req->handler_state && req->handler_state_free == free_pending) {
		s = req->handler_state;	/* this request's, started by an earlier call */
	} else {
		/* a HEAD has no body; a handler_state not ours is left alone */
		int rc = req->method == METHOD_HEAD || req->handler_state ? KHUB_EINVAL
						    : lfs_store_stream_open(store, oid, size, from, count, &s);
		if (rc == KHUB_EINVAL)
			return unstreamed_answer(req, a, store, oid, size, from, count);
		if (rc < 0)
			return rc;
		req->handler_state = s;
		req->handler_state_free = free_pending;
	}
	int state = lfs_stream_state(s);
	if (state == 1 && request_park_closing())
		state = KHUB_EIO;
	if (state != 1)
		return stream_answered(req, a, s, state, count);
	request_park_fd(req, lfs_stream_fd(s), POLLIN, STREAM_PARK_MS);
	return 1;
}
