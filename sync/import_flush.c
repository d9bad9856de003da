/* import_flush.c -- a thread that makes staged files durable while the
 * import streams the next entries: each finished staging file is handed
 * over (its fd), fsynced and closed here, so the disk writes one object
 * while the next is read, hashed and written to the page cache. The import
 * waits for it (import_flush_finish) before anything refers to a staged
 * file, so nothing is referenced before it is on disk. A job may rename
 * the file once durable (a staged LFS object gets its verified name only
 * then) and append a line to the import's journal of verified entries
 * (what a re-run of a killed import need not read again). */
#include "sync/import_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct import_flush {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct flush_job {
		int fd;		/* owned here; -1: none */
		char *from, *to;	/* rename once durable, or NULL */
		char *line;	/* for the journal, or NULL */
	} *jobs;		/* queued */
	int journal;		/* fd, or -1 */
	size_t n, cap, head;
	int done;		/* no more fds will come */
	int err;		/* the first fsync, close, rename or write errno, 0 */
	int inline_;		/* no thread could be made */
};

static int run_job(struct import_flush *f, struct flush_job *j)
{
	int e = 0;
	if (j->fd >= 0) {
		e = fsync(j->fd) < 0 ? errno : 0;
		if (close(j->fd) < 0 && !e)
			e = errno;
	}
	if (!e && j->from && rename(j->from, j->to) < 0)
		e = errno;
	/* not fsynced: a line lost in a power cut only costs a re-read; one
	 * kept whose rename was lost is checked against the file on resume */
	if (!e && j->line && f->journal >= 0 && write_all(f->journal, j->line, strlen(j->line)) < 0)
		e = errno;
	free(j->from);
	free(j->to);
	free(j->line);
	return e;
}

static void *flush_main(void *arg)
{
	struct import_flush *f = arg;
	pthread_mutex_lock(&f->mu);
	for (;;) {
		while (f->head == f->n && !f->done)
			pthread_cond_wait(&f->cond, &f->mu);
		if (f->head == f->n)
			break;
		struct flush_job j = f->jobs[f->head++];
		pthread_mutex_unlock(&f->mu);
		int e = run_job(f, &j);
		pthread_mutex_lock(&f->mu);
		if (e && !f->err)
			f->err = e;
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

struct import_flush *import_flush_start(int journal)
{
	struct import_flush *f = xcalloc(1, sizeof(*f));
	f->journal = journal;
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cond, NULL);
	if (pthread_create(&f->thread, NULL, flush_main, f) != 0)
		f->inline_ = 1;	/* no thread: each job runs as it is added */
	return f;
}

int import_flush_add(struct import_flush *f, int fd, const char *from, const char *to, const char *line)
{
	struct flush_job j = { fd, from ? xstrdup(from) : NULL, to ? xstrdup(to) : NULL, line ? xstrdup(line) : NULL };
	if (f->inline_) {
		int e = run_job(f, &j);
		if (e && !f->err)
			f->err = e;
		return e ? KHUB_EIO : 0;
	}
	pthread_mutex_lock(&f->mu);
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 64;
		f->jobs = xrealloc(f->jobs, f->cap * sizeof(*f->jobs));
	}
	f->jobs[f->n++] = j;
	pthread_cond_signal(&f->cond);
	pthread_mutex_unlock(&f->mu);
	return 0;
}

int import_flush_finish(struct import_flush *f)
{
	if (!f)
		return 0;
	if (!f->inline_) {
		pthread_mutex_lock(&f->mu);
		f->done = 1;
		pthread_cond_signal(&f->cond);
		pthread_mutex_unlock(&f->mu);
		pthread_join(f->thread, NULL);
	}
	int err = f->err;
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->mu);
	free(f->jobs);
	free(f);
	return err;
}
