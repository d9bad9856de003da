/* commit_parse.c -- the NDJSON commit body as it streams in: header, file
 * (inline base64 decoded straight to disk: a spool file of its own when
 * large, else the commit's content file; a pointer text only to an object
 * linked to the repo), lfsFile (the object must be linked to the repo),
 * deletedFile and deletedFolder lines become operations for publish_apply,
 * which decides what is LFS; the first error is kept. */
#include "api/commit_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int commit_stream_fail(struct commit_stream *cs, int status, const char *code, const char *fmt, ...)
{
	if (cs->err_status)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cs->err, sizeof(cs->err), fmt, ap);
	va_end(ap);
	cs->err_status = status;
	cs->err_code = code;
	return -1;
}

/* A failure of ours while writing: 507 when the disk is full (the client
 * may retry later), 500 otherwise; never a 400. */
static int commit_storage_fail(struct commit_stream *cs, int rc, const char *what)
{
	if (rc == KHUB_ENOSPC)
		return commit_stream_fail(cs, 507, NULL, "insufficient storage: no space left to %s", what);
	return commit_stream_fail(cs, 500, NULL, "cannot %s", what);
}

void commit_line_reset(struct commit_stream *cs)
{
	free(cs->key);
	free(cs->path);
	free(cs->encoding);
	free(cs->oid);
	free(cs->algo);
	free(cs->summary);
	free(cs->description);
	free(cs->parent);
	cs->key = cs->path = cs->encoding = cs->oid = cs->algo = NULL;
	cs->summary = cs->description = cs->parent = NULL;
	cs->have_size = cs->have_content = 0;
	cs->size = 0;
	lfs_writer_abort(cs->spool);
	cs->spool = NULL;
	cs->in_file = 0;
	strbuf_reset(&cs->content_mem);
	cs->head_len = 0;
	cs->content_size = 0;
	strbuf_reset(&cs->raw_text);
	cs->raw_overflow = 0;
	cs->b64_acc = 0;
	cs->b64_bits = cs->b64_data = cs->b64_pad = cs->b64_bad = 0;
	cs->b64_out_len = 0;
}

/* ---- base64 content, decoded as it streams in ----------------------------- */

/* The commit's content file: the contents that have no spool file of
 * their own, one after another (unlinked: it goes with the descriptor). */
static int content_append(struct commit_stream *cs, const void *data, size_t len)
{
	if (!cs->content_fd) {
		char *path = xasprintf("%s/commit-XXXXXX", lfs_store_tmp_dir(api_ctx.lfs));
		int fd = mkostemp(path, O_CLOEXEC);
		int err = errno;
		if (fd >= 0)
			unlink(path);
		free(path);
		if (fd < 0)
			return khub_err_from_errno(err);
		cs->content_fd = fd;
	}
	if (len && write_all(cs->content_fd, data, len) < 0)
		return khub_err_from_errno(errno);
	cs->content_len += len;
	return 0;
}

/* Content past INLINE_MEM_MAX leaves memory: to a spool file of its own
 * while few files have one, else to the content file. */
static int spill(struct commit_stream *cs)
{
	int rc = 0;
	if (cs->nspools < SPOOLS_MAX) {
		if (!(cs->spool = lfs_writer_begin(api_ctx.lfs)))
			rc = khub_err_from_errno(errno);
		else if (cs->content_mem.len)
			rc = lfs_writer_write(cs->spool, cs->content_mem.buf, cs->content_mem.len);
	} else {
		cs->in_file = 1;
		cs->content_at = cs->content_len;
		rc = content_append(cs, cs->content_mem.buf, cs->content_mem.len);
	}
	strbuf_reset(&cs->content_mem);
	return rc;
}

