/* repo.h -- storage/git/'s one header: repo names and paths, the bare git
 * repo store, reading refs, trees and files, building commits
 * (quarantined), writing refs and history. Importing from another hub is
 * storage/publish/publish.h's. Every function returns 0 or a negative enum
 * khub_err unless it says otherwise. */
#ifndef KHUB_STORAGE_REPO_H
#define KHUB_STORAGE_REPO_H

#include <git2.h>
#include <stdint.h>
#include <time.h>

#include "common/common.h"

/* ---- names, paths and revisions (storage/git/names.c) ----------------------- */

enum repo_type { REPO_MODEL = 0, REPO_DATASET, REPO_SPACE, REPO_KERNEL, REPO_TYPE_COUNT };

const char *repo_type_name(enum repo_type type);	/* "kernel" */
const char *repo_type_plural(enum repo_type type);	/* "kernels" */
const char *repo_type_url_prefix(enum repo_type type);	/* "kernels/", "" for models */
/* Accepts "kernel" and "kernels" (and so on); 0 or KHUB_EINVAL. */
int repo_type_parse(const char *s, enum repo_type *out);

#define REPO_NAME_MAX 96
#define REPO_PATH_MAX 1024
#define REF_NAME_MAX 200

/* A namespace or repo name: [A-Za-z0-9] then [A-Za-z0-9._-], at most 96
 * chars, no "..", not ending in ".git". On failure *why (static) says what. */
int repo_name_validate(const char *name, const char **why);
/* A file path inside a repo: relative, '/'-separated, no empty, "." or ".."
 * component, no ".git" component, no NUL/control bytes or backslash, at
 * most REPO_PATH_MAX bytes. */
int repo_path_validate(const char *path, const char **why);
/* A short branch or tag name, as git check-ref-format would accept under
 * refs/heads/; at most REF_NAME_MAX bytes. */
int ref_name_validate(const char *name, const char **why);

/* ---- git repo store (storage/git/repo_store.c) ------------------------------ */

/* Call once at start-up before any other git function. */
void repo_store_global_init(void);
/* log_error of what fmt says, then ": " and libgit2's last error on this
 * thread (storage/git/git_error.c). */
void log_git_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "{root}/{type plural}/{ns}/{name}.git"; the caller frees. */
char *repo_store_git_dir(const char *root, enum repo_type type, const char *ns, const char *name);
/* Create a bare repo with an initial commit on main holding .gitattributes.
 * KHUB_EEXIST when the directory exists. */
int repo_store_create(const char *root, enum repo_type type, const char *ns, const char *name);
/* The Hub's initial commit (.gitattributes, author "system") on main,
 * unless main exists. */
int repo_store_initial_commit(git_repository *repo);
/* Create an empty bare repo (no commit): imports (the mirror, air-gap
 * sync) keep the source's history exactly. KHUB_EEXIST when it exists. */
int repo_store_init_empty(const char *root, enum repo_type type, const char *ns, const char *name);
/* Open a bare repo. The caller frees *out with git_repository_free. */
int repo_store_open(const char *root, enum repo_type type, const char *ns, const char *name,
		    git_repository **out);

/* The .gitattributes khub writes into a new repo. */
extern const char repo_default_gitattributes[];

/* ---- reading refs, trees and files (storage/git/repo_read.c) ---------------- */

enum ref_kind { REF_BRANCH, REF_TAG, REF_PR, REF_CONVERT };

struct ref_item {
	enum ref_kind kind;
	char *name;	/* "v1", "3" for refs/pr/3 */
	char *ref;	/* "refs/heads/v1" */
	char sha[41];
};

struct ref_list {
	struct ref_item *items;
	size_t count;
};

int repo_list_refs(git_repository *repo, struct ref_list *out);
void ref_list_release(struct ref_list *list);

/* Resolve a branch, tag, full ref or 40-hex commit sha to a commit sha.
 * KHUB_ENOTFOUND when it names nothing. */
