/* test_json_stream.c -- the streaming JSON parser of commit bodies: events
 * for nested values, input split at every byte, escapes, numbers, streamed
 * strings, and the errors. */
#include "common/common.h"
#include "tap.h"

#include <stdlib.h>

/* Every event as text: {, }, path=kind:value, S(path)…E for a streamed
 * string (its pieces concatenated, so splits do not show). */
struct recorder {
	struct strbuf out;
	size_t chunks, largest_chunk;
	int fail_on_object_end;
};

static void add_path(struct strbuf *sb, char keys[][JSON_STREAM_MAX_KEY], int depth)
{
	for (int i = 0; i < depth; i++) {
		if (i)
			strbuf_add(sb, ".", 1);
		strbuf_add(sb, keys[i], strlen(keys[i]));
	}
}

static int on_begin(void *ctx)
{
	strbuf_add(&((struct recorder *)ctx)->out, "{", 1);
	return 0;
}

static int on_end(void *ctx)
{
	struct recorder *r = ctx;
	strbuf_add(&r->out, "}", 1);
	return r->fail_on_object_end ? -1 : 0;
}

static enum json_string_mode on_mode(void *ctx, char keys[][JSON_STREAM_MAX_KEY], int depth)
{
	struct recorder *r = ctx;
	if (strcmp(keys[depth - 1], "content") != 0)
		return JSON_STRING_COLLECT;
	strbuf_add(&r->out, "S(", 2);
	add_path(&r->out, keys, depth);
	strbuf_add(&r->out, ")", 1);
	return JSON_STRING_STREAM;
}

static int on_chunk(void *ctx, const char *data, size_t len)
{
	struct recorder *r = ctx;
	r->chunks++;
	if (len > r->largest_chunk)
		r->largest_chunk = len;
	strbuf_add(&r->out, data, len);
	return 0;
}

static int on_string_end(void *ctx)
{
	strbuf_add(&((struct recorder *)ctx)->out, "E", 1);
	return 0;
}

static int on_scalar(void *ctx, char keys[][JSON_STREAM_MAX_KEY], int depth, enum json_scalar kind,
		     const char *text, size_t len)
{
	static const char kinds[] = "sntfz";
	struct recorder *r = ctx;
	strbuf_add(&r->out, "<", 1);
	add_path(&r->out, keys, depth);
	strbuf_add(&r->out, "=", 1);
	strbuf_add(&r->out, &kinds[kind], 1);
	strbuf_add(&r->out, ":", 1);
	strbuf_add(&r->out, text, len);
	strbuf_add(&r->out, ">", 1);
	return 0;
}

static struct json_stream *recorder_stream(struct recorder *r, size_t collect_limit)
{
	static const struct json_stream_handler h = { NULL, on_begin, on_end, on_mode, on_chunk, on_string_end,
						      on_scalar };
	struct json_stream_handler hh = h;
	memset(r, 0, sizeof(*r));
	strbuf_init(&r->out);
	hh.ctx = r;
	return json_stream_new(&hh, collect_limit);
}

/* Parse text fed in pieces of `step` bytes (0 = whole); the transcript, or
 * "ERROR: …" (caller frees). */
static char *parse_in_steps(const char *text, size_t len, size_t step)
{
	struct recorder r;
	struct json_stream *js = recorder_stream(&r, 1 << 16);
	int rc = 0;
	if (step == 0)
		step = len ? len : 1;
	for (size_t at = 0; rc == 0 && at < len; at += step)
		rc = json_stream_feed(js, text + at, len - at < step ? len - at : step);
	if (rc == 0)
		rc = json_stream_finish(js);
	char *out = rc == 0 ? xstrdup(r.out.buf ? r.out.buf : "") : xasprintf("ERROR: %s", json_stream_error(js));
	json_stream_free(js);
	strbuf_release(&r.out);
	return out;
}

static char *parse(const char *text)
{
	return parse_in_steps(text, strlen(text), 0);
}

static void expect(const char *text, const char *want, const char *what)
{
	char *got = parse(text);
	is_str(got, want, "%s", what);
	free(got);
}

