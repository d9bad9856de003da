/* commit.c -- POST /api/{type}s/{ns}/{name}/commit/{rev}: the NDJSON commit
 * body, parsed as it arrives (kernel-builder sends whole binaries inline as
 * base64), spooled to disk, applied all at once under the repo's lock with
 * compare-and-swap on the ref. Also create_pr=1 (refs/pr/N). */
#include "api/api.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define HEAD_BYTES 8000			/* what the binary-content test looks at */
#define RAW_TEXT_MAX (1 << 20)		/* utf-8 "encoded" content kept for that case */
#define COLLECT_MAX (1 << 20)		/* any other string value */
#define MAX_OPERATIONS 100000

enum op_kind { OP_PUT, OP_DELETE_FILE, OP_DELETE_FOLDER };

struct commit_op {
	enum op_kind kind;
	char *path;
	char blob[41];
	int stored_as_lfs;
};

struct commit_stream {
	struct repo_handle repo;
	int create_pr;
	char target_ref[REF_NAME_MAX + 16];
	char *gitattributes;		/* at the head when the body started */
	struct json_stream *parser;

	/* the line being read */
	char *key, *path, *encoding, *oid, *algo, *summary, *description, *parent;
	uint64_t size;
	int have_size, have_content;
	struct lfs_writer *spool;
	char head[HEAD_BYTES];
	size_t head_len;
	uint64_t content_size;
	struct strbuf raw_text;
	int raw_overflow;
	unsigned b64_acc;
	int b64_bits, b64_data, b64_pad, b64_bad;
	char b64_out[48 * 1024];
	size_t b64_out_len;

	/* the commit */
	int have_header;
	char *commit_summary, *commit_description, *commit_parent;
	struct commit_op *ops;
	size_t nops, ops_alloc;
	size_t lines;
	uint64_t bytes_in;

	/* the first error (answered once the body has been read) */
	int err_status;
	const char *err_code;
	char err[600];
};

static int stream_fail(struct commit_stream *cs, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int stream_fail(struct commit_stream *cs, int status, const char *code, const char *fmt, ...)
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

static void line_reset(struct commit_stream *cs)
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
	cs->head_len = 0;
	cs->content_size = 0;
	strbuf_reset(&cs->raw_text);
	cs->raw_overflow = 0;
	cs->b64_acc = 0;
	cs->b64_bits = cs->b64_data = cs->b64_pad = cs->b64_bad = 0;
	cs->b64_out_len = 0;
}

/* ---- base64 content, decoded as it streams in ----------------------------- */

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
	int rc = lfs_writer_write(cs->spool, cs->b64_out, cs->b64_out_len);
	cs->b64_out_len = 0;
	return rc < 0 ? stream_fail(cs, 500, NULL, "cannot spool file content") : 0;
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
	line_reset(cs);
	cs->lines++;
	return 0;
}

static enum json_string_mode string_mode(void *ctx, char keys[][JSON_STREAM_MAX_KEY], int depth)
{
	struct commit_stream *cs = ctx;
	if (depth == 2 && strcmp(keys[0], "value") == 0 && strcmp(keys[1], "content") == 0) {
		if (!cs->spool)
			cs->spool = lfs_writer_begin(api_ctx.lfs);
		return JSON_STRING_STREAM;
	}
	return JSON_STRING_COLLECT;
}

static int on_content_chunk(void *ctx, const char *data, size_t len)
{
	struct commit_stream *cs = ctx;
	if (!cs->spool)
		return stream_fail(cs, 500, NULL, "cannot spool file content");
	return content_chunk(ctx, data, len);
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
		return stream_fail(cs, 400, NULL, "line %zu: NUL byte in a string", cs->lines);
	if (depth == 1 && strcmp(keys[0], "key") == 0) {
		if (kind != JSON_STREAM_STRING)
			return stream_fail(cs, 400, NULL, "line %zu: \"key\" must be a string", cs->lines);
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
			return stream_fail(cs, 400, NULL, "line %zu: size must be a non-negative integer", cs->lines);
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
			return stream_fail(cs, 400, NULL, "line %zu: value.%s must be a string", cs->lines, field);
		keep((char **)((char *)cs + fields[i].offset), text);
	}
	return 0;
}