int repo_resolve_revision(git_repository *repo, const char *rev, char sha[41]);
/* A revision and the path after it in a page URL split on '/'
 * (/tree/release/v1.2/src): the longest "rev/leading/components/of/path"
 * that names a branch or tag wins (as the Hub does), else rev alone (a
 * sha, a full ref, a name sent with %2F). 0 with sha, *ref (the revision
 * that matched; the caller frees) and *rest (the rest of path, pointing
 * into it; "" when none), or KHUB_ENOTFOUND. */
int repo_resolve_rev_path(git_repository *repo, const char *rev, const char *path, char **ref, const char **rest,
			  char sha[41]);

struct tree_entry {
	int is_dir;
	char *path;		/* repo-root relative */
	char oid[41];		/* git blob or tree sha1 */
	uint64_t size;		/* content size (LFS: real size), 0 for dirs */
	int is_lfs;
	char lfs_oid[65];
	uint64_t pointer_size;
	unsigned mode;		/* git file mode */
};

struct tree_listing {
	struct tree_entry *entries;
	size_t count;
};

/* List the directory path ("" for the root) at a commit. KHUB_ENOTFOUND when
 * path is absent, KHUB_ENOTDIR when it is a file. Entries are in git order
 * (a directory's children follow it when recursive). */
int repo_list_tree(git_repository *repo, const char *commit_sha, const char *path, int recursive,
		   struct tree_listing *out);
/* One page of that listing: at most limit entries that come after the
 * entry `after` (a path relative to path, as listed on the previous page;
 * NULL or "" = from the start). The walk goes straight to `after`, so a
 * page costs its size and the tree's depth, not the repo's size. *more
 * (may be NULL) is set when entries remain. KHUB_EINVAL when `after` is
 * not an entry of this listing. */
int repo_list_tree_page(git_repository *repo, const char *commit_sha, const char *path, int recursive,
			const char *after, size_t limit, struct tree_listing *out, int *more);
void tree_listing_release(struct tree_listing *listing);
void tree_entry_release(struct tree_entry *entry);

/* Describe one path at a commit; is_dir set for directories. */
int repo_stat_path(git_repository *repo, const char *commit_sha, const char *path,
		   struct tree_entry *out);

/* The content of a small regular (not LFS) file at a commit, at most
 * limit bytes, NUL-terminated; NULL when absent, a directory, LFS or
 * larger. The caller frees. */
char *repo_read_text_file(git_repository *repo, const char *commit_sha, const char *path, size_t limit);

/* Read a blob's bytes (at most limit). The caller frees *data. */
int repo_read_blob(git_repository *repo, const char *blob_sha, size_t limit, char **data,
		   size_t *len);

/* ---- building commits (storage/git/commit_build.c) -------------------------- */

/* A commit under construction: start from a parent (or none), stage
 * changes, then write it and move the branch with compare-and-swap. */
struct commit_builder;

/* parent_sha NULL or "" starts from an empty tree. NULL on failure. */
struct commit_builder *commit_builder_new(git_repository *repo, const char *parent_sha);
void commit_builder_free(struct commit_builder *cb);
/* Stage a file whose blob is already written (blob_sha), mode 0100644/0100755. */
int commit_builder_put_blob(struct commit_builder *cb, const char *path, const char *blob_sha,
			    unsigned mode);
/* Write bytes as a blob and stage it. */
int commit_builder_put_bytes(struct commit_builder *cb, const char *path, const void *data,
			     size_t len, unsigned mode);
int commit_builder_delete_file(struct commit_builder *cb, const char *path);
int commit_builder_delete_folder(struct commit_builder *cb, const char *path);
/* 1 when the path is a file in the staged tree (0 otherwise). */
int commit_builder_has_file(struct commit_builder *cb, const char *path);
/* Unstage everything (the commit will hold only what is put after). */
void commit_builder_clear(struct commit_builder *cb);
/* 1 when the staged tree equals the parent's tree (nothing to commit). */
int commit_builder_unchanged(struct commit_builder *cb);
/* Write tree and commit objects (nothing visible yet). */
int commit_builder_write(struct commit_builder *cb, const char *author_name, const char *author_email,
			 const char *summary, const char *description, char commit_sha[41]);
