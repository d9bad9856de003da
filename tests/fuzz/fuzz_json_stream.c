/* fuzz_json_stream.c -- fuzz the streaming JSON parser of commit bodies:
 * feeding the input whole, split at a point the input chooses, and a byte
 * at a time must give the same events and the same verdict. */
#include <assert.h>
#include <string.h>

#include "common/common.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static int on_begin(void *ctx)
{
	strbuf_add(ctx, "{", 1);
	return 0;
}

static int on_end(void *ctx)
{
	strbuf_add(ctx, "}", 1);
	return 0;
}

/* Stream the strings under keys that start with 'c' (as "content"), collect
 * the others: both paths get exercised. */
static enum json_string_mode on_mode(void *ctx, char keys[][JSON_STREAM_MAX_KEY], int depth)
{
	if (keys[depth - 1][0] != 'c')
		return JSON_STRING_COLLECT;
	strbuf_add(ctx, "S", 1);
	return JSON_STRING_STREAM;
}

static int on_chunk(void *ctx, const char *p, size_t n)
{
	assert(n > 0 && n <= 4096);
	strbuf_add(ctx, p, n);
	return 0;
}

static int on_string_end(void *ctx)
{
	strbuf_add(ctx, "E", 1);
	return 0;
}

static int on_scalar(void *ctx, char keys[][JSON_STREAM_MAX_KEY], int depth, enum json_scalar kind,
		     const char *text, size_t len)
{
	assert(depth >= 1 && depth <= JSON_STREAM_MAX_DEPTH);
	assert(text[len] == '\0');
	for (int i = 0; i < depth; i++)
		strbuf_addf(ctx, "%s/", keys[i]);
	strbuf_addf(ctx, "%d=%zu:", (int)kind, len);
	strbuf_add(ctx, text, len);
	return 0;
}

/* Parse in pieces: the first `cut` bytes, then the rest in `step`-byte
 * pieces. The events (or "!" and the error) go to out. */
static void parse(const unsigned char *data, size_t size, size_t cut, size_t step, struct strbuf *out)
{
	static const struct json_stream_handler h = { NULL, on_begin, on_end, on_mode, on_chunk, on_string_end,
						      on_scalar };
	struct json_stream_handler hh = h;
	hh.ctx = out;
	struct json_stream *js = json_stream_new(&hh, 1024);
	int rc = json_stream_feed(js, (const char *)data, cut);
	for (size_t at = cut; rc == 0 && at < size; at += step)
		rc = json_stream_feed(js, (const char *)data + at, size - at < step ? size - at : step);
	if (rc == 0)
		rc = json_stream_finish(js);
	if (rc < 0) {
		strbuf_addf(out, "!%s", json_stream_error(js));
		assert(json_stream_feed(js, "{}", 2) < 0);	/* an error is final */
	}
	json_stream_free(js);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct strbuf whole, split, bytes;
	strbuf_init(&whole);
	strbuf_init(&split);
	strbuf_init(&bytes);
	parse(data, size, size, 1, &whole);
	size_t cut = size ? data[0] % (size + 1) : 0;
	parse(data, size, cut, size ? size : 1, &split);
	parse(data, size, 0, 1, &bytes);
	assert(whole.len == split.len && (whole.len == 0 || memcmp(whole.buf, split.buf, whole.len) == 0));
	assert(whole.len == bytes.len && (whole.len == 0 || memcmp(whole.buf, bytes.buf, whole.len) == 0));
	strbuf_release(&whole);
	strbuf_release(&split);
	strbuf_release(&bytes);
	return 0;
}
