/* publish.h -- the one way new content becomes visible in a repo. Every
 * writer (the commit API, repo creation, khub import; the build worker and
 * air-gap sync) follows the same steps:
 *
 *   publish_begin      a quarantined handle on the repo: objects written
 *                      through it stay in memory, LFS content in sealed
 *                      temp files, until the commit is accepted
 *   publish_trylock /  the repo's write lock (a PostgreSQL advisory lock,
 *   publish_lock       so every process serialises on it)
 *   publish_tree       start the new tree from a parent, or empty
 *   publish_put_*      files: the LFS decision, the per-repo LFS link,
 *                      pointers, .gitattributes
 *   publish_commit     write the commit, store its objects and LFS content
 *                      durably, move the ref by compare-and-swap
 *   publish_end        unlock, then every after-move step, once
 *
 * Refs that move through objects arriving as packs (git push, the mirror)
 * are followed by publish_refs_moved: the same after-move steps. Functions
 * return 0 or a negative enum khub_err unless they say otherwise. */
#ifndef KHUB_PUBLISH_H
#define KHUB_PUBLISH_H

#include "storage/repo.h"
#include "storage/lfs.h"
#include "storage/db.h"

/* Who publishes, for the audit log (strings borrowed). user_id 0 with a
 * name such as "cli" or "mirror" for the server's own work. */
struct publish_actor {
	int64_t user_id;
	const char *name;
	const char *email;		/* commit author email */
	const char *remote_addr;	/* "local" for the command line */
};

/* What an after-move step is told. */
enum publish_change {
	PUBLISH_NEW_COMMIT,	/* a branch or PR ref now points at a new commit */
	PUBLISH_REFS_CHANGED,	/* branches or tags were created, moved or deleted */
};

/* Called after every publication, once the lock is released (the server
 * registers its cache invalidation here). NULL: none. */
typedef void (*publish_after_move_fn)(int64_t repo_id, enum publish_change change);
void publish_set_after_move(publish_after_move_fn fn);

/* Called after a ref moved to a new commit (publish_end, and the push hook
 * through publish_new_commit_notify): ref is the full name, old_sha NULL
 * for a new ref. The server registers the build farm's trigger here. */
typedef void (*publish_new_commit_fn)(int64_t repo_id, git_repository *git, const char *ref, const char *old_sha,
				      const char *new_sha);
void publish_set_on_new_commit(publish_new_commit_fn fn);
void publish_new_commit_notify(int64_t repo_id, git_repository *git, const char *ref, const char *old_sha,
			       const char *new_sha);

/* The git objects one publication may hold in memory before it is
 * accepted (default 256 MiB): past it, writes fail and publish_over_limit
 * says so (the commit API answers 413). Set once, before publishing. */
void publish_set_memory_limit(uint64_t bytes);

struct publication;

/* Open rec's repo for publishing under repo_root, LFS content into lfs
 * (borrowed; must outlive the publication). The caller ends it with
 * publish_end (published or not). */
int publish_begin(const char *repo_root, struct lfs_store *lfs, const struct repo_record *rec,
		  struct publication **out);
/* The quarantined git handle (owned by the publication): reads see the
 * repo and what was put; writes stay in memory until publish_commit. */
git_repository *publish_git(struct publication *pub);

/* The repo's write lock. publish_trylock: 0 taken, 1 held by someone else
 * (this process or another), KHUB_EDB. publish_lock waits for it (command
 * line only: never on a request thread). Released by publish_end. */
int publish_trylock(struct publication *pub);
int publish_lock(struct publication *pub);
/* Called with the repo id whenever a write lock of this process is
 * released (the server wakes requests waiting for it). */
void publish_set_unlock_notify(void (*fn)(int64_t repo_id));
/* The same lock for writers that only move refs (branches, tags, repo
 * moves and deletes): 0 taken, 1 busy, KHUB_EDB; and its release. */
int publish_repo_trylock(int64_t repo_id);
void publish_repo_unlock(int64_t repo_id);

