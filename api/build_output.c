/* build_output.c -- PUT /api/builds/{id}/output: the worker's tar is
 * spooled to a temporary file, checked (layout, paths, sizes, metadata,
 * ABI policy) and published on a background thread (api/build_publish.c),
 * which may wait for the repo's lock; the request waits parked and answers
 * with the job's final state. */
#include "api/builds.h"
#include "api/build_output.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OUTPUT_MAX_ENTRIES 100000
#define REPORT_MAX_BYTES (16 * 1024 * 1024)
#define README_MAX_BYTES (1024 * 1024)

void build_output_release(struct build_output *out)
{
	if (!out)
		return;
	json_decref(out->report);
	free(out->metadata);
	free(out->report_text);
	free(out->readme);
	memset(out, 0, sizeof(*out));
}

int build_output_open(const char *path, struct archive **out)
{
	struct archive *ar = archive_read_new();
	archive_read_support_format_tar(ar);
	archive_read_support_format_gnutar(ar);
	archive_read_support_filter_none(ar);
	if (archive_read_open_filename(ar, path, 65536) != ARCHIVE_OK) {
		archive_read_free(ar);
		return KHUB_EINVAL;
	}
	*out = ar;
	return 0;
}

/* A tar member's name without a leading "./" and trailing "/"; NULL when
 * absolute, empty, or holding "." or ".." components or NUL tricks. */
char *build_output_clean_path(const char *raw)
{
	if (!raw || raw[0] == '/')
		return NULL;
	while (raw[0] == '.' && raw[1] == '/')
		raw += 2;
	char *p = xstrdup(raw);
	size_t len = strlen(p);
	while (len > 0 && p[len - 1] == '/')
		p[--len] = '\0';
	const char *why;
	if (!len || strstr(p, "//") || repo_path_validate(p, &why) < 0) {
		free(p);
		return NULL;
	}
	for (char *seg = p; seg; seg = strchr(seg, '/') ? strchr(seg, '/') + 1 : NULL) {
		size_t n = strcspn(seg, "/");
		if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.')) {
			free(p);
			return NULL;
		}
	}
	return p;
}

/* Read a member's bytes whole (at most limit): the caller frees. */
char *build_output_read_member(struct archive *ar, int64_t size, size_t limit, size_t *len)
{
	if (size < 0 || (uint64_t)size > limit)
		return NULL;
	char *buf = xmalloc((size_t)size + 1);
	la_ssize_t got = 0, n;
	while (got < size && (n = archive_read_data(ar, buf + got, (size_t)(size - got))) > 0)
		got += n;
	if (got != size) {
		free(buf);
		return NULL;
	}
	buf[size] = '\0';
	*len = (size_t)size;
	return buf;
}

#define REFUSE(...) do { snprintf(why, why_size, __VA_ARGS__); rc = KHUB_EINVAL; goto cleanup; } while (0)

long build_toml_version(const char *text)
{
	int in_general = 0;
	for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		while (*line == ' ' || *line == '\t')
			line++;
		if (*line == '[')
			in_general = strncmp(line, "[general]", 9) == 0;
		else if (in_general && strncmp(line, "version", 7) == 0) {
			const char *v = line + 7 + strspn(line + 7, " \t");
			if (*v == '=')
				return strtol(v + 1 + strspn(v + 1, " \t"), NULL, 10);
		}
	}
	return -1;
}

