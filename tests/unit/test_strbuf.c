/* test_strbuf.c -- string buffer, the one UTF-8 decoder and JSON string
 * quoter (hostile bytes included), percent coding, hex. */
#include "http/http.h"
#include "tap.h"

/* utf8_decode: the code point and length of well-formed UTF-8; -1 for
 * everything else (the hard cases of every hand-written decoder it
 * replaced). */
static void test_utf8_decode(void)
{
	static const struct { const char *in; size_t n; int len; uint32_t cp; const char *what; } cases[] = {
		{ "A", 1, 1, 0x41, "ASCII" },
		{ "\xc3\xa9", 2, 2, 0xe9, "2 bytes (U+00E9)" },
		{ "\xe2\x82\xac", 3, 3, 0x20ac, "3 bytes (U+20AC)" },
		{ "\xf0\x9f\x98\x80", 4, 4, 0x1f600, "4 bytes (an emoji, U+1F600)" },
		{ "\xf4\x8f\xbf\xbf", 4, 4, 0x10ffff, "U+10FFFF, the last" },
		{ "\xed\x9f\xbf", 3, 3, 0xd7ff, "U+D7FF, below the surrogates" },
		{ "\xc2\x80", 2, 2, 0x80, "U+0080, the shortest 2-byte form" },
		{ "\xc0\xaf", 2, -1, 0, "overlong '/' (C0 AF)" },
		{ "\xc1\xbf", 2, -1, 0, "overlong (C1 BF)" },
		{ "\xe0\x80\xaf", 3, -1, 0, "overlong 3-byte '/' (E0 80 AF)" },
		{ "\xf0\x80\x80\xaf", 4, -1, 0, "overlong 4-byte '/'" },
		{ "\xed\xa0\x80", 3, -1, 0, "surrogate U+D800 (ED A0 80)" },
		{ "\xed\xbf\xbf", 3, -1, 0, "surrogate U+DFFF" },
		{ "\xf4\x90\x80\x80", 4, -1, 0, "U+110000, past U+10FFFF (F4 90 80 80)" },
		{ "\xf7\xbf\xbf\xbf", 4, -1, 0, "F7: far past U+10FFFF" },
		{ "\xf8\x88\x80\x80", 4, -1, 0, "a 5-byte lead" },
		{ "\xff", 1, -1, 0, "FF" },
		{ "\x80", 1, -1, 0, "a stray continuation byte" },
		{ "\xe2\x82\xac", 2, -1, 0, "cut short by n" },
		{ "\xf0\x9f\x98\x80", 3, -1, 0, "4 bytes cut short by n" },
		{ "\xe2\x82", 2, -1, 0, "truncated (NUL next)" },
		{ "\xe2(\xac", 3, -1, 0, "a plain byte inside a sequence" },
		{ "", 0, -1, 0, "nothing" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t cp = 0xdead;
		int len = utf8_decode((const unsigned char *)cases[i].in, cases[i].n, &cp);
		ok(len == cases[i].len && (len < 0 ? cp == 0xdead : cp == cases[i].cp),
		   "utf8_decode: %s (got %d, U+%04X)", cases[i].what, len, (unsigned)cp);
	}
	ok(utf8_decode((const unsigned char *)"\xc3\xa9", 2, NULL) == 2, "utf8_decode: cp may be NULL");
}

int main(void)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s-%d", "a", 42);
	is_str(sb.buf, "a-42", "addf");
	strbuf_reset(&sb);
	strbuf_add_urlencoded(&sb, "refs/heads/v1", 0);
	is_str(sb.buf, "refs%2Fheads%2Fv1", "urlencode a full ref as one segment");
	strbuf_reset(&sb);
	strbuf_add_urlencoded(&sb, "build/torch cpu", 1);
	is_str(sb.buf, "build/torch%20cpu", "urlencode keeping slashes");
	strbuf_reset(&sb);
	strbuf_add_json_quoted(&sb, "a\"b\\c\nd\x01");
	is_str(sb.buf, "\"a\\\"b\\\\c\\nd\\u0001\"", "json escaping");
	strbuf_release(&sb);

	/* strbuf_add_json_quoted (answers and log lines alike): well-formed
	 * UTF-8 kept, anything else U+FFFD, one per byte */
	static const struct { const char *in, *want, *what; } quoted[] = {
		{ "a\"b\\c\nd\r\t\x01\x1f", "\"a\\\"b\\\\c\\nd\\r\\t\\u0001\\u001f\"", "quote, backslash, controls" },
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", "2-, 3- and 4-byte UTF-8 kept" },
		{ "x\xffy", "\"x\\ufffdy\"", "a byte that starts nothing" },
		{ "\xc0\xaf", "\"\\ufffd\\ufffd\"", "an overlong '/'" },
		{ "\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\"", "an overlong 3-byte form" },
		{ "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"", "a surrogate (U+D800)" },
		{ "\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"", "past U+10FFFF" },
		{ "\xe2\x82", "\"\\ufffd\\ufffd\"", "a sequence cut short at the end" },
		{ "\x7f", "\"\x7f\"", "DEL is valid JSON as it is" },
		{ "\xf0\x9f\x98", "\"\\ufffd\\ufffd\\ufffd\"", "a 4-byte sequence cut short" },
		{ "\xe2\x82x", "\"\\ufffd\\ufffdx\"", "a sequence cut by a plain byte" },
		{ "\x80\xbf", "\"\\ufffd\\ufffd\"", "stray continuation bytes" },
		{ "\xf8\x88\x80\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\"", "a 5-byte form" },
		{ "\xed\x9f\xbf\xee\x80\x80", "\"\xed\x9f\xbf\xee\x80\x80\"", "U+D7FF and U+E000 (around the surrogates) kept" },
		{ "\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\"", "U+10FFFF kept" },
	};
	for (size_t i = 0; i < sizeof(quoted) / sizeof(quoted[0]); i++) {
		strbuf_reset(&sb);
		strbuf_add_json_quoted(&sb, quoted[i].in);
		is_str(sb.buf, quoted[i].want, "json quoted: %s", quoted[i].what);
	}
	strbuf_release(&sb);

	test_utf8_decode();

	char s[] = "refs%2Fheads%2Fv1";
	ok(percent_decode_inplace(s) == 0, "decode ok");
	is_str(s, "refs/heads/v1", "decoded");
	char bad[] = "x%2";
	ok(percent_decode_inplace(bad) < 0, "truncated escape refused");
	char nul[] = "a%00b";
	ok(percent_decode_inplace(nul) < 0, "NUL refused");

	char hex[65];
	sha256_hex("", 0, hex);
	is_str(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "sha256 of nothing");
	ok(is_lower_hex("abc123", 6), "lower hex");
	ok(!is_lower_hex("ABC123", 6), "upper hex is not lower hex");
	ok(!is_lower_hex("abc1234", 6), "length must match");

	struct hashmap map;
	hashmap_init(&map);
	char keys[200][16];
	for (int i = 0; i < 200; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%d", i);
		hashmap_put(&map, keys[i], keys[i]);
	}
	int all = 1;
	for (int i = 0; i < 200; i++)
		all &= hashmap_get(&map, keys[i]) == keys[i];
	ok(all && map.count == 200, "hashmap holds 200 keys across growth");
	ok(hashmap_remove(&map, "k7") == keys[7] && hashmap_get(&map, "k7") == NULL, "remove");
	hashmap_release(&map, NULL);
	return done_testing();
}
