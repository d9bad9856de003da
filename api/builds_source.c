/* builds_source.c -- GET /api/builds/{id}/source: the tree of the job's
 * commit as a tar, LFS pointers replaced by their stored content, for the
 * worker holding the lease. The tar is made on the work queue and kept on
 * disk (farm/build_source_cache.c); this handler only checks, waits parked
 * and streams the file. */
#include "api/builds.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static enum MHD_Result respond_tar(struct request *req, int fd, uint64_t size, const char *sha)
{
	struct answer a;
	answer_init(&a, 200);
	answer_header(&a, "Content-Type", "application/x-tar");
	answer_header(&a, "X-Source-Commit", sha);
	answer_body_file(&a, fd, 0, size);
	return answer_send(req, &a);
}

/* The tree of the job's commit (variant: a benchmark job's variant_commit,
 * the published tree with build/<variant>/). */
static enum MHD_Result send_tree(struct request *req, int variant)
{
	enum MHD_Result result;
	int64_t id;
	struct build_row b;
	/* checked again on every resumption: the lease may lapse meanwhile */
	if (build_id_from_request(req, &id, &result) < 0 || build_require_lease(req, id, &result) < 0)
		return result;
	if (db_build_get(id, &b) < 0)
		return respond_db_unavailable(req);
	if (variant && !b.variant_commit) {
		build_row_release(&b);
		return respond_error(req, 404, NULL, "build %" PRId64 " is no benchmark job: it has no variant tree", id);
	}
	if (variant) {	/* the tar of that commit, made and cached as a source's */
		free(b.commit);
		b.commit = xstrdup(b.variant_commit);
	}
	char sha[41];
	snprintf(sha, sizeof(sha), "%s", b.commit);
	int64_t repo_id = b.repo_id;
	int fd;
	uint64_t size;
	if (!req->work_job_id && build_source_cache_open(repo_id, sha, 1, &fd, &size) == 0) {
		build_row_release(&b);
		return respond_tar(req, fd, size, sha);
	}
	int job_rc = 0;
	struct farm_job job;
	build_source_make_job(&b, &job);
	int rc = builds_run_job(req, WORK_POOL_MAIN, &job, &job_rc, &result);
	build_row_release(&b);
	if (rc != 0)
		return result;	/* parked, or 503 (queue full, past work_wait_ms) */
	if (job_rc == KHUB_ENOSPC)
		return respond_storage_full(req, "the build's source");
	if (job_rc == KHUB_EDB)
		return respond_db_unavailable(req);
	if (job_rc < 0)
		return respond_error(req, job_rc == KHUB_ENOTFOUND ? 404 : 500, NULL,
				     "cannot make the source of build %" PRId64, id);
	/* the tar this request waited for (a partial one too: made for it) */
	if (build_source_cache_open(repo_id, sha, 0, &fd, &size) < 0)
		return respond_unavailable(req, "the source of build %" PRId64 " was removed from the cache; retry", id);
	return respond_tar(req, fd, size, sha);
}

static enum MHD_Result handle_source(struct request *req)
{
	return send_tree(req, 0);
}

static enum MHD_Result handle_variant(struct request *req)
{
	return send_tree(req, 1);
}

const struct route build_source_routes[] = {
	{ METHOD_GET, "/api/builds/{arg}/source", handle_source, 0, 0, NULL, ACCESS_WORKER },
	{ METHOD_GET, "/api/builds/{arg}/variant", handle_variant, 0, 0, NULL, ACCESS_WORKER },
	{ 0, NULL, NULL, 0, 0 },
};
