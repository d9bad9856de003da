/* test_strbuf.c -- string buffer, JSON escaping, percent coding, hex. */
#include "http/http.h"
#include "tap.h"

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
	strbuf_add_json_string(&sb, "a\"b\\c\nd\x01");
	is_str(sb.buf, "\"a\\\"b\\\\c\\nd\\u0001\"", "json escaping");
	strbuf_release(&sb);

	/* strbuf_add_json_quoted (log lines): well-formed UTF-8 kept, anything else U+FFFD */
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
	};
	for (size_t i = 0; i < sizeof(quoted) / sizeof(quoted[0]); i++) {
		strbuf_reset(&sb);
		strbuf_add_json_quoted(&sb, quoted[i].in);
		is_str(sb.buf, quoted[i].want, "json quoted: %s", quoted[i].what);
	}
	strbuf_release(&sb);

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