static int spool_flush(struct commit_stream *cs)
{
	if (!cs->b64_out_len)
		return 0;
	size_t take = cs->head_len < HEAD_BYTES ? HEAD_BYTES - cs->head_len : 0;
	if (take > cs->b64_out_len)
		take = cs->b64_out_len;
	memcpy(cs->head + cs->head_len, cs->b64_out, take);
	cs->head_len += take;
	cs->content_size += cs->b64_out_len;
	int rc = 0;
	/* small content stays in memory: no temp file per file */
	if (!cs->spool && !cs->in_file && cs->content_mem.len + cs->b64_out_len <= INLINE_MEM_MAX) {
		strbuf_add(&cs->content_mem, cs->b64_out, cs->b64_out_len);
	} else {
		if (!cs->spool && !cs->in_file)
			rc = spill(cs);
		if (rc == 0)
			rc = cs->spool ? lfs_writer_write(cs->spool, cs->b64_out, cs->b64_out_len)
				       : content_append(cs, cs->b64_out, cs->b64_out_len);
	}
	cs->b64_out_len = 0;
	return rc < 0 ? commit_storage_fail(cs, rc, "spool file content") : 0;
}

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z') return c - 'A';
	if (c >= 'a' && c <= 'z') return c - 'a' + 26;
	if (c >= '0' && c <= '9') return c - '0' + 52;
	if (c == '+') return 62;
	if (c == '/') return 63;
	return -1;
}

static int content_chunk(void *ctx, const char *data, size_t len)
{
	struct commit_stream *cs = ctx;
	if (!cs->raw_overflow) {
		if (cs->raw_text.len + len > RAW_TEXT_MAX) {
			cs->raw_overflow = 1;
			strbuf_release(&cs->raw_text);
		} else {
			strbuf_add(&cs->raw_text, data, len);
		}
	}
	if (cs->b64_bad)
		return 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)data[i];
		if (c == '\n' || c == '\r' || c == ' ')
			continue;
		if (c == '=') {
			cs->b64_pad++;
			continue;
		}
		int v = b64_value(c);
		if (v < 0 || cs->b64_pad) {
			cs->b64_bad = 1;
			return 0;
		}
		cs->b64_data++;
		cs->b64_acc = (cs->b64_acc << 6) | (unsigned)v;
		cs->b64_bits += 6;
		if (cs->b64_bits >= 8) {
			cs->b64_bits -= 8;
			cs->b64_out[cs->b64_out_len++] = (char)((cs->b64_acc >> cs->b64_bits) & 0xff);
			cs->b64_acc &= (1u << cs->b64_bits) - 1;
			if (cs->b64_out_len == sizeof(cs->b64_out) && spool_flush(cs) < 0)
				return -1;
		}
	}
	return 0;
}

static int content_end(void *ctx)
{
	struct commit_stream *cs = ctx;
	cs->have_content = 1;
	size_t total = (size_t)cs->b64_data + (size_t)cs->b64_pad;
	if (cs->b64_pad > 2 || (cs->b64_pad && total % 4) || cs->b64_data % 4 == 1 || cs->b64_acc != 0)
		cs->b64_bad = 1;
	return cs->b64_bad ? 0 : spool_flush(cs);
}

/* ---- JSON events ------------------------------------------------------------- */

static int line_begin(void *ctx)
{
	struct commit_stream *cs = ctx;
	commit_line_reset(cs);
	cs->lines++;
	return 0;
}

static enum json_string_mode string_mode(void *ctx, char keys[][JSON_STREAM_MAX_KEY], int depth)
{
	(void)ctx;
	if (depth == 2 && strcmp(keys[0], "value") == 0 && strcmp(keys[1], "content") == 0)
		return JSON_STRING_STREAM;
	return JSON_STRING_COLLECT;
}

static void keep(char **slot, const char *text)
{
	free(*slot);
	*slot = xstrdup(text);
}

