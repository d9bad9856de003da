/* commit_internal.h -- shared by api/commit_parse.c (the NDJSON body, parsed
 * as it streams into a list of operations) and api/commit.c (the request,
 * the list handed to publish_apply, the answer). Internal to api/. */
#ifndef KHUB_COMMIT_INTERNAL_H
#define KHUB_COMMIT_INTERNAL_H

#include "api/api.h"

#define HEAD_BYTES 8000			/* what the binary-content test looks at */
#define RAW_TEXT_MAX (1 << 20)		/* utf-8 "encoded" content kept for that case */
#define COLLECT_MAX (1 << 20)		/* any other string value */
#define MAX_OPERATIONS 100000
/* Decoded content kept in memory before it goes to a spool file. */
#define INLINE_MEM_MAX (1 << 20)
/* Files that get a spool file of their own (open until the commit, then
 * stored as LFS without a copy); the content of the others goes to the
 * commit's content file. */
#define SPOOLS_MAX 256

enum op_kind { OP_PUT, OP_PUT_LFS, OP_DELETE_FILE, OP_DELETE_FOLDER };

struct commit_op {
	enum op_kind kind;
	char *path;
	struct lfs_writer *spool;	/* OP_PUT: its content (owned until handed over), or */
	uint64_t offset, len;		/* OP_PUT: this range of the content file */
	struct lfs_pointer lfs;		/* OP_PUT_LFS: an object linked to the repo */
};

struct commit_stream {
	struct repo_handle repo;	/* opened by the server; read only */
	struct publication *pub;	/* storage/publish/publish.h: owns what this commit writes */
	int64_t in_flight_user;		/* counted in the per-account limit */
	int create_pr;
	char target_ref[REF_NAME_MAX + 16];
	struct json_stream *parser;
	int content_fd;			/* the content file (unlinked), 0 before the first */
	uint64_t content_len;		/* its length */
	size_t nspools;			/* spool files the operations hold */

	/* the line being read */
	char *key, *path, *encoding, *oid, *algo, *summary, *description, *parent;
	uint64_t size;
	int have_size, have_content;
	struct strbuf content_mem;	/* decoded content while small */
	struct lfs_writer *spool;	/* decoded content once it is not, or */
	int in_file;			/* it goes to the content file from content_at */
	uint64_t content_at;
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
	int body_checked;		/* the handler has run once */
	/* Applying it (api/commit.c): the work queue's job fills these (and
	 * the error below) while the request waits parked; the request
	 * answers from them. */
	struct publish_actor who;
	const char *rev;		/* as the request named it (the request's) */
	char who_email[REPO_NAME_MAX + 32];
	int result_rc;			/* the khub_err that decides the answer (5xx, 413), or 0 */
	struct publish_result res;	/* the commit, its ref (refs/pr/N), why not */

	/* the first error (answered once the body has been read) */
	int err_status;
	const char *err_code;
	char err[600];
};

/* Record the first error (answered once the body has been read); -1. */
int commit_stream_fail(struct commit_stream *cs, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Forget the line being read (frees its fields and spool). */
void commit_line_reset(struct commit_stream *cs);
/* The JSON events that turn NDJSON lines into operations (ctx = the
 * struct commit_stream). */
extern const struct json_stream_handler commit_events;

#endif
