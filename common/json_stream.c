/* json_stream.c -- an incremental JSON parser for request bodies that may
 * not fit in memory (NDJSON commits with inline base64 binaries). */
#include "common.h"

#include <stdlib.h>
#include <string.h>

enum state {
	ST_TOP,			/* between top-level objects */
	ST_VALUE,		/* expecting a value */
	ST_VALUE_OR_END,	/* after '[': a value or ']' */
	ST_KEY_OR_END,		/* after '{' */
	ST_KEY,			/* expecting a key after ',' */
	ST_COLON,
	ST_COMMA_OR_END,	/* after a value inside a container */
	ST_STRING,
	ST_STRING_ESCAPE,
	ST_STRING_UNICODE,
	ST_LITERAL,		/* number, true, false, null */
	ST_ERROR,
};

struct json_stream {
	struct json_stream_handler h;
	size_t collect_limit;
	enum state state;
	/* containers: '{' or '[' */
	char stack[JSON_STREAM_MAX_DEPTH + 1];
	int depth;
	/* keys[i] = key of the value being parsed inside the object at depth i+1 */
	char keys[JSON_STREAM_MAX_DEPTH][JSON_STREAM_MAX_KEY];
	int in_key;		/* the string being read is a key */
	size_t key_len;
	enum json_string_mode mode;
	struct strbuf collect;
	char chunk[4096];	/* unescaped bytes of a streamed string, flushed when full */
	size_t chunk_len;
	unsigned unicode;	/* \\uXXXX being read */
	int unicode_digits;
	unsigned high_surrogate;
	size_t line;
	char error[160];
};

struct json_stream *json_stream_new(const struct json_stream_handler *handler, size_t collect_limit)
{
	struct json_stream *js = xcalloc(1, sizeof(*js));
	js->h = *handler;
	js->collect_limit = collect_limit;
	js->state = ST_TOP;
	js->line = 1;
	strbuf_init(&js->collect);
	return js;
}

void json_stream_free(struct json_stream *js)
{
	if (!js)
		return;
	strbuf_release(&js->collect);
	free(js);
}

const char *json_stream_error(const struct json_stream *js) { return js->error; }
size_t json_stream_line(const struct json_stream *js) { return js->line; }

static int fail(struct json_stream *js, const char *msg)
{
	if (js->state != ST_ERROR)
		snprintf(js->error, sizeof(js->error), "line %zu: %s", js->line, msg);
	js->state = ST_ERROR;
	return -1;
}

static int callback_failed(struct json_stream *js)
{
	return fail(js, "rejected by the consumer");
}

/* After a complete value: back to the container's expectation. */
static int value_done(struct json_stream *js)
{
	if (js->depth == 0)
		return fail(js, "a top-level value must be an object");
	js->state = ST_COMMA_OR_END;
	return 0;
}

static int flush_chunk(struct json_stream *js)
{
	if (js->chunk_len == 0)
		return 0;
	int rc = js->h.string_chunk ? js->h.string_chunk(js->h.ctx, js->chunk, js->chunk_len) : 0;
	js->chunk_len = 0;
	return rc < 0 ? callback_failed(js) : 0;
}

/* Append unescaped bytes of the current string. */
static int string_bytes(struct json_stream *js, const char *p, size_t n)
{
	if (js->in_key) {
		if (js->key_len + n >= JSON_STREAM_MAX_KEY)
			return fail(js, "object key too long");
		memcpy(js->keys[js->depth - 1] + js->key_len, p, n);
		js->key_len += n;
		js->keys[js->depth - 1][js->key_len] = '\0';
		return 0;
	}
	if (js->mode == JSON_STRING_COLLECT) {
		if (js->collect.len + n > js->collect_limit)
			return fail(js, "string value too long");
		strbuf_add(&js->collect, p, n);
		return 0;
	}
	while (n > 0) {
		size_t room = sizeof(js->chunk) - js->chunk_len, take = n < room ? n : room;
		memcpy(js->chunk + js->chunk_len, p, take);
		js->chunk_len += take;
		p += take;
		n -= take;
		if (js->chunk_len == sizeof(js->chunk) && flush_chunk(js) < 0)
			return -1;
	}
	return 0;
}