static int add_op(struct commit_stream *cs, enum op_kind kind, const char *path, const char *blob, int lfs)
{
	if (cs->nops == MAX_OPERATIONS)
		return stream_fail(cs, 400, NULL, "more than %d operations in one commit", MAX_OPERATIONS);
	if (cs->nops == cs->ops_alloc) {
		cs->ops_alloc = cs->ops_alloc ? cs->ops_alloc * 2 : 64;
		cs->ops = xrealloc(cs->ops, cs->ops_alloc * sizeof(*cs->ops));
	}
	struct commit_op *op = &cs->ops[cs->nops++];
	memset(op, 0, sizeof(*op));
	op->kind = kind;
	op->path = xstrdup(path);
	if (blob)
		memcpy(op->blob, blob, 41);
	op->stored_as_lfs = lfs;
	return 0;
}

static int check_path(struct commit_stream *cs, const char *path)
{
	const char *why;
	if (!path)
		return stream_fail(cs, 400, NULL, "line %zu: missing value.path", cs->lines);
	if (repo_path_validate(path, &why) < 0)
		return stream_fail(cs, 400, NULL, "line %zu: invalid path (%s): '%.200s%s'", cs->lines, why, path,
				   strlen(path) > 200 ? "..." : "");
	return 0;
}

/* Store a pointer text as a blob; fills blob_sha. */
static int write_pointer(struct commit_stream *cs, const struct lfs_pointer *ptr, char blob_sha[41])
{
	char text[LFS_POINTER_MAX];
	size_t n = lfs_pointer_format(ptr, text);
	git_oid oid;
	if (git_blob_create_from_buffer(&oid, cs->repo.git, text, n) < 0)
		return stream_fail(cs, 500, NULL, "cannot write a blob");
	git_oid_tostr(blob_sha, 41, &oid);
	return 0;
}

static int finish_inline_file(struct commit_stream *cs)
{
	char blob[41];
	git_oid oid;
	if (check_path(cs, cs->path) < 0)
		return -1;
	if (!cs->have_content)
		return stream_fail(cs, 400, NULL, "line %zu: file %s has no value.content", cs->lines, cs->path);
	int utf8 = cs->encoding && strcmp(cs->encoding, "utf-8") == 0;
	if (cs->encoding && !utf8 && strcmp(cs->encoding, "base64") != 0)
		return stream_fail(cs, 400, NULL, "line %zu: unknown encoding '%s'", cs->lines, cs->encoding);
	if (utf8) {
		if (cs->raw_overflow)
			return stream_fail(cs, 413, NULL, "line %zu: utf-8 content over 1 MiB; send it as base64",
					   cs->lines);
		lfs_writer_abort(cs->spool);
		cs->spool = NULL;
		if (git_blob_create_from_buffer(&oid, cs->repo.git, cs->raw_text.buf ? cs->raw_text.buf : "",
						cs->raw_text.len) < 0)
			return stream_fail(cs, 500, NULL, "cannot write a blob");
		git_oid_tostr(blob, sizeof(blob), &oid);
		return add_op(cs, OP_PUT, cs->path, blob, 0);
	}
	if (cs->b64_bad)
		return stream_fail(cs, 400, NULL, "line %zu: value.content of %s is not valid base64", cs->lines,
				   cs->path);
	if (lfs_should_store(cs->gitattributes, cs->path, cs->head, cs->head_len, cs->content_size)) {
		struct lfs_pointer ptr;
		int rc = lfs_writer_commit(cs->spool, NULL, ptr.oid, &ptr.size);
		cs->spool = NULL;
		if (rc < 0)
			return stream_fail(cs, 500, NULL, "cannot store %s", cs->path);
		if (db_lfs_link(cs->repo.record.id, ptr.oid) < 0)
			return stream_fail(cs, 503, NULL, "database unavailable");
		if (write_pointer(cs, &ptr, blob) < 0)
			return -1;
		return add_op(cs, OP_PUT, cs->path, blob, 1);
	}
	if (git_blob_create_from_disk(&oid, cs->repo.git, lfs_writer_temp_path(cs->spool)) < 0)
		return stream_fail(cs, 500, NULL, "cannot write a blob");
	lfs_writer_abort(cs->spool);
	cs->spool = NULL;
	git_oid_tostr(blob, sizeof(blob), &oid);
	return add_op(cs, OP_PUT, cs->path, blob, 0);
}