static int on_scalar(void *ctx, char keys[][JSON_STREAM_MAX_KEY], int depth, enum json_scalar kind,
		     const char *text, size_t len)
{
	struct commit_stream *cs = ctx;
	if (kind == JSON_STREAM_STRING && memchr(text, '\0', len))
		return commit_stream_fail(cs, 400, NULL, "line %zu: NUL byte in a string", cs->lines);
	if (depth == 1 && strcmp(keys[0], "key") == 0) {
		if (kind != JSON_STREAM_STRING)
			return commit_stream_fail(cs, 400, NULL, "line %zu: \"key\" must be a string", cs->lines);
		keep(&cs->key, text);
		return 0;
	}
	if (depth != 2 || strcmp(keys[0], "value") != 0)
		return 0;	/* unknown fields are ignored */
	const char *field = keys[1];
	if (strcmp(field, "size") == 0) {
		if (kind == JSON_STREAM_NULL)
			return 0;
		char *end;
		unsigned long long v = strtoull(text, &end, 10);
		if (kind != JSON_STREAM_NUMBER || *end || text[0] == '-')
			return commit_stream_fail(cs, 400, NULL, "line %zu: size must be a non-negative integer", cs->lines);
		cs->size = v;
		cs->have_size = 1;
		return 0;
	}
	if (kind == JSON_STREAM_NULL)
		return 0;
	static const struct { const char *name; size_t offset; } fields[] = {
		{ "path", offsetof(struct commit_stream, path) },
		{ "encoding", offsetof(struct commit_stream, encoding) },
		{ "oid", offsetof(struct commit_stream, oid) },
		{ "algo", offsetof(struct commit_stream, algo) },
		{ "summary", offsetof(struct commit_stream, summary) },
		{ "description", offsetof(struct commit_stream, description) },
		{ "parentCommit", offsetof(struct commit_stream, parent) },
	};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		if (strcmp(field, fields[i].name) != 0)
			continue;
		if (kind != JSON_STREAM_STRING)
			return commit_stream_fail(cs, 400, NULL, "line %zu: value.%s must be a string", cs->lines, field);
		keep((char **)((char *)cs + fields[i].offset), text);
	}
	return 0;
}

/* A new operation (zeroed) at path; NULL once the error is recorded. */
static struct commit_op *add_op(struct commit_stream *cs, enum op_kind kind, const char *path)
{
	if (cs->nops == MAX_OPERATIONS) {
		commit_stream_fail(cs, 400, NULL, "more than %d operations in one commit", MAX_OPERATIONS);
		return NULL;
	}
	if (cs->nops == cs->ops_alloc) {
		cs->ops_alloc = cs->ops_alloc ? cs->ops_alloc * 2 : 64;
		cs->ops = xrealloc(cs->ops, cs->ops_alloc * sizeof(*cs->ops));
	}
	struct commit_op *op = &cs->ops[cs->nops++];
	memset(op, 0, sizeof(*op));
	op->kind = kind;
	op->path = xstrdup(path);
	return op;
}

/* An LFS object linked to the repo (checked) at path. */
static int add_lfs_op(struct commit_stream *cs, const char *path, const struct lfs_pointer *ptr)
{
	struct commit_op *op = add_op(cs, OP_PUT_LFS, path);
	if (!op)
		return -1;
	op->lfs = *ptr;
	return 0;
}

/* A file whose content is the line's: its spool file (taken), or what is
 * in memory or in the content file. */
static int add_content_op(struct commit_stream *cs, const char *data, size_t len)
{
	struct commit_op *op = add_op(cs, OP_PUT, cs->path);
	if (!op)
		return -1;
	if (cs->spool) {
		op->spool = cs->spool;
		cs->spool = NULL;
		cs->nspools++;
		return 0;
	}
	if (!cs->in_file) {
		cs->content_at = cs->content_len;
		int rc = content_append(cs, data, len);
		if (rc < 0)
			return commit_storage_fail(cs, rc, "spool file content");
	}
	op->offset = cs->content_at;
	op->len = cs->content_len - cs->content_at;
	cs->in_file = 0;
	return 0;
}

static int check_path(struct commit_stream *cs, const char *path)
{
	const char *why;
	if (!path)
		return commit_stream_fail(cs, 400, NULL, "line %zu: missing value.path", cs->lines);
	if (repo_path_validate(path, &why) < 0)
		return commit_stream_fail(cs, 400, NULL, "line %zu: invalid path (%s): '%.200s%s'", cs->lines, why, path,
				   strlen(path) > 200 ? "..." : "");
	return 0;
}

