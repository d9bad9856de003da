/* test_work_queue.c -- the background work queue (http/work_queue.c) with
 * real parked connections: one job per key however many requests want it,
 * a full queue and a job past its wait answered 503, the caller's thread
 * without workers, and shutdown (waiters answered, queued jobs dropped,
 * running ones waited for, threads joined, every argument freed). */
#include "tests/unit/tap.h"
#include "tests/unit/mhd_harness.h"

/* Jobs block on the gate until the test opens it. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open;
static atomic_int runs, running, parked_calls, live_args;

static void gate_set(int open)
{
	pthread_mutex_lock(&gate_lock);
	gate_open = open;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
}

struct job_arg {
	int rc;
};

static int gated_job(void *arg)
{
	struct job_arg *a = arg;
	atomic_fetch_add(&runs, 1);
	atomic_fetch_add(&running, 1);
	pthread_mutex_lock(&gate_lock);
	while (!gate_open)
		pthread_cond_wait(&gate_cond, &gate_lock);
	pthread_mutex_unlock(&gate_lock);
	atomic_fetch_sub(&running, 1);
	return a->rc;
}

static void *new_arg(int rc)
{
	struct job_arg *a = malloc(sizeof(*a));
	a->rc = rc;
	atomic_fetch_add(&live_args, 1);
	return a;
}

static void free_arg(void *arg)
{
	atomic_fetch_sub(&live_args, 1);
	free(arg);
}

/* GET /run/<key>: run gated_job under key, answer "rc=N" once it ended. */
static enum MHD_Result handler(struct request *req)
{
	const char *key = req->log_path + strlen("/run/");
	int job_rc = 0;
	enum MHD_Result result;
	int rc = work_queue_run(req, key, gated_job, new_arg(7), free_arg, &job_rc, &result);
	if (rc == 1) {
		atomic_fetch_add(&parked_calls, 1);
		return result;
	}
	if (rc < 0)
		return result;
	char text[32];
	snprintf(text, sizeof(text), "rc=%d", job_rc);
	return respond_json_text(req, 200, text, strlen(text));
}

static void test_without_workers(void)
{
	struct request req = { 0 };
	int job_rc = -1;
	enum MHD_Result result;
	gate_set(1);
	int rc = work_queue_run(&req, "inline", gated_job, new_arg(3), free_arg, &job_rc, &result);
	ok(rc == 0 && job_rc == 3, "without started workers (CLI roles) the job runs in the caller");
	ok(atomic_load(&runs) == 1 && atomic_load(&live_args) == 0, "ran once, its argument freed");
	gate_set(0);
}

static void test_single_flight(void)
{
	struct harness_call a, b;
	int runs_before = atomic_load(&runs);
	atomic_store(&parked_calls, 0);
	harness_call_start(&a, "/run/k1");
	harness_call_start(&b, "/run/k1");
	harness_wait_for(atomic_load(&parked_calls) == 2 && atomic_load(&running) == 1);
	ok(atomic_load(&parked_calls) == 2, "two requests for one key both park");
	ok(atomic_load(&live_args) == 1, "the joining request's argument is freed at once");
	gate_set(1);
	harness_call_join(&a);
	harness_call_join(&b);
	ok(a.status == 200 && strcmp(a.body, "rc=7") == 0, "the first waiter gets the job's answer");
	ok(b.status == 200 && strcmp(b.body, "rc=7") == 0, "the second waiter gets the same answer");
	ok(atomic_load(&runs) - runs_before == 1, "the job ran once for both");

	struct harness_call c;
	harness_call_start(&c, "/run/k1");
	harness_call_join(&c);
	ok(c.status == 200 && atomic_load(&runs) - runs_before == 2,
	   "a later request that waited on nothing runs the finished job again");
	gate_set(0);
}

/* Two workers busy, one job queued (queue_max 1): the next is refused. */
/* The main pool idle: no job running or queued (a finished job's worker
 * may still be on its way back when its request has its answer). */
static int pool_idle(void)
{
	struct work_pool_depth depth;
	work_pool_depth(WORK_POOL_MAIN, &depth);
	return depth.running == 0 && depth.queued == 0;
}

