/* pull_refs.c -- a mirrored repo's refs: list the upstream's and fetch
 * their objects into hidden staging refs (each libgit2 network step in a
 * child process under a deadline: libgit2 1.5 has no network timeout),
 * then move or delete the visible refs per policy. */
#include "mirror/pull_internal.h"
#include "storage/publish/publish.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- refs ----------------------------------------------------------------------- */

static int list_upstream_refs(struct repo_pull *rp, git_remote *remote, struct upstream_ref **out, size_t *n)
{
	const git_remote_head **heads;
	size_t count;
	git_remote_callbacks callbacks;
	git_remote_init_callbacks(&callbacks, GIT_REMOTE_CALLBACKS_VERSION);
	if (git_remote_connect(remote, GIT_DIRECTION_FETCH, &callbacks, NULL, upstream_git_headers(rp->client)) < 0 ||
	    git_remote_ls(&heads, &count, remote) < 0) {
		const git_error *e = git_error_last();
		strbuf_addf(&rp->errors, "cannot list upstream refs: %s; ", e ? e->message : "?");
		return KHUB_EIO;
	}
	*out = xcalloc(count + 1, sizeof(**out));
	*n = 0;
	for (size_t i = 0; i < count; i++) {
		const char *name = heads[i]->name;
		size_t len = strlen(name);
		if (len > 3 && strcmp(name + len - 3, "^{}") == 0)
			continue;	/* peeled tag lines */
		if (!pull_ref_selected(rp->sel, name))
			continue;
		(*out)[*n].name = xstrdup(name);
		git_oid_tostr((*out)[*n].sha, 41, &heads[i]->oid);
		(*n)++;
	}
	git_remote_disconnect(remote);
	return 0;
}

int pull_local_ref(git_repository *git, const char *name, char sha[41])
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
static int fetch_objects(struct repo_pull *rp, git_remote *remote, struct upstream_ref *refs, size_t n)
{
	char **specs = xcalloc(n + 1, sizeof(char *));
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		char staged[41];
		char *sname = staging_name(refs[i].name);
		/* staging already at the upstream sha: its objects are here */
		if (!(pull_local_ref(rp->git, sname, staged) == 0 && strcmp(staged, refs[i].sha) == 0))
			specs[k++] = xasprintf("+%s:%s", refs[i].name, sname);
		free(sname);
	}
	int rc = 0;
	if (k > 0) {
		pull_progress(rp, "fetching git objects for %zu refs", k);
		git_fetch_options opts;
		git_fetch_options_init(&opts, GIT_FETCH_OPTIONS_VERSION);
		if (upstream_git_headers(rp->client))
			opts.custom_headers = *upstream_git_headers(rp->client);
		opts.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
		opts.update_fetchhead = 0;
		git_strarray arr = { specs, k };
		if (git_remote_fetch(remote, &arr, &opts, "khub mirror") < 0) {
			const git_error *e = git_error_last();
			strbuf_addf(&rp->errors, "git fetch failed: %s; ", e ? e->message : "?");
			rc = KHUB_EIO;
		}
	}
	free_strings(specs, k);
	return rc;
}

int pull_move_visible_ref(struct repo_pull *rp, const char *name, const char *sha)
{
	char current[41];
	int exists = pull_local_ref(rp->git, name, current) == 0;
	if (exists && strcmp(current, sha) == 0)
		return 0;
	if (exists && rp->sel->policy == POLICY_KEEP) {
		git_oid a, b;
		git_oid_fromstr(&a, sha);
		git_oid_fromstr(&b, current);
		if (git_graph_descendant_of(rp->git, &a, &b) != 1) {
			strbuf_addf(&rp->warnings, "%s was force-pushed upstream (%.12s -> %.12s): kept %.12s (policy keep); ",
				    name, current, sha, current);
			rp->run->stats.refs_kept++;
			return 0;
		}
	}
	/* the after-move steps every writer runs: touch, index, audit, cache
	 * invalidation */
	static const struct publish_actor mirror_actor = { 0, "mirror", NULL, "mirror" };
	struct repo_import_ref move = { name, exists ? current : NULL, sha, "khub mirror" };
	json_t *d = json_pack("{s:s, s:s}", "ref", name, "new", sha);	/* a ref name may hold a quote */
	char *details = d ? json_dumps(d, JSON_COMPACT) : NULL;
	int rc = repo_import_move_ref(rp->rec.id, rp->git, &move, &mirror_actor, "mirror.ref", rp->upstream_repo,
				      details);
	json_decref(d);
	free(details);
	if (rc == 0)
		rp->run->stats.refs_moved++;
	return rc;
}

