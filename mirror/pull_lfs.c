/* pull_lfs.c -- the LFS objects a selection wants at a commit, fetched from
 * the upstream by a bounded pool of threads and verified before stored. */
#include "mirror/pull_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- LFS objects ------------------------------------------------------------ */

struct fetch_pool {
	struct repo_pull *rp;
	const char *sha;
	struct wanted *items;
	size_t count, next, done, failed;
	int corrupt;
	pthread_mutex_t lock;
};

static void *fetch_worker(void *arg)
{
	struct fetch_pool *pool = arg;
	struct repo_pull *rp = pool->rp;
	for (;;) {
		pthread_mutex_lock(&pool->lock);
		size_t i = pool->next < pool->count && !atomic_load(&rp->run->fenced) ? pool->next++ : (size_t)-1;
		pthread_mutex_unlock(&pool->lock);
		if (i == (size_t)-1)
			break;
		struct wanted *w = &pool->items[i];
		struct strbuf url = STRBUF_INIT;
		strbuf_addf(&url, "%s/%s%s/resolve/%s/", rp->up->url, repo_type_url_prefix(rp->sel->type),
			    rp->upstream_repo, pool->sha);
		strbuf_add_urlencoded(&url, w->path, 1);
		uint64_t transferred = 0;
		/* prove: an object stored for another repo is downloaded again,
		 * so a tree naming an oid is never enough to get it linked */
		/* named in flight until linked: khub gc keeps it meanwhile */
		int64_t inflight = 0;
		int rc = db_lfs_inflight_begin(w->oid, &inflight) < 0 ? KHUB_EDB : 0;
		if (rc == 0)
			rc = upstream_fetch_lfs(rp->client, url.buf, w->oid, w->size, rp->run->lfs, rp->rec.id,
						&transferred);
		db_lfs_inflight_end(inflight);
		strbuf_release(&url);
		pthread_mutex_lock(&pool->lock);
		rp->bytes += transferred;
		pool->done++;
		if (rc == 0) {
			rp->objects++;
		} else {
			pool->failed++;
			pool->corrupt |= rc == KHUB_EINVAL;
			strbuf_addf(&rp->errors, "%s: LFS object %s %s; ", w->path, w->oid,
				    rc == KHUB_EINVAL ? "failed verification (sha256 or size mismatch)"
				    : rc == KHUB_EDB ? "could not be linked (database unavailable)"
						      : "could not be fetched");
		}
		pull_progress(rp, "%zu/%zu LFS objects, %.1f MiB", pool->done, pool->count, (double)rp->bytes / 1048576.0);
		pthread_mutex_unlock(&pool->lock);
	}
	return NULL;
}

/* Join a fetch thread, asking every 500 ms meanwhile whether the run still
 * holds its lock: once not, the threads take no further object. */
static void join_watching_lock(struct mirror_run *run, pthread_t thread)
{
	for (;;) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 500 * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		if (pthread_timedjoin_np(thread, NULL, &until) != ETIMEDOUT)
			return;
		mirror_run_fenced(run);
	}
}

/* Every LFS object the selection wants at sha, fetched, verified and then
 * linked to the repo. A tree naming an oid proves nothing (a hostile
 * upstream may name another repo's private object): an object is linked
 * only once this repo's upstream served its bytes; objects of other
 * variants are linked by mirror_lazy_fetch on first request. */
int pull_fetch_wanted_objects(struct repo_pull *rp, const char *sha)
{
	struct tree_listing listing;
	if (repo_list_tree(rp->git, sha, "", 1, &listing) < 0)
		return KHUB_EIO;
	struct wanted *items = xcalloc(listing.count + 1, sizeof(*items));
	size_t n = 0;
	int rc = 0;
	for (size_t i = 0; i < listing.count && rc == 0; i++) {
		const struct tree_entry *e = &listing.entries[i];
		if (e->is_dir || !e->is_lfs || !pull_eager_path(rp->sel, e->path))
			continue;
		int linked = db_lfs_linked(rp->rec.id, e->lfs_oid);
		if (linked < 0) {
			strbuf_addf(&rp->errors, "%s: database unavailable; ", e->path);
			rc = KHUB_EDB;
			break;
		}
		if (linked && lfs_store_stat(rp->run->lfs, e->lfs_oid, NULL) == 0)
			continue;
		int dup = 0;
		for (size_t k = 0; k < n && !dup; k++)
			dup = strcmp(items[k].oid, e->lfs_oid) == 0;
		if (dup)
			continue;
		memcpy(items[n].oid, e->lfs_oid, 65);
		items[n].size = e->size;
		items[n].path = xstrdup(e->path);
		n++;
	}
	tree_listing_release(&listing);
	if (rc == 0 && n > 0) {
		struct fetch_pool pool = { rp, sha, items, n, 0, 0, 0, 0, PTHREAD_MUTEX_INITIALIZER };
		int workers = rp->up->concurrency < (int)n ? rp->up->concurrency : (int)n;
		pthread_t threads[64];
		for (int t = 0; t < workers; t++)
			pthread_create(&threads[t], NULL, fetch_worker, &pool);
		for (int t = 0; t < workers; t++)
			join_watching_lock(rp->run, threads[t]);
		rc = pool.failed || pool.done < n ? (pool.corrupt ? KHUB_EINVAL : KHUB_EIO) : 0;
	}
	for (size_t i = 0; i < n; i++)
		free(items[i].path);
	free(items);
	return rc;
}
