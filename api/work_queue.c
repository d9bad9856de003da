/* work_queue.c -- slow work (a lazily mirrored LFS download, applying a
 * commit, indexing a commit's variants) off the request threads: a few
 * worker threads run jobs keyed by a string, one job per key however many
 * requests want it; each request parks its connection until its job ends,
 * then its handler runs again and finds the job's result. A full queue or
 * a job running past work_wait_ms is 503 with Retry-After (commits wait to
 * the end). */
#include "api/api.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long a finished job's result stays for the requests that waited on
 * it (they are resumed at once; this only covers a busy parker). */
#define RESULT_KEEP_USEC (30u * 1000000u)

struct job {
	struct job *next;
	char *key;
	uint64_t id;			/* requests remember it: a rerun is another job */
	work_fn fn;
	void *arg;
	void (*free_arg)(void *);
	int state;			/* JOB_QUEUED, JOB_RUNNING, JOB_DONE */
	int rc;
	uint64_t done_usec;
};

enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE };

static pthread_mutex_t wq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wq_changed = PTHREAD_COND_INITIALIZER;
static struct job *jobs;		/* every job not yet forgotten, newest first */
static size_t queued;
static uint64_t next_id = 1;
static long max_queued = 256, wait_ms = 120000;
static int stopping;
static int running_workers;	/* threads not yet returned */
static pthread_t *workers;
static size_t nworkers;

static void job_free(struct job *j)
{
	if (!j)
		return;
	if (j->free_arg)
		j->free_arg(j->arg);
	free(j->key);
	free(j);
}

/* Drop results nobody can still be waiting for; under wq_lock. */
static void forget_old(uint64_t now)
{
	struct job **pp = &jobs;
	while (*pp) {
		struct job *j = *pp;
		if (j->state == JOB_DONE && now - j->done_usec > RESULT_KEEP_USEC) {
			*pp = j->next;
			job_free(j);
		} else {
			pp = &j->next;
		}
	}
}

static struct job *find_job(const char *key)
{
	for (struct job *j = jobs; j; j = j->next)
		if (strcmp(j->key, key) == 0)
			return j;
	return NULL;
}

static void *worker(void *arg)
{
	(void)arg;
	log_set_request_id("work");
	pthread_mutex_lock(&wq_lock);
	for (;;) {
		struct job *j = NULL;
		/* oldest queued first: the list is newest first */
		for (struct job *k = jobs; k; k = k->next)
			if (k->state == JOB_QUEUED)
				j = k;
		if (!j) {
			if (stopping)
				break;
			pthread_cond_wait(&wq_changed, &wq_lock);
			continue;
		}
		j->state = JOB_RUNNING;
		queued--;
		pthread_mutex_unlock(&wq_lock);
		int rc = j->fn(j->arg);
		pthread_mutex_lock(&wq_lock);
		j->rc = rc;
		j->state = JOB_DONE;
		j->done_usec = monotonic_usec();
		char key[PARK_KEY_MAX];
		park_key(key, "work", j->id);
		pthread_mutex_unlock(&wq_lock);
		request_wake(key);
		pthread_mutex_lock(&wq_lock);
	}
	running_workers--;
	pthread_mutex_unlock(&wq_lock);
	return NULL;
}

void work_queue_start(long threads, long queue_max, long wait_limit_ms)
{
	max_queued = queue_max;
	wait_ms = wait_limit_ms;
	nworkers = threads > 0 ? (size_t)threads : 1;
	running_workers = (int)nworkers;
	workers = xcalloc(nworkers, sizeof(*workers));
	for (size_t i = 0; i < nworkers; i++)
		if (pthread_create(&workers[i], NULL, worker, NULL) != 0)
			fatal("cannot start the work queue's threads");
}

int work_queue_stop(unsigned stop_wait_ms)
{
	if (!workers)
		return 0;
	uint64_t deadline = monotonic_usec() + (uint64_t)stop_wait_ms * 1000u;
	pthread_mutex_lock(&wq_lock);
	stopping = 1;
	/* queued jobs are dropped: nobody waits for them any more */
	for (struct job *j = jobs; j; j = j->next)
		if (j->state == JOB_QUEUED) {
			j->state = JOB_DONE;
			j->rc = KHUB_EIO;
			j->done_usec = monotonic_usec();
		}
	queued = 0;
	pthread_cond_broadcast(&wq_changed);
	/* a job stuck on a slow upstream must not hold up the exit */
	while (running_workers > 0 && monotonic_usec() < deadline) {
		pthread_mutex_unlock(&wq_lock);
		usleep(20000);
		pthread_mutex_lock(&wq_lock);
	}
	int left = running_workers;
	pthread_mutex_unlock(&wq_lock);
	if (left) {
		log_warn("work queue: %d jobs still running at exit", left);
		return -1;
	}
	for (size_t i = 0; i < nworkers; i++)
		pthread_join(workers[i], NULL);
	free(workers);
	workers = NULL;
	while (jobs) {
		struct job *j = jobs;
		jobs = j->next;
		job_free(j);
	}
	stopping = 0;
	return 0;
}