static void expect_error(const char *text, const char *fragment, const char *what)
{
	char *got = parse(text);
	int matched = strncmp(got, "ERROR: ", 7) == 0 && strstr(got, fragment);
	ok(matched, "%s", what);
	if (!matched)
		printf("#   got '%s', want an error with '%s'\n", got, fragment);
	free(got);
}

/* Splitting the input at any one byte, or feeding it a byte at a time, must
 * give the same transcript as feeding it whole. */
static void expect_split_invariant(const char *text, const char *what)
{
	size_t len = strlen(text);
	char *whole = parse(text), *bytewise = parse_in_steps(text, len, 1);
	int same = strcmp(whole, bytewise) == 0;
	for (size_t cut = 1; same && cut < len; cut++) {
		struct recorder r;
		struct json_stream *js = recorder_stream(&r, 1 << 16);
		int rc = json_stream_feed(js, text, cut);
		if (rc == 0)
			rc = json_stream_feed(js, text + cut, len - cut);
		if (rc == 0)
			rc = json_stream_finish(js);
		char *got = rc == 0 ? xstrdup(r.out.buf ? r.out.buf : "") :
				      xasprintf("ERROR: %s", json_stream_error(js));
		if (strcmp(got, whole) != 0) {
			same = 0;
			printf("#   split at %zu: '%s' vs whole '%s'\n", cut, got, whole);
		}
		free(got);
		json_stream_free(js);
		strbuf_release(&r.out);
	}
	ok(same, "%s: same events split at every byte and byte by byte", what);
	free(whole);
	free(bytewise);
}

