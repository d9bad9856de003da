/* cluster.c -- khub serve as one of several nodes on one database: the
 * caches each name in a NOTIFY khub_cache drops (the listener thread is
 * storage/db/db_listen.c), and draining (docs/operations.md). */
#include "server/server.h"

#include <string.h>

static void drop_repos(void)
{
	repo_cache_invalidate();	/* records, and the git handles they name */
}

/* What each cache name drops. Caches keyed by an immutable commit sha
 * (response cache, response memo, the variant index's rows) need nothing:
 * a ref is read from the shared git repositories on every request. */
static const struct {
	const char *name;
	void (*drop)(void);
} cache_drops[] = {
	{ "repos", drop_repos },
	{ "tokens", auth_cache_clear },
};

static void cluster_drop(const char *cache)
{
	int all = strcmp(cache, "*") == 0, known = 0;
	for (size_t i = 0; i < sizeof(cache_drops) / sizeof(cache_drops[0]); i++) {
		if (all || strcmp(cache, cache_drops[i].name) == 0) {
			cache_drops[i].drop();
			known = 1;
		}
	}
	if (!known)	/* a newer node's cache name: drop everything to be safe */
		for (size_t i = 0; i < sizeof(cache_drops) / sizeof(cache_drops[0]); i++)
			cache_drops[i].drop();
}

void cluster_start(void)
{
	db_listen_start(runtime_conninfo(), cluster_drop);
}

void cluster_stop(void)
{
	db_listen_stop();
}

void cluster_drain(int on)
{
	__atomic_store_n(&http_ctx.draining, on, __ATOMIC_RELAXED);
	if (on)
		log_info("SIGUSR1: draining: /api/health answers 503, requests are still served");
	else
		log_info("SIGUSR2: serving again: /api/health answers 200");
}