/* Inline content that is an LFS pointer text becomes a pointer in the
 * commit: it may only name an object this repo may use (stored and
 * linked), or any writer, or anyone opening a pull request, could point at
 * another repo's private object and read it back through this one.
 * 1 when data is such a pointer (*ptr filled), 0 when it is no pointer,
 * -1 once the error is recorded. */
static int check_inline_pointer(struct commit_stream *cs, const char *data, size_t len, struct lfs_pointer *ptr)
{
	if (lfs_pointer_parse(data, len, ptr) < 0)
		return 0;
	int linked = db_lfs_linked(cs->repo.record.id, ptr->oid);
	if (linked < 0)
		return commit_stream_fail(cs, 503, NULL, "database unavailable");
	uint64_t stored;
	if (!linked || lfs_store_stat(api_ctx.lfs, ptr->oid, &stored) < 0)
		return commit_stream_fail(cs, 400, NULL,
				   "line %zu: the content of %s is an LFS pointer to %s, an object this repo does not "
				   "have; send the file's bytes instead (inline, or uploaded through the LFS batch API "
				   "and named by an lfsFile line)", cs->lines, cs->path, ptr->oid);
	if (stored != ptr->size)
		return commit_stream_fail(cs, 400, NULL, "line %zu: the LFS pointer %s says %" PRIu64 " bytes; LFS object "
				   "%s has %" PRIu64, cs->lines, cs->path, ptr->size, ptr->oid, stored);
	return 1;
}

static int finish_inline_file(struct commit_stream *cs)
{
	struct lfs_pointer inline_ptr;
	int is_pointer;
	if (check_path(cs, cs->path) < 0)
		return -1;
	if (!cs->have_content)
		return commit_stream_fail(cs, 400, NULL, "line %zu: file %s has no value.content", cs->lines, cs->path);
	int utf8 = cs->encoding && strcmp(cs->encoding, "utf-8") == 0;
	if (cs->encoding && !utf8 && strcmp(cs->encoding, "base64") != 0)
		return commit_stream_fail(cs, 400, NULL, "line %zu: unknown encoding '%s'", cs->lines, cs->encoding);
	if (utf8) {
		if (cs->raw_overflow)
			return commit_stream_fail(cs, 413, NULL, "line %zu: utf-8 content over 1 MiB; send it as base64",
					   cs->lines);
		is_pointer = check_inline_pointer(cs, cs->raw_text.buf ? cs->raw_text.buf : "", cs->raw_text.len,
						  &inline_ptr);
		if (is_pointer)
			return is_pointer < 0 ? -1 : add_lfs_op(cs, cs->path, &inline_ptr);
		/* the base64 reading of the text is no content */
		lfs_writer_abort(cs->spool);
		cs->spool = NULL;
		cs->in_file = 0;
		return add_content_op(cs, cs->raw_text.buf, cs->raw_text.len);
	}
	if (cs->b64_bad)
		return commit_stream_fail(cs, 400, NULL, "line %zu: value.content of %s is not valid base64", cs->lines,
				   cs->path);
	/* a pointer is shorter than LFS_POINTER_MAX, so all of it is in head;
	 * a checked one goes in as its canonical text, not as content */
	is_pointer = cs->content_size == cs->head_len ? check_inline_pointer(cs, cs->head, cs->head_len, &inline_ptr) : 0;
	if (is_pointer)
		return is_pointer < 0 ? -1 : add_lfs_op(cs, cs->path, &inline_ptr);
	return add_content_op(cs, cs->content_mem.buf, cs->content_mem.len);
}

