/* publish.h -- the one way new content becomes visible in a repo. Every
 * writer (the commit API, repo creation, khub import, the build farm's
 * publication) hands over one change -- a list of operations, the ref and
 * the parent it expects, the commit's message -- and gets the new commit
 * back:
 *
 *   publish_begin      a quarantined handle on the repo: objects written
 *                      for the change stay in memory, LFS content in sealed
 *                      temp files, until the commit is accepted
 *   publish_trylock /  the repo's write lock (a PostgreSQL advisory lock,
 *   publish_lock       so every process serialises on it)
 *   publish_apply      the tree from the operations (the LFS decision,
 *                      pointers, .gitattributes as the Hub keeps it), the
 *                      commit, its objects and LFS content stored durably,
 *                      the ref moved by compare-and-swap
 *   publish_end        unlock, then every after-move step, once
 *
 * Refs that move through objects arriving as packs (git push, the mirror,
 * air-gap sync) are followed by publish_refs_moved: the same after-move
 * steps. Content that arrived from another hub comes in through
 * repo_import_* (storage/publish/import.c, below). Functions return 0 or a
 * negative enum khub_err unless they say otherwise. */
#ifndef KHUB_PUBLISH_H
#define KHUB_PUBLISH_H

#include "storage/git/repo.h"
#include "storage/lfs/lfs.h"
#include "storage/db/db.h"

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
 * for a new ref. The server registers the build farm's trigger here.
 * publish_new_commit_notify (and publish_import_ref) also queue the repo's
 * repo.content webhook deliveries (storage/db/webhooks.h), whatever is
 * registered. */
typedef void (*publish_new_commit_fn)(int64_t repo_id, git_repository *git, const char *ref, const char *old_sha,
				      const char *new_sha);
void publish_set_on_new_commit(publish_new_commit_fn fn);
void publish_new_commit_notify(int64_t repo_id, git_repository *git, const char *ref, const char *old_sha,
			       const char *new_sha);

/* The git objects one publication may hold in memory before it is
 * accepted (default 256 MiB): past it, publish_apply fails with
 * KHUB_ETOOBIG (the commit API answers 413). Set once, before publishing. */
void publish_set_memory_limit(uint64_t bytes);

/* The database calls a publication makes, in one table: by default
 * PostgreSQL's (storage/db/db.h: the repo's write lock, the in-flight LFS
 * names, the repo-to-object links, lastModified, the variant index, the
 * audit log). Unit tests put an in-memory table in its place to run
 * publish_apply and publish_end whole without a server; everything else
 * uses the default. publish_set_db returns the table it replaces; NULL
 * restores the default. Set before publishing, never during. */
struct publish_db {
	int (*lock_try)(int64_t repo_id);		/* 0 taken, 1 busy, KHUB_EDB */
	int (*lock_wait)(int64_t repo_id);
	void (*unlock)(int64_t repo_id);
	/* n objects at once (db_lfs_inflight_begin_many, db_lfs_link_many) */
	int (*lfs_inflight_begin)(const char *const *oids, size_t n, int64_t *ids);
	void (*lfs_inflight_end)(const int64_t *ids, size_t n);
	int (*lfs_link)(int64_t repo_id, const char *const *oids, size_t n);
	int (*lfs_linked)(int64_t repo_id, const char *oid);	/* 1, 0, KHUB_EDB */
	int (*repo_touch)(int64_t repo_id);
	int (*variant_index_update)(int64_t repo_id, git_repository *git, const char *commit_sha);
	int (*audit)(int64_t actor_id, const char *actor_name, const char *action, const char *target,
		     const char *details, const char *remote_addr);
};
const struct publish_db *publish_set_db(const struct publish_db *db);

struct publication;

/* Open rec's repo for publishing under repo_root, LFS content into lfs
 * (borrowed; must outlive the publication). The caller ends it with
 * publish_end (published or not). */
int publish_begin(const char *repo_root, struct lfs_store *lfs, const struct repo_record *rec,
		  struct publication **out);

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

enum publish_op_kind {
	PUBLISH_PUT,		/* a file: stored as LFS or as a blob by the rules below */
	PUBLISH_PUT_LFS,	/* an LFS object already stored and linked to the repo */
	PUBLISH_DELETE_FILE,	/* KHUB_ENOTFOUND when no such file */
	PUBLISH_DELETE_FOLDER,	/* KHUB_ENOTFOUND when nothing is under it */
	PUBLISH_COPY,		/* the file src_path at commit src_rev (NULL: the base) */
};

