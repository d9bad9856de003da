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

static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)cls, (void)pos, (void)buf, (void)max;
	return MHD_CONTENT_READER_END_WITH_ERROR;	/* never called for a HEAD */
}

/* Not streamed (a local store, an empty object, a HEAD). */
static int unstreamed_response(struct request *req, struct lfs_store *store, const char *oid, uint64_t size,
			       uint64_t from, uint64_t count, struct MHD_Response **resp)
{
	uint64_t stored;
	int fd;
	if (req->method == METHOD_HEAD) {
		int rc = lfs_store_stat(store, oid, &stored);
		if (rc < 0 || stored != size)
			return rc < 0 ? rc : KHUB_ENOTFOUND;
		*resp = MHD_create_response_from_callback(count, 1, no_body, NULL, NULL);
		return *resp ? 0 : KHUB_EIO;
	}
	int rc = lfs_store_open_object(store, oid, &fd, &stored);
	if (rc < 0)
		return rc;
	if (stored != size || !(*resp = http_file_response(fd, from, count))) {
		close(fd);
		return stored != size ? KHUB_ENOTFOUND : KHUB_EIO;
	}
	return 0;
}

/* The store answered the stream kept in req->handler_state: its body, or
 * the failure (the stream closed either way). */
static int stream_answered(struct request *req, struct lfs_stream *s, int state, uint64_t count,
			   struct MHD_Response **resp)
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
	*resp = MHD_create_response_from_callback(count, STREAM_BLOCK, read_stream, b, free_stream_body);
	if (!*resp) {
		free_stream_body(b);
		return KHUB_EIO;
	}
	return 0;
}

int http_lfs_object_response(struct request *req, struct lfs_store *store, const char *oid, uint64_t size,
			     uint64_t from, uint64_t count, struct MHD_Response **resp)
{
	struct lfs_stream *s = NULL;
	if (req->handler_state && req->handler_state_free == free_pending) {
		s = req->handler_state;	/* this request's, started by an earlier call */
	} else {
		/* a HEAD has no body; a handler_state not ours is left alone */
		int rc = req->method == METHOD_HEAD || req->handler_state ? KHUB_EINVAL
						    : lfs_store_stream_open(store, oid, size, from, count, &s);
		if (rc == KHUB_EINVAL)
			return unstreamed_response(req, store, oid, size, from, count, resp);
		if (rc < 0)
			return rc;
		req->handler_state = s;
		req->handler_state_free = free_pending;
	}
	int state = lfs_stream_state(s);
	if (state == 1 && request_park_closing())
		state = KHUB_EIO;
	if (state != 1)
		return stream_answered(req, s, state, count, resp);
	request_park_fd(req, lfs_stream_fd(s), POLLIN, STREAM_PARK_MS);
	return 1;
}
