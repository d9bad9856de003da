/* work_queue.c -- slow work (a lazily mirrored LFS download, applying a
 * commit, indexing a commit's variants) off the request threads: a few
 * worker threads run jobs keyed by a string, one job per key however many
 * requests want it; each request parks its connection until its job ends,
 * then its handler runs again and finds the job's result. A full queue or
 * a job running past work_wait_ms is 503 with Retry-After (commits wait to
 * the end). Pools are separate queues with their own threads: work that
 * waits on strangers' servers (external git fetches) has its own, and so
 * has reading an author's build.toml for a build request, so neither ever
 * holds the threads commits need. */
#include "http/http.h"

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

struct work_pool {
	const char *name;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	struct job *jobs;		/* every job not yet forgotten, newest first */
	size_t queued;
	long max_queued, wait_ms;
	int stopping;
	int running_workers;		/* threads not yet returned */
	pthread_t *workers;
	size_t nworkers;
};

static struct work_pool pools[WORK_POOLS] = {
	[WORK_POOL_MAIN] = { "work", PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 256, 120000, 0, 0, NULL, 0 },
	[WORK_POOL_FETCH] = { "fetch", PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 16, 120000, 0, 0, NULL, 0 },
	[WORK_POOL_PLAN] = { "plan", PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 256, 120000, 0, 0, NULL, 0 },
};
/* job ids are unique across pools: a parked request waits on "work:<id>" */
static pthread_mutex_t id_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t next_id = 1;

static uint64_t new_job_id(void)
{
	pthread_mutex_lock(&id_lock);
	uint64_t id = next_id++;
	pthread_mutex_unlock(&id_lock);
	return id;
}

static void job_free(struct job *j)
{
	if (!j)
		return;
	if (j->free_arg)
		j->free_arg(j->arg);
	free(j->key);
	free(j);
}