/* One operation (strings and bytes borrowed until publish_apply returns).
 * A PUT becomes LFS when the .gitattributes rules, binary content (a NUL
 * in its first 8000 bytes) or a size over LFS_SIZE_THRESHOLD say so; with
 * PUBLISH_HUB_LFS_RULES the change's own .gitattributes decides too. A PUT
 * whose content is an LFS pointer text is accepted only for an object
 * stored and linked to this repo (KHUB_EPERM: knowing a sha256 gives no
 * right to another repo's bytes), as is every PUT_LFS. */
struct publish_op {
	enum publish_op_kind kind;
	const char *path;
	unsigned mode;			/* PUT, PUT_LFS: 0100755 executable, else 0100644 */
	/* PUT: the content, from the first of these that is set */
	struct lfs_writer *spool;	/* written by the caller, not sealed: taken
					 * by publish_apply, even when it fails */
	const char *fs_path;		/* a file on disk */
	int fd;				/* > 0: len bytes of this open file at offset */
	uint64_t offset;
	const void *data;		/* else len bytes here */
	size_t len;
	struct lfs_pointer lfs;		/* PUT_LFS: the object */
	const char *src_path, *src_rev;	/* COPY */
};

enum publish_flags {
	PUBLISH_NEW_REF = 1,		/* ref must not exist; the tree starts at base (NULL: empty) */
	PUBLISH_NEW_PULL_REQUEST = 2,	/* the commit goes to a new refs/pr/N, started from
					 * base (NULL: ref's head); ref must exist */
	PUBLISH_START_EMPTY = 4,	/* the tree holds only what the operations put */
	PUBLISH_HUB_LFS_RULES = 8,	/* the commit API: the change's own .gitattributes
					 * decides too, and a rule is added for every LFS
					 * file none covers (git clients then check out
					 * content, not pointers) */
	PUBLISH_SKIP_UNCHANGED = 16,	/* nothing committed when the tree equals the ref's head */
	PUBLISH_DRY_RUN = 32,		/* build the tree and compare, never commit */
};

/* One change to a repo. */
struct publish_changeset {
	const struct publish_op *ops;
	size_t nops;
	const char *ref;		/* full name: "refs/heads/main" */
	const char *parent;		/* NULL: on the ref's head as it is; else 5-40 hex
					 * the head must start with (KHUB_ECONFLICT) */
	const char *base;		/* NEW_REF, NEW_PULL_REQUEST: a revision to start from */
	const char *summary, *description;
	const char *gitattributes;	/* the LFS rules instead of the base's (NULL: those) */
	const char *unchanged_except;	/* SKIP_UNCHANGED, DRY_RUN: a path whose change
					 * alone leaves the tree unchanged */
	unsigned flags;			/* enum publish_flags */
};

/* What publish_apply says. */
struct publish_result {
	char sha[41];			/* the new commit; the head when unchanged */
	char head[41];			/* where the ref pointed ("" none) */
	char ref[REF_NAME_MAX + 16];	/* the ref that moved (refs/pr/N for a pull request) */
	int pr_number;
	int unchanged;			/* SKIP_UNCHANGED, DRY_RUN: the tree is the head's */
	int stale_parent;		/* KHUB_ECONFLICT: the head is not parent */
	int missing_base;		/* KHUB_ENOTFOUND: base names no commit (else: no ref) */
	size_t failed_op;		/* the operation an error is about; SIZE_MAX none */
	size_t lfs_files;		/* PUTs stored as LFS */
};

/* Apply change under the lock (publish_trylock/publish_lock first): the
 * tree from the operations, the commit (author who), its objects and LFS
 * content stored durably (linked to the repo), then the ref moved by
 * compare-and-swap. Once per publication. KHUB_ENOTFOUND (ref, base, or a
 * deleted path: failed_op), KHUB_ECONFLICT (stale parent, or the ref moved
 * meanwhile: nothing visible), KHUB_EPERM (an LFS object this repo has
 * not), KHUB_ETOOBIG (the quarantine's memory limit), KHUB_EINVAL,
 * KHUB_EDB, KHUB_ENOSPC, KHUB_EIO. */
int publish_apply(struct publication *pub, const struct publish_actor *who, const struct publish_changeset *change,
		  struct publish_result *res);

