/* publish_stage.c -- the tree of one change, from its operations (see
 * publish_stage.h): the LFS decision, pointers, the .gitattributes rules
 * the Hub keeps, and where the change starts. Git and the LFS store only. */
#include "storage/publish/publish_stage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEAD_BYTES 8000			/* what the binary-content test looks at */
#define RULES_MAX (1 << 20)		/* a .gitattributes longer than this is not read */

/* ---- where the change starts --------------------------------------------- */

/* A revision naming a commit (a sha or an abbreviation of one). */
static int resolve_commit(git_repository *git, const char *rev, char sha[41])
{
	git_object *obj = NULL;
	int rc = git_revparse_single(&obj, git, rev) == 0 && git_object_type(obj) == GIT_OBJECT_COMMIT ? 0
													: KHUB_ENOTFOUND;
	if (rc == 0)
		git_oid_tostr(sha, 41, git_object_id(obj));
	git_object_free(obj);
	return rc;
}

int publish_stage_target(git_repository *git, const struct publish_changeset *change, struct publish_result *res,
			 char base[41])
{
	int new_ref = (change->flags & PUBLISH_NEW_REF) != 0;
	res->head[0] = base[0] = '\0';
	snprintf(res->ref, sizeof(res->ref), "%s", change->ref);
	if (!new_ref && repo_resolve_revision(git, change->ref, res->head) < 0)
		return KHUB_ENOTFOUND;
	if (change->parent && !new_ref && strncmp(res->head, change->parent, strlen(change->parent)) != 0) {
		res->stale_parent = 1;
		return KHUB_ECONFLICT;
	}
	if (change->base && change->base[0] && (new_ref || (change->flags & PUBLISH_NEW_PULL_REQUEST))) {
		if (resolve_commit(git, change->base, base) < 0) {
			res->missing_base = 1;
			return KHUB_ENOTFOUND;
		}
	} else if (!new_ref) {
		memcpy(base, res->head, 41);
	}
	if (change->flags & PUBLISH_NEW_PULL_REQUEST) {
		res->pr_number = repo_next_pr_number(git);
		snprintf(res->ref, sizeof(res->ref), "refs/pr/%d", res->pr_number);
	}
	return 0;
}

/* ---- the content of a PUT -------------------------------------------------- */

struct content {
	uint64_t size;
	char head[HEAD_BYTES];
	size_t head_len;
};

