/* builds_follow.c -- a build's log as it grows (docs/build-farm.md, "Live
 * logs"): GET /api/builds/{id}/log?follow=1 (plain text, chunked) and the
 * log page's event stream (server-sent events) answer the log so far, then
 * each new piece as the worker appends it, until the build ends. Between
 * pieces the connection waits parked (http/park.c), holding no thread:
 * woken by an append or a change of the job here, else it looks again
 * every second (another node's appends). The text is escaped as the log
 * route escapes it; followers are bounded and end when idle. */
#include "api/builds.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define FOLLOW_READ_MAX (256L * 1024)	/* read per piece */
#define FOLLOW_POLL_MS 1000u		/* another node's appends, a lapsed lease */
#define FOLLOW_LINE_MAX (64L * 1024)	/* a running log's unended line held back at most */
#define SSE_KEEPALIVE_USEC (15ull * 1000000)	/* a comment keeps proxies from closing the stream */
#define FOLLOW_BLOCK (16 * 1024)

static atomic_long followers;

struct follower {
	int64_t id;
	int64_t offset;		/* the next byte of the log to read */
	int64_t seen_length;	/* the log's length when read up to it (-1: read again) */
	int sse;		/* server-sent events, else the plain text */
	struct MHD_Connection *conn;
	struct strbuf out;	/* formatted, not yet handed on */
	size_t out_pos;
	int ending;		/* out holds the last bytes: end after them */
	uint64_t news_usec;	/* when bytes last came (or the follow began) */
	uint64_t sent_usec;	/* when bytes last went (keep-alive) */
	char key[PARK_KEY_MAX];
};

void builds_log_changed(int64_t id)
{
	char key[PARK_KEY_MAX];
	park_key(key, "build-log", (uint64_t)id);
	request_wake(key);
}

static int state_ended(const char *state)
{
	enum build_state s = build_state_named(state);
	return s == BUILD_SUCCEEDED || s == BUILD_FAILED || s == BUILD_CANCELED;
}

/* Text as one event: a data line per line (the stream parser joins them
 * with \n), its id the offset to read on from (Last-Event-ID resumes). */
static void sse_event(struct strbuf *out, const char *event, const char *text, size_t len, int64_t id)
{
	if (id >= 0)
		strbuf_addf(out, "id: %" PRId64 "\n", id);
	if (event)
		strbuf_addf(out, "event: %s\n", event);
	const char *p = text, *end = text + len;
	for (;;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		strbuf_adds(out, "data: ");
		strbuf_add(out, p, nl ? (size_t)(nl - p) : (size_t)(end - p));
		strbuf_adds(out, "\n");
		if (!nl)
			break;
		p = nl + 1;
	}
	strbuf_adds(out, "\n");
}

/* How many bytes of what a read gave go out now: all once the build
 * ended, else up to its last line end, so that a line's \r\n, an escape
 * sequence or a character the read cut comes whole with the next piece
 * (a long unended line goes out as it is). What is held back is the
 * log's own bytes (the cut line ends with \n): read again from next
 * minus them. */
static size_t complete_lines(const struct strbuf *text, int ended)
{
	if (ended || !text->len)
		return text->len;
	const char *nl = memrchr(text->buf, '\n', text->len);
	size_t keep = nl ? (size_t)(nl - text->buf) + 1 : 0;
	return text->len - keep > FOLLOW_LINE_MAX ? text->len : keep;
}

/* Read on from f->offset: 1 with new text in f->out, 0 with none, or a
 * negative error. */
static int read_more(struct follower *f, int ended, int64_t length)
{
	struct strbuf text = STRBUF_INIT, shown = STRBUF_INIT;
	int64_t len_now = 0, next = 0;
	int rc = db_build_log_read(f->id, f->offset, FOLLOW_READ_MAX, &text, &len_now, &next);
	if (rc < 0)
		goto cleanup;
	/* read up to what is there (or nothing stored past it): wait for more */
	f->seen_length = next >= length || !text.len ? length : -1;
	size_t n = complete_lines(&text, ended);
	next -= (int64_t)(text.len - n);
	rc = 0;
	if (n == 0 || next <= f->offset)
		goto cleanup;
	/* the author's build code wrote it: escaped as the log route does */
	terminal_text_sanitize(text.buf, n, &shown);
	if (f->sse)
		sse_event(&f->out, NULL, shown.buf ? shown.buf : "", shown.len, next);
	else
		strbuf_add(&f->out, shown.buf ? shown.buf : "", shown.len);
	f->offset = next;
	f->news_usec = monotonic_usec();
	rc = 1;
cleanup:
	strbuf_release(&text);
	strbuf_release(&shown);
	return rc;
}