/* End: unlock, and when publish_apply moved a ref: touch the repo, index
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

/* ---- importing what arrived from another hub (storage/publish/import.c) -- */

/* The one importer for the mirror (`khub mirror`: objects fetched by
 * libgit2 under staging refs, LFS content into temp files) and air-gap
 * sync (`khub sync import`: packs and LFS objects staged from a bundle).
 * Outside storage/, nothing else registers a mirrored repo, creates its
 * store, copies its org's trust flag, moves a pack or adopts LFS content
 * into it, or moves its refs. For one repo, in this order:
 *
 *   repo_import_register    registered as a mirrored repo (the org made
 *                           when new, marked as made by an import)
 *   repo_import_open        its store, created empty and fresh when new
 *                           (never adopting a directory), opened
 *   repo_import_copy_trust  its org's trustedKernelPublisher follows the
 *                           source unless an admin set it here
 *   repo_import_add_pack    a staged pack moved into its objects
 *   repo_import_add_lfs     a staged LFS object adopted, linked to it
 *   repo_import_move_ref    a ref moved by compare-and-swap under the
 *                           repo's write lock, then the after-move steps
 *                           (touch, index, audit entry, hook) once
 *
 * An air-gap import sets the refs of a repo new here before registering
 * it (repo_import_set_fresh_ref), so that it appears whole, and runs the
 * after-move steps once it is registered (repo_import_refs_moved). */

/* Fills out. Safe inside a caller's transaction. */
int repo_import_register(enum repo_type type, const char *ns, const char *name, int private_,
			 struct repo_record *out);
/* A repo's store, opened: fresh (the repo not registered here, so nothing
 * owns its place) is made empty and new (repo_store_init_empty_fresh: a
 * directory found there goes to the trash, *quarantined (may be NULL) its
 * trash path, the caller frees; never adopted); otherwise the registered
 * repo's own directory (made empty when missing). The caller holds the
 * registry lock (DB_LOCK_REGISTRY) when fresh, and frees *out with
 * git_repository_free. */
int repo_import_open(const char *root, enum repo_type type, const char *ns, const char *name, int fresh,
		     git_repository **out, char **quarantined);
int repo_import_copy_trust(const char *ns, int trusted);
/* staged is a pack's path without .pack/.idx (git_indexer's output): both
 * renamed into git's objects/pack, the .idx last. KHUB_EIO with errno
 * set when a rename fails. */
int repo_import_add_pack(git_repository *git, const char *staged);
/* The repo as an import would see it once a staged pack is in, for the
 * checks a dry run makes: the repo's store (exists) or an empty
 * in-memory one, with the staged pack (its path without .pack/.idx; NULL:
 * none) added to its objects in memory, nothing moved. KHUB_EIO. */
int repo_import_open_with_pack(const char *root, enum repo_type type, const char *ns, const char *name, int exists,
			       const char *staged, git_repository **out);
/* staged (may be NULL: stored already) is a file the caller hashed as it
 * wrote it (its sha256 is oid): renamed into the store. Then linked to
 * repo_id (0: not yet, the repo is not registered). KHUB_EDB. */
int repo_import_add_lfs(struct lfs_store *lfs, int64_t repo_id, const char *staged, const char *oid);

/* A ref to move: name (full), expected_old (NULL or "": must not exist),
 * new_sha (NULL or "": delete it); strings borrowed. */
struct repo_import_ref {
	const char *name;
	const char *expected_old;
	const char *new_sha;
	const char *log_message;
};
/* The objects must be in the repo (KHUB_EINVAL when new_sha is neither a
 * commit here nor an annotated tag of one); KHUB_ECONFLICT when the ref
 * moved meanwhile. Waits for the write lock: background work only, never
 * a request thread. The audit entry (action, target, details JSON) is
 * written when who and action are not NULL. */
int repo_import_move_ref(int64_t repo_id, git_repository *git, const struct repo_import_ref *ref,
			 const struct publish_actor *who, const char *action, const char *target, const char *details);
/* A ref of a repo not registered yet: no lock (nobody else can reach it),
 * no after-move steps. */
int repo_import_set_fresh_ref(git_repository *git, const struct repo_import_ref *ref);
/* The after-move steps for a ref moved to new_sha (NULL or "": deleted). */
void repo_import_refs_moved(int64_t repo_id, git_repository *git, const char *new_sha,
			    const struct publish_actor *who, const char *action, const char *target, const char *details);

#endif