/* Visible refs inside the selection that upstream no longer has. */
void pull_apply_deletions(struct repo_pull *rp, struct upstream_ref *refs, size_t n)
{
	git_reference_iterator *it = NULL;
	git_reference *ref;
	if (git_reference_iterator_new(&it, rp->git) < 0)
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
		} else if (pull_ref_selected(rp->sel, name)) {
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
		if (rp->sel->policy == POLICY_KEEP) {
			strbuf_addf(&rp->warnings, "%s was deleted upstream: kept (policy keep); ", name);
			rp->run->stats.refs_kept++;
		} else {
			struct repo_import_ref del = { name, NULL, NULL, "khub mirror" };
			if (repo_import_move_ref(rp->rec.id, rp->git, &del, NULL, NULL, NULL, NULL) == 0)
				rp->run->stats.refs_moved++;
		}
	}
	strbuf_release(&gone);
}

/* ---- libgit2's network steps, under a deadline --------------------------------- */

/* libgit2 1.5 has no network timeout: an upstream that accepts a
 * connection and never answers would hang the pull. Each network step
 * runs in a child process that reports on a pipe ("R <sha> <ref>" lines,
 * "E <message>" on failure); the parent stops waiting at the deadline.
 * The child runs libgit2, not a program, so this is a plain fork, not
 * spawn_process: it is safe because only the mirror role (`khub mirror`,
 * never the threaded server) gets here, from the one thread that pulls,
 * while no other thread of its own runs (pull_lfs.c joins its workers
 * before a repo's git steps, and the role starts no watchdog): no lock the
 * child needs can be held by a thread missing in the child. glibc keeps
 * malloc and stdio usable after fork, and log.c takes its lock across fork
 * so the child may log. The child never touches the database connection. */
static void child_report(int fd, const char *line)
{
	(void)write_all(fd, line, strlen(line));
}

int pull_run_git_step(struct repo_pull *rp, git_remote *remote, enum net_step step,
			     struct upstream_ref **refs, size_t *nrefs)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) < 0) {
		strbuf_addf(&rp->errors, "cannot create a pipe; ");
		return KHUB_EIO;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		strbuf_addf(&rp->errors, "cannot fork; ");
		return KHUB_EIO;
	}
	if (pid == 0) {
		/* the child: libgit2 only, never the database connection */
		close(fds[0]);
		struct strbuf out = STRBUF_INIT;
		int rc;
		if (step == STEP_LIST) {
			rc = list_upstream_refs(rp, remote, refs, nrefs);
			for (size_t i = 0; rc == 0 && i < *nrefs; i++)
				strbuf_addf(&out, "R %s %s\n", (*refs)[i].sha, (*refs)[i].name);
		} else {
			rc = fetch_objects(rp, remote, *refs, *nrefs);
		}
		if (rc < 0)
			strbuf_addf(&out, "E %s\n", rp->errors.len ? rp->errors.buf : "failed");
		child_report(fds[1], out.buf ? out.buf : "");
		_exit(rc < 0 ? 1 : 0);
	}
	close(fds[1]);
	struct strbuf in = STRBUF_INIT;
	uint64_t deadline = monotonic_usec() + (uint64_t)rp->sel->git_timeout * 1000000u;
	int timed_out = read_until_deadline(fds[0], deadline, 0, &in) == 1;
	close(fds[0]);
	int status = 0;
	if (timed_out)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	int rc = 0;
	if (timed_out) {
		strbuf_addf(&rp->errors, "the upstream did not answer the git %s within %ld s; ",
			    step == STEP_LIST ? "ref advertisement" : "fetch", rp->sel->git_timeout);
		rc = KHUB_EIO;
	} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		const char *e = in.buf ? strstr(in.buf, "E ") : NULL;
		strbuf_addf(&rp->errors, "%s", e ? e + 2 : "the git step failed; ");
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