static int put_codepoint(struct json_stream *js, unsigned cp)
{
	char out[4];
	size_t n;
	if (cp == 0)
		return fail(js, "\\u0000 is not allowed");
	if (cp < 0x80) {
		out[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		out[0] = (char)(0xf0 | (cp >> 18));
		out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return string_bytes(js, out, n);
}

static int string_begin(struct json_stream *js, int is_key)
{
	js->in_key = is_key;
	js->high_surrogate = 0;
	if (is_key) {
		js->key_len = 0;
		js->keys[js->depth - 1][0] = '\0';
	} else {
		js->mode = js->h.string_mode ? js->h.string_mode(js->h.ctx, js->keys, js->depth)
					     : JSON_STRING_COLLECT;
		strbuf_reset(&js->collect);
		js->chunk_len = 0;
	}
	js->state = ST_STRING;
	return 0;
}

static int string_finish(struct json_stream *js)
{
	if (js->high_surrogate)
		return fail(js, "unpaired surrogate in string");
	if (js->in_key) {
		js->state = ST_COLON;
		return 0;
	}
	int rc;
	if (js->mode == JSON_STRING_STREAM) {
		if (flush_chunk(js) < 0)
			return -1;
		rc = js->h.string_end ? js->h.string_end(js->h.ctx) : 0;
	} else {
		if (!js->collect.buf)
			strbuf_grow(&js->collect, 0), js->collect.buf[0] = '\0';
		rc = js->h.scalar ? js->h.scalar(js->h.ctx, js->keys, js->depth, JSON_STREAM_STRING,
						 js->collect.buf, js->collect.len) : 0;
	}
	if (rc < 0)
		return callback_failed(js);
	return value_done(js);
}

static int literal_finish(struct json_stream *js)
{
	const char *t = js->collect.buf ? js->collect.buf : "";
	enum json_scalar kind;
	if (strcmp(t, "true") == 0)
		kind = JSON_STREAM_TRUE;
	else if (strcmp(t, "false") == 0)
		kind = JSON_STREAM_FALSE;
	else if (strcmp(t, "null") == 0)
		kind = JSON_STREAM_NULL;
	else {
		/* JSON number grammar: -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)? */
		const char *p = t;
		if (*p == '-')
			p++;
		if (*p == '0')
			p++;
		else if (*p >= '1' && *p <= '9')
			while (*p >= '0' && *p <= '9')
				p++;
		else
			return fail(js, "invalid literal");
		if (*p == '.') {
			p++;
			if (!(*p >= '0' && *p <= '9'))
				return fail(js, "invalid number");
			while (*p >= '0' && *p <= '9')
				p++;
		}
		if (*p == 'e' || *p == 'E') {
			p++;
			if (*p == '+' || *p == '-')
				p++;
			if (!(*p >= '0' && *p <= '9'))
				return fail(js, "invalid number");
			while (*p >= '0' && *p <= '9')
				p++;
		}
		if (*p)
			return fail(js, "invalid number");
		kind = JSON_STREAM_NUMBER;
	}
	if (js->h.scalar && js->h.scalar(js->h.ctx, js->keys, js->depth, kind, t, js->collect.len) < 0)
		return callback_failed(js);
	return value_done(js);
}

static int container_open(struct json_stream *js, char kind)
{
	if (js->depth >= JSON_STREAM_MAX_DEPTH)
		return fail(js, "nesting too deep");
	js->stack[js->depth++] = kind;
	if (kind == '{') {
		js->keys[js->depth - 1][0] = '\0';
		js->state = ST_KEY_OR_END;
	} else {
		strcpy(js->keys[js->depth - 1], "[]");
		js->state = ST_VALUE_OR_END;
	}
	return 0;
}

static int container_close(struct json_stream *js, char closer)
{
	char open = closer == '}' ? '{' : '[';
	if (js->depth == 0 || js->stack[js->depth - 1] != open)
		return fail(js, "mismatched bracket");
	js->depth--;
	if (js->depth == 0) {
		js->state = ST_TOP;
		if (js->h.object_end && js->h.object_end(js->h.ctx) < 0)
			return callback_failed(js);
		return 0;
	}
	js->state = ST_COMMA_OR_END;
	return 0;
}

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The steps of json_stream_feed, one per state: 0 when c was taken, -1 on
 * an error (js->error set). */
static int step_top(struct json_stream *js, char c)
{
	if (is_space(c))
		return 0;
	if (c != '{')
		return fail(js, "expected '{' to start an object");
	if (js->h.object_begin && js->h.object_begin(js->h.ctx) < 0)
		return callback_failed(js);
	return container_open(js, '{');
}

static int step_key(struct json_stream *js, char c)
{
	if (is_space(c))
		return 0;
	if (c == '}' && js->state == ST_KEY_OR_END)
		return container_close(js, '}');
	if (c != '"')
		return fail(js, "expected a key");
	string_begin(js, 1);
	return 0;
}

static int step_colon(struct json_stream *js, char c)
{
	if (is_space(c))
		return 0;
	if (c != ':')
		return fail(js, "expected ':'");
	js->state = ST_VALUE;
	return 0;
}

static int step_value(struct json_stream *js, char c)
{
	if (is_space(c))
		return 0;
	if (c == ']' && js->state == ST_VALUE_OR_END)	/* not after ',' */
		return container_close(js, ']');
	if (c == '"') {
		string_begin(js, 0);
	} else if (c == '{' || c == '[') {
		return container_open(js, c);
	} else if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
		strbuf_reset(&js->collect);
		strbuf_add(&js->collect, &c, 1);
		js->state = ST_LITERAL;
	} else {
		return fail(js, "expected a value");
	}
	return 0;
}

/* ST_LITERAL: 0 when c was taken, 1 when c ended the literal (it belongs
 * to the container: feed it again), -1 on an error. */
static int step_literal(struct json_stream *js, char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '.' || c == '+' || c == '-' || c == 'E') {
		if (js->collect.len >= 64)
			return fail(js, "literal too long");
		strbuf_add(&js->collect, &c, 1);
		return 0;
	}
	return literal_finish(js) < 0 ? -1 : 1;
}

