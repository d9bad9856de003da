/* answer.c -- described answers: a handler fills a struct answer (status,
 * headers, what the body is) and http/ builds, heads and queues the
 * libmicrohttpd response here. With response_memo.c (kept answers) and
 * file_body.c (sendfile), this is the one place responses are made: no
 * file outside http/ calls MHD_create_response_*, MHD_add_response_header,
 * MHD_queue_response or MHD_destroy_response (t0004 checks). */
#include "http/http.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void answer_init(struct answer *a, int status)
{
	/* not memset: text[] is large and written only as used */
	a->status = status;
	a->nheaders = 0;
	a->body = ANSWER_EMPTY;
	a->data = NULL;
	a->len = 0;
	a->data_owner = ANSWER_DATA_STATIC;
	a->fd = -1;
	a->offset = a->count = 0;
	a->reader = NULL;
	a->reader_cls = NULL;
	a->reader_free = NULL;
	a->block = 0;
	a->memo_key = NULL;
	a->identity = 0;
	a->text_used = 0;
	a->nowned = 0;
}

void answer_header(struct answer *a, const char *name, const char *value)
{
	if (a->nheaders == ANSWER_HEADERS_MAX) {
		log_warn("answer: more than %d headers, %s dropped", ANSWER_HEADERS_MAX, name);
		return;
	}
	a->headers[a->nheaders].name = name;
	a->headers[a->nheaders].value = value;
	a->nheaders++;
}

void answer_headerf(struct answer *a, const char *name, const char *fmt, ...)
{
	va_list ap;
	size_t room = sizeof(a->text) - a->text_used;
	va_start(ap, fmt);
	int n = vsnprintf(a->text + a->text_used, room, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < room) {
		answer_header(a, name, a->text + a->text_used);
		a->text_used += (size_t)n + 1;
		return;
	}
	if (a->nowned == ANSWER_HEADERS_MAX)
		return;
	struct strbuf sb = STRBUF_INIT;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	char *value = strbuf_detach(&sb, NULL);
	a->owned[a->nowned++] = value;
	answer_header(a, name, value);
}

void answer_body_copy(struct answer *a, const void *data, size_t len)
{
	a->body = ANSWER_BUFFER;
	a->data = data;
	a->len = len;
	a->data_owner = ANSWER_DATA_COPY;
}

void answer_body_take(struct answer *a, char *data, size_t len)
{
	a->body = ANSWER_BUFFER;
	a->data = data;
	a->len = len;
	a->data_owner = ANSWER_DATA_TAKE;
}

void answer_body_static(struct answer *a, const char *data, size_t len)
{
	a->body = ANSWER_BUFFER;
	a->data = data;
	a->len = len;
	a->data_owner = ANSWER_DATA_STATIC;
}

void answer_body_size_only(struct answer *a, uint64_t count)
{
	a->body = ANSWER_SIZE_ONLY;
	a->count = count;
}

void answer_body_file(struct answer *a, int fd, uint64_t offset, uint64_t count)
{
	a->body = ANSWER_FILE;
	a->fd = fd;
	a->offset = offset;
	a->count = count;
}

void answer_body_reader(struct answer *a, uint64_t size, size_t block, MHD_ContentReaderCallback reader, void *cls,
			MHD_ContentReaderFreeCallback free_cls)
{
	a->body = ANSWER_READER;
	a->count = size;
	a->block = block;
	a->reader = reader;
	a->reader_cls = cls;
	a->reader_free = free_cls;
}

void answer_redirect(struct answer *a, int status, const char *location)
{
	a->status = status;
	answer_header(a, "Location", location);
}

void answer_identity(struct answer *a)
{
	a->identity = 1;
}

void answer_memo(struct answer *a, const char *key)
{
	a->memo_key = key;
}

/* What the body still owns when it was not handed to a response. */
static void release_body(struct answer *a)
{
	if (a->body == ANSWER_BUFFER && a->data_owner == ANSWER_DATA_TAKE)
		free((void *)a->data);
	else if (a->body == ANSWER_FILE && a->fd >= 0)
		close(a->fd);
	else if (a->body == ANSWER_READER && a->reader_free)
		a->reader_free(a->reader_cls);
	a->body = ANSWER_EMPTY;
}

void answer_release(struct answer *a)
{
	release_body(a);
	for (size_t i = 0; i < a->nowned; i++)
		free(a->owned[i]);
	a->nowned = 0;
	a->nheaders = 0;
}

static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)cls, (void)pos, (void)buf, (void)max;
	return MHD_CONTENT_READER_END_WITH_ERROR;	/* never called for a HEAD */
}

/* The body's response (NULL: none could be made, the body still a's), and
 * the bytes it sends for the access log. */
static struct MHD_Response *create_body(struct request *req, struct answer *a)
{
	static const enum MHD_ResponseMemoryMode modes[] = {
		[ANSWER_DATA_COPY] = MHD_RESPMEM_MUST_COPY,
		[ANSWER_DATA_TAKE] = MHD_RESPMEM_MUST_FREE,
		[ANSWER_DATA_STATIC] = MHD_RESPMEM_PERSISTENT,
	};
	struct MHD_Response *resp = NULL;
	switch (a->body) {
	case ANSWER_EMPTY:
		return MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	case ANSWER_BUFFER:
		resp = MHD_create_response_from_buffer(a->len, (void *)a->data, modes[a->data_owner]);
		req->bytes_out = a->len;
		break;
	case ANSWER_SIZE_ONLY:
		/* libmicrohttpd never reads a HEAD body; the buffer it allocates
		 * with a callback response is one byte, not a page */
		resp = MHD_create_response_from_callback(a->count, 1, no_body, NULL, NULL);
		req->bytes_out = 0;
		break;
	case ANSWER_FILE:
		resp = http_file_response(a->fd, a->offset, a->count);
		req->bytes_out = a->count;
		break;
	case ANSWER_READER:
		resp = MHD_create_response_from_callback(a->count, a->block, a->reader, a->reader_cls,
							 a->reader_free);
		if (a->count != MHD_SIZE_UNKNOWN)
			req->bytes_out = a->count;
		break;
	}
	if (resp)
		a->body = ANSWER_EMPTY;	/* the response's now */
	return resp;
}

enum MHD_Result answer_send(struct request *req, struct answer *a)
{
	answer_compress(req, a);
	struct MHD_Response *resp = create_body(req, a);
	if (!resp) {
		answer_release(a);
		return respond_error(req, 500, NULL, "cannot build response");
	}
	for (size_t i = 0; i < a->nheaders; i++)
		MHD_add_response_header(resp, a->headers[i].name, a->headers[i].value);
	enum MHD_Result r = a->memo_key ? respond_and_memo(req, a->memo_key, a->status, resp)
					: respond(req, a->status, resp);
	answer_release(a);
	return r;
}
