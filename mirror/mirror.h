/* mirror.h -- the mirror role: keep a selection of an upstream hub's repos
 * in sync with identical commit SHAs (git objects over smart HTTP through
 * libgit2, LFS bytes over HTTP through libcurl, each verified), moving a
 * ref only once every file the selection wants at its commit is here.
 * Uses storage/ and HTTP, never api/. */
#ifndef KHUB_MIRROR_H
#define KHUB_MIRROR_H

#include <jansson.h>
#include <stdatomic.h>

#include "storage/git/repo.h"
#include "storage/lfs/lfs.h"
#include "storage/db/db.h"
#include "storage/publish/publish.h"

/* ---- configuration (mirror/mirror_config.c) ------------------------------ */

struct mirror_upstream {
	char *name;
	char *url;		/* base URL, no trailing slash */
	char *token_env;	/* environment variable holding the token */
	char *token_file;	/* or a file holding it */
	double rate;		/* requests per second (0 = unlimited) */
	int concurrency;	/* parallel LFS transfers */
	int max_retries;
	long request_timeout;	/* seconds one JSON request may take */
};

enum mirror_policy { POLICY_MIRROR, POLICY_KEEP };

struct mirror_selection {
	char *name;
	char *upstream;
	enum repo_type type;
	char **repos;		/* "ns/name" or globs such as "ns/kernel-*" */
	size_t nrepos;
	char **refs;		/* short-name globs ("main", "v*"), "tags", "all" */
	size_t nrefs;
	char **eager;		/* variant-name globs fetched eagerly */
	size_t neager;
	int lazy;		/* other LFS files fetched on first request */
	long interval;		/* seconds between syncs in `khub mirror run` */
	enum mirror_policy policy;	/* upstream force-pushes and deletions */
	long git_timeout;	/* seconds a git ref listing or fetch may take */
};

struct mirror_config {
	struct mirror_upstream *upstreams;
	size_t nupstreams;
	struct mirror_selection *selections;
	size_t nselections;
};

/* Parse the JSON configuration; on failure err says what is wrong. */
int mirror_config_parse(const char *text, struct mirror_config *out, char *err, size_t errlen);
/* The configuration from file (when not NULL) or else from the database
 * (PUT /api/admin/mirror/config). */
int mirror_config_load(const char *file, struct mirror_config *out, char *err, size_t errlen);
void mirror_config_release(struct mirror_config *cfg);
const struct mirror_upstream *mirror_config_upstream(const struct mirror_config *cfg, const char *name);
/* The token for an upstream (environment or file), or NULL; caller frees. */
char *mirror_upstream_token(const struct mirror_upstream *up);

/* ---- upstream HTTP client (mirror/upstream.c) ---------------------------- */

struct upstream_client;

/* token may be NULL. NULL on failure. */
struct upstream_client *upstream_client_new(const struct mirror_upstream *up, const char *token);
void upstream_client_free(struct upstream_client *c);
/* GET JSON with retries (429 Retry-After/RateLimit honoured, 5xx backed
 * off). *status is the final HTTP status; *next (may be NULL) gets the
 * Link rel="next" URL (caller frees) or NULL. */
int upstream_get_json(struct upstream_client *c, const char *url, json_t **out, long *status, char **next);
/* Fetch url into the LFS store as oid/size (through storage's
 * repo_import_add_lfs): resumes a partial download (Range), follows
 * redirects, verifies the sha256, retries. *transferred adds the bytes
 * that crossed the network. KHUB_EINVAL when the bytes do not verify,
 * KHUB_EIO when the upstream cannot be reached, KHUB_ENOTFOUND on 404,
 * KHUB_EDB. link_repo_id (0: none): download and verify the whole object
 * even when the store has it already (from scratch), which proves the
 * upstream serves those bytes, then link it to that mirrored repo. */
int upstream_fetch_lfs(struct upstream_client *c, const char *url, const char *oid, uint64_t size,
		       struct lfs_store *lfs, int64_t link_repo_id, uint64_t *transferred);
/* Headers for libgit2 (Authorization), NULL-safe; owned by the client. */
const git_strarray *upstream_git_headers(struct upstream_client *c);
uint64_t upstream_requests(const struct upstream_client *c);

/* ---- pulling (mirror/pull.c) ---------------------------------------------- */

struct mirror_stats {
	uint64_t repos, repos_unchanged, refs_moved, refs_kept, objects, bytes, errors;
};

struct mirror_run {
	const struct mirror_config *cfg;
	const char *repo_root;
	struct lfs_store *lfs;
	int progress;		/* print progress on stderr */
	struct mirror_stats stats;
	/* khub mirror run: asked on the run's thread before each repo, git
	 * fetch, ref move and while LFS objects download: 0 once the run lost
	 * its right to write (the mirror-run lock went with its database
	 * connection; a standby may hold it now). NULL: always 1. */
	int (*holds_lock)(void);
	atomic_int fenced;	/* set once holds_lock said 0: nothing more is fetched or written */
};

/* Nonzero once the run must stop (holds_lock said 0, now or before); on
 * the run's thread only (its LFS fetch threads read run->fenced). */
int mirror_run_fenced(struct mirror_run *run);
/* Pull every repo of one selection. Errors per repo are recorded in
 * mirror_repos and counted; returns 0 unless the whole run failed. */
int mirror_pull_selection(struct mirror_run *run, const struct mirror_selection *sel, const char *only_repo);

/* For the server: fetch one LFS object of a mirrored repo on first
 * request, and link it to the repo once downloaded and verified (an
 * object stored for another repo is downloaded again: the upstream must
 * prove it has it). 0 when it is now in the store and linked; KHUB_EIO
 * when the upstream cannot be reached; KHUB_EINVAL when its bytes do not
 * verify; KHUB_ENOTFOUND when the repo is not lazily mirrored or the
 * upstream does not have it; KHUB_EDB. */
int mirror_lazy_fetch(int64_t repo_id, const char *commit_sha, const char *path, const char *oid, uint64_t size,
		      struct lfs_store *lfs);

#endif