static int finish_lfs_file(struct commit_stream *cs)
{
	if (check_path(cs, cs->path) < 0)
		return -1;
	if (cs->algo && strcmp(cs->algo, "sha256") != 0)
		return stream_fail(cs, 400, NULL, "line %zu: algo must be sha256", cs->lines);
	if (!cs->oid || !is_lower_hex(cs->oid, 64))
		return stream_fail(cs, 400, NULL, "line %zu: lfsFile %s needs a 64-hex sha256 oid", cs->lines, cs->path);
	uint64_t stored;
	/* the bytes must have been uploaded for this repo: knowing a sha256
	 * is not a right to another repo's object */
	int linked = db_lfs_linked(cs->repo.record.id, cs->oid);
	if (linked < 0)
		return stream_fail(cs, 503, NULL, "database unavailable");
	if (!linked || lfs_store_stat(api_ctx.lfs, cs->oid, &stored) < 0)
		return stream_fail(cs, 422, NULL,
				   "line %zu: LFS object %s (for %s) is not stored on this server; upload it "
				   "through the LFS batch API first", cs->lines, cs->oid, cs->path);
	if (cs->have_size && cs->size != stored)
		return stream_fail(cs, 422, NULL, "line %zu: LFS object %s has %" PRIu64 " bytes, not %" PRIu64,
				   cs->lines, cs->oid, stored, cs->size);
	struct lfs_pointer ptr;
	memcpy(ptr.oid, cs->oid, 65);
	ptr.size = stored;
	char blob[41];
	if (write_pointer(cs, &ptr, blob) < 0)
		return -1;
	return add_op(cs, OP_PUT, cs->path, blob, 1);
}

static int line_end(void *ctx)
{
	struct commit_stream *cs = ctx;
	if (cs->err_status)
		return -1;
	if (!cs->key)
		return stream_fail(cs, 400, NULL, "line %zu: missing \"key\"", cs->lines);
	if (strcmp(cs->key, "header") == 0) {
		if (cs->have_header || cs->nops)
			return stream_fail(cs, 400, NULL, "line %zu: the header must be the first line, once", cs->lines);
		cs->have_header = 1;
		cs->commit_summary = cs->summary ? xstrdup(cs->summary) : NULL;
		cs->commit_description = cs->description ? xstrdup(cs->description) : NULL;
		if (cs->parent) {
			size_t n = strlen(cs->parent);
			for (size_t i = 0; i < n; i++)
				cs->parent[i] = (char)((cs->parent[i] >= 'A' && cs->parent[i] <= 'F') ? cs->parent[i] + 32
												 : cs->parent[i]);
			if (n < 5 || n > 40 || !is_lower_hex(cs->parent, n))
				return stream_fail(cs, 400, NULL, "parentCommit must be 5 to 40 hex characters");
			cs->commit_parent = xstrdup(cs->parent);
		}
		return 0;
	}
	if (!cs->have_header)
		return stream_fail(cs, 400, NULL, "line %zu: the first line must be {\"key\":\"header\",...}", cs->lines);
	if (strcmp(cs->key, "file") == 0)
		return finish_inline_file(cs);
	if (strcmp(cs->key, "lfsFile") == 0)
		return finish_lfs_file(cs);
	if (strcmp(cs->key, "deletedFile") == 0) {
		if (check_path(cs, cs->path) < 0)
			return -1;
		return add_op(cs, OP_DELETE_FILE, cs->path, NULL, 0);
	}
	if (strcmp(cs->key, "deletedFolder") == 0) {
		if (cs->path) {
			size_t n = strlen(cs->path);
			while (n > 1 && cs->path[n - 1] == '/')
				cs->path[--n] = '\0';
		}
		if (check_path(cs, cs->path) < 0)
			return -1;
		return add_op(cs, OP_DELETE_FOLDER, cs->path, NULL, 0);
	}
	return stream_fail(cs, 400, NULL, "line %zu: unknown key '%s' (want header, file, lfsFile, deletedFile or "
				"deletedFolder)", cs->lines, cs->key);
}