/* Move ref_name (full, e.g. "refs/heads/v1") from expected_old (NULL or ""
 * when the ref must not exist) to new_sha. KHUB_ECONFLICT when it moved;
 * KHUB_EBUSY while another live writer holds the ref (its .lock file: one
 * whose writer died is removed at once, see ref_owner below). */
int repo_update_ref(git_repository *repo, const char *ref_name, const char *expected_old,
		    const char *new_sha, const char *log_message);

/* 1 when the last .gitattributes rule matching path sets filter=lfs. */
int gitattributes_match_lfs(const char *gitattributes, const char *path);
/* Next free pull request number (1 + the highest refs/pr/N). */
int repo_next_pr_number(git_repository *repo);

/* Files over this size are stored as LFS (the Hub's rule); a push may not
 * bring a plain blob larger than this. */
#define LFS_SIZE_THRESHOLD (10u * 1024 * 1024)
/* Whether a file should be stored as LFS: the .gitattributes rules at the
 * parent (text of that file, may be NULL), binary content (a NUL byte in
 * the first 8000 bytes) or a size over LFS_SIZE_THRESHOLD. Empty files never are. */
int lfs_should_store(const char *gitattributes, const char *path, const void *head,
		     size_t head_len, uint64_t size);

/* ---- quarantined writes (storage/git/quarantine.c) --------------------------- */

/* The objects of a commit under construction, kept in memory until the
 * commit is accepted. quarantine_open opens the repo a second time (*repo,
 * owned by the quarantine): reads see the repo's objects and the new ones,
 * writes stay in memory, at most max_bytes of them (further writes fail and
 * quarantine_over_limit says so). */
struct git_quarantine;
int quarantine_open(const char *root, enum repo_type type, const char *ns, const char *name, uint64_t max_bytes,
		    struct git_quarantine **out, git_repository **repo);
/* Write every quarantined object into the repo's store, durably (fsynced),
 * before a ref may point at them. */
int quarantine_publish(struct git_quarantine *q);
int quarantine_over_limit(const struct git_quarantine *q);
/* Drop what was not published and close the repo handle; accepts NULL. */
void quarantine_free(struct git_quarantine *q);

/* ---- repo directories over their life (storage/git/repo_lifecycle.c) -------- */

/* repo_store_create, never adopting: a directory already at the repo's
 * place (a crash between creating one and registering its repo, or any
 * leftover) is first moved to the trash; *quarantined (may be NULL) is then
 * its trash path (the caller frees), else NULL. */
int repo_store_create_fresh(const char *root, enum repo_type type, const char *ns, const char *name,
			    char **quarantined);
/* The same with repo_store_init_empty (no commit): for a repo new here that
 * an import (the mirror, air-gap sync) brings. */
int repo_store_init_empty_fresh(const char *root, enum repo_type type, const char *ns, const char *name,
				char **quarantined);
/* The trash, {root}/.trash (the caller frees): inside the repos' folder, on
 * their filesystem, so that trashing is a rename that cannot fail
 * cross-device. Laid out as root is ({plural}/{ns}/...). */
char *repo_store_trash_dir(const char *root);
/* Move a repo's directory to {root}/.trash/{plural}/{ns}/{name}.git.{UTC
 * time}.{random} (a rename: nothing is lost, the name is free again);
 * *slot (may be NULL) is then that path (the caller frees).
 * KHUB_ENOTFOUND when there is no directory, KHUB_EIO (nothing moved) when
 * it cannot be moved. */