static int finish_lfs_file(struct commit_stream *cs)
{
	if (check_path(cs, cs->path) < 0)
		return -1;
	if (cs->algo && strcmp(cs->algo, "sha256") != 0)
		return commit_stream_fail(cs, 400, NULL, "line %zu: algo must be sha256", cs->lines);
	if (!cs->oid || !is_lower_hex(cs->oid, 64))
		return commit_stream_fail(cs, 400, NULL, "line %zu: lfsFile %s needs a 64-hex sha256 oid", cs->lines, cs->path);
	uint64_t stored;
	/* the bytes must have been uploaded for this repo: knowing a sha256
	 * is not a right to another repo's object */
	int linked = db_lfs_linked(cs->repo.record.id, cs->oid);
	if (linked < 0)
		return commit_stream_fail(cs, 503, NULL, "database unavailable");
	if (!linked || lfs_store_stat(api_ctx.lfs, cs->oid, &stored) < 0)
		return commit_stream_fail(cs, 422, NULL,
				   "line %zu: LFS object %s (for %s) is not stored on this server; upload it "
				   "through the LFS batch API first", cs->lines, cs->oid, cs->path);
	if (cs->have_size && cs->size != stored)
		return commit_stream_fail(cs, 422, NULL, "line %zu: LFS object %s has %" PRIu64 " bytes, not %" PRIu64,
				   cs->lines, cs->oid, stored, cs->size);
	struct lfs_pointer ptr;
	memcpy(ptr.oid, cs->oid, 65);
	ptr.size = stored;
	return add_lfs_op(cs, cs->path, &ptr);
}

static int line_end(void *ctx)
{
	struct commit_stream *cs = ctx;
	if (cs->err_status)
		return -1;
	if (!cs->key)
		return commit_stream_fail(cs, 400, NULL, "line %zu: missing \"key\"", cs->lines);
	if (strcmp(cs->key, "header") == 0) {
		if (cs->have_header || cs->nops)
			return commit_stream_fail(cs, 400, NULL, "line %zu: the header must be the first line, once", cs->lines);
		cs->have_header = 1;
		cs->commit_summary = cs->summary ? xstrdup(cs->summary) : NULL;
		cs->commit_description = cs->description ? xstrdup(cs->description) : NULL;
		if (cs->parent) {
			size_t n = strlen(cs->parent);
			for (size_t i = 0; i < n; i++)
				cs->parent[i] = (char)((cs->parent[i] >= 'A' && cs->parent[i] <= 'F') ? cs->parent[i] + 32
												 : cs->parent[i]);
			if (n < 5 || n > 40 || !is_lower_hex(cs->parent, n))
				return commit_stream_fail(cs, 400, NULL, "parentCommit must be 5 to 40 hex characters");
			cs->commit_parent = xstrdup(cs->parent);
		}
		return 0;
	}
	if (!cs->have_header)
		return commit_stream_fail(cs, 400, NULL, "line %zu: the first line must be {\"key\":\"header\",...}", cs->lines);
	if (strcmp(cs->key, "file") == 0)
		return finish_inline_file(cs);
	if (strcmp(cs->key, "lfsFile") == 0)
		return finish_lfs_file(cs);
	if (strcmp(cs->key, "deletedFile") == 0) {
		if (check_path(cs, cs->path) < 0)
			return -1;
		return add_op(cs, OP_DELETE_FILE, cs->path) ? 0 : -1;
	}
	if (strcmp(cs->key, "deletedFolder") == 0) {
		if (cs->path) {
			size_t n = strlen(cs->path);
			while (n > 1 && cs->path[n - 1] == '/')
				cs->path[--n] = '\0';
		}
		if (check_path(cs, cs->path) < 0)
			return -1;
		return add_op(cs, OP_DELETE_FOLDER, cs->path) ? 0 : -1;
	}
	return commit_stream_fail(cs, 400, NULL, "line %zu: unknown key '%s' (want header, file, lfsFile, deletedFile or "
				"deletedFolder)", cs->lines, cs->key);
}

const struct json_stream_handler commit_events = {
	.object_begin = line_begin,
	.object_end = line_end,
	.string_mode = string_mode,
	.string_chunk = content_chunk,
	.string_end = content_end,
	.scalar = on_scalar,
};