static const struct json_stream_handler commit_events = {
	.object_begin = line_begin,
	.object_end = line_end,
	.string_mode = string_mode,
	.string_chunk = on_content_chunk,
	.string_end = content_end,
	.scalar = on_scalar,
};

/* ---- the request ------------------------------------------------------------- */

static char *read_gitattributes(git_repository *git, const char *sha)
{
	struct tree_entry e;
	char *text = NULL;
	size_t len;
	if (sha[0] && repo_stat_path(git, sha, ".gitattributes", &e) == 0) {
		if (!e.is_dir && !e.is_lfs)
			repo_read_blob(git, e.oid, 1 << 20, &text, &len);
		tree_entry_release(&e);
	}
	return text;
}

/* rev → full ref of an existing branch (or PR for direct commits). */
static int target_ref_of(struct request *req, struct commit_stream *cs, char sha[41])
{
	const char *rev = req->rev;
	if (strncmp(rev, "refs/pr/", 8) == 0 && !cs->create_pr)
		snprintf(cs->target_ref, sizeof(cs->target_ref), "%s", rev);
	else if (strncmp(rev, "refs/heads/", 11) == 0)
		snprintf(cs->target_ref, sizeof(cs->target_ref), "%s", rev);
	else if (ref_name_validate(rev, NULL) == 0 && strncmp(rev, "refs/", 5) != 0)
		snprintf(cs->target_ref, sizeof(cs->target_ref), "refs/heads/%s", rev);
	else
		return -1;
	return repo_resolve_revision(cs->repo.git, cs->target_ref, sha) == 0 ? 0 : -1;
}

static int commit_begin(struct request *req)
{
	enum MHD_Result result;
	struct commit_stream *cs = xcalloc(1, sizeof(*cs));
	req->stream_state = cs;
	strbuf_init(&cs->raw_text);
	cs->create_pr = request_query_bool(req, "create_pr", 0);
	/* Anyone who can read a repo may open a pull request and add to it
	 * (kernel-builder --create-pr sends its later batches to refs/pr/N). */
	int to_pr = cs->create_pr || strncmp(req->rev, "refs/pr/", 8) == 0;
	if (repo_open_for_write(req, &cs->repo, to_pr ? ROLE_READ : ROLE_WRITE, &result) < 0)
		return -1;
	if (to_pr && req->principal.scope == ROLE_READ) {
		respond_error(req, 403, NULL, "a read-only token cannot open or update pull requests");
		return -1;
	}
	if (cs->repo.record.mirrored) {
		respond_error(req, 403, NULL, "a mirrored repo is read-only: open pull requests upstream");
		return -1;
	}
	char sha[41];
	if (target_ref_of(req, cs, sha) < 0) {
		respond_revision_not_found(req, req->rev);
		return -1;
	}
	cs->gitattributes = read_gitattributes(cs->repo.git, sha);
	struct json_stream_handler events = commit_events;
	events.ctx = cs;
	cs->parser = json_stream_new(&events, COLLECT_MAX);
	return 0;
}

static int commit_data(struct request *req, const char *data, size_t len)
{
	struct commit_stream *cs = req->stream_state;
	cs->bytes_in += len;
	if (json_stream_feed(cs->parser, data, len) < 0) {
		if (!cs->err_status)
			stream_fail(cs, 400, NULL, "malformed NDJSON: %s", json_stream_error(cs->parser));
		return -1;
	}
	return 0;
}

static void commit_cleanup(struct request *req)
{
	struct commit_stream *cs = req->stream_state;
	if (!cs)
		return;
	line_reset(cs);
	json_stream_free(cs->parser);
	strbuf_release(&cs->raw_text);
	for (size_t i = 0; i < cs->nops; i++)
		free(cs->ops[i].path);
	free(cs->ops);
	free(cs->gitattributes);
	free(cs->commit_summary);
	free(cs->commit_description);
	free(cs->commit_parent);
	free(cs);
	req->stream_state = NULL;
}