/* Drop results nobody can still be waiting for; under the pool's lock. */
static void forget_old(struct work_pool *p, uint64_t now)
{
	struct job **pp = &p->jobs;
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

static struct job *find_job(struct work_pool *p, const char *key)
{
	for (struct job *j = p->jobs; j; j = j->next)
		if (strcmp(j->key, key) == 0)
			return j;
	return NULL;
}

static void *worker(void *arg)
{
	struct work_pool *p = arg;
	log_set_request_id(p->name);
	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct job *j = NULL;
		/* oldest queued first: the list is newest first */
		for (struct job *k = p->jobs; k; k = k->next)
			if (k->state == JOB_QUEUED)
				j = k;
		if (!j) {
			if (p->stopping)
				break;
			pthread_cond_wait(&p->changed, &p->lock);
			continue;
		}
		j->state = JOB_RUNNING;
		p->queued--;
		pthread_mutex_unlock(&p->lock);
		int rc = j->fn(j->arg);
		pthread_mutex_lock(&p->lock);
		j->rc = rc;
		j->state = JOB_DONE;
		j->done_usec = monotonic_usec();
		char key[PARK_KEY_MAX];
		park_key(key, "work", j->id);
		pthread_mutex_unlock(&p->lock);
		request_wake(key);
		pthread_mutex_lock(&p->lock);
	}
	p->running_workers--;
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

void work_pool_start(enum work_pool_id id, long threads, long queue_max, long wait_limit_ms)
{
	struct work_pool *p = &pools[id];
	p->max_queued = queue_max;
	p->wait_ms = wait_limit_ms;
	p->nworkers = threads > 0 ? (size_t)threads : 1;
	p->running_workers = (int)p->nworkers;
	p->workers = xcalloc(p->nworkers, sizeof(*p->workers));
	for (size_t i = 0; i < p->nworkers; i++)
		if (pthread_create(&p->workers[i], NULL, worker, p) != 0)
			fatal("cannot start the %s queue's threads", p->name);
}

void work_queue_start(long threads, long queue_max, long wait_limit_ms)
{
	work_pool_start(WORK_POOL_MAIN, threads, queue_max, wait_limit_ms);
}

/* Stop one pool by the deadline: 0, or the number of jobs still running. */
static int pool_stop(struct work_pool *p, uint64_t deadline)
{
	if (!p->workers)
		return 0;
	pthread_mutex_lock(&p->lock);
	p->stopping = 1;
	/* queued jobs are dropped: nobody waits for them any more */
	for (struct job *j = p->jobs; j; j = j->next)
		if (j->state == JOB_QUEUED) {
			j->state = JOB_DONE;
			j->rc = KHUB_EIO;
			j->done_usec = monotonic_usec();
		}
	p->queued = 0;
	pthread_cond_broadcast(&p->changed);
	/* a job stuck on a slow upstream must not hold up the exit */
	while (p->running_workers > 0 && monotonic_usec() < deadline) {
		pthread_mutex_unlock(&p->lock);
		usleep(20000);
		pthread_mutex_lock(&p->lock);
	}
	int left = p->running_workers;
	pthread_mutex_unlock(&p->lock);
	if (left) {
		log_warn("%s queue: %d jobs still running at exit", p->name, left);
		return left;
	}
	for (size_t i = 0; i < p->nworkers; i++)
		pthread_join(p->workers[i], NULL);
	free(p->workers);
	p->workers = NULL;
	while (p->jobs) {
		struct job *j = p->jobs;
		p->jobs = j->next;
		job_free(j);
	}
	p->stopping = 0;
	return 0;
}

int work_queue_stop(unsigned stop_wait_ms)
{
	uint64_t deadline = monotonic_usec() + (uint64_t)stop_wait_ms * 1000u;
	int left = 0;
	for (size_t i = 0; i < WORK_POOLS; i++)
		left += pool_stop(&pools[i], deadline);
	return left ? -1 : 0;
}

static enum MHD_Result refuse(struct request *req, const char *why)
{
	req->work_job_id = 0;
	req->work_wait_started_usec = 0;
	return respond_unavailable(req, "%s; retry later", why);
}

/* Under the pool's lock: block this thread until j ended (the server is
 * stopping: a request that must see its job's end may hold its thread now). */
static void wait_here(struct work_pool *p, struct job *j)
{
	while (j->state != JOB_DONE) {
		pthread_mutex_unlock(&p->lock);
		usleep(20000);
		pthread_mutex_lock(&p->lock);
	}
}

/* Under the pool's lock, which it releases: the ended job j's result is
 * the request's; it waits for nothing any more. */
static int take_result(struct work_pool *p, struct request *req, const struct job *j, int *job_rc)
{
	*job_rc = j->rc;
	pthread_mutex_unlock(&p->lock);
	req->work_job_id = 0;
	req->work_wait_started_usec = 0;
	return 0;
}

/* Under p's lock: a new queued job (owning arg), or NULL when the queue
 * is full (the lock is then released and arg freed). */
static struct job *enqueue(struct work_pool *p, const char *key, work_fn fn, void *arg, void (*free_arg)(void *))
{
	if (p->queued >= (size_t)p->max_queued) {
		pthread_mutex_unlock(&p->lock);
		if (free_arg)
			free_arg(arg);
		log_warn("%s queue full (%ld jobs waiting): refusing %s", p->name, p->max_queued, key);
		return NULL;
	}
	struct job *j = xcalloc(1, sizeof(*j));
	j->key = xstrdup(key);
	j->id = new_job_id();
	j->fn = fn;
	j->arg = arg;
	j->free_arg = free_arg;
	j->state = JOB_QUEUED;
	j->next = p->jobs;
	p->jobs = j;
	p->queued++;
	pthread_cond_signal(&p->changed);
	return j;
}

static int run_job(struct work_pool *p, struct request *req, const char *key, work_fn fn, void *arg,
		   void (*free_arg)(void *), int to_end, int *job_rc, enum MHD_Result *result)
{
	uint64_t now = monotonic_usec();
	pthread_mutex_lock(&p->lock);
	forget_old(p, now);
	struct job *j = find_job(p, key);
	if (j && j->state == JOB_DONE && j->id == req->work_job_id) {
		/* the job this request waited for */
		take_result(p, req, j, job_rc);
		if (free_arg)
			free_arg(arg);
		return 0;
	}
	if (!p->workers) {
		/* no background threads (a CLI role): do it here */
		pthread_mutex_unlock(&p->lock);
		*job_rc = fn(arg);
		if (free_arg)
			free_arg(arg);
		return 0;
	}
	if (j && j->state == JOB_DONE) {
		/* an earlier job's result: the caller saw it was not enough (or
		 * it failed), so run it again */
		struct job **pp = &p->jobs;
		while (*pp != j)
			pp = &(*pp)->next;
		*pp = j->next;
		job_free(j);
		j = NULL;
	}
	if (!j) {
		if (!(j = enqueue(p, key, fn, arg, free_arg))) {
			*result = refuse(req, "the server is busy");
			return -1;
		}
	} else if (free_arg) {
		free_arg(arg);	/* joined the running job */
	}
	if (!req->work_wait_started_usec)
		req->work_wait_started_usec = now;	/* a request's waits add up */
	req->work_job_id = j->id;
	uint64_t waited_ms = (now - req->work_wait_started_usec) / 1000u;
	if (to_end) {
		if (request_park_closing()) {
			wait_here(p, j);
			return take_result(p, req, j, job_rc);
		}
		waited_ms = 0;	/* no deadline: parked until the job ends */
	} else if (waited_ms >= (uint64_t)p->wait_ms || request_park_closing()) {
		pthread_mutex_unlock(&p->lock);
		*result = refuse(req, waited_ms >= (uint64_t)p->wait_ms ? "still working on it" : "the server is stopping");
		return -1;
	}
	/* parked before the lock is released: the worker's wake, which follows
	 * its taking the lock, cannot come between the check and the park */
	char pk[PARK_KEY_MAX];
	park_key(pk, "work", j->id);
	request_park(req, pk, (unsigned)((uint64_t)p->wait_ms - waited_ms));
	pthread_mutex_unlock(&p->lock);
	*result = MHD_YES;
	return 1;
}

int work_queue_run(struct request *req, const char *key, work_fn fn, void *arg, void (*free_arg)(void *),
		   int *job_rc, enum MHD_Result *result)
{
	return run_job(&pools[WORK_POOL_MAIN], req, key, fn, arg, free_arg, 0, job_rc, result);
}

int work_pool_run(enum work_pool_id id, struct request *req, const char *key, work_fn fn, void *arg,
		  void (*free_arg)(void *), int *job_rc, enum MHD_Result *result)
{
	return run_job(&pools[id], req, key, fn, arg, free_arg, 0, job_rc, result);
}

int work_queue_run_to_end(struct request *req, const char *key, work_fn fn, void *arg, void (*free_arg)(void *),
			  int *job_rc, enum MHD_Result *result)
{
	return run_job(&pools[WORK_POOL_MAIN], req, key, fn, arg, free_arg, 1, job_rc, result);
}

const char *work_pool_depth(enum work_pool_id id, struct work_pool_depth *out)
{
	struct work_pool *p = &pools[id];
	pthread_mutex_lock(&p->lock);
	out->queued = p->queued;
	out->running = 0;
	for (struct job *j = p->jobs; j; j = j->next)
		out->running += j->state == JOB_RUNNING;
	out->max_queued = (size_t)p->max_queued;
	out->threads = p->nworkers;
	pthread_mutex_unlock(&p->lock);
	return p->name;
}
