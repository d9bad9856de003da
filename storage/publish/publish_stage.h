/* publish_stage.h -- internal to storage/: the half of publish_apply that
 * needs only git and the LFS store (no database, no lock), so that it can
 * be tested on a bare repo alone: where the change starts (the ref's head,
 * the parent check, the base), and the tree built from the operations
 * with the LFS decision, pointers and .gitattributes coverage. */
#ifndef KHUB_PUBLISH_STAGE_H
#define KHUB_PUBLISH_STAGE_H

#include "storage/publish/publish.h"

/* The LFS content a stage holds open (sealed) before it stores the rest
 * at once through store_now. */
#define PUBLISH_HELD_MAX 256

/* An LFS object the tree points at whose bytes did not come with the
 * change: the caller checks that the repo may use it. */
struct publish_named_lfs {
	size_t op;
	char oid[65];
};

struct publish_stage {
	git_repository *git;		/* borrowed */
	struct lfs_store *lfs;		/* borrowed */
	char base[41];			/* "" = an empty tree */
	struct commit_builder *cb;
	char *rules;			/* the .gitattributes the decision follows */
	char *own_rules;		/* PUBLISH_HUB_LFS_RULES: the change's own, or NULL */
	unsigned char *as_lfs;		/* per operation: it points at LFS content */
	char (*blobs)[41];		/* per operation: the blob staged ("" none) */
	/* sealed LFS content, for publish_stage_hand_over */
	struct lfs_writer **held;
	size_t nheld;
	/* past PUBLISH_HELD_MAX held: store w's object now (NULL: keep holding) */
	int (*store_now)(void *ctx, struct lfs_writer *w, const char *oid);
	void *store_ctx;
	struct publish_named_lfs *named;
	size_t nnamed;
	size_t failed_op;		/* SIZE_MAX when none */
	size_t lfs_files;
};

/* Where change starts in git: fills res->head, res->ref (and pr_number
 * for a pull request) and base ("" empty). KHUB_ENOTFOUND (the ref, or
 * base: res->missing_base), KHUB_ECONFLICT (res->stale_parent). */
int publish_stage_target(git_repository *git, const struct publish_changeset *change, struct publish_result *res,
			 char base[41]);

/* Start st on git from base, then build the tree from change's operations
 * (every spool of them taken, even on failure; st->failed_op names the
 * operation a failure is about). */
void publish_stage_init(struct publish_stage *st, git_repository *git, struct lfs_store *lfs, const char *base);
int publish_stage_build(struct publish_stage *st, const struct publish_changeset *change);
/* 1 when the staged tree equals the base's (except at path, may be NULL). */
int publish_stage_unchanged(struct publish_stage *st, const struct publish_changeset *change, const char *except);
/* Write the tree and the commit (nothing visible yet); fills sha. */
int publish_stage_write(struct publish_stage *st, const struct publish_actor *who, const struct publish_changeset *change,
			char sha[41]);
/* Abort what is still held, free the tree; accepts a stage never built. */
void publish_stage_release(struct publish_stage *st);
/* Abort the spools of ops[from..n) (a change refused before its build). */
void publish_ops_drop_spools(const struct publish_op *ops, size_t from, size_t n);

#endif