/* Add .gitattributes rules for LFS-stored paths no rule covers yet, as the
 * Hub does, so git clients check out content rather than pointers. */
static int cover_lfs_paths(struct commit_stream *cs, struct commit_builder *cb, const char *base_sha)
{
	char *attrs = NULL;
	for (size_t i = 0; i < cs->nops; i++)
		if (cs->ops[i].kind == OP_PUT && strcmp(cs->ops[i].path, ".gitattributes") == 0) {
			size_t len;
			free(attrs);
			attrs = NULL;
			repo_read_blob(cs->repo.git, cs->ops[i].blob, 1 << 20, &attrs, &len);
		}
	if (!attrs && commit_builder_has_file(cb, ".gitattributes"))
		attrs = read_gitattributes(cs->repo.git, base_sha);
	struct strbuf add = STRBUF_INIT;
	for (size_t i = 0; i < cs->nops; i++) {
		const struct commit_op *op = &cs->ops[i];
		if (op->kind != OP_PUT || !op->stored_as_lfs || (attrs && gitattributes_match_lfs(attrs, op->path)) ||
		    gitattributes_match_lfs(add.buf ? add.buf : "", op->path))
			continue;
		for (const char *p = op->path; *p; p++) {
			if (*p == ' ')
				strbuf_adds(&add, "[[:space:]]");
			else if (strchr("*?[\\#!", *p))
				strbuf_addf(&add, "\\%c", *p);
			else
				strbuf_add(&add, p, 1);
		}
		strbuf_adds(&add, " filter=lfs diff=lfs merge=lfs -text\n");
	}
	int rc = 0;
	if (add.len) {
		struct strbuf text = STRBUF_INIT;
		if (attrs) {
			strbuf_adds(&text, attrs);
			if (text.len && text.buf[text.len - 1] != '\n')
				strbuf_adds(&text, "\n");
		}
		strbuf_add(&text, add.buf, add.len);
		rc = commit_builder_put_bytes(cb, ".gitattributes", text.buf, text.len, 0100644);
		strbuf_release(&text);
	}
	strbuf_release(&add);
	free(attrs);
	return rc;
}

/* A .gitattributes in this very commit also decides which of its regular
 * files become LFS (they were judged by the parent's rules while the body
 * streamed in; regular files are at most 10 MiB). */
static int relfs_by_new_attributes(struct commit_stream *cs, struct commit_builder *cb)
{
	char *attrs = NULL;
	size_t len;
	for (size_t i = 0; i < cs->nops; i++)
		if (cs->ops[i].kind == OP_PUT && strcmp(cs->ops[i].path, ".gitattributes") == 0 && !cs->ops[i].stored_as_lfs) {
			free(attrs);
			attrs = NULL;
			repo_read_blob(cs->repo.git, cs->ops[i].blob, 1 << 20, &attrs, &len);
		}
	if (!attrs)
		return 0;
	int rc = 0;
	for (size_t i = 0; i < cs->nops && rc == 0; i++) {
		struct commit_op *op = &cs->ops[i];
		if (op->kind != OP_PUT || op->stored_as_lfs || strcmp(op->path, ".gitattributes") == 0 ||
		    !gitattributes_match_lfs(attrs, op->path))
			continue;
		char *data = NULL;
		size_t size;
		if (repo_read_blob(cs->repo.git, op->blob, 16u << 20, &data, &size) < 0 || size == 0) {
			free(data);
			continue;
		}
		struct lfs_writer *w = lfs_writer_begin(api_ctx.lfs);
		struct lfs_pointer ptr;
		char blob[41];
		if (!w || lfs_writer_write(w, data, size) < 0 || lfs_writer_commit(w, NULL, ptr.oid, &ptr.size) < 0 ||
		    db_lfs_link(cs->repo.record.id, ptr.oid) < 0 || write_pointer(cs, &ptr, blob) < 0) {
			rc = -1;
		} else {
			memcpy(op->blob, blob, sizeof(blob));
			op->stored_as_lfs = 1;
			rc = commit_builder_put_blob(cb, op->path, op->blob, 0100644);
		}
		free(data);
	}
	free(attrs);
	return rc;
}

