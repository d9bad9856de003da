/* build_external.c -- builds of an external git source: the server
 * fetches the URL (http, https or git) with libgit2 into
 * {data_dir}/build-sources/<hash>.git on a background thread, and the
 * worker gets that commit from GET /api/builds/{id}/source as usual. */
#include "api/builds.h"

#include <stdlib.h>
#include <string.h>

#define SOURCE_URL_MAX 2048

int build_source_url_valid(const char *url)
{
	size_t n = url ? strlen(url) : 0;
	if (n == 0 || n > SOURCE_URL_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)url[i] <= ' ' || url[i] == 0x7f)
			return 0;
	return strncmp(url, "https://", 8) == 0 || strncmp(url, "http://", 7) == 0 || strncmp(url, "git://", 6) == 0;
}

int build_source_revision_valid(const char *rev)
{
	return rev && ((strlen(rev) == 40 && is_lower_hex(rev, 40)) || ref_name_validate(rev, NULL) == 0);
}

char *build_source_dir(const char *url)
{
	char hash[65];
	sha256_hex(url, strlen(url), hash);
	return xasprintf("%s/%.24s.git", api_ctx.builds.sources_dir, hash);
}

int build_source_open(const char *url, git_repository **out)
{
	char *dir = build_source_dir(url);
	int rc = git_repository_open_bare(out, dir) < 0 ? KHUB_ENOTFOUND : 0;
	free(dir);
	return rc;
}

int build_source_resolve(git_repository *git, const char *revision, char sha[41])
{
	static const char *const prefixes[] = { "refs/khub/heads/", "refs/khub/tags/" };
	git_object *obj = NULL, *peeled = NULL;
	int rc = KHUB_ENOTFOUND;
	if (strlen(revision) == 40 && is_lower_hex(revision, 40)) {
		git_oid oid;
		git_commit *c = NULL;
		if (git_oid_fromstr(&oid, revision) == 0 && git_commit_lookup(&c, git, &oid) == 0) {
			memcpy(sha, revision, 41);
			rc = 0;
		}
		git_commit_free(c);
		return rc;
	}
	for (size_t i = 0; i < 2 && rc < 0; i++) {
		char *ref = xasprintf("%s%s", prefixes[i], revision);
		if (git_revparse_single(&obj, git, ref) == 0 && git_object_peel(&peeled, obj, GIT_OBJECT_COMMIT) == 0) {
			git_oid_tostr(sha, 41, git_object_id(peeled));
			rc = 0;
		}
		git_object_free(peeled);
		git_object_free(obj);
		peeled = obj = NULL;
		free(ref);
	}
	return rc;
}

struct fetch_job {
	char *url;
};

static void fetch_job_free(void *arg)
{
	struct fetch_job *job = arg;
	free(job->url);
	free(job);
}

/* Every branch and tag of the URL into the bare repo (made when missing). */
static int fetch_run(void *arg)
{
	struct fetch_job *job = arg;
	char *dir = build_source_dir(job->url);
	git_repository *git = NULL;
	git_remote *remote = NULL;
	int rc = KHUB_EIO;
	char *refspecs[] = { "+refs/heads/*:refs/khub/heads/*", "+refs/tags/*:refs/khub/tags/*" };
	git_strarray specs = { refspecs, 2 };
	if (mkdir_p(api_ctx.builds.sources_dir, 0755) < 0 ||
	    (git_repository_open_bare(&git, dir) < 0 && git_repository_init(&git, dir, 1) < 0))
		goto cleanup;
	/* the URL as given, never rewritten by url.*.insteadOf (libgit2 1.5
	 * also leaks a regex match per config entry it checks) */
	git_remote_create_options ropts = GIT_REMOTE_CREATE_OPTIONS_INIT;
	ropts.repository = git;
	ropts.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF | GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
	if (git_remote_create_with_opts(&remote, job->url, &ropts) < 0)
		goto cleanup;
	git_fetch_options opts = GIT_FETCH_OPTIONS_INIT;
	if (git_remote_fetch(remote, &specs, &opts, "khub build source") < 0) {
		const git_error *e = git_error_last();
		log_warn("build source %s: fetch failed: %s", job->url, e && e->message ? e->message : "?");
		rc = KHUB_ENOTFOUND;
		goto cleanup;
	}
	rc = 0;
cleanup:
	git_remote_free(remote);
	git_repository_free(git);
	free(dir);
	return rc;
}

int build_source_fetch(struct request *req, const char *url, int *fetch_rc, enum MHD_Result *result)
{
	char hash[65], key[48];
	sha256_hex(url, strlen(url), hash);
	snprintf(key, sizeof(key), "build-source/%.24s", hash);
	struct fetch_job *job = xcalloc(1, sizeof(*job));
	job->url = xstrdup(url);
	return work_queue_run(req, key, fetch_run, job, fetch_job_free, fetch_rc, result);
}

int build_open_job_source(const struct db_rows *rows, size_t row, git_repository **out)
{
	if (!db_rows_isnull(rows, row, BUILD_COL_SOURCE_URL))
		return build_source_open(db_rows_get(rows, row, BUILD_COL_SOURCE_URL), out);
	return repo_store_open(api_ctx.repo_root, REPO_KERNEL, db_rows_get(rows, row, BUILD_COL_NS),
			       db_rows_get(rows, row, BUILD_COL_NAME), out);
}