int repo_store_trash_to(const char *root, enum repo_type type, const char *ns, const char *name, char **slot);
/* repo_store_trash_to without the slot. */
int repo_store_trash(const char *root, enum repo_type type, const char *ns, const char *name);
/* Put a trashed directory (slot, from repo_store_trash_to) back at the
 * repo's place; KHUB_EIO when something is there already or the rename
 * fails. */
int repo_store_untrash(const char *root, enum repo_type type, const char *ns, const char *name, const char *slot);
/* Rename a repo's directory (another namespace's folder is created as
 * needed). KHUB_EEXIST when the target exists, KHUB_ENOTFOUND when the
 * source does not. Callers serialise renames. */
int repo_store_rename(const char *root, enum repo_type type, const char *from_ns, const char *from_name,
		      const char *to_ns, const char *to_name);

/* ---- who is inside a ref update (storage/git/ref_owner.c) -------------------- */

/* Held by a writer around libgit2's update of one ref of a repo. */
struct ref_owner {
	int fd;			/* {gitdir}/khub-ref-owner, flock()ed */
	const char *ref_name;	/* borrowed */
	char *lock_path;	/* {gitdir}/{ref_name}.lock (owned) */
	char prev[1400];	/* the previous owner's record, "" when it finished */
};

/* Become the repo's ref writer for ref_name (waits up to 100 ms): 0,
 * KHUB_EBUSY when a live writer is inside an update, or KHUB_EIO. Release
 * with ref_owner_release (also after a failure). */
int ref_owner_take(git_repository *repo, const char *ref_name, struct ref_owner *o);
/* With o taken, the ref's .lock file was found: remove it when its writer
 * is dead (a khub process that recorded this ref and is gone, or a lock of
 * no khub owner, git's, older than 5 s) and return 0 (try again);
 * KHUB_EBUSY while it may be alive, KHUB_EIO. */
int ref_owner_clear_stale(const struct ref_owner *o);
/* Clear the record and drop the flock; accepts a failed take. */
void ref_owner_release(struct ref_owner *o);

/* ---- writing refs (storage/git/refs_write.c) --------------------------------- */

/* repo_resolve_revision, and also an abbreviated sha (7 to 39 hex digits)
 * naming exactly one commit. KHUB_ENOTFOUND otherwise. */
int repo_resolve_commitish(git_repository *repo, const char *rev, char sha[41]);
/* The object a full ref points at, unpeeled. KHUB_ENOTFOUND when absent. */
int repo_ref_read(git_repository *repo, const char *ref_name, char sha[41]);
/* Point refs/heads/{branch} at target_sha. KHUB_EEXIST when the branch
 * exists and !overwrite; with overwrite it moves by compare-and-swap
 * (KHUB_ECONFLICT when it moved meanwhile). */
int repo_branch_set(git_repository *repo, const char *branch, const char *target_sha, int overwrite,
		    const char *log_message);
/* Delete a full ref if it still points where it did when looked up.
 * KHUB_ENOTFOUND when absent, KHUB_ECONFLICT when it moved. */
int repo_delete_ref(git_repository *repo, const char *ref_name);
/* Create refs/tags/{tag} at a commit: an annotated tag object when message
 * is not NULL (tagger = name/email, now), else a lightweight tag.
 * KHUB_EEXIST when the tag exists, KHUB_EINVAL for a bad name,
 * KHUB_ENOTFOUND when target_sha is not a commit. */
int repo_tag_create(git_repository *repo, const char *tag, const char *target_sha, const char *message,
		    const char *tagger_name, const char *tagger_email);
/* Write a parentless commit with an empty tree (nothing visible yet). */
int repo_commit_empty_root(git_repository *repo, const char *author_name, const char *author_email,
			   const char *summary, char commit_sha[41]);

/* ---- history (storage/git/commit_log.c) ---------------------------------------- */

struct commit_info {
	char sha[41];
	char *title;		/* first line of the message */
	char *message;		/* the rest, after the blank line */
	char *author_name;
	char *author_email;
	time_t time;		/* committer time */
	char (*parents)[41];
	size_t nparents;
};