static enum MHD_Result refuse(struct request *req, const char *why)
{
	req->work_job_id = 0;
	req->work_wait_started_usec = 0;
	return respond_unavailable(req, "%s; retry later", why);
}

/* Under wq_lock: block this thread until j ended (the server is stopping:
 * a request that must see its job's end may hold its thread now). */
static void wait_here(struct job *j)
{
	while (j->state != JOB_DONE) {
		pthread_mutex_unlock(&wq_lock);
		usleep(20000);
		pthread_mutex_lock(&wq_lock);
	}
}

/* Under wq_lock, which it releases: the ended job j's result is the
 * request's; it waits for nothing any more. */
static int take_result(struct request *req, const struct job *j, int *job_rc)
{
	*job_rc = j->rc;
	pthread_mutex_unlock(&wq_lock);
	req->work_job_id = 0;
	req->work_wait_started_usec = 0;
	return 0;
}

static int run_job(struct request *req, const char *key, work_fn fn, void *arg, void (*free_arg)(void *),
		   int to_end, int *job_rc, enum MHD_Result *result)
{
	uint64_t now = monotonic_usec();
	pthread_mutex_lock(&wq_lock);
	forget_old(now);
	struct job *j = find_job(key);
	if (j && j->state == JOB_DONE && j->id == req->work_job_id) {
		/* the job this request waited for */
		take_result(req, j, job_rc);
		if (free_arg)
			free_arg(arg);
		return 0;
	}
	if (!workers) {
		/* no background threads (a CLI role): do it here */
		pthread_mutex_unlock(&wq_lock);
		*job_rc = fn(arg);
		if (free_arg)
			free_arg(arg);
		return 0;
	}
	if (j && j->state == JOB_DONE) {
		/* an earlier job's result: the caller saw it was not enough (or
		 * it failed), so run it again */
		struct job **pp = &jobs;
		while (*pp != j)
			pp = &(*pp)->next;
		*pp = j->next;
		job_free(j);
		j = NULL;
	}
	if (!j) {
		if (queued >= (size_t)max_queued) {
			pthread_mutex_unlock(&wq_lock);
			if (free_arg)
				free_arg(arg);
			log_warn("work queue full (%ld jobs waiting): refusing %s", max_queued, key);
			*result = refuse(req, "the server is busy");
			return -1;
		}
		j = xcalloc(1, sizeof(*j));
		j->key = xstrdup(key);
		j->id = next_id++;
		j->fn = fn;
		j->arg = arg;
		j->free_arg = free_arg;
		j->state = JOB_QUEUED;
		j->next = jobs;
		jobs = j;
		queued++;
		pthread_cond_signal(&wq_changed);
	} else if (free_arg) {
		free_arg(arg);	/* joined the running job */
	}
	if (!req->work_wait_started_usec)
		req->work_wait_started_usec = now;	/* a request's waits add up */
	req->work_job_id = j->id;
	uint64_t waited_ms = (now - req->work_wait_started_usec) / 1000u;
	if (to_end) {
		if (request_park_closing()) {
			wait_here(j);
			return take_result(req, j, job_rc);
		}
		waited_ms = 0;	/* no deadline: parked until the job ends */
	} else if (waited_ms >= (uint64_t)wait_ms || request_park_closing()) {
		pthread_mutex_unlock(&wq_lock);
		*result = refuse(req, waited_ms >= (uint64_t)wait_ms ? "still working on it" : "the server is stopping");
		return -1;
	}
	/* parked before wq_lock is released: the worker's wake, which follows
	 * its taking wq_lock, cannot come between the check and the park */
	char pk[PARK_KEY_MAX];
	park_key(pk, "work", j->id);
	request_park(req, pk, (unsigned)((uint64_t)wait_ms - waited_ms));
	pthread_mutex_unlock(&wq_lock);
	*result = MHD_YES;
	return 1;
}

int work_queue_run(struct request *req, const char *key, work_fn fn, void *arg, void (*free_arg)(void *),
		   int *job_rc, enum MHD_Result *result)
{
	return run_job(req, key, fn, arg, free_arg, 0, job_rc, result);
}

int work_queue_run_to_end(struct request *req, const char *key, work_fn fn, void *arg, void (*free_arg)(void *),
			  int *job_rc, enum MHD_Result *result)
{
	return run_job(req, key, fn, arg, free_arg, 1, job_rc, result);
}