static enum MHD_Result apply_commit(struct request *req, struct commit_stream *cs)
{
	struct commit_builder *cb = NULL;
	char head[41] = "", base[41] = "", sha[41], pr_ref[32] = "";
	int pr_number = 0, locked = 0;
	enum MHD_Result result;
	int status = 0;
	const char *code = NULL;
	char msg[400] = "";

	if (repo_write_lock(cs->repo.record.id) < 0)
		return respond_error(req, 503, NULL, "database unavailable");
	locked = 1;
	if (repo_resolve_revision(cs->repo.git, cs->target_ref, head) < 0) {
		result = respond_revision_not_found(req, req->rev);
		goto cleanup;
	}
	memcpy(base, head, sizeof(base));
	if (cs->commit_parent) {
		if (cs->create_pr) {
			git_object *obj = NULL;
			if (git_revparse_single(&obj, cs->repo.git, cs->commit_parent) < 0 ||
			    git_object_type(obj) != GIT_OBJECT_COMMIT) {
				git_object_free(obj);
				result = respond_revision_not_found(req, cs->commit_parent);
				goto cleanup;
			}
			git_oid_tostr(base, sizeof(base), git_object_id(obj));
			git_object_free(obj);
		} else if (strncmp(head, cs->commit_parent, strlen(cs->commit_parent)) != 0) {
			result = respond_error(req, 412, NULL,
					       "The branch was updated since you opened this page. Please refresh and "
					       "try again. (parentCommit %s, head %s)", cs->commit_parent, head);
			goto cleanup;
		}
	}
	cb = commit_builder_new(cs->repo.git, base);
	if (!cb) {
		result = respond_error(req, 500, NULL, "cannot start the commit");
		goto cleanup;
	}
	for (size_t i = 0; i < cs->nops && !status; i++) {
		const struct commit_op *op = &cs->ops[i];
		int rc = 0;
		if (op->kind == OP_PUT)
			rc = commit_builder_put_blob(cb, op->path, op->blob, 0100644);
		else if (op->kind == OP_DELETE_FILE)
			rc = commit_builder_delete_file(cb, op->path);
		else
			rc = commit_builder_delete_folder(cb, op->path);
		if (rc == KHUB_ENOTFOUND) {
			status = 404, code = "EntryNotFound";
			snprintf(msg, sizeof(msg), "A %s with this name doesn't exist: %s. Make sure to differentiate "
				 "file and folder paths.", op->kind == OP_DELETE_FILE ? "file" : "folder", op->path);
		} else if (rc < 0) {
			status = 400;
			snprintf(msg, sizeof(msg), "cannot apply the operation on %s", op->path);
		}
	}
	if (!status && relfs_by_new_attributes(cs, cb) < 0)
		status = 500, snprintf(msg, sizeof(msg), "cannot store a file as LFS");
	if (!status && cover_lfs_paths(cs, cb, base) < 0)
		status = 500, snprintf(msg, sizeof(msg), "cannot update .gitattributes");
	if (status) {
		result = respond_error(req, status, code, "%s", msg);
		goto cleanup;
	}
	char email[REPO_NAME_MAX + 32];
	snprintf(email, sizeof(email), "%s@users.khub", req->principal.name);
	if (commit_builder_write(cb, req->principal.name, email, cs->commit_summary, cs->commit_description, sha) < 0) {
		result = respond_error(req, 500, NULL, "cannot write the commit");
		goto cleanup;
	}
	int rc;
	if (cs->create_pr) {
		pr_number = repo_next_pr_number(cs->repo.git);
		snprintf(pr_ref, sizeof(pr_ref), "refs/pr/%d", pr_number);
		rc = repo_update_ref(cs->repo.git, pr_ref, NULL, sha, cs->commit_summary);
	} else {
		rc = repo_update_ref(cs->repo.git, cs->target_ref, head, sha, cs->commit_summary);
	}
	if (rc == KHUB_ECONFLICT) {
		result = respond_error(req, 412, NULL, "The branch was updated since you opened this page. Please "
					    "refresh and try again.");
		goto cleanup;
	}
	if (rc < 0) {
		result = respond_error(req, 500, NULL, "cannot move %s", cs->create_pr ? pr_ref : cs->target_ref);
		goto cleanup;
	}
	/* The commit is visible: from here on nothing may answer 5xx (clients
	 * retry 5xx and would commit twice). */
	repo_write_unlock(cs->repo.record.id);
	locked = 0;
	db_repo_touch(cs->repo.record.id);
	char *details = xasprintf("{\"ref\":\"%s\",\"commit\":\"%s\",\"operations\":%zu,\"bytes\":%" PRIu64 "}",
				  cs->create_pr ? pr_ref : cs->target_ref, sha, cs->nops, cs->bytes_in);
	char target[2 * REPO_NAME_MAX + 16];
	snprintf(target, sizeof(target), "%s/%s", cs->repo.record.ns, cs->repo.record.name);
	api_audit(req, cs->create_pr ? "commit.pull_request" : "commit", target, details);
	free(details);
	/* Kernel repos: index build/<variant>/ of the new commit (a failure is
	 * logged and repaired lazily by the read endpoints, never answered). */
	if (variant_index_update(cs->repo.record.id, cs->repo.git, sha) < 0)
		log_warn("variant index: commit %s not indexed", sha);

