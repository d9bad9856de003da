/* test_range.c -- Range header parsing for resolve. */
#include "http/http.h"
#include "tap.h"

int main(void)
{
	uint64_t a = 0, b = 0;
	ok(http_range_parse(NULL, 100, &a, &b) == 0, "no header");
	ok(http_range_parse("bytes=0-0", 100, &a, &b) == 1 && a == 0 && b == 0, "first byte (JS probe)");
	ok(http_range_parse("bytes=10-", 100, &a, &b) == 1 && a == 10 && b == 99, "open end (resume)");
	ok(http_range_parse("bytes=90-200", 100, &a, &b) == 1 && a == 90 && b == 99, "end clamped");
	ok(http_range_parse("bytes=-10", 100, &a, &b) == 1 && a == 90 && b == 99, "suffix");
	ok(http_range_parse("bytes=-1000", 100, &a, &b) == 1 && a == 0 && b == 99, "suffix longer than file");
	ok(http_range_parse("bytes=100-", 100, &a, &b) == -1, "start at size is unsatisfiable");
	ok(http_range_parse("bytes=5-2", 100, &a, &b) == -1, "reversed is unsatisfiable");
	ok(http_range_parse("bytes=0-1,5-6", 100, &a, &b) == 0, "multi-range ignored");
	ok(http_range_parse("items=0-1", 100, &a, &b) == 0, "other unit ignored");
	ok(http_range_parse("bytes=x-1", 100, &a, &b) == 0, "garbage ignored");
	ok(http_range_parse("bytes=0-0", 0, &a, &b) == -1, "empty file");
	return done_testing();
}