int build_output_check(const char *path, const char *variant, const char *build_toml, struct build_output *out,
		       char *why, size_t why_size)
{
	struct archive *ar = NULL;
	struct archive_entry *e;
	char *name = NULL;
	int rc = 0, r;
	size_t vlen = strlen(variant);
	memset(out, 0, sizeof(*out));
	if (build_output_open(path, &ar) < 0)
		REFUSE("the output is not a tar archive");
	while ((r = archive_read_next_header(ar, &e)) == ARCHIVE_OK) {
		const char *raw = archive_entry_pathname(e);
		if (archive_entry_filetype(e) == AE_IFDIR && raw && (strcmp(raw, ".") == 0 || strcmp(raw, "./") == 0))
			continue;	/* the top of `tar -C dir .` */
		free(name);
		name = build_output_clean_path(raw);
		if (!name)
			REFUSE("bad path in the output: '%.200s' (absolute, empty, '.', '..' or not a repo path)",
			       archive_entry_pathname(e) ? archive_entry_pathname(e) : "");
		if (++out->entries > OUTPUT_MAX_ENTRIES)
			REFUSE("more than %d entries in the output", OUTPUT_MAX_ENTRIES);
		mode_t type = archive_entry_filetype(e);
		int in_variant = strncmp(name, variant, vlen) == 0 && (name[vlen] == '/' || name[vlen] == '\0');
		if (type == AE_IFDIR) {
			if (!in_variant)
				REFUSE("'%.200s' is not the variant's directory (%s/)", name, variant);
			continue;
		}
		if (type != AE_IFREG || archive_entry_hardlink(e))
			REFUSE("'%.200s' is not a regular file (links and devices are refused)", name);
		int64_t size = archive_entry_size(e);
		if (size < 0 || size > api_ctx.builds.output_max_bytes)
			REFUSE("'%.200s' is too large", name);
		size_t len = 0;
		if (in_variant && name[vlen] == '/') {
			out->files++;
			if (strcmp(name + vlen, "/metadata.json") == 0 &&
			    !(out->metadata = build_output_read_member(ar, size, METADATA_MAX_BYTES, &out->metadata_len)))
				REFUSE("%s/metadata.json is unreadable or larger than %d bytes", variant, METADATA_MAX_BYTES);
		} else if (strcmp(name, "abi-report.json") == 0) {
			if (!(out->report_text = build_output_read_member(ar, size, REPORT_MAX_BYTES, &len)))
				REFUSE("abi-report.json is unreadable or too large");
		} else if (strcmp(name, "README.md") == 0) {
			if (!(out->readme = build_output_read_member(ar, size, README_MAX_BYTES, &out->readme_len)))
				REFUSE("README.md is unreadable or larger than %d bytes", README_MAX_BYTES);
		} else {
			REFUSE("'%.200s' is outside %s/ (the output holds %s/, abi-report.json and README.md)", name,
			       variant, variant);
		}
	}
	if (r != ARCHIVE_EOF)
		REFUSE("the output tar is damaged: %.200s", archive_error_string(ar) ? archive_error_string(ar) : "");
	if (!out->files)
		REFUSE("the output has no files under %s/", variant);
	if (!out->metadata)
		REFUSE("%s/metadata.json is missing", variant);
	struct variant_check c;
	variant_check_init(&c, variant);
	variant_check_metadata(&c, out->metadata, out->metadata_len);
	if (!c.name_valid || c.metadata_status != VARIANT_METADATA_OK || !c.has_kernel_version || c.kernel_version < 1) {
		snprintf(why, why_size, "%s/metadata.json: %s", variant,
			 !c.name_valid ? c.name_error : c.metadata_error[0] ? c.metadata_error : "no integer version >= 1");
		variant_check_release(&c);
		rc = KHUB_EINVAL;
		goto cleanup;
	}
	out->version = (long)c.kernel_version;
	variant_check_release(&c);
	long source_version = build_toml ? build_toml_version(build_toml) : -1;
	if (source_version >= 0 && source_version != out->version)
		REFUSE("%s/metadata.json has version %ld but the source's build.toml says %ld", variant, out->version,
		       source_version);
	if (out->report_text) {
		out->report = json_loads(out->report_text, 0, NULL);
		if (!json_is_object(out->report) || !json_is_boolean(json_object_get(out->report, "ok")))
			REFUSE("abi-report.json is not an object with a boolean \"ok\"");
	}
cleanup:
	free(name);
	if (ar)
		archive_read_free(ar);
	return rc;
}

/* ---- the request ------------------------------------------------------------------- */

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
	st->path = xasprintf("%s/output-%" PRId64 "-XXXXXX", api_ctx.builds.tmp_dir, id);
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
	if (st->size > (uint64_t)api_ctx.builds.output_max_bytes) {
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

static void job_free(void *arg)
{
	struct build_publish_job *job = arg;
	if (job->path)
		unlink(job->path);
	free(job->path);
	free(job);
}

static enum MHD_Result handle_output(struct request *req)
{
	struct output_state *st = req->stream_state;
	if (st->too_large || st->write_error) {
		if (st->write_error)
			return respond_err(req, st->write_error, "cannot store the output");
		db_build_finish(st->id, req->principal.worker_id, 0, "the output tar is larger than build_output_max_mb",
				NULL, NULL, NULL, NULL);
		return respond_error(req, 413, NULL, "the output is larger than %ld bytes", api_ctx.builds.output_max_bytes);
	}
	struct build_publish_job *job = xcalloc(1, sizeof(*job));
	job->id = st->id;
	job->worker_id = req->principal.worker_id;
	snprintf(job->worker, sizeof(job->worker), "%s", req->principal.name);
	if (st->path && st->fd >= 0) {
		job->path = st->path;	/* the job's now (it syncs it); a rerun after parking joins it */
		st->path = NULL;
	}
	char key[48];
	snprintf(key, sizeof(key), "build-output/%" PRId64, st->id);
	int job_rc = 0;
	enum MHD_Result result;
	int rc = work_queue_run(req, key, build_publish_run, job, job_free, &job_rc, &result);
	if (rc != 0)
		return result;
	struct db_rows rows;
	if (job_rc == KHUB_EDB || db_build_get(st->id, &rows) < 0)
		return respond_db_unavailable(req);
	const char *state = db_rows_get(&rows, 0, BUILD_COL_STATE);
	if (strcmp(state, "succeeded") == 0)
		result = respond_json(req, 200, json_pack("{s:s, s:s, s:s, s:s?}", "state", state, "branch",
							  db_rows_get(&rows, 0, BUILD_COL_BRANCH), "commit",
							  db_rows_get(&rows, 0, BUILD_COL_PUBLISHED), "note",
							  db_rows_isnull(&rows, 0, BUILD_COL_NOTE) ? NULL
							  : db_rows_get(&rows, 0, BUILD_COL_NOTE)));
	else if (strcmp(state, "failed") == 0)
		result = respond_json(req, 422, json_pack("{s:s, s:s}", "state", state, "error",
							  db_rows_get(&rows, 0, BUILD_COL_ERROR)));
	else if (job_rc == KHUB_ENOSPC)
		result = respond_storage_full(req, "the repository");
	else
		result = respond_json(req, job_rc < 0 ? 500 : 409,
				      json_pack("{s:s, s:s}", "error", job_rc < 0 ? "the output could not be published"
						: "the build is no longer this worker's", "state", state));
	db_rows_release(&rows);
	return result;
}

static const struct stream_ops output_stream_ops = { output_begin, output_data, output_cleanup };

const struct route build_output_routes[] = {
	{ METHOD_PUT, "/api/builds/{arg}/output", handle_output, 0, 0, &output_stream_ops, ACCESS_WORKER },
	{ 0, NULL, NULL, 0, 0 },
};
