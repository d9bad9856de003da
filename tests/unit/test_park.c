/* test_park.c -- waiting without a thread (http/park.c) with real
 * libmicrohttpd connections: a parked request is resumed by a wake of its
 * key (and only its key), by a wake from another thread that resumes it
 * there and then (request_wake_now: once, the parker no longer holding
 * it), by its delay running out, by its file descriptor
 * becoming ready, and by the shutdown's wake of everything, after which
 * nothing parks again. A request that cannot wait (no descriptor left for
 * the parker) is answered 503, the server lives on, and the next park
 * starts the parker. */
#include "tests/unit/tap.h"
#include "tests/unit/mhd_harness.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>

static atomic_int parked_calls;
static int pipe_fds[2] = { -1, -1 };

/* GET /key/<key>/<ms>: park on key for ms, then answer "rounds=N waited=W"
 * (W: whole milliseconds parked). GET /fd: park until pipe_fds[0] is
 * readable. Once shutting down, 503 instead of parking. */
/* The first park, with every descriptor below a lowered limit taken: the
 * parker's eventfd cannot be made. */
static void request_park_without_descriptors(struct request *req)
{
	static int taken[1024];
	int base = open("/dev/null", O_RDONLY | O_CLOEXEC), n = 0;
	struct rlimit old, low;
	getrlimit(RLIMIT_NOFILE, &old);
	low = old;
	low.rlim_cur = 1024;
	setrlimit(RLIMIT_NOFILE, &low);
	while (base >= 0 && n < 1024 && (taken[n] = dup(base)) >= 0)
		n++;
	request_park(req, "t:nofd", 600000);
	while (n > 0)
		close(taken[--n]);
	setrlimit(RLIMIT_NOFILE, &old);
	close(base);
}

static enum MHD_Result handler(struct request *req)
{
	if (req->park_rounds > 0) {
		char text[64];
		uint64_t waited = (monotonic_usec() - req->wait_started_usec) / 1000u;
		snprintf(text, sizeof(text), "rounds=%u waited=%llu", req->park_rounds, (unsigned long long)waited);
		return respond_json_text(req, 200, text, strlen(text));
	}
	if (request_park_closing())
		return respond_unavailable(req, "the server is stopping");
	req->wait_started_usec = monotonic_usec();
	if (strcmp(req->log_path, "/nofd") == 0) {
		request_park_without_descriptors(req);
		return MHD_YES;	/* as a handler that parked does */
	}
	if (strcmp(req->log_path, "/fd") == 0) {
		request_park_fd(req, pipe_fds[0], POLLIN, 600000);
	} else {
		char key[PARK_KEY_MAX];
		unsigned ms = 0;
		if (sscanf(req->log_path, "/key/%47[^/]/%u", key, &ms) != 2)
			return respond_error(req, 400, NULL, "bad test path");
		request_park(req, key, ms);
	}
	atomic_fetch_add(&parked_calls, 1);
	return MHD_YES;
}

static void test_park_key(void)
{
	char key[PARK_KEY_MAX];
	park_key(key, "work", 12);
	is_str(key, "work:12", "park_key is kind:n");
	park_key(key, "lock", UINT64_MAX);
	is_str(key, "lock:18446744073709551615", "the largest n fits");
}

static void test_wake_by_key(void)
{
	struct harness_call a, b;
	atomic_store(&parked_calls, 0);
	harness_call_start(&a, "/key/t:1/600000");
	harness_call_start(&b, "/key/t:2/600000");
	harness_wait_for(atomic_load(&parked_calls) == 2);
	ok(atomic_load(&parked_calls) == 2, "two requests parked on two keys");
	request_wake("t:1");
	harness_call_join(&a);
	ok(a.status == 200 && strncmp(a.body, "rounds=1 ", 9) == 0, "a wake of its key resumes the first (%s)", a.body);
	ok(!atomic_load(&b.done), "the other key's request stays parked");
	request_wake("t:none");
	request_wake("t:2");
	harness_call_join(&b);
	ok(b.status == 200 && strncmp(b.body, "rounds=1 ", 9) == 0, "its own wake resumes it");
}