	const char *base_url = request_base_url(req);
	const char *prefix = repo_type_url_prefix(cs->repo.record.type);
	json_t *body = json_object();
	json_object_set_new(body, "success", json_true());
	json_object_set_new(body, "commitOid", json_string(sha));
	char *url = xasprintf("%s/%s%s/%s/commit/%s", base_url, prefix, cs->repo.record.ns, cs->repo.record.name, sha);
	json_object_set_new(body, "commitUrl", json_string(url));
	free(url);
	json_object_set_new(body, "hookOutput", json_string(""));
	if (cs->create_pr) {
		url = xasprintf("%s/%s%s/%s/discussions/%d", base_url, prefix, cs->repo.record.ns, cs->repo.record.name,
				pr_number);
		json_object_set_new(body, "pullRequestUrl", json_string(url));
		json_object_set_new(body, "prNum", json_integer(pr_number));
		free(url);
	}
	log_info("commit %s to %s/%s %s: %zu operations, %" PRIu64 " bytes of body", sha, cs->repo.record.ns,
		 cs->repo.record.name, cs->create_pr ? pr_ref : cs->target_ref, cs->nops, cs->bytes_in);
	result = respond_json(req, 200, body);
cleanup:
	if (locked)
		repo_write_unlock(cs->repo.record.id);
	commit_builder_free(cb);
	return result;
}

static enum MHD_Result handle_commit(struct request *req)
{
	struct commit_stream *cs = req->stream_state;
	if (!cs->err_status && json_stream_finish(cs->parser) < 0)
		stream_fail(cs, 400, NULL, "malformed NDJSON: %s", json_stream_error(cs->parser));
	if (!cs->err_status && !cs->have_header)
		stream_fail(cs, 400, NULL, "the body needs a header line: {\"key\":\"header\",\"value\":{\"summary\":...}}");
	if (!cs->err_status && cs->nops == 0)
		stream_fail(cs, 400, NULL, "no operation: add a line with the key `lfsFile`, `file` or `deletedFile`");
	if (cs->err_status)
		return respond_error(req, cs->err_status, cs->err_code, "%s", cs->err);
	return apply_commit(req, cs);
}

static const struct stream_ops commit_stream_ops = { commit_begin, commit_data, commit_cleanup };

const struct route commit_routes[] = {
	{ METHOD_POST, "/api/{type}/{ns}/{name}/commit/{rev}", handle_commit, 0, 0, &commit_stream_ops },
	{ 0, NULL, NULL, 0, 0, NULL },
};
