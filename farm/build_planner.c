/* build_planner.c -- the server's push planner: builds on push are planned
 * on threads of their own after the commit was answered, so a slow
 * build.toml (the planner child runs up to build_plan_wall_ms) never holds
 * a thread commits need nor delays any commit's answer. The queue is
 * bounded, a quarter of it per owner, and served round-robin across owners:
 * one author's many slow plans delay another's by at most one plan per
 * thread. A push of a repo and commit already waiting joins it. A git
 * push is planned here too: its hook (another process) writes what it
 * read to a file the server gave it, which the server submits once the
 * push was answered (build_planner_take). */
#include "farm/farm.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

struct plan_item {
	struct plan_item *next;
	struct push_plan *plan;
};

/* An owner with pushes waiting, in the ring of owners served in turn. */
struct plan_owner {
	struct plan_owner *next;
	int64_t owner_id;
	struct plan_item *head, *tail;
	size_t n;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct plan_owner *first, *last;	/* served from first; one served goes last */
	size_t queued, max_queued;
	int stopping;
	pthread_t *threads;
	size_t nthreads;
} planner = { .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER };

static struct plan_owner *owner_find(int64_t owner_id)
{
	for (struct plan_owner *o = planner.first; o; o = o->next)
		if (o->owner_id == owner_id)
			return o;
	return NULL;
}

static int plan_waiting(const struct plan_owner *o, const struct push_plan *p)
{
	for (const struct plan_item *i = o->head; i; i = i->next)
		if (i->plan->repo_id == p->repo_id && strcmp(i->plan->sha, p->sha) == 0 &&
		    i->plan->campaign_id == p->campaign_id)
			return 1;
	return 0;
}

static void owner_append(struct plan_owner *o)
{
	o->next = NULL;
	if (planner.last)
		planner.last->next = o;
	else
		planner.first = o;
	planner.last = o;
}

/* The next push to plan, the first owner's oldest; that owner goes to
 * the back of the ring. Under the lock; NULL when none waits. */
static struct push_plan *next_plan(void)
{
	struct plan_owner *o = planner.first;
	if (!o)
		return NULL;
	planner.first = o->next;
	if (!planner.first)
		planner.last = NULL;
	struct plan_item *i = o->head;
	o->head = i->next;
	if (!o->head)
		o->tail = NULL;
	o->n--;
	planner.queued--;
	if (o->n)
		owner_append(o);
	else
		free(o);
	struct push_plan *p = i->plan;
	free(i);
	return p;
}

static void *planner_loop(void *arg)
{
	(void)arg;
	log_set_request_id("planner");
	pthread_mutex_lock(&planner.lock);
	while (!planner.stopping) {
		struct push_plan *p = next_plan();
		if (!p) {
			pthread_cond_wait(&planner.wake, &planner.lock);
			continue;
		}
		pthread_mutex_unlock(&planner.lock);
		build_push_plan(p);
		push_plan_free(p);
		pthread_mutex_lock(&planner.lock);
	}
	pthread_mutex_unlock(&planner.lock);
	db_thread_done();
	return NULL;
}

void build_planner_start(long threads, long queue_max)
{
	planner.max_queued = queue_max > 0 ? (size_t)queue_max : 1;
	planner.nthreads = threads > 0 ? (size_t)threads : 1;
	planner.threads = xcalloc(planner.nthreads, sizeof(*planner.threads));
	for (size_t i = 0; i < planner.nthreads; i++)
		if (pthread_create(&planner.threads[i], NULL, planner_loop, NULL) != 0)
			fatal("cannot start the push planner");
}

void build_planner_stop(void)
{
	if (!planner.threads)
		return;
	pthread_mutex_lock(&planner.lock);
	planner.stopping = 1;
	pthread_cond_broadcast(&planner.wake);
	pthread_mutex_unlock(&planner.lock);
	for (size_t i = 0; i < planner.nthreads; i++)
		pthread_join(planner.threads[i], NULL);
	free(planner.threads);
	planner.threads = NULL;
	struct push_plan *p;
	while ((p = next_plan()))
		push_plan_free(p);
}

/* Why p cannot wait, or NULL once it waits (or joined the same push);
 * under the lock. */