static void *wake_now_thread(void *key)
{
	request_wake_now(key);
	return NULL;
}

static void test_wake_now(void)
{
	struct harness_call a, b;
	atomic_store(&parked_calls, 0);
	harness_call_start(&a, "/key/t:7/600000");
	harness_call_start(&b, "/key/t:8/600000");
	harness_wait_for(atomic_load(&parked_calls) == 2);
	pthread_t t;
	pthread_create(&t, NULL, wake_now_thread, "t:7");
	pthread_join(t, NULL);
	harness_call_join(&a);
	ok(a.status == 200 && strncmp(a.body, "rounds=1 ", 9) == 0, "a wake from another thread resumes it at once (%s)",
	   a.body);
	ok(!atomic_load(&b.done), "the other key's request stays parked");
	request_wake_now("t:7");	/* nobody parked under it any more: nothing happens */
	request_wake("t:7");
	request_wake_now("t:8");
	harness_call_join(&b);
	ok(b.status == 200 && strncmp(b.body, "rounds=1 ", 9) == 0, "its own wake resumes it, once (%s)", b.body);
}

static void test_cannot_park(void)
{
	struct harness_call a;
	harness_call_start(&a, "/nofd");
	harness_call_join(&a);
	ok(a.status == 503, "a request that cannot wait is answered 503 (got %d), the server lives on", a.status);
	ok(strstr(a.body, "cannot make this request wait") != NULL, "saying why (%s)", a.body);
}

static void test_delay(void)
{
	struct harness_call a;
	harness_call_start(&a, "/key/t:3/150");
	harness_call_join(&a);
	unsigned rounds = 0;
	unsigned long long waited = 0;
	sscanf(a.body, "rounds=%u waited=%llu", &rounds, &waited);
	ok(a.status == 200 && rounds == 1, "a request nobody wakes resumes after its delay");
	ok(waited >= 150, "not before it (%llu ms)", waited);
}

static void test_fd(void)
{
	struct harness_call a;
	ok(pipe(pipe_fds) == 0, "a pipe");
	atomic_store(&parked_calls, 0);
	harness_call_start(&a, "/fd");
	harness_wait_for(atomic_load(&parked_calls) == 1);
	ok(atomic_load(&parked_calls) == 1 && !atomic_load(&a.done), "a request parked on an empty pipe waits");
	ok(write(pipe_fds[1], "x", 1) == 1, "a byte written");
	harness_call_join(&a);
	ok(a.status == 200, "the readable pipe resumes it");
	close(pipe_fds[0]);
	close(pipe_fds[1]);
}

static void test_wake_all(void)
{
	struct harness_call a, b, c;
	atomic_store(&parked_calls, 0);
	ok(!request_park_closing(), "not closing before the shutdown");
	harness_call_start(&a, "/key/t:4/600000");
	harness_call_start(&b, "/key/t:5/600000");
	harness_wait_for(atomic_load(&parked_calls) == 2);
	request_wake_all();
	ok(request_park_closing(), "closing once everything was woken");
	harness_call_join(&a);
	harness_call_join(&b);
	ok(a.status == 200 && b.status == 200, "the shutdown resumes every parked request");
	harness_call_start(&c, "/key/t:6/600000");
	harness_call_join(&c);
	ok(c.status == 503, "a request after it answers instead of parking (got %d)", c.status);
}

int main(void)
{
	log_set_output(stderr);
	test_park_key();
	ok(harness_start(handler) == 0, "a daemon on a loopback port");
	test_cannot_park();	/* first: the parker is not running yet */
	test_wake_by_key();
	test_wake_now();
	test_delay();
	test_fd();
	test_wake_all();
	harness_stop();
	return done_testing();
}
