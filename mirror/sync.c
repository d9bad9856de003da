/* sync.c -- sync one selection of upstream repos: list refs (one ref
 * advertisement per repo; nothing more when nothing changed), fetch git
 * objects into a hidden staging namespace, fetch and verify the LFS objects
 * the selection wants eagerly, then move each visible ref to exactly the
 * upstream sha. A crash at any point leaves visible refs where they were;
 * the next sync resumes partial LFS downloads and skips verified objects. */
#include "mirror/mirror.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STAGING_PREFIX "refs/khub-upstream/"

struct wanted {
	char oid[65];
	uint64_t size;
	char *path;
};

struct repo_sync {
	struct mirror_run *run;
	const struct mirror_selection *sel;
	const struct mirror_upstream *up;
	struct upstream_client *client;
	git_repository *git;
	struct repo_record rec;
	char upstream_repo[2 * REPO_NAME_MAX + 2];
	struct strbuf warnings;
	struct strbuf errors;
	uint64_t bytes, objects;
	int refs_behind;
};

static int glob_any(char *const *globs, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (fnmatch(globs[i], s, 0) == 0)
			return 1;
	return 0;
}

static int ref_selected(const struct mirror_selection *sel, const char *full)
{
	if (strncmp(full, "refs/heads/", 11) == 0) {
		for (size_t i = 0; i < sel->nrefs; i++)
			if (strcmp(sel->refs[i], "all") == 0 ||
			    (strcmp(sel->refs[i], "tags") != 0 && fnmatch(sel->refs[i], full + 11, 0) == 0))
				return 1;
		return 0;
	}
	if (strncmp(full, "refs/tags/", 10) == 0) {
		for (size_t i = 0; i < sel->nrefs; i++)
			if (strcmp(sel->refs[i], "all") == 0 || strcmp(sel->refs[i], "tags") == 0)
				return 1;
		return 0;
	}
	return 0;
}

/* An LFS file is wanted eagerly unless it lies in a build variant outside
 * the selection's eager globs. */
static int eager_path(const struct mirror_selection *sel, const char *path)
{
	if (strncmp(path, "build/", 6) != 0)
		return 1;
	const char *variant = path + 6, *slash = strchr(variant, '/');
	if (!slash)
		return 1;
	char name[256];
	size_t n = (size_t)(slash - variant) < sizeof(name) - 1 ? (size_t)(slash - variant) : sizeof(name) - 1;
	memcpy(name, variant, n);
	name[n] = '\0';
	return glob_any(sel->eager, sel->neager, name);
}

