/* test_metrics.c -- common/metrics.c: requests counted per thread add up
 * across threads (those that ended too), statuses past a thread's slots
 * count as "other", histogram buckets are cumulative with +Inf = _count,
 * and label values are escaped. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "tap.h"

#define THREADS 4
#define PER_THREAD 1000

static void *record_some(void *arg)
{
	(void)arg;
	for (int i = 0; i < PER_THREAD; i++)
		reqstats_record(0, i % 2 ? 200 : 404, 10, (uint64_t)(i % 4) * 1000);	/* 0, 1, 2, 3 ms */
	return NULL;
}

/* The value of the line that starts with prefix (then a space), or -1. */
static double sample(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, prefix, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

int main(void)
{
	const char *keys[] = { "/api/{type}/{ns}/{name}", "a\"b\\c\nd", "/idle" };
	reqstats_init(keys, 3);
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, record_some, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);	/* their shards are retired, still counted */
	record_some(NULL);	/* and this thread's own */
	for (int s = 1; s <= 10; s++)
		reqstats_record(1, 500 + s, 0, 40000000);	/* 10 statuses: 8 slots, 2 "other"; past 30 s */
	reqstats_record(99, 200, 1, 1);	/* no such key: ignored */

	struct strbuf sb = STRBUF_INIT;
	reqstats_write(&sb);
	const double all = (THREADS + 1) * PER_THREAD;
	const char *r = "{route=\"/api/{type}/{ns}/{name}\"";
	char name[200];
	snprintf(name, sizeof(name), "khub_http_requests_total%s,status=\"200\"}", r);
	ok(sample(sb.buf, name) == all / 2, "200s of 5 threads (4 ended) add up: %g", sample(sb.buf, name));
	snprintf(name, sizeof(name), "khub_http_requests_total%s,status=\"404\"}", r);
	ok(sample(sb.buf, name) == all / 2, "404s too");
	snprintf(name, sizeof(name), "khub_http_response_bytes_total%s}", r);
	ok(sample(sb.buf, name) == all * 10, "bytes add up");
	snprintf(name, sizeof(name), "khub_http_request_duration_seconds_bucket%s,le=\"0.001\"}", r);
	ok(sample(sb.buf, name) == all / 2, "le=0.001 holds the 0 and 1 ms requests (le is inclusive)");
	snprintf(name, sizeof(name), "khub_http_request_duration_seconds_bucket%s,le=\"0.0025\"}", r);
	ok(sample(sb.buf, name) == all * 3 / 4, "le=0.0025 adds the 2 ms ones: cumulative");
	snprintf(name, sizeof(name), "khub_http_request_duration_seconds_bucket%s,le=\"+Inf\"}", r);
	double inf = sample(sb.buf, name);
	snprintf(name, sizeof(name), "khub_http_request_duration_seconds_count%s}", r);
	ok(inf == all && sample(sb.buf, name) == all, "+Inf = _count = every request");
	snprintf(name, sizeof(name), "khub_http_request_duration_seconds_sum%s}", r);
	ok(sample(sb.buf, name) == (THREADS + 1) * (PER_THREAD / 4) * 0.006, "_sum in seconds");

	const char *esc = "{route=\"a\\\"b\\\\c\\nd\"";
	snprintf(name, sizeof(name), "khub_http_requests_total%s,status=\"501\"}", esc);
	ok(sample(sb.buf, name) == 1, "a label value with quote, backslash and newline escaped");
	snprintf(name, sizeof(name), "khub_http_requests_total%s,status=\"other\"}", esc);
	ok(sample(sb.buf, name) == 2, "statuses past a thread's 8 slots count as other");
	snprintf(name, sizeof(name), "khub_http_request_duration_seconds_bucket%s,le=\"30\"}", esc);
	ok(sample(sb.buf, name) == 0, "40 s is past the last bound...");
	snprintf(name, sizeof(name), "khub_http_request_duration_seconds_bucket%s,le=\"+Inf\"}", esc);
	ok(sample(sb.buf, name) == 10, "...and in +Inf");
	ok(!strstr(sb.buf, "/idle"), "a key without requests writes no sample");
	ok(strstr(sb.buf, "# TYPE khub_http_request_duration_seconds histogram\n") != NULL, "TYPE lines");
	strbuf_release(&sb);
	return done_testing();
}