static int step_comma_or_end(struct json_stream *js, char c)
{
	if (is_space(c))
		return 0;
	if (c == ',') {
		js->state = js->stack[js->depth - 1] == '{' ? ST_KEY : ST_VALUE;
		return 0;
	}
	if (c == '}' || c == ']')
		return container_close(js, c);
	return fail(js, "expected ',' or the end of the container");
}

/* ST_STRING at data[*i]: a run of plain characters is taken at once (*i
 * then the last of them). */
static int step_string(struct json_stream *js, const char *data, size_t len, size_t *i)
{
	char c = data[*i];
	if (js->high_surrogate && c != '\\')
		return fail(js, "unpaired surrogate in string");
	size_t j = *i;
	while (j < len && data[j] != '"' && data[j] != '\\' && (unsigned char)data[j] >= 0x20)
		j++;
	if (j > *i) {
		if (string_bytes(js, data + *i, j - *i) < 0)
			return -1;
		*i = j - 1;
		return 0;
	}
	if (c == '"')
		return string_finish(js);
	if (c != '\\')
		return fail(js, "control character in string");
	js->state = ST_STRING_ESCAPE;
	return 0;
}

static int step_escape(struct json_stream *js, char c)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const char *at = c ? strchr(from, c) : NULL;
	if (c == 'u') {
		js->unicode = 0;
		js->unicode_digits = 0;
		js->state = ST_STRING_UNICODE;
		return 0;
	}
	if (!at)
		return fail(js, "invalid escape");
	if (js->high_surrogate)
		return fail(js, "unpaired surrogate in string");
	js->state = ST_STRING;
	return string_bytes(js, &to[at - from], 1);
}

static int step_unicode(struct json_stream *js, char c)
{
	int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
		: (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
	if (v < 0)
		return fail(js, "invalid \\u escape");
	js->unicode = js->unicode * 16 + (unsigned)v;
	if (++js->unicode_digits < 4)
		return 0;
	js->state = ST_STRING;
	unsigned u = js->unicode;
	if (js->high_surrogate) {
		if (u < 0xdc00 || u > 0xdfff)
			return fail(js, "unpaired surrogate in string");
		unsigned cp = 0x10000 + ((js->high_surrogate - 0xd800) << 10) + (u - 0xdc00);
		js->high_surrogate = 0;
		return put_codepoint(js, cp);
	}
	if (u >= 0xd800 && u <= 0xdbff) {
		js->high_surrogate = u;	/* the low half must follow immediately as \\uXXXX */
		return 0;
	}
	if (u >= 0xdc00 && u <= 0xdfff)
		return fail(js, "unpaired surrogate in string");
	return put_codepoint(js, u);
}

int json_stream_feed(struct json_stream *js, const char *data, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		char c = data[i];
		int rc = 0;
		if (c == '\n')
			js->line++;
		switch (js->state) {
		case ST_ERROR:
			return -1;
		case ST_TOP:
			rc = step_top(js, c);
			break;
		case ST_KEY_OR_END:
		case ST_KEY:
			rc = step_key(js, c);
			break;
		case ST_COLON:
			rc = step_colon(js, c);
			break;
		case ST_VALUE:
		case ST_VALUE_OR_END:
			rc = step_value(js, c);
			break;
		case ST_LITERAL:
			rc = step_literal(js, c);
			if (rc == 1) {	/* the delimiter belongs to the container */
				rc = 0;
				i--;
				if (c == '\n')
					js->line--;
			}
			break;
		case ST_COMMA_OR_END:
			rc = step_comma_or_end(js, c);
			break;
		case ST_STRING:
			rc = step_string(js, data, len, &i);
			break;
		case ST_STRING_ESCAPE:
			rc = step_escape(js, c);
			break;
		case ST_STRING_UNICODE:
			rc = step_unicode(js, c);
			break;
		}
		if (rc < 0)
			return -1;
	}
	return js->state == ST_ERROR ? -1 : 0;
}

int json_stream_finish(struct json_stream *js)
{
	if (js->state == ST_ERROR)
		return -1;
	if (js->state != ST_TOP)
		return fail(js, "the body ended inside a value");
	return 0;
}