int main(void)
{
	/* ---- values and nesting ---- */
	expect("{}", "{}", "empty object");
	expect("{\"a\":1}", "{<a=n:1>}", "one number");
	expect(" \n{ \"a\" : \"x\" , \"b\" : true ,\"c\":false,\"d\":null }\r\n",
	       "{<a=s:x><b=t:true><c=f:false><d=z:null>}", "whitespace, strings and literals");
	expect("{\"a\":{\"b\":{\"c\":\"deep\"}},\"d\":[1,[2,{\"e\":3}],[]],\"f\":{}}",
	       "{<a.b.c=s:deep><d.[]=n:1><d.[].[]=n:2><d.[].[].e=n:3>}", "nested objects and arrays report paths");
	expect("{\"a\":1}\n{\"b\":2}\n{\"c\":3}", "{<a=n:1>}{<b=n:2>}{<c=n:3>}", "NDJSON: one object per line");
	expect("{\"a\":1}{\"b\":2}", "{<a=n:1>}{<b=n:2>}", "objects back to back");
	expect("", "", "empty input is no object");
	expect("{\"\":\"\"}", "{<=s:>}", "empty key and empty string");

	/* ---- escapes ---- */
	expect("{\"k\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}", "{<k=s:\"\\/\b\f\n\r\t>}", "simple escapes");
	expect("{\"k\":\"\\u0041\\u00e9\\u20AC\"}", "{<k=s:A\xc3\xa9\xe2\x82\xac>}", "\\u escapes to 1, 2 and 3 bytes of UTF-8");
	expect("{\"k\":\"\\ud83d\\ude00\"}", "{<k=s:\xf0\x9f\x98\x80>}", "a surrogate pair is one 4-byte character");
	expect("{\"\\u006bey\":1}", "{<key=n:1>}", "escapes in keys");
	expect("{\"k\":\"caf\xc3\xa9\"}", "{<k=s:caf\xc3\xa9>}", "raw UTF-8 passes through");
	expect_error("{\"k\":\"\\ud83d\"}", "unpaired surrogate", "a high surrogate alone is refused");
	expect_error("{\"k\":\"\\ud83dx\"}", "unpaired surrogate", "a high surrogate followed by a character");
	expect_error("{\"k\":\"\\ud83d\\n\"}", "unpaired surrogate", "a high surrogate followed by another escape");
	expect_error("{\"k\":\"\\ud83d\\ud83d\"}", "unpaired surrogate", "two high surrogates");
	expect_error("{\"k\":\"\\ude00\"}", "unpaired surrogate", "a low surrogate alone");
	expect_error("{\"k\":\"\\u0000\"}", "\\u0000", "\\u0000 is refused");
	expect_error("{\"k\":\"\\u12g4\"}", "invalid \\u escape", "a bad hex digit");
	expect_error("{\"k\":\"\\x\"}", "invalid escape", "an unknown escape");
	expect_error("{\"k\":\"a\tb\"}", "control character", "a raw control character in a string");

	/* ---- numbers ---- */
	expect("{\"n\":[0,-0,12,-3.25,1e9,1E+2,2.5e-3]}",
	       "{<n.[]=n:0><n.[]=n:-0><n.[]=n:12><n.[]=n:-3.25><n.[]=n:1e9><n.[]=n:1E+2><n.[]=n:2.5e-3>}",
	       "numbers in JSON's grammar");
	expect_error("{\"n\":01}", "invalid number", "a leading zero");
	expect_error("{\"n\":1.}", "invalid number", "a dot without digits");
	expect_error("{\"n\":.5}", "expected a value", "no digit before the dot");
	expect_error("{\"n\":1e}", "invalid number", "an exponent without digits");
	expect_error("{\"n\":-}", "invalid literal", "a lone minus");
	expect_error("{\"n\":+1}", "expected a value", "a plus sign");
	expect_error("{\"n\":1x}", "invalid number", "letters after a number");
	expect_error("{\"n\":tru}", "invalid literal", "a truncated literal");
	expect_error("{\"n\":nulll}", "invalid literal", "a long literal");
	expect_error("{\"n\":11111111111111111111111111111111111111111111111111111111111111111111}",
		     "literal too long", "numbers are bounded");

	/* ---- streamed strings ---- */
	{
		size_t n = 100000;
		struct strbuf doc;
		strbuf_init(&doc);
		strbuf_addf(&doc, "{\"path\":\"x.bin\",\"content\":\"");
		for (size_t i = 0; i < n; i++)
			strbuf_add(&doc, &"ABCDEFGHIJ"[i % 10], 1);
		strbuf_addf(&doc, "\\n\\u00e9\",\"after\":1}");
		for (size_t step = 1; step <= 8192; step *= 8) {
			struct recorder r;
			struct json_stream *js = recorder_stream(&r, 64);	/* collected strings are small */
			int rc = 0;
			for (size_t at = 0; rc == 0 && at < doc.len; at += step)
				rc = json_stream_feed(js, doc.buf + at, doc.len - at < step ? doc.len - at : step);
			if (rc == 0)
				rc = json_stream_finish(js);
			ok(rc == 0, "a %zu-byte streamed string fed in %zu-byte pieces parses (%s)", n, step,
			   json_stream_error(js));
			static const char tail[] = "\n\xc3\xa9" "E<after=n:1>}";
			const char *s = r.out.buf ? strstr(r.out.buf, "S(content)") : NULL;
			ok(s && strncmp(s + 10, "ABCDEFGHIJ", 10) == 0 && r.out.len > n &&
				   strcmp(r.out.buf + r.out.len - strlen(tail), tail) == 0,
			   "its bytes arrive in order, unescaped, then its end and the next key");
			ok(r.largest_chunk <= 4096 && r.chunks >= n / 4096,
			   "in bounded pieces (%zu pieces, largest %zu bytes)", r.chunks, r.largest_chunk);
			json_stream_free(js);
			strbuf_release(&r.out);
		}
		strbuf_release(&doc);
	}
	{
		struct recorder r;
		struct json_stream *js = recorder_stream(&r, 8);
		const char *doc = "{\"path\":\"123456789\"}";
		ok(json_stream_feed(js, doc, strlen(doc)) < 0 && strstr(json_stream_error(js), "string value too long"),
		   "a collected string longer than collect_limit is refused");
		json_stream_free(js);
		strbuf_release(&r.out);
	}

	/* ---- splits at every byte ---- */
	expect_split_invariant("{\"a\":{\"b\":[1,-2.5e3,true,false,null,\"s\"]},\"content\":\"abc\\u00e9\\ud83d\\ude00\\n\"}\n"
			       "{\"key\\u0041\":\"v\\\"w\",\"n\":[[],{}],\"x\":0}",
			       "nested values, escapes and surrogates");
	expect_split_invariant("{\"a\":[1,2,]}", "an error");
	expect_split_invariant("{\"a\":123}", "a number at the end of a piece");

	/* ---- errors ---- */
	expect_error("{\"a\":1", "ended inside a value", "truncated after a value");
	expect_error("{\"a\":\"abc", "ended inside a value", "truncated inside a string");
	expect_error("{\"a\":\"\\u12", "ended inside a value", "truncated inside a \\u escape");
	expect_error("{\"a\":[1", "ended inside a value", "truncated inside an array");
	expect_error("{\"a\":1} x", "expected '{'", "trailing garbage after an object");
	expect_error("{\"a\":1}}", "expected '{'", "a trailing bracket");
	expect_error("[1]", "expected '{'", "a top-level array");
	expect_error("\"s\"", "expected '{'", "a top-level string");
	expect_error("{\"a\":1,}", "expected a key", "a trailing comma in an object");
	expect_error("{\"a\":[1,]}", "expected a value", "a trailing comma in an array");
	expect_error("{\"a\":[,1]}", "expected a value", "a leading comma in an array");
	expect_error("{\"a\" 1}", "expected ':'", "a missing colon");
	expect_error("{\"a\":1 \"b\":2}", "expected ','", "a missing comma");
	expect_error("{\"a\":[1}", "mismatched bracket", "mismatched brackets");
	expect_error("{a:1}", "expected a key", "an unquoted key");
	expect_error("{\"a\":'x'}", "expected a value", "single quotes");
	{
		char key[JSON_STREAM_MAX_KEY + 16];
		memset(key, 'k', sizeof(key) - 1);
		key[sizeof(key) - 1] = '\0';
		char *doc = xasprintf("{\"%s\":1}", key);
		expect_error(doc, "object key too long", "keys are bounded");
		free(doc);
	}
	/* JSON_STREAM_MAX_DEPTH containers, the top-level object included */
	{
		struct strbuf ok_doc, deep_doc;
		strbuf_init(&ok_doc);
		strbuf_init(&deep_doc);
		strbuf_add(&ok_doc, "{\"a\":", 5);
		strbuf_add(&deep_doc, "{\"a\":", 5);
		for (int i = 1; i < JSON_STREAM_MAX_DEPTH; i++)
			strbuf_add(&ok_doc, "[", 1);
		for (int i = 1; i < JSON_STREAM_MAX_DEPTH; i++)
			strbuf_add(&ok_doc, "]", 1);
		strbuf_add(&ok_doc, "}", 1);
		for (int i = 0; i < JSON_STREAM_MAX_DEPTH; i++)
			strbuf_add(&deep_doc, "[", 1);
		char *got = parse(ok_doc.buf);
		ok(strncmp(got, "ERROR", 5) != 0, "%d levels of nesting parse", JSON_STREAM_MAX_DEPTH);
		free(got);
		expect_error(deep_doc.buf, "nesting too deep", "one more level is refused");
		strbuf_release(&ok_doc);
		strbuf_release(&deep_doc);
	}
	{
		struct recorder r;
		struct json_stream *js = recorder_stream(&r, 64);
		ok(json_stream_feed(js, "{\"a\":1,\n\"b\":?}", 14) < 0 && strncmp(json_stream_error(js), "line 2:", 7) == 0,
		   "errors name their line (%s)", json_stream_error(js));
		ok(json_stream_feed(js, "{}", 2) < 0 && json_stream_finish(js) < 0,
		   "after an error the stream refuses more input");
		json_stream_free(js);
		strbuf_release(&r.out);

		js = recorder_stream(&r, 64);
		r.fail_on_object_end = 1;
		ok(json_stream_feed(js, "{\"a\":1}", 7) < 0 && strstr(json_stream_error(js), "rejected by the consumer"),
		   "a callback's refusal stops the stream");
		json_stream_free(js);
		strbuf_release(&r.out);
	}
	json_stream_free(NULL);
	ok(1, "json_stream_free(NULL) is a no-op");
	return done_testing();
}
