/* commit_internal.h -- shared by api/commit_parse.c (the NDJSON body, parsed
 * as it streams) and api/commit.c (the request and applying the commit).
 * Internal to api/. */
#ifndef KHUB_COMMIT_INTERNAL_H
#define KHUB_COMMIT_INTERNAL_H

#include "api/api.h"

#define HEAD_BYTES 8000			/* what the binary-content test looks at */
#define RAW_TEXT_MAX (1 << 20)		/* utf-8 "encoded" content kept for that case */
#define COLLECT_MAX (1 << 20)		/* any other string value */
#define MAX_OPERATIONS 100000
/* Decoded content kept in memory before it goes to a spool file. */
#define INLINE_MEM_MAX (1 << 20)

enum op_kind { OP_PUT, OP_DELETE_FILE, OP_DELETE_FOLDER };

struct commit_op {
	enum op_kind kind;
	char *path;
	char blob[41];
	int stored_as_lfs;
};

struct commit_stream {
	struct repo_handle repo;	/* repo.git: the publication's (quarantined) handle */
	struct publication *pub;	/* storage/publish.h: owns what this commit writes */
	int64_t in_flight_user;		/* counted in the per-account limit */
	int create_pr;
	char target_ref[REF_NAME_MAX + 16];
	char *gitattributes;		/* at the head when the body started */
	struct json_stream *parser;

	/* the line being read */
	char *key, *path, *encoding, *oid, *algo, *summary, *description, *parent;
	uint64_t size;
	int have_size, have_content;
	struct strbuf content_mem;	/* decoded content while small */
	struct lfs_writer *spool;	/* decoded content once it is not */
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
	char ref_head[41], sha[41], pr_ref[32];
	int pr_number;

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
/* The error for a blob that could not be written: 413 past the
 * quarantine's limit, else 500; -1. */
int commit_blob_failed(struct commit_stream *cs);
/* Content to store as LFS (takes the writer): held by the publication
 * until the commit is accepted. */
int commit_lfs_hold(struct commit_stream *cs, struct lfs_writer *w, struct lfs_pointer *ptr);
/* Store an LFS pointer text as a blob; fills blob_sha. */
int commit_write_pointer(struct commit_stream *cs, const struct lfs_pointer *ptr, char blob_sha[41]);
/* The JSON events that turn NDJSON lines into operations (ctx = the
 * struct commit_stream). */
extern const struct json_stream_handler commit_events;

#endif