static void progress(struct repo_sync *rs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void progress(struct repo_sync *rs, const char *fmt, ...)
{
	if (!rs->run->progress)
		return;
	va_list ap;
	fprintf(stderr, "\r\033[K[%s] ", rs->upstream_repo);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
}

/* ---- status in the database ---------------------------------------------- */

static void status_begin(struct repo_sync *rs)
{
	char id[24];
	snprintf(id, sizeof(id), "%" PRId64, rs->rec.id);
	const char *params[8] = { id, rs->sel->name, rs->up->name, rs->up->url, rs->upstream_repo,
				  rs->up->token_env, rs->up->token_file, rs->sel->lazy ? "true" : "false" };
	PQclear(db_exec("INSERT INTO mirror_repos (repo_id, selection, upstream_name, upstream_url, upstream_repo,"
			" token_env, token_file, lazy, last_sync_started) VALUES ($1,$2,$3,$4,$5,$6,$7,$8, now())"
			" ON CONFLICT (repo_id) DO UPDATE SET selection = $2, upstream_name = $3, upstream_url = $4,"
			" upstream_repo = $5, token_env = $6, token_file = $7, lazy = $8, last_sync_started = now()",
			8, params, NULL));
}

static void status_end(struct repo_sync *rs, int ok)
{
	char id[24], bytes[24], objects[24], behind[16];
	snprintf(id, sizeof(id), "%" PRId64, rs->rec.id);
	snprintf(bytes, sizeof(bytes), "%" PRIu64, rs->bytes);
	snprintf(objects, sizeof(objects), "%" PRIu64, rs->objects);
	snprintf(behind, sizeof(behind), "%d", rs->refs_behind);
	const char *params[7] = { id, ok ? "true" : "false", rs->errors.len ? rs->errors.buf : NULL,
				  rs->warnings.len ? rs->warnings.buf : NULL, bytes, objects, behind };
	PQclear(db_exec("UPDATE mirror_repos SET last_sync_finished = now(),"
			" last_success = CASE WHEN $2::boolean THEN now() ELSE last_success END,"
			" last_error = $3, warnings = $4, bytes_total = bytes_total + $5::bigint,"
			" objects_total = objects_total + $6::bigint, refs_behind = $7::int,"
			" syncs_total = syncs_total + 1 WHERE repo_id = $1", 7, params, NULL));
}

/* ---- LFS objects ------------------------------------------------------------ */

struct fetch_pool {
	struct repo_sync *rs;
	const char *sha;
	struct wanted *items;
	size_t count, next, done, failed;
	int corrupt;
	pthread_mutex_t lock;
};

static void *fetch_worker(void *arg)
{
	struct fetch_pool *pool = arg;
	struct repo_sync *rs = pool->rs;
	for (;;) {
		pthread_mutex_lock(&pool->lock);
		size_t i = pool->next < pool->count ? pool->next++ : (size_t)-1;
		pthread_mutex_unlock(&pool->lock);
		if (i == (size_t)-1)
			break;
		struct wanted *w = &pool->items[i];
		struct strbuf url = STRBUF_INIT;
		strbuf_addf(&url, "%s/%s%s/resolve/%s/", rs->up->url, repo_type_url_prefix(rs->sel->type),
			    rs->upstream_repo, pool->sha);
		strbuf_add_urlencoded(&url, w->path, 1);
		uint64_t transferred = 0;
		int rc = lfs_store_stat(rs->run->lfs, w->oid, NULL) == 0 ? 0
		       : upstream_fetch_lfs(rs->client, url.buf, w->oid, w->size, rs->run->lfs, &transferred);
		strbuf_release(&url);
		pthread_mutex_lock(&pool->lock);
		rs->bytes += transferred;
		pool->done++;
		if (rc == 0) {
			rs->objects++;
		} else {
			pool->failed++;
			pool->corrupt |= rc == KHUB_EINVAL;
			strbuf_addf(&rs->errors, "%s: LFS object %s %s; ", w->path, w->oid,
				    rc == KHUB_EINVAL ? "failed verification (sha256 or size mismatch)"
						      : "could not be fetched");
		}
		progress(rs, "%zu/%zu LFS objects, %.1f MiB", pool->done, pool->count, (double)rs->bytes / 1048576.0);
		pthread_mutex_unlock(&pool->lock);
	}
	return NULL;
}

/* Every LFS object the selection wants at sha, fetched and verified. */
static int fetch_wanted_objects(struct repo_sync *rs, const char *sha)
{
	struct tree_listing listing;
	if (repo_list_tree(rs->git, sha, "", 1, &listing) < 0)
		return KHUB_EIO;
	struct wanted *items = xcalloc(listing.count + 1, sizeof(*items));
	size_t n = 0;
	for (size_t i = 0; i < listing.count; i++) {
		const struct tree_entry *e = &listing.entries[i];
		if (e->is_dir || !e->is_lfs)
			continue;
		/* the upstream's tree names it: this repo may serve it (eagerly
		 * fetched now, or lazily on first request) */
		db_lfs_link(rs->rec.id, e->lfs_oid);
		if (!eager_path(rs->sel, e->path))
			continue;
		if (lfs_store_stat(rs->run->lfs, e->lfs_oid, NULL) == 0)
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
	int rc = 0;
	if (n > 0) {
		struct fetch_pool pool = { rs, sha, items, n, 0, 0, 0, 0, PTHREAD_MUTEX_INITIALIZER };
		int workers = rs->up->concurrency < (int)n ? rs->up->concurrency : (int)n;
		pthread_t threads[64];
		for (int t = 0; t < workers; t++)
			pthread_create(&threads[t], NULL, fetch_worker, &pool);
		for (int t = 0; t < workers; t++)
			pthread_join(threads[t], NULL);
		rc = pool.failed ? (pool.corrupt ? KHUB_EINVAL : KHUB_EIO) : 0;
	}
	for (size_t i = 0; i < n; i++)
		free(items[i].path);
	free(items);
	return rc;
}

/* ---- refs ----------------------------------------------------------------------- */

struct upstream_ref {
	char *name;	/* refs/heads/v1 */
	char sha[41];
};

static int list_upstream_refs(struct repo_sync *rs, git_remote *remote, struct upstream_ref **out, size_t *n)
{
	const git_remote_head **heads;
	size_t count;
	git_remote_callbacks callbacks;
	git_remote_init_callbacks(&callbacks, GIT_REMOTE_CALLBACKS_VERSION);
	if (git_remote_connect(remote, GIT_DIRECTION_FETCH, &callbacks, NULL, upstream_git_headers(rs->client)) < 0 ||
	    git_remote_ls(&heads, &count, remote) < 0) {
		const git_error *e = git_error_last();
		strbuf_addf(&rs->errors, "cannot list upstream refs: %s; ", e ? e->message : "?");
		return KHUB_EIO;
	}
	*out = xcalloc(count + 1, sizeof(**out));
	*n = 0;
	for (size_t i = 0; i < count; i++) {
		const char *name = heads[i]->name;
		size_t len = strlen(name);
		if (len > 3 && strcmp(name + len - 3, "^{}") == 0)
			continue;	/* peeled tag lines */
		if (!ref_selected(rs->sel, name))
			continue;
		(*out)[*n].name = xstrdup(name);
		git_oid_tostr((*out)[*n].sha, 41, &heads[i]->oid);
		(*n)++;
	}
	git_remote_disconnect(remote);
	return 0;
}

static int local_ref(git_repository *git, const char *name, char sha[41])
{
	git_reference *ref = NULL;
	if (git_reference_lookup(&ref, git, name) < 0)
		return -1;
	const git_oid *oid = git_reference_target(ref);
	int rc = oid ? 0 : -1;
	if (oid)
		git_oid_tostr(sha, 41, oid);
	git_reference_free(ref);
	return rc;
}

static char *staging_name(const char *ref)
{
	return xasprintf(STAGING_PREFIX "%s", ref + 5);	/* refs/heads/x → refs/khub-upstream/heads/x */
}

/* Bring every selected upstream ref's objects into staging refs. */
static int fetch_objects(struct repo_sync *rs, git_remote *remote, struct upstream_ref *refs, size_t n)
{
	char **specs = xcalloc(n + 1, sizeof(char *));
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		char staged[41];
		char *sname = staging_name(refs[i].name);
		/* staging already at the upstream sha: its objects are here */
		if (!(local_ref(rs->git, sname, staged) == 0 && strcmp(staged, refs[i].sha) == 0))
			specs[k++] = xasprintf("+%s:%s", refs[i].name, sname);
		free(sname);
	}
	int rc = 0;
	if (k > 0) {
		progress(rs, "fetching git objects for %zu refs", k);
		git_fetch_options opts;
		git_fetch_options_init(&opts, GIT_FETCH_OPTIONS_VERSION);
		if (upstream_git_headers(rs->client))
			opts.custom_headers = *upstream_git_headers(rs->client);
		opts.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
		opts.update_fetchhead = 0;
		git_strarray arr = { specs, k };
		if (git_remote_fetch(remote, &arr, &opts, "khub mirror") < 0) {
			const git_error *e = git_error_last();
			strbuf_addf(&rs->errors, "git fetch failed: %s; ", e ? e->message : "?");
			rc = KHUB_EIO;
		}
	}
	for (size_t i = 0; i < k; i++)
		free(specs[i]);
	free(specs);
	return rc;
}

static int move_visible_ref(struct repo_sync *rs, const char *name, const char *sha)
{
	char current[41];
	int exists = local_ref(rs->git, name, current) == 0;
	if (exists && strcmp(current, sha) == 0)
		return 0;
	if (exists && rs->sel->policy == POLICY_KEEP) {
		git_oid a, b;
		git_oid_fromstr(&a, sha);
		git_oid_fromstr(&b, current);
		if (git_graph_descendant_of(rs->git, &a, &b) != 1) {
			strbuf_addf(&rs->warnings, "%s was force-pushed upstream (%.12s -> %.12s): kept %.12s (policy keep); ",
				    name, current, sha, current);
			rs->run->stats.refs_kept++;
			return 0;
		}
	}
	int rc = repo_update_ref(rs->git, name, exists ? current : NULL, sha, "khub mirror");
	if (rc == 0)
		rs->run->stats.refs_moved++;
	return rc;
}

/* Visible refs inside the selection that upstream no longer has. */
static void apply_deletions(struct repo_sync *rs, struct upstream_ref *refs, size_t n)
{
	git_reference_iterator *it = NULL;
	git_reference *ref;
	if (git_reference_iterator_new(&it, rs->git) < 0)
		return;
	struct strbuf gone = STRBUF_INIT;
	while (git_reference_next(&ref, it) == 0) {
		const char *name = git_reference_name(ref);
		int upstream_has = 0;
		if (strncmp(name, STAGING_PREFIX, strlen(STAGING_PREFIX)) == 0) {
			char *visible = xasprintf("refs/%s", name + strlen(STAGING_PREFIX));
			for (size_t i = 0; i < n && !upstream_has; i++)
				upstream_has = strcmp(refs[i].name, visible) == 0;
			if (!upstream_has)
				git_reference_delete(ref);	/* staging follows upstream exactly */
			free(visible);
		} else if (ref_selected(rs->sel, name)) {
			for (size_t i = 0; i < n && !upstream_has; i++)
				upstream_has = strcmp(refs[i].name, name) == 0;
			if (!upstream_has) {
				strbuf_adds(&gone, name);
				strbuf_adds(&gone, "\n");
			}
		}
		git_reference_free(ref);
	}
	git_reference_iterator_free(it);
	char *save = NULL;
	for (char *name = gone.len ? strtok_r(gone.buf, "\n", &save) : NULL; name;
	     name = strtok_r(NULL, "\n", &save)) {
		if (rs->sel->policy == POLICY_KEEP) {
			strbuf_addf(&rs->warnings, "%s was deleted upstream: kept (policy keep); ", name);
			rs->run->stats.refs_kept++;
		} else if (git_reference_remove(rs->git, name) == 0) {
			rs->run->stats.refs_moved++;
		}
	}
	strbuf_release(&gone);
}

/* ---- libgit2's network steps, under a deadline --------------------------------- */

/* libgit2 1.5 has no network timeout: an upstream that accepts a
 * connection and never answers would hang the sync. Each network step
 * runs in a child process that reports on a pipe ("R <sha> <ref>" lines,
 * "E <message>" on failure); the parent stops waiting at the deadline. */
enum net_step { STEP_LIST, STEP_FETCH };

static void child_report(int fd, const char *line)
{
	size_t n = strlen(line);
	while (n > 0) {
		ssize_t w = write(fd, line, n);
		if (w <= 0)
			return;
		line += w;
		n -= (size_t)w;
	}
}

static int run_step_in_child(struct repo_sync *rs, git_remote *remote, enum net_step step,
			     struct upstream_ref **refs, size_t *nrefs)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) < 0) {
		strbuf_addf(&rs->errors, "cannot create a pipe; ");
		return KHUB_EIO;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		strbuf_addf(&rs->errors, "cannot fork; ");
		return KHUB_EIO;
	}
	if (pid == 0) {
		/* the child: libgit2 only, never the database connection */
		close(fds[0]);
		struct strbuf out = STRBUF_INIT;
		int rc;
		if (step == STEP_LIST) {
			rc = list_upstream_refs(rs, remote, refs, nrefs);
			for (size_t i = 0; rc == 0 && i < *nrefs; i++)
				strbuf_addf(&out, "R %s %s\n", (*refs)[i].sha, (*refs)[i].name);
		} else {
			rc = fetch_objects(rs, remote, *refs, *nrefs);
		}
		if (rc < 0)
			strbuf_addf(&out, "E %s\n", rs->errors.len ? rs->errors.buf : "failed");
		child_report(fds[1], out.buf ? out.buf : "");
		_exit(rc < 0 ? 1 : 0);
	}
	close(fds[1]);
	struct strbuf in = STRBUF_INIT;
	uint64_t deadline = monotonic_usec() + (uint64_t)rs->sel->git_timeout * 1000000u;
	int timed_out = 0;
	for (;;) {
		uint64_t now = monotonic_usec();
		if (now >= deadline) {
			timed_out = 1;
			break;
		}
		struct pollfd p = { fds[0], POLLIN, 0 };
		int prc = poll(&p, 1, (int)((deadline - now) / 1000 + 1));
		if (prc < 0 && errno == EINTR)
			continue;
		if (prc <= 0)
			continue;
		char buf[4096];
		ssize_t n = read(fds[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		strbuf_add(&in, buf, (size_t)n);
	}
	close(fds[0]);
	int status = 0;
	if (timed_out)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	int rc = 0;
	if (timed_out) {
		strbuf_addf(&rs->errors, "the upstream did not answer the git %s within %ld s; ",
			    step == STEP_LIST ? "ref advertisement" : "fetch", rs->sel->git_timeout);
		rc = KHUB_EIO;
	} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		const char *e = in.buf ? strstr(in.buf, "E ") : NULL;
		strbuf_addf(&rs->errors, "%s", e ? e + 2 : "the git step failed; ");
		rc = KHUB_EIO;
	} else if (step == STEP_LIST) {
		*refs = NULL;
		*nrefs = 0;
		char *save = NULL;
		for (char *line = in.len ? strtok_r(in.buf, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
			if (line[0] != 'R' || strlen(line) < 44)
				continue;
			*refs = xrealloc(*refs, (*nrefs + 1) * sizeof(**refs));
			memcpy((*refs)[*nrefs].sha, line + 2, 40);
			(*refs)[*nrefs].sha[40] = '\0';
			(*refs)[*nrefs].name = xstrdup(line + 43);
			(*nrefs)++;
		}
	}
	strbuf_release(&in);
	return rc;
}

/* ---- one repo ---------------------------------------------------------------- */

static int sync_repo(struct mirror_run *run, const struct mirror_selection *sel, struct upstream_client *client,
		     const char *repo_id)
{
	struct repo_sync rs = { run, sel, mirror_config_upstream(run->cfg, sel->upstream), client };
	strbuf_init(&rs.warnings);
	strbuf_init(&rs.errors);
	snprintf(rs.upstream_repo, sizeof(rs.upstream_repo), "%s", repo_id);
	char *ns = xstrndup(repo_id, (size_t)(strchr(repo_id, '/') - repo_id));
	const char *name = strchr(repo_id, '/') + 1, *why;
	git_remote *remote = NULL;
	struct upstream_ref *refs = NULL;
	size_t nrefs = 0;
	int rc = KHUB_EIO, ok = 0;

	if (repo_name_validate(ns, &why) < 0 || repo_name_validate(name, &why) < 0) {
		log_warn("mirror: skipping %s: %s", repo_id, why);
		free(ns);
		return KHUB_EINVAL;
	}
	if ((rc = db_repo_ensure_mirrored(sel->type, ns, name, &rs.rec)) < 0)
		goto cleanup;
	rc = repo_store_init_empty(run->repo_root, sel->type, rs.rec.ns, rs.rec.name);
	if (rc < 0 && rc != KHUB_EEXIST)
		goto cleanup;
	if ((rc = repo_store_open(run->repo_root, sel->type, rs.rec.ns, rs.rec.name, &rs.git)) < 0)
		goto cleanup;
	status_begin(&rs);
	char *url = xasprintf("%s/%s%s", rs.up->url, repo_type_url_prefix(sel->type), repo_id);
	rc = git_remote_create_anonymous(&remote, rs.git, url) < 0 ? KHUB_EIO : 0;
	free(url);
	if (rc < 0 || (rc = run_step_in_child(&rs, remote, STEP_LIST, &refs, &nrefs)) < 0)
		goto done;

	/* Nothing new: every selected visible ref already equals upstream and
	 * no visible ref is gone upstream. That costs one ref advertisement. */
	int unchanged = 1;
	for (size_t i = 0; i < nrefs && unchanged; i++) {
		char sha[41];
		unchanged = local_ref(rs.git, refs[i].name, sha) == 0 && strcmp(sha, refs[i].sha) == 0;
	}
	if (unchanged) {
		apply_deletions(&rs, refs, nrefs);
		run->stats.repos_unchanged++;
		ok = rs.errors.len == 0;
		rc = 0;
		goto done;
	}
	if ((rc = run_step_in_child(&rs, remote, STEP_FETCH, &refs, &nrefs)) < 0)
		goto done;
	for (size_t i = 0; i < nrefs; i++) {
		char sha[41];
		if (local_ref(rs.git, refs[i].name, sha) == 0 && strcmp(sha, refs[i].sha) == 0)
			continue;
		git_object *obj = NULL, *commit = NULL;
		git_oid oid;
		git_oid_fromstr(&oid, refs[i].sha);
		int have = git_object_lookup(&obj, rs.git, &oid, GIT_OBJECT_ANY) == 0 &&
			   git_object_peel(&commit, obj, GIT_OBJECT_COMMIT) == 0;
		char commit_sha[41] = "";
		if (have)
			git_oid_tostr(commit_sha, sizeof(commit_sha), git_object_id(commit));
		git_object_free(commit);
		git_object_free(obj);
		if (!have) {
			strbuf_addf(&rs.errors, "%s: upstream commit %.12s missing after fetch; ", refs[i].name, refs[i].sha);
			rs.refs_behind++;
			continue;
		}
		int frc = fetch_wanted_objects(&rs, commit_sha);
		if (frc < 0) {
			/* the ref stays where it was: no client ever sees a commit
			 * whose selected files are missing */
			rs.refs_behind++;
			continue;
		}
		if (move_visible_ref(&rs, refs[i].name, refs[i].sha) < 0) {
			strbuf_addf(&rs.errors, "%s: cannot move the ref; ", refs[i].name);
			rs.refs_behind++;
		} else if (variant_index_update(rs.rec.id, rs.git, commit_sha) < 0) {
			log_warn("mirror %s: cannot index %s", repo_id, commit_sha);
		}
	}
	apply_deletions(&rs, refs, nrefs);
	variant_index_update(rs.rec.id, rs.git, NULL);
	if (rs.refs_behind == 0)
		db_repo_touch(rs.rec.id);
	ok = rs.errors.len == 0;
	rc = ok ? 0 : KHUB_EIO;
done:
	status_end(&rs, ok);
	progress(&rs, "%s%s\n", ok ? "in sync" : "failed: ", ok ? "" : rs.errors.buf);
	if (!ok)
		log_warn("mirror %s: %s", repo_id, rs.errors.buf);
	if (rs.warnings.len)
		log_warn("mirror %s: %s", repo_id, rs.warnings.buf);
cleanup:
	for (size_t i = 0; i < nrefs; i++)
		free(refs[i].name);
	free(refs);
	git_remote_free(remote);
	git_repository_free(rs.git);
	strbuf_release(&rs.warnings);
	strbuf_release(&rs.errors);
	free(ns);
	run->stats.repos++;
	run->stats.bytes += rs.bytes;
	run->stats.objects += rs.objects;
	if (rc < 0)
		run->stats.errors++;
	return rc;
}

/* ---- namespaces and the repo list ------------------------------------------------- */

/* Copy the upstream org's trustedKernelPublisher unless an admin overrode it. */
static void copy_trust(struct upstream_client *client, const struct mirror_upstream *up, const char *ns)
{
	static const char *const kinds[] = { "organizations", "users" };
	for (size_t k = 0; k < 2; k++) {
		char *url = xasprintf("%s/api/%s/%s/overview", up->url, kinds[k], ns);
		json_t *doc = NULL;
		long status;
		int rc = upstream_get_json(client, url, &doc, &status, NULL);
		free(url);
		if (rc == 0 && json_is_object(doc)) {
			int trusted = json_is_true(json_object_get(doc, "trustedKernelPublisher"));
			const char *params[2] = { ns, trusted ? "true" : "false" };
			PQclear(db_exec("UPDATE accounts SET trusted_kernel_publisher = $2"
					" WHERE lower(name) = lower($1) AND trust_override IS NULL"
					" AND trusted_kernel_publisher <> $2::boolean", 2, params, NULL));
			json_decref(doc);
			return;
		}
		json_decref(doc);
	}
}

static int has_glob(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

/* Upstream repo ids matching a pattern "ns/glob" (listing by author). */
static void list_matching(struct upstream_client *client, const struct mirror_upstream *up,
			  const struct mirror_selection *sel, const char *pattern, char ***ids, size_t *n)
{
	char *ns = xstrndup(pattern, (size_t)(strchr(pattern, '/') - pattern));
	char *url = xasprintf("%s/api/%s?author=%s&limit=500", up->url, repo_type_plural(sel->type), ns);
	while (url) {
		json_t *doc = NULL;
		long status;
		char *next = NULL;
		int rc = upstream_get_json(client, url, &doc, &status, &next);
		free(url);
		url = next;
		if (rc < 0 || !json_is_array(doc)) {
			log_warn("mirror: cannot list %s repos of %s (HTTP %ld)", repo_type_name(sel->type), ns, status);
			json_decref(doc);
			break;
		}
		size_t i;
		json_t *item;
		json_array_foreach(doc, i, item) {
			const char *id = json_string_value(json_object_get(item, "id"));
			if (!id || fnmatch(pattern, id, FNM_CASEFOLD) != 0)
				continue;
			*ids = xrealloc(*ids, (*n + 1) * sizeof(char *));
			(*ids)[(*n)++] = xstrdup(id);
		}
		json_decref(doc);
	}
	free(url);
	free(ns);
}

int mirror_sync_selection(struct mirror_run *run, const struct mirror_selection *sel, const char *only_repo)
{
	const struct mirror_upstream *up = mirror_config_upstream(run->cfg, sel->upstream);
	char *token = mirror_upstream_token(up);
	struct upstream_client *client = upstream_client_new(up, token);
	free(token);
	char **ids = NULL, **namespaces = NULL;
	size_t nids = 0, nns = 0;
	for (size_t i = 0; i < sel->nrepos; i++) {
		if (has_glob(sel->repos[i]))
			list_matching(client, up, sel, sel->repos[i], &ids, &nids);
		else {
			ids = xrealloc(ids, (nids + 1) * sizeof(char *));
			ids[nids++] = xstrdup(sel->repos[i]);
		}
	}
	for (size_t i = 0; i < nids; i++) {
		if (only_repo && strcasecmp(only_repo, ids[i]) != 0)
			continue;
		int seen = 0;
		for (size_t k = 0; k < i && !seen; k++)
			seen = strcasecmp(ids[k], ids[i]) == 0;
		if (seen)
			continue;
		/* the namespace (and its trust flag) first, once per run */
		char *ns = xstrndup(ids[i], (size_t)(strchr(ids[i], '/') - ids[i]));
		int known = 0;
		for (size_t k = 0; k < nns && !known; k++)
			known = strcasecmp(namespaces[k], ns) == 0;
		if (!known) {
			struct account acct;
			if (db_account_get(ns, &acct) == KHUB_ENOTFOUND)
				db_account_create(ACCOUNT_ORG, ns, ns, 0, NULL);
			copy_trust(client, up, ns);
			namespaces = xrealloc(namespaces, (nns + 1) * sizeof(char *));
			namespaces[nns++] = ns;
		} else {
			free(ns);
		}
		sync_repo(run, sel, client, ids[i]);
	}
	for (size_t i = 0; i < nids; i++)
		free(ids[i]);
	free(ids);
	for (size_t i = 0; i < nns; i++)
		free(namespaces[i]);
	free(namespaces);
	log_info("mirror %s: %" PRIu64 " upstream requests", sel->name, upstream_requests(client));
	upstream_client_free(client);
	return 0;
}

int mirror_lazy_fetch(int64_t repo_id, const char *commit_sha, const char *path, const char *oid, uint64_t size,
		      struct lfs_store *lfs)
{
	char id[24];
	snprintf(id, sizeof(id), "%" PRId64, repo_id);
	const char *params[1] = { id };
	PGresult *res = db_exec("SELECT m.upstream_url, m.upstream_repo, m.token_env, m.token_file, m.lazy, r.type"
				" FROM mirror_repos m JOIN repos r ON r.id = m.repo_id WHERE m.repo_id = $1",
				1, params, NULL);
	if (!res)
		return KHUB_EDB;
	if (PQntuples(res) != 1 || PQgetvalue(res, 0, 4)[0] != 't') {
		PQclear(res);
		return KHUB_ENOTFOUND;
	}
	struct mirror_upstream up = { 0 };
	up.name = "lazy";
	up.url = PQgetvalue(res, 0, 0);
	up.token_env = PQgetisnull(res, 0, 2) ? NULL : PQgetvalue(res, 0, 2);
	up.token_file = PQgetisnull(res, 0, 3) ? NULL : PQgetvalue(res, 0, 3);
	up.concurrency = 1;
	up.max_retries = 1;	/* a client is waiting: fail fast */
	up.request_timeout = 30;
	enum repo_type type = REPO_KERNEL;
	repo_type_parse(PQgetvalue(res, 0, 5), &type);
	char *token = mirror_upstream_token(&up);
	struct upstream_client *client = upstream_client_new(&up, token);
	struct strbuf url = STRBUF_INIT;
	strbuf_addf(&url, "%s/%s%s/resolve/%s/", up.url, repo_type_url_prefix(type), PQgetvalue(res, 0, 1), commit_sha);
	strbuf_add_urlencoded(&url, path, 1);
	uint64_t transferred = 0;
	int rc = upstream_fetch_lfs(client, url.buf, oid, size, lfs, &transferred);
	if (rc == 0)
		db_lfs_link(repo_id, oid);
	if (rc == 0)
		log_info("mirror: fetched %s (%s, %" PRIu64 " bytes) on first request", path, oid, transferred);
	if (transferred > 0) {	/* lazy bytes crossed the network too: count them */
		char bytes[24], objects[4];
		snprintf(bytes, sizeof(bytes), "%" PRIu64, transferred);
		snprintf(objects, sizeof(objects), "%d", rc == 0);
		const char *p3[3] = { id, bytes, objects };
		PQclear(db_exec("UPDATE mirror_repos SET bytes_total = bytes_total + $2::bigint,"
				" objects_total = objects_total + $3::bigint WHERE repo_id = $1", 3, p3, NULL));
	}
	strbuf_release(&url);
	upstream_client_free(client);
	free(token);
	PQclear(res);
	return rc;
}