/* Start the new tree from parent_sha (NULL or "": empty); clear = 1
 * starts empty whatever the parent (an import is the whole directory).
 * Reads the parent's .gitattributes for the LFS decisions. */
int publish_tree(struct publication *pub, const char *parent_sha, int clear);

/* Replace the .gitattributes text the LFS decisions follow (copied; an
 * import decides by the directory's own). */
void publish_set_gitattributes(struct publication *pub, const char *text);
/* A file from bytes or from a file on disk: stored as LFS when the
 * .gitattributes rules, binary content or its size say so (content held
 * until publish_commit), otherwise as a blob. A file whose content is an
 * LFS pointer is accepted only when the object is stored and linked to
 * this repo (KHUB_EPERM otherwise: knowing a sha256 gives no right to
 * another repo's bytes). mode 0100644 or 0100755. *as_lfs (may be NULL)
 * says which it became. */
int publish_put_bytes(struct publication *pub, const char *path, const void *data, size_t len, unsigned mode,
		      int *as_lfs);
int publish_put_file(struct publication *pub, const char *path, const char *fs_path, unsigned mode, int *as_lfs);
/* Content already spooled by the caller (an open LFS writer, taken):
 * sealed, held and stored as LFS at publish_commit. Fills ptr. */
int publish_hold_lfs(struct publication *pub, struct lfs_writer *w, struct lfs_pointer *ptr);
/* The pointer blob for an LFS object; fills blob_sha. */
int publish_write_pointer(struct publication *pub, const struct lfs_pointer *ptr, char blob_sha[41]);
/* The staged tree, for callers that stage in ways of their own (blobs
 * already written, deletions: commit_builder_* in storage/repo.h). */
struct commit_builder *publish_builder(struct publication *pub);
/* 1 when the staged tree equals the parent's. */
int publish_unchanged(struct publication *pub);
/* 1 when the quarantine's size limit stopped a write. */
int publish_over_limit(struct publication *pub);

/* Write the commit (summary/description as given), store its objects and
 * held LFS content (linked to the repo), then move ref (full name) from
 * expected_old (NULL or "": the ref must not exist) to it. Needs the lock.
 * KHUB_ECONFLICT when the ref moved meanwhile (nothing visible), KHUB_EDB,
 * KHUB_ENOSPC, KHUB_EIO. Fills sha. */
int publish_commit(struct publication *pub, const struct publish_actor *who, const char *summary,
		   const char *description, const char *ref, const char *expected_old, char sha[41]);

/* End: unlock, and when publish_commit moved a ref: touch the repo, index
 * the new commit (kernel repos), write the audit entry (action, details
 * JSON or NULL) and call the after-move hook. Frees everything. Accepts
 * NULL. */
void publish_end(struct publication *pub, const struct publish_actor *who, const char *action, const char *details);

/* The ref-import entry, for objects that arrived as a pack (the mirror;
 * air-gap sync): move ref to new_sha (NULL: delete it) by
 * compare-and-swap from expected_old (NULL or "": must not exist) under
 * the repo's write lock, waited for (background work only, never a request
 * thread). The objects must be in the repo already (checked: KHUB_EINVAL
 * when new_sha is neither a commit here nor an annotated tag of one). Then
 * call publish_refs_moved. */
int publish_import_ref(int64_t repo_id, git_repository *git, const char *ref, const char *expected_old,
		       const char *new_sha, const char *log_message);

/* The same for a repo that is not registered yet (an import sets its refs
 * before the repo becomes visible, so it appears whole): no lock, nobody
 * else can reach it; no after-move steps (registering the repo does them). */
int publish_import_unregistered_ref(git_repository *git, const char *ref, const char *expected_old, const char *new_sha,
				    const char *log_message);

/* The after-move steps for refs moved by others (pushes, mirror syncs,
 * branch and tag changes): touch the repo, index new_sha (NULL: refresh
 * the branch heads only), the audit entry when action is not NULL, the
 * hook. git may be NULL (no indexing then). */
void publish_refs_moved(int64_t repo_id, git_repository *git, const char *new_sha, enum publish_change change,
			const struct publish_actor *who, const char *action, const char *target,
			const char *details);

#endif