/* n bytes of fd at offset (short only at the end of the file). */
static ssize_t read_at(int fd, void *buf, size_t n, uint64_t offset)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(offset + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* The file a PUT's content is in (NULL: bytes or a range of fd). */
static const char *content_path(const struct publish_op *op)
{
	return op->spool ? lfs_writer_temp_path(op->spool) : op->fs_path;
}

/* Size and first bytes of op's content. */
static int content_probe(const struct publish_op *op, struct content *c)
{
	const char *path = content_path(op);
	if (!path && op->fd <= 0) {
		c->size = op->len;
		c->head_len = op->len < HEAD_BYTES ? op->len : HEAD_BYTES;
		if (c->head_len)
			memcpy(c->head, op->data, c->head_len);
		return 0;
	}
	int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : op->fd;
	struct stat st;
	if (fd < 0 || (path && fstat(fd, &st) < 0)) {
		if (fd >= 0)
			close(fd);
		return KHUB_EIO;
	}
	c->size = path ? (uint64_t)st.st_size : op->len;
	ssize_t n = read_at(fd, c->head, c->size < HEAD_BYTES ? (size_t)c->size : HEAD_BYTES, path ? 0 : op->offset);
	if (path)
		close(fd);
	if (n < 0)
		return KHUB_EIO;
	c->head_len = (size_t)n;
	return 0;
}

/* All of op's content (size bytes) in memory, NUL-terminated; the caller
 * frees *out. */
static int content_read(const struct publish_op *op, uint64_t size, char **out)
{
	const char *path = content_path(op);
	if (size > SIZE_MAX - 1)
		return KHUB_ETOOBIG;
	*out = xmalloc((size_t)size + 1);
	ssize_t n = (ssize_t)size;
	if (path || op->fd > 0) {
		int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : op->fd;
		n = fd < 0 ? -1 : read_at(fd, *out, (size_t)size, path ? 0 : op->offset);
		if (path && fd >= 0)
			close(fd);
	} else if (size) {
		memcpy(*out, op->data, (size_t)size);
	}
	if (n != (ssize_t)size) {
		free(*out);
		*out = NULL;
		return KHUB_EIO;
	}
	(*out)[size] = '\0';
	return 0;
}

/* Copy op's content (not a spool) into w. */
static int content_copy(const struct publish_op *op, struct lfs_writer *w)
{
	if (!op->fs_path && op->fd <= 0)
		return lfs_writer_write(w, op->data, op->len);
	int fd = op->fs_path ? open(op->fs_path, O_RDONLY | O_CLOEXEC) : op->fd;
	if (fd < 0)
		return KHUB_EIO;
	char buf[1 << 16];
	uint64_t at = op->fs_path ? 0 : op->offset, end = op->fs_path ? UINT64_MAX : op->offset + op->len;
	int rc = 0;
	while (rc == 0 && at < end) {
		size_t want = end - at < sizeof(buf) ? (size_t)(end - at) : sizeof(buf);
		ssize_t n = read_at(fd, buf, want, at);
		if (n < 0)
			rc = KHUB_EIO;
		else if (n == 0)
			rc = op->fs_path ? 1 : KHUB_EIO;	/* a file's end; a range cut short */
		else if ((rc = lfs_writer_write(w, buf, (size_t)n)) == 0)
			at += (uint64_t)n;
	}
	if (op->fs_path)
		close(fd);
	return rc == 1 ? 0 : rc;
}

/* ---- staging ---------------------------------------------------------------- */

static int stage_blob(struct publish_stage *st, size_t i, const struct publish_op *op, const char *blob, int lfs)
{
	memcpy(st->blobs[i], blob, 41);
	st->as_lfs[i] = (unsigned char)lfs;
	return commit_builder_put_blob(st->cb, op->path, blob, op->mode == 0100755 ? 0100755 : 0100644);
}

/* The pointer blob for ptr, staged at op's path. */
static int stage_pointer(struct publish_stage *st, size_t i, const struct publish_op *op,
			 const struct lfs_pointer *ptr)
{
	char text[LFS_POINTER_MAX], blob[41];
	size_t n = lfs_pointer_format(ptr, text);
	git_oid oid;
	if (git_blob_create_from_buffer(&oid, st->git, text, n) < 0)
		return khub_err_from_errno(errno);
	git_oid_tostr(blob, sizeof(blob), &oid);
	return stage_blob(st, i, op, blob, 1);
}

/* An object the change names but did not bring: stored, of that size,
 * and left for the caller's check that the repo may use it. */
static int stage_named(struct publish_stage *st, size_t i, const struct publish_op *op, const struct lfs_pointer *ptr)
{
	uint64_t stored;
	if (lfs_store_stat(st->lfs, ptr->oid, &stored) < 0 || stored != ptr->size)
		return KHUB_EPERM;
	st->named = xrealloc(st->named, (st->nnamed + 1) * sizeof(*st->named));
	st->named[st->nnamed].op = i;
	memcpy(st->named[st->nnamed].oid, ptr->oid, 65);
	st->nnamed++;
	return stage_pointer(st, i, op, ptr);
}

/* Seal w (taken) and keep it for the commit; fills ptr. */
static int hold(struct publish_stage *st, struct lfs_writer *w, struct lfs_pointer *ptr)
{
	int rc = lfs_writer_seal(w, ptr->oid, &ptr->size);
	if (rc < 0) {
		lfs_writer_abort(w);
		return rc;
	}
	if (st->nheld >= PUBLISH_HELD_MAX && st->store_now)
		return st->store_now(st->store_ctx, w, ptr->oid);
	st->held = xrealloc(st->held, (st->nheld + 1) * sizeof(*st->held));
	st->held[st->nheld++] = w;
	return 0;
}

static int stage_lfs_content(struct publish_stage *st, size_t i, const struct publish_op *op)
{
	struct lfs_writer *w = op->spool;
	int rc = 0;
	if (!w && !(w = lfs_writer_begin(st->lfs)))
		return khub_err_from_errno(errno);
	if (!op->spool && (rc = content_copy(op, w)) < 0) {
		lfs_writer_abort(w);
		return rc;
	}
	struct lfs_pointer ptr;
	if ((rc = hold(st, w, &ptr)) < 0)
		return rc;
	st->lfs_files++;
	return stage_pointer(st, i, op, &ptr);
}

static int stage_blob_content(struct publish_stage *st, size_t i, const struct publish_op *op, uint64_t size)
{
	const char *path = content_path(op);
	char *data = NULL, blob[41];
	git_oid oid;
	int rc = 0;
	if (path)
		rc = git_blob_create_from_disk(&oid, st->git, path) < 0 ? khub_err_from_errno(errno) : 0;
	else if (op->fd > 0 && (rc = content_read(op, size, &data)) == 0)
		rc = git_blob_create_from_buffer(&oid, st->git, data, (size_t)size) < 0 ? khub_err_from_errno(errno) : 0;
	else if (op->fd <= 0)
		rc = git_blob_create_from_buffer(&oid, st->git, op->data ? op->data : "", op->len) < 0
			     ? khub_err_from_errno(errno) : 0;
	free(data);
	lfs_writer_abort(op->spool);
	if (rc < 0)
		return rc;
	git_oid_tostr(blob, sizeof(blob), &oid);
	return stage_blob(st, i, op, blob, 0);
}

/* Whether content c of op goes to LFS: the base's rules, binary content
 * or its size, then the change's own rules (an empty file never). */
static int goes_to_lfs(const struct publish_stage *st, const struct publish_op *op, const struct content *c)
{
	if (lfs_should_store(st->rules, op->path, c->head, c->head_len, c->size))
		return 1;
	return st->own_rules && c->size > 0 && strcmp(op->path, ".gitattributes") != 0 &&
	       gitattributes_match_lfs(st->own_rules, op->path);
}

static int stage_put(struct publish_stage *st, size_t i, const struct publish_op *op)
{
	struct content c;
	struct lfs_pointer ptr;
	int rc = content_probe(op, &c);
	if (rc < 0) {
		lfs_writer_abort(op->spool);
		return rc;
	}
	if (c.size == c.head_len && lfs_pointer_parse(c.head, c.head_len, &ptr) == 0) {
		lfs_writer_abort(op->spool);
		st->lfs_files++;
		return stage_named(st, i, op, &ptr);
	}
	if (goes_to_lfs(st, op, &c))
		return stage_lfs_content(st, i, op);
	return stage_blob_content(st, i, op, c.size);
}

static int stage_copy(struct publish_stage *st, size_t i, const struct publish_op *op)
{
	char from[41];
	struct tree_entry e;
	if (!op->src_path || (op->src_rev ? resolve_commit(st->git, op->src_rev, from) : (st->base[0] ? 0 : -1)) < 0)
		return KHUB_ENOTFOUND;
	int rc = repo_stat_path(st->git, op->src_rev ? from : st->base, op->src_path, &e);
	if (rc < 0)
		return rc;
	if (e.is_dir)
		rc = KHUB_ENOTDIR;
	else
		rc = stage_blob(st, i, &(struct publish_op){ .path = op->path, .mode = e.mode }, e.oid, e.is_lfs);
	tree_entry_release(&e);
	return rc;
}

static int stage_op(struct publish_stage *st, size_t i, const struct publish_op *op)
{
	switch (op->kind) {
	case PUBLISH_PUT:
		return stage_put(st, i, op);
	case PUBLISH_PUT_LFS:
		return stage_named(st, i, op, &op->lfs);
	case PUBLISH_DELETE_FILE:
		return commit_builder_delete_file(st->cb, op->path);
	case PUBLISH_DELETE_FOLDER:
		return commit_builder_delete_folder(st->cb, op->path);
	case PUBLISH_COPY:
		return stage_copy(st, i, op);
	}
	return KHUB_EINVAL;
}

/* ---- the Hub's .gitattributes rules ----------------------------------------- */

/* The .gitattributes the change itself writes: the last PUT of it that is
 * no LFS content (those were the ones judged by the base's rules). */
static int read_own_rules(struct publish_stage *st, const struct publish_changeset *change)
{
	for (size_t i = change->nops; i-- > 0;) {
		const struct publish_op *op = &change->ops[i];
		struct content c;
		struct lfs_pointer ptr;
		if (op->kind != PUBLISH_PUT || strcmp(op->path, ".gitattributes") != 0)
			continue;
		int rc = content_probe(op, &c);
		if (rc < 0)
			return rc;
		if ((c.size == c.head_len && lfs_pointer_parse(c.head, c.head_len, &ptr) == 0) || goes_to_lfs(st, op, &c))
			continue;
		if (c.size <= RULES_MAX && (rc = content_read(op, c.size, &st->own_rules)) < 0)
			return rc;
		return 0;
	}
	return 0;
}

/* A rule for path: spaces and pattern characters escaped. */
static void add_rule(struct strbuf *add, const char *path)
{
	for (const char *p = path; *p; p++) {
		if (*p == ' ')
			strbuf_adds(add, "[[:space:]]");
		else if (strchr("*?[\\#!", *p))
			strbuf_addf(add, "\\%c", *p);
		else
			strbuf_add(add, p, 1);
	}
	strbuf_adds(add, " filter=lfs diff=lfs merge=lfs -text\n");
}

/* Add .gitattributes rules for LFS paths no rule covers yet, as the Hub
 * does, so git clients check out content rather than pointers. */
static int cover_lfs_paths(struct publish_stage *st, const struct publish_changeset *change)
{
	char *attrs = st->own_rules ? xstrdup(st->own_rules) : NULL;
	if (!attrs && st->base[0] && commit_builder_has_file(st->cb, ".gitattributes"))
		attrs = repo_read_text_file(st->git, st->base, ".gitattributes", RULES_MAX);
	struct strbuf add = STRBUF_INIT;
	for (size_t i = 0; i < change->nops; i++) {
		const char *path = change->ops[i].path;
		if (st->as_lfs[i] && change->ops[i].kind != PUBLISH_DELETE_FILE &&
		    change->ops[i].kind != PUBLISH_DELETE_FOLDER && !(attrs && gitattributes_match_lfs(attrs, path)) &&
		    !gitattributes_match_lfs(add.buf ? add.buf : "", path))
			add_rule(&add, path);
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
		rc = commit_builder_put_bytes(st->cb, ".gitattributes", text.buf, text.len, 0100644);
		strbuf_release(&text);
	}
	strbuf_release(&add);
	free(attrs);
	return rc;
}

/* ---- the stage --------------------------------------------------------------- */

void publish_ops_drop_spools(const struct publish_op *ops, size_t from, size_t n)
{
	for (size_t i = from; i < n; i++)
		if (ops[i].kind == PUBLISH_PUT)
			lfs_writer_abort(ops[i].spool);
}

void publish_stage_init(struct publish_stage *st, git_repository *git, struct lfs_store *lfs, const char *base)
{
	memset(st, 0, sizeof(*st));
	st->git = git;
	st->lfs = lfs;
	snprintf(st->base, sizeof(st->base), "%s", base ? base : "");
	st->failed_op = SIZE_MAX;
}

int publish_stage_build(struct publish_stage *st, const struct publish_changeset *change)
{
	size_t i = 0;
	int rc = 0;
	st->cb = commit_builder_new(st->git, st->base);
	if (!st->cb) {
		rc = KHUB_EIO;
		goto cleanup;
	}
	if (change->flags & PUBLISH_START_EMPTY)
		commit_builder_clear(st->cb);
	st->rules = change->gitattributes ? xstrdup(change->gitattributes)
		  : st->base[0] ? repo_read_text_file(st->git, st->base, ".gitattributes", RULES_MAX) : NULL;
	st->as_lfs = xcalloc(change->nops + 1, sizeof(*st->as_lfs));
	st->blobs = xcalloc(change->nops + 1, sizeof(*st->blobs));
	if ((change->flags & PUBLISH_HUB_LFS_RULES) && (rc = read_own_rules(st, change)) < 0)
		goto cleanup;
	for (; i < change->nops; i++) {
		if ((rc = stage_op(st, i, &change->ops[i])) < 0) {
			st->failed_op = i++;	/* its spool is taken */
			goto cleanup;
		}
	}
	if (change->flags & PUBLISH_HUB_LFS_RULES)
		rc = cover_lfs_paths(st, change);
cleanup:
	publish_ops_drop_spools(change->ops, i, change->nops);
	return rc;
}

int publish_stage_unchanged(struct publish_stage *st, const struct publish_changeset *change, const char *except)
{
	size_t i = change->nops;
	while (except && i-- > 0)
		if (change->ops[i].kind != PUBLISH_DELETE_FILE && change->ops[i].kind != PUBLISH_DELETE_FOLDER &&
		    strcmp(change->ops[i].path, except) == 0 && st->blobs[i][0])
			break;
	struct tree_entry e;
	if (!except || i == SIZE_MAX || !st->base[0] || repo_stat_path(st->git, st->base, except, &e) < 0)
		return commit_builder_unchanged(st->cb);
	/* the base's file in place of the new one: no change left means the same files */
	int same = !e.is_dir && commit_builder_put_blob(st->cb, except, e.oid, e.mode) == 0 &&
		   commit_builder_unchanged(st->cb);
	unsigned mode = change->ops[i].mode == 0100755 ? 0100755 : 0100644;
	if (commit_builder_put_blob(st->cb, except, st->blobs[i], mode) < 0)
		same = 0;
	tree_entry_release(&e);
	return same;
}

int publish_stage_write(struct publish_stage *st, const struct publish_actor *who, const struct publish_changeset *change,
			char sha[41])
{
	return commit_builder_write(st->cb, who->name, who->email ? who->email : "system@khub.local", change->summary,
				    change->description, sha);
}

void publish_stage_release(struct publish_stage *st)
{
	for (size_t i = 0; i < st->nheld; i++)
		lfs_writer_abort(st->held[i]);
	free(st->held);
	st->held = NULL;
	st->nheld = 0;
	commit_builder_free(st->cb);
	st->cb = NULL;
	free(st->rules);
	free(st->own_rules);
	free(st->as_lfs);
	free(st->blobs);
	free(st->named);
	st->rules = st->own_rules = NULL;
	st->as_lfs = NULL;
	st->blobs = NULL;
	st->named = NULL;
	st->nnamed = 0;
}