struct commit_log {
	struct commit_info *items;	/* owned; release with commit_log_release */
	size_t count;
	size_t total;			/* commits reachable from the start */
};

/* Walk the history of sha newest first (topological, then by time): skip
 * `skip` commits, keep up to `limit`, count them all. */
int repo_log(git_repository *repo, const char *sha, size_t skip, size_t limit, struct commit_log *out);
void commit_log_release(struct commit_log *log);	/* accepts NULL */
/* One commit (sha: 40 hex) as repo_log describes it; KHUB_ENOTFOUND when
 * it is not a commit here. The caller releases out with commit_info_release. */
int repo_commit_info(git_repository *repo, const char *sha, struct commit_info *out);
void commit_info_release(struct commit_info *info);	/* accepts NULL */
/* The newest commit that changed each of the n entries `names` of the
 * folder dir ("" for the root) at sha, following first parents, walking at
 * most max_walk commits: out[i] is filled for each (sha "" when the walk
 * ended first; release each with commit_info_release) and *complete is 0
 * when entries were left unresolved by the bound. */
int repo_last_commits(git_repository *repo, const char *sha, const char *dir, const char *const *names, size_t n,
		      size_t max_walk, struct commit_info *out, int *complete);

/* ---- what a commit changed (storage/git/commit_diff.c) ------------------------- */

enum diff_status { DIFF_ADDED, DIFF_DELETED, DIFF_MODIFIED, DIFF_RENAMED };
/* How a file's change is shown: lines, a size change of LFS content (the
 * pointer's oid and size, never the pointer text), a size change of a
 * binary file, or a size change of a file too large to diff (over 1 MiB,
 * whatever it holds). */
enum diff_kind { DIFF_TEXT, DIFF_LFS, DIFF_BINARY, DIFF_TOO_LARGE };

struct diff_line {
	char origin;		/* ' ' context, '+' added, '-' removed, '\\' no newline at end */
	int old_no, new_no;	/* line numbers, 0 where the line is not on that side */
	char *text;		/* without its newline, cut at DIFF_LINE_MAX bytes */
};

struct diff_hunk {
	int old_start, old_lines, new_start, new_lines;
	size_t first, count;	/* its lines: file->lines[first .. first + count) */
};

struct diff_file {
	char *old_path, *new_path;	/* both set; equal unless renamed */
	enum diff_status status;
	enum diff_kind kind;
	size_t additions, deletions;	/* DIFF_TEXT when shown: all of them, kept or not */
	uint64_t old_size, new_size;	/* bytes (LFS: the content's), 0 on the absent side */
	char old_oid[65], new_oid[65];	/* DIFF_LFS: sha256 of each side's content, "" when not LFS */
	int shown;			/* 0: over the limits, only this header */
	struct diff_hunk *hunks;
	size_t nhunks;
	struct diff_line *lines;
	size_t nlines;
	size_t lines_left_out;		/* of this file, for the limits */
};

/* The bounds on one commit's diff: files described, lines and bytes of
 * line text kept (over all files). */
struct diff_limits {
	size_t max_files, max_lines, max_bytes;
};

struct commit_diff {
	struct diff_file *files;	/* owned; release with commit_diff_release */
	size_t count;
	size_t files_total;		/* files the commit changed (count <= files_total) */
	size_t lines_left_out;		/* over all files described */
	size_t files_not_shown;		/* described with their header only */
};

#define DIFF_LINE_MAX 2000

/* The changes of commit sha (40 hex) against its first parent (the root
 * commit: against the empty tree), renames found, within lim. KHUB_ENOTFOUND
 * when sha is no commit here, KHUB_EIO. The caller releases out. */
int repo_commit_diff(git_repository *repo, const char *sha, const struct diff_limits *lim, struct commit_diff *out);
void commit_diff_release(struct commit_diff *diff);	/* accepts NULL */

#endif
