/* variant_index.h -- storage: the kernel variant index (what every
 * build/<variant>/ of a kernel repo's commits holds, in the database).
 * Every function returns 0 or a negative enum khub_err unless it says
 * otherwise. */
#ifndef KHUB_STORAGE_VARIANT_INDEX_H
#define KHUB_STORAGE_VARIANT_INDEX_H

#include <git2.h>
#include <stdint.h>

#include "common/common.h"
#include "kernel/kernel.h"

/* ---- the kernel variant index (storage/db/variant_index.c) ------------------- */

/* Bumped when what the index records changes: older commits are redone. */
#define VARIANT_INDEX_VERSION 1

/* Index every build/<variant>/ of a kernel repo's commit (name parts,
 * metadata.json, file count and size) unless already done, then refresh the
 * repo's recorded branch heads from git. commit_sha may be a tag object's
 * sha (peeled) or NULL (heads only, e.g. after a branch was deleted). Does
 * nothing for repos of other types. */
int variant_index_update(int64_t repo_id, git_repository *git, const char *commit_sha);
/* Index one commit if it is not yet (the read endpoints' lazy path). */
int variant_index_ensure(int64_t repo_id, git_repository *git, const char *commit_sha);
/* 1 when commit_sha is indexed at the current version (or the repo is not
 * a kernel repo: nothing to index), 0 when variant_index_ensure has work to
 * do, or a negative error. */
int variant_index_current(int64_t repo_id, git_repository *git, const char *commit_sha);
/* Index the kernel repos (under repo_root) whose heads were never recorded
 * or point at unindexed commits, at most `limit` repos; returns how many
 * were (re)indexed or a negative error. */
int variant_index_catch_up(const char *repo_root, long limit);
/* The same for one repo, whatever its recorded heads: index every branch
 * head, then record the heads as git has them (khub fsck --repair). */
int variant_index_catch_up_repo(int64_t repo_id, git_repository *git);

/* ---- README cards (storage/db/kernel_cards.c) -------------------------------- */

/* Bumped when what a card records changes: every card is read again. */
#define KERNEL_CARD_INDEX_VERSION 1

/* Read the card of the repo's main README.md (kernel/card.c) into
 * kernel_cards unless the stored one is of main's head already (no main:
 * an empty card). Called with the variant index's updates. */
int kernel_card_index(int64_t repo_id, git_repository *git);

struct variant_row {
	char *name;			/* owned, like every pointer below */
	int name_valid;
	char *name_error;		/* NULL when valid */
	int64_t file_count, total_size;
	enum variant_metadata_status metadata_status;
	char *metadata_error;		/* NULL when ok */
	char *metadata;			/* the document as JSON text; NULL when missing or not JSON */
	char *warnings;			/* JSON array text */
};

struct variant_rows {
	struct variant_row *items;
	size_t count;
};

/* The indexed variants of a commit, by name. KHUB_ENOTFOUND when the commit
 * is not indexed. Release with variant_rows_release. */
int variant_index_load(int64_t repo_id, const char *commit_sha, struct variant_rows *out);
void variant_rows_release(struct variant_rows *rows);	/* accepts NULL */

#endif