static const char *plan_enqueue(struct push_plan *p)
{
	size_t share = planner.max_queued / 4 ? planner.max_queued / 4 : 1;
	struct plan_owner *o = owner_find(p->owner_id);
	if (o && plan_waiting(o, p)) {
		push_plan_free(p);
		return NULL;
	}
	if (planner.queued >= planner.max_queued)
		return "the push planner's queue is full (build_plan_queue_max)";
	if (o && o->n >= share && !p->campaign_id)	/* a campaign's kernels share one owner */
		return "this owner's pushes fill their share of the push planner's queue";
	if (!o) {
		o = xcalloc(1, sizeof(*o));
		o->owner_id = p->owner_id;
		owner_append(o);
	}
	struct plan_item *i = xcalloc(1, sizeof(*i));
	i->plan = p;
	if (o->tail)
		o->tail->next = i;
	else
		o->head = i;
	o->tail = i;
	o->n++;
	planner.queued++;
	pthread_cond_signal(&planner.wake);
	return NULL;
}

int build_planner_submit(struct push_plan *p)
{
	if (!planner.threads)
		return 0;
	pthread_mutex_lock(&planner.lock);
	const char *refused = planner.stopping ? "the server is stopping" : plan_enqueue(p);
	pthread_mutex_unlock(&planner.lock);
	if (refused) {
		log_warn("build trigger: repo %lld %s: not planned: %s", (long long)p->repo_id, p->sha, refused);
		if (p->campaign_id)
			db_campaign_kernel_add(p->campaign_id, p->repo_id, p->position, p->sha, p->version, 0, refused);
		push_plan_free(p);
	}
	return 1;
}

/* ---- a git push's plans, handed over by its hook ------------------------------ */

#define REFUSED_MAX 4096

int push_plan_write(FILE *fp, const struct push_plan *p)
{
	size_t refused_len = p->refused ? strlen(p->refused) : 0;
	if (refused_len > REFUSED_MAX)
		refused_len = REFUSED_MAX;
	if (fprintf(fp, "khub-plan %lld %lld %s %lld %zu %s\n", (long long)p->repo_id, (long long)p->owner_id,
		    p->sha, p->toml ? (long long)p->len : -1LL, refused_len, p->ref) < 0 ||
	    (p->toml && fwrite(p->toml, 1, p->len, fp) != p->len) ||
	    (refused_len && fwrite(p->refused, 1, refused_len, fp) != refused_len))
		return -1;
	return 0;
}

/* n bytes of fp, NUL-ended (owned by the caller), or NULL when cut short. */
static char *read_bytes(FILE *fp, size_t n)
{
	char *buf = xmalloc(n + 1);
	if (fread(buf, 1, n, fp) != n) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

int push_plan_read_next(FILE *fp, struct push_plan **out)
{
	char line[1200], sha[64], ref[1024];
	long long repo_id, owner_id, toml_len;
	size_t refused_len;
	*out = NULL;
	if (!fgets(line, sizeof(line), fp))
		return 0;
	if (!strchr(line, '\n') ||
	    sscanf(line, "khub-plan %lld %lld %63s %lld %zu %1023s", &repo_id, &owner_id, sha, &toml_len,
		   &refused_len, ref) != 6 ||
	    !is_lower_hex(sha, 40) || toml_len < -1 || toml_len > BUILD_TOML_MAX || refused_len > REFUSED_MAX)
		return -1;
	struct push_plan *p = xcalloc(1, sizeof(*p));
	p->repo_id = repo_id;
	p->owner_id = owner_id;
	p->ref = xstrdup(ref);
	memcpy(p->sha, sha, sizeof(p->sha));
	p->len = toml_len > 0 ? (size_t)toml_len : 0;
	if ((toml_len >= 0 && !(p->toml = read_bytes(fp, p->len))) ||
	    (refused_len && !(p->refused = read_bytes(fp, refused_len)))) {
		push_plan_free(p);
		return -1;
	}
	*out = p;
	return 1;
}

size_t build_planner_take(int fd, int64_t repo_id)
{
	size_t n = 0;
	int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	FILE *fp = copy >= 0 ? fdopen(copy, "r") : NULL;
	if (!fp || fseek(fp, 0, SEEK_SET) != 0) {
		log_warn("build trigger: repo %lld: cannot read what its push hook handed over: %s", (long long)repo_id,
			 strerror(errno));
		goto cleanup;
	}
	struct push_plan *p;
	int rc;
	while ((rc = push_plan_read_next(fp, &p)) > 0) {
		if (p->repo_id != repo_id) {	/* the hook writes only the pushed repo's */
			push_plan_free(p);
			continue;
		}
		if (!build_planner_submit(p)) {
			log_warn("build trigger: repo %lld %s: no push planner runs; not planned", (long long)repo_id, p->sha);
			push_plan_free(p);
			continue;
		}
		n++;
	}
	if (rc < 0)
		log_warn("build trigger: repo %lld: its push hook's plans end cut short; the rest is not planned",
			 (long long)repo_id);
cleanup:
	if (fp)
		fclose(fp);
	else if (copy >= 0)
		close(copy);
	return n;
}
