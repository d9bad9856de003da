/* builds_output.c -- PUT /api/builds/{id}/output: the worker's tar is
 * spooled to a temporary file, then checked and published by the farm on
 * a background thread (farm/build_output.c, farm/build_publish.c), which
 * may wait for the repo's lock; the request waits parked and answers with
 * the job's final state. */
#include "api/builds.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct output_state {
	int64_t id;
	int fd;
	char *path;		/* owned until handed to the job */
	uint64_t size;
	int too_large, write_error;
};

static int output_begin(struct request *req)
{
	enum MHD_Result result;
	int64_t id;
	if (build_id_from_request(req, &id, &result) < 0 || build_require_lease(req, id, &result) < 0)
		return -1;
	struct output_state *st = xcalloc(1, sizeof(*st));
	req->stream_state = st;
	st->id = id;
	st->path = xasprintf("%s/output-%" PRId64 "-XXXXXX", farm_settings.tmp_dir, id);
	st->fd = mkstemp(st->path);
	if (st->fd < 0) {
		respond_err(req, khub_err_from_errno(errno), "cannot store the output");
		free(st->path);
		st->path = NULL;
		return -1;
	}
	return 0;
}

static int output_data(struct request *req, const char *data, size_t len)
{
	struct output_state *st = req->stream_state;
	st->size += len;
	if (st->size > (uint64_t)farm_settings.output_max_bytes) {
		st->too_large = 1;
		return -1;
	}
	while (len > 0) {
		ssize_t n = write(st->fd, data, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			st->write_error = khub_err_from_errno(errno);
			return -1;
		}
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

static void output_cleanup(struct request *req)
{
	struct output_state *st = req->stream_state;
	if (!st)
		return;
	if (st->fd >= 0)
		close(st->fd);
	if (st->path)
		unlink(st->path);
	free(st->path);
	free(st);
	req->stream_state = NULL;
}

static enum MHD_Result handle_output(struct request *req)
{
	struct output_state *st = req->stream_state;
	if (st->too_large || st->write_error) {
		if (st->write_error)
			return respond_err(req, st->write_error, "cannot store the output");
		build_job_refuse(st->id, req->principal.worker_id, "the output tar is larger than build_output_max_mb",
				 NULL);
		return respond_error(req, 413, NULL, "the output is larger than %ld bytes", farm_settings.output_max_bytes);
	}
	/* the tar is the job's now (it syncs it); a rerun after parking joins it */
	char *path = NULL;
	if (st->path && st->fd >= 0) {
		path = st->path;
		st->path = NULL;
	}
	struct farm_job job;
	build_publish_job(st->id, req->principal.worker_id, req->principal.name, path, &job);
	int job_rc = 0;
	enum MHD_Result result;
	int rc = builds_run_job(req, WORK_POOL_MAIN, &job, &job_rc, &result);
	if (rc != 0)
		return result;
	struct build_row b;
	builds_log_changed(st->id);	/* published or refused: its followers end */
	if (job_rc == KHUB_EDB || db_build_get(st->id, &b) < 0)
		return respond_db_unavailable(req);
	const char *state = b.state;
	if (strcmp(state, "succeeded") == 0 || strcmp(state, "staged") == 0)	/* staged: on a campaign's PR */
		result = respond_json(req, 200, json_pack("{s:s, s:s, s:s, s:s?}", "state", state, "branch",
							  b.branch ? b.branch : "", "commit",
							  b.published ? b.published : "", "note", b.note));
	else if (strcmp(state, "failed") == 0)
		result = respond_json(req, 422, json_pack("{s:s, s:s}", "state", state, "error",
							  b.error ? b.error : ""));
	else if (job_rc == KHUB_ENOSPC)
		result = respond_storage_full(req, "the repository");
	else
		result = respond_json(req, job_rc < 0 ? 500 : 409,
				      json_pack("{s:s, s:s}", "error", job_rc < 0 ? "the output could not be published"
						: "the build is no longer this worker's", "state", state));
	build_row_release(&b);
	return result;
}

static const struct stream_ops output_stream_ops = { output_begin, output_data, output_cleanup };

const struct route build_output_routes[] = {
	{ METHOD_PUT, "/api/builds/{arg}/output", handle_output, 0, 0, &output_stream_ops, ACCESS_WORKER },
	{ 0, NULL, NULL, 0, 0 },
};