static void test_queue_full(void)
{
	struct harness_call a, b, c, d;
	harness_wait_for(pool_idle());
	atomic_store(&parked_calls, 0);
	/* one at a time: a job queued before an idle worker took it would
	 * fill the queue (max 1) and make b the refused one */
	harness_call_start(&a, "/run/a");
	harness_wait_for(atomic_load(&running) == 1 && atomic_load(&parked_calls) == 1);
	harness_call_start(&b, "/run/b");
	harness_wait_for(atomic_load(&running) == 2 && atomic_load(&parked_calls) == 2);
	ok(atomic_load(&running) == 2, "both workers run a job");
	harness_call_start(&c, "/run/c");
	harness_wait_for(atomic_load(&parked_calls) == 3);
	ok(atomic_load(&parked_calls) == 3, "a third job waits in the queue");
	int live_before = atomic_load(&live_args);
	harness_call_start(&d, "/run/d");
	harness_call_join(&d);
	ok(d.status == 503, "a fourth while the queue is full is 503 (got %d)", d.status);
	ok(strstr(d.reply, "Retry-After:") != NULL && strstr(d.body, "the server is busy") != NULL,
	   "with Retry-After and a reason");
	ok(atomic_load(&live_args) <= live_before, "the refused job's argument is freed");
	gate_set(1);
	harness_call_join(&a);
	harness_call_join(&b);
	harness_call_join(&c);
	ok(a.status == 200 && b.status == 200 && c.status == 200, "the running and the queued jobs answer");
	gate_set(0);
}

/* A job still running after the pool's wait: the request gets 503. */
static void test_wait_limit(void)
{
	ok(work_queue_stop(60000) == 0, "an idle queue stops at once");
	work_queue_start(1, 4, 200);
	struct harness_call a;
	harness_call_start(&a, "/run/slow");
	harness_call_join(&a);
	ok(a.status == 503 && strstr(a.body, "still working on it") != NULL,
	   "a job past work_wait_ms is 503 while it still runs (got %d)", a.status);
	gate_set(1);
	harness_wait_for(atomic_load(&running) == 0);
	gate_set(0);
}

static void test_shutdown(void)
{
	struct harness_call a, b;
	int runs_before = atomic_load(&runs);
	ok(work_queue_stop(60000) == 0, "the queue stops once its job ended");
	work_queue_start(1, 4, 600000);
	atomic_store(&parked_calls, 0);
	harness_call_start(&a, "/run/s1");
	harness_wait_for(atomic_load(&running) == 1 && atomic_load(&parked_calls) == 1);
	harness_call_start(&b, "/run/s2");
	harness_wait_for(atomic_load(&parked_calls) == 2);
	ok(atomic_load(&parked_calls) == 2, "one job runs, one is queued, both requests parked");
	request_wake_all();
	harness_call_join(&a);
	harness_call_join(&b);
	ok(a.status == 503 && b.status == 503 && strstr(a.body, "stopping") != NULL,
	   "at shutdown their waiters are answered 503 (got %d, %d)", a.status, b.status);
	ok(work_queue_stop(50) == -1, "stop reports the job still running past its wait");
	gate_set(1);
	ok(work_queue_stop(60000) == 0, "and succeeds once it ended: the threads are joined");
	ok(atomic_load(&runs) - runs_before == 1, "the queued job was dropped, never run");
	ok(atomic_load(&live_args) == 0, "every job's argument was freed (finished jobs keep theirs until then)");
	struct request req = { 0 };
	int job_rc = 0;
	enum MHD_Result result;
	ok(work_queue_run(&req, "after", gated_job, new_arg(5), free_arg, &job_rc, &result) == 0 && job_rc == 5,
	   "after the stop, work runs in the caller again");
}

int main(void)
{
	log_set_output(stderr);
	test_without_workers();
	ok(harness_start(handler) == 0, "a daemon on a loopback port");
	work_queue_start(2, 1, 600000);
	test_single_flight();
	test_queue_full();
	test_wait_limit();
	test_shutdown();
	harness_stop();
	return done_testing();
}