/* What comes next: 1 with bytes in f->out (f->ending when they are the
 * last), 0 to wait, -1 to cut the stream (a failure, an idle plain
 * follower: never a clean end, which says the build ended). */
static int follow_step(struct follower *f)
{
	char state[16];
	int64_t length = 0;
	if (request_park_closing() || db_build_log_progress(f->id, state, &length) < 0)
		return -1;
	int ended = state_ended(state);
	if (length != f->seen_length || ended) {
		int rc = read_more(f, ended, length);
		if (rc != 0)
			return rc < 0 ? -1 : 1;
	}
	uint64_t now = monotonic_usec();
	if (ended || now - f->news_usec > (uint64_t)api_ctx.build_log_follow_idle_s * 1000000u) {
		if (!f->sse)
			return ended ? (f->ending = 1, 1) : -1;
		const char *status = ended ? build_state_status(build_state_named(state)) : "";
		sse_event(&f->out, ended ? "end" : "idle", status, strlen(status), -1);
		f->ending = 1;
		return 1;
	}
	if (f->sse && now - f->sent_usec > SSE_KEEPALIVE_USEC) {
		strbuf_adds(&f->out, ": keep-alive\n\n");
		return 1;
	}
	return 0;
}

static ssize_t follow_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct follower *f = cls;
	(void)pos;
	while (f->out_pos == f->out.len) {
		strbuf_reset(&f->out);
		f->out_pos = 0;
		if (f->ending)
			return MHD_CONTENT_READER_END_OF_STREAM;
		int rc = follow_step(f);
		if (rc < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;	/* the client sees the stream cut */
		if (rc == 0) {
			if (park_connection(f->conn, f->key, -1, 0, FOLLOW_POLL_MS) < 0)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			return 0;	/* called again once resumed */
		}
	}
	size_t n = f->out.len - f->out_pos < max ? f->out.len - f->out_pos : max;
	memcpy(buf, f->out.buf + f->out_pos, n);
	f->out_pos += n;
	f->sent_usec = monotonic_usec();
	return (ssize_t)n;
}

static void follower_free(void *cls)
{
	struct follower *f = cls;
	strbuf_release(&f->out);
	free(f);
	atomic_fetch_sub(&followers, 1);
}

enum MHD_Result builds_log_follow(struct request *req, int64_t id, int64_t from, int sse)
{
	long max = api_ctx.build_log_followers_max;
	if (atomic_fetch_add(&followers, 1) >= max) {
		atomic_fetch_sub(&followers, 1);
		return respond_unavailable(req, "too many build logs are followed now (build_log_followers_max, %ld); "
					   "retry later, or read the log without follow", max);
	}
	struct follower *f = xcalloc(1, sizeof(*f));
	f->id = id;
	f->offset = from;
	f->seen_length = -1;
	f->sse = sse;
	f->conn = req->conn;
	strbuf_init(&f->out);
	f->news_usec = f->sent_usec = monotonic_usec();
	park_key(f->key, "build-log", (uint64_t)id);
	struct answer a;
	answer_init(&a, 200);
	answer_header(&a, "Content-Type", sse ? "text/event-stream; charset=utf-8" : "text/plain; charset=utf-8");
	if (!sse)	/* a page's answer carries no-store already */
		answer_header(&a, "Cache-Control", "no-store");
	answer_header(&a, "X-Accel-Buffering", "no");	/* nginx: hand each piece on */
	answer_body_reader(&a, MHD_SIZE_UNKNOWN, FOLLOW_BLOCK, follow_reader, f, follower_free);
	return answer_send(req, &a);
}
