/* publish.c -- the one publish path (see publish.h): quarantined writes,
 * the repo's write lock, one change applied (its tree built by
 * publish_stage.c, its LFS objects checked and linked to the repo), commit
 * with compare-and-swap, and the after-move steps in one place. */
#include "storage/publish/publish_stage.h"
#include "storage/db/variant_index.h"
#include "storage/db/webhooks.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Git objects of one publication are held in memory up to this
 * (publish_set_memory_limit; the server sets commit_memory_mb). */
static uint64_t quarantine_max = (uint64_t)256 << 20;

struct publication {
	struct repo_record rec;
	struct lfs_store *lfs;
	struct git_quarantine *quarantine;
	git_repository *git;			/* owned by the quarantine */
	struct publish_stage stage;		/* the tree; LFS content held until the commit */
	int locked;
	int applied;				/* publish_apply ran */
	int moved;				/* publish_apply moved ref */
	char ref[REF_NAME_MAX + 16];
	char sha[41];
	char old[41];				/* where ref was; "" = nowhere */
};

static int pg_lock_try(int64_t repo_id)
{
	return db_lock_try(DB_LOCK_REPO_WRITE, repo_id);
}

static int pg_lock_wait(int64_t repo_id)
{
	return db_lock_wait(DB_LOCK_REPO_WRITE, repo_id);
}

static void pg_unlock(int64_t repo_id)
{
	db_unlock(DB_LOCK_REPO_WRITE, repo_id);
}

static const struct publish_db postgres_db = {
	.lock_try = pg_lock_try,
	.lock_wait = pg_lock_wait,
	.unlock = pg_unlock,
	.lfs_inflight_begin = db_lfs_inflight_begin_many,
	.lfs_inflight_end = db_lfs_inflight_end_many,
	.lfs_link = db_lfs_link_many,
	.lfs_linked = db_lfs_linked,
	.repo_touch = db_repo_touch,
	.variant_index_update = variant_index_update,
	.audit = db_audit,
};
static const struct publish_db *db = &postgres_db;

const struct publish_db *publish_set_db(const struct publish_db *with)
{
	const struct publish_db *was = db;
	db = with ? with : &postgres_db;
	return was;
}

static publish_after_move_fn after_move_hook;
static publish_new_commit_fn new_commit_hook;
static void (*unlock_notify)(int64_t repo_id);

void publish_set_after_move(publish_after_move_fn fn)
{
	after_move_hook = fn;
}

void publish_set_on_new_commit(publish_new_commit_fn fn)
{
	new_commit_hook = fn;
}

void publish_set_memory_limit(uint64_t bytes)
{
	quarantine_max = bytes;
}

void publish_new_commit_notify(int64_t repo_id, git_repository *git, const char *ref, const char *old_sha,
			       const char *new_sha)
{
	if (ref && new_sha)	/* every writer's commit reaches here or publish_import_ref */
		webhook_event_content(repo_id, ref, old_sha, new_sha);
	if (new_commit_hook && git && ref && new_sha)
		new_commit_hook(repo_id, git, ref, old_sha && old_sha[0] ? old_sha : NULL, new_sha);
}

void publish_set_unlock_notify(void (*fn)(int64_t repo_id))
{
	unlock_notify = fn;
}

/* ---- the repo's write lock -------------------------------------------------- */

/* Locks this process holds: a thread never asks the database for a lock
 * another thread of ours has (advisory locks are per connection, and each
 * thread has its own). */
static struct hashmap held_locks;
static pthread_mutex_t held_mutex = PTHREAD_MUTEX_INITIALIZER;

static void lock_key(char *key, size_t size, int64_t repo_id)
{
	snprintf(key, size, "%" PRId64, repo_id);
}

static int reserve(int64_t repo_id)
{
	char key[24];
	lock_key(key, sizeof(key), repo_id);
	pthread_mutex_lock(&held_mutex);
	if (!held_locks.buckets)
		hashmap_init(&held_locks);
	int busy = hashmap_get(&held_locks, key) != NULL;
	if (!busy)
		hashmap_put(&held_locks, key, (void *)1);
	pthread_mutex_unlock(&held_mutex);
	return busy;
}

static void unreserve(int64_t repo_id)
{
	char key[24];
	lock_key(key, sizeof(key), repo_id);
	pthread_mutex_lock(&held_mutex);
	hashmap_remove(&held_locks, key);
	pthread_mutex_unlock(&held_mutex);
}

int publish_repo_trylock(int64_t repo_id)
{
	if (reserve(repo_id))
		return 1;
	int rc = db->lock_try(repo_id);
	if (rc != 0)
		unreserve(repo_id);
	return rc;
}

void publish_repo_unlock(int64_t repo_id)
{
	db->unlock(repo_id);
	unreserve(repo_id);
	if (unlock_notify)
		unlock_notify(repo_id);
}

/* Wait for the lock (command line and background work only). */
static int repo_lock_wait(int64_t repo_id)
{
	while (reserve(repo_id))
		usleep(20000);
	int rc = db->lock_wait(repo_id);
	if (rc < 0)
		unreserve(repo_id);
	return rc;
}

/* pub's repo lock, taken once by take (try or wait). */
static int publication_lock(struct publication *pub, int (*take)(int64_t repo_id))
{
	int rc = pub->locked ? 0 : take(pub->rec.id);
	if (rc == 0)
		pub->locked = 1;
	return rc;
}

int publish_trylock(struct publication *pub)
{
	return publication_lock(pub, publish_repo_trylock);
}

int publish_lock(struct publication *pub)
{
	return publication_lock(pub, repo_lock_wait);
}

static void unlock(struct publication *pub)
{
	if (!pub->locked)
		return;
	pub->locked = 0;
	publish_repo_unlock(pub->rec.id);
}

/* ---- begin, stage --------------------------------------------------------------- */

int publish_begin(const char *repo_root, struct lfs_store *lfs, const struct repo_record *rec,
		  struct publication **out)
{
	struct publication *pub = xcalloc(1, sizeof(*pub));
	pub->rec = *rec;
	pub->lfs = lfs;
	int rc = quarantine_open(repo_root, rec->type, rec->ns, rec->name, quarantine_max, &pub->quarantine,
				 &pub->git);
	if (rc < 0) {
		free(pub);
		return rc;
	}
	*out = pub;
	return 0;
}

/* Store sealed writers' objects and link them to the repo, named in
 * flight in between so that khub gc cannot remove them before the links
 * exist: one transaction names them all, the files are made durable (each
 * directory synced once), one statement links them. Ends every writer. */
static int install_and_link(struct publication *pub, struct lfs_writer **w, size_t n)
{
	const char **oids = xcalloc(n, sizeof(*oids));
	int64_t *inflight = xcalloc(n, sizeof(*inflight));
	for (size_t i = 0; i < n; i++)
		oids[i] = xstrdup(lfs_writer_oid(w[i]));
	int rc = db->lfs_inflight_begin(oids, n, inflight);
	if (rc < 0) {
		for (size_t i = 0; i < n; i++)
			lfs_writer_abort(w[i]);
	} else if ((rc = lfs_writers_install(w, n)) == 0) {
		rc = db->lfs_link(pub->rec.id, oids, n);
	}
	db->lfs_inflight_end(inflight, n);	/* the links keep them now (ids of 0 skipped) */
	free_strings((char **)oids, n);
	free(inflight);
	return rc;
}

/* What is held, stored and linked as one batch (PUBLISH_HELD_MAX at most). */
static int install_held(struct publication *pub)
{
	size_t n = pub->stage.nheld;
	pub->stage.nheld = 0;
	return n ? install_and_link(pub, pub->stage.held, n) : 0;
}

/* Too much LFS content to keep open: what is held and w stored and linked
 * now as one batch (never referenced unless the commit lands). */
static int store_now(void *ctx, struct lfs_writer *w, const char *oid)
{
	struct publication *pub = ctx;
	(void)oid;
	pub->stage.held = xrealloc(pub->stage.held, (pub->stage.nheld + 1) * sizeof(*pub->stage.held));
	pub->stage.held[pub->stage.nheld++] = w;
	return install_held(pub);
}

/* A git write that failed past the quarantine's limit failed for it. */
static int over_limit(struct publication *pub, int rc)
{
	if ((rc == KHUB_EIO || rc == KHUB_ENOSPC) && quarantine_over_limit(pub->quarantine))
		return KHUB_ETOOBIG;
	return rc;
}

/* Every LFS object the tree names without bringing it must be linked to
 * this repo: knowing a sha256 gives no right to another repo's bytes. */
static int check_named(struct publication *pub, struct publish_result *res)
{
	for (size_t i = 0; i < pub->stage.nnamed; i++) {
		int linked = db->lfs_linked(pub->rec.id, pub->stage.named[i].oid);
		if (linked <= 0) {
			res->failed_op = pub->stage.named[i].op;
			return linked < 0 ? KHUB_EDB : KHUB_EPERM;
		}
	}
	return 0;
}

/* The commit, its objects and LFS content stored durably, then the ref
 * moved by compare-and-swap. */
static int commit_and_move(struct publication *pub, const struct publish_actor *who,
			   const struct publish_changeset *change, struct publish_result *res)
{
	int rc = publish_stage_write(&pub->stage, who, change, res->sha);
	if (rc < 0)
		return over_limit(pub, rc);
	/* accepted: its objects and LFS content are stored durably before
	 * the ref may point at them */
	if ((rc = quarantine_publish(pub->quarantine)) < 0 || (rc = install_held(pub)) < 0)
		return rc;
	int fresh = (change->flags & (PUBLISH_NEW_REF | PUBLISH_NEW_PULL_REQUEST)) != 0;
	if ((rc = repo_update_ref(pub->git, res->ref, fresh ? NULL : res->head, res->sha, change->summary)) < 0)
		return rc;
	pub->moved = 1;
	snprintf(pub->old, sizeof(pub->old), "%s", fresh ? "" : res->head);
	snprintf(pub->ref, sizeof(pub->ref), "%s", res->ref);
	memcpy(pub->sha, res->sha, 41);
	return 0;
}

int publish_apply(struct publication *pub, const struct publish_actor *who, const struct publish_changeset *change,
		  struct publish_result *res)
{
	char base[41];
	memset(res, 0, sizeof(*res));
	res->failed_op = SIZE_MAX;
	int rc = !pub->locked || pub->applied ? KHUB_EINVAL : publish_stage_target(pub->git, change, res, base);
	pub->applied = 1;
	if (rc < 0) {
		publish_ops_drop_spools(change->ops, 0, change->nops);
		return rc;
	}
	publish_stage_init(&pub->stage, pub->git, pub->lfs, base);
	pub->stage.store_now = store_now;
	pub->stage.store_ctx = pub;
	rc = publish_stage_build(&pub->stage, change);
	res->failed_op = pub->stage.failed_op;
	res->lfs_files = pub->stage.lfs_files;
	if (rc == 0)
		rc = check_named(pub, res);
	if (rc < 0)
		return over_limit(pub, rc);
	int on_head = !(change->flags & (PUBLISH_NEW_REF | PUBLISH_NEW_PULL_REQUEST)) && res->head[0];
	if ((change->flags & (PUBLISH_SKIP_UNCHANGED | PUBLISH_DRY_RUN)) && on_head &&
	    publish_stage_unchanged(&pub->stage, change, change->unchanged_except)) {
		res->unchanged = 1;
		memcpy(res->sha, res->head, 41);
		return 0;
	}
	if (change->flags & PUBLISH_DRY_RUN)
		return 0;
	return commit_and_move(pub, who, change, res);
}

/* 1 when new_sha is a commit in git, or an annotated tag of one. */
static int names_commit(git_repository *git, const char *new_sha)
{
	git_oid oid;
	git_object *obj = NULL, *commit = NULL;
	int found = git_oid_fromstr(&oid, new_sha) == 0 && git_object_lookup(&obj, git, &oid, GIT_OBJECT_ANY) == 0 &&
		    git_object_peel(&commit, obj, GIT_OBJECT_COMMIT) == 0;
	git_object_free(commit);
	git_object_free(obj);
	return found;
}

int publish_import_ref(int64_t repo_id, git_repository *git, const char *ref, const char *expected_old,
		       const char *new_sha, const char *log_message)
{
	if (new_sha && !names_commit(git, new_sha))
		return KHUB_EINVAL;
	int rc = repo_lock_wait(repo_id);
	if (rc < 0)
		return rc;
	if (new_sha)
		rc = repo_update_ref(git, ref, expected_old, new_sha, log_message);
	else
		rc = repo_delete_ref(git, ref);
	publish_repo_unlock(repo_id);
	if (rc == 0 && new_sha)
		webhook_event_content(repo_id, ref, expected_old, new_sha);
	return rc;
}

int publish_import_unregistered_ref(git_repository *git, const char *ref, const char *expected_old, const char *new_sha,
				    const char *log_message)
{
	if (!names_commit(git, new_sha))
		return KHUB_EINVAL;
	return repo_update_ref(git, ref, expected_old, new_sha, log_message);
}

void publish_refs_moved(int64_t repo_id, git_repository *git, const char *new_sha, enum publish_change change,
			const struct publish_actor *who, const char *action, const char *target,
			const char *details)
{
	if (db->repo_touch(repo_id) < 0)
		log_warn("repo %" PRId64 ": lastModified not updated", repo_id);
	/* kernel repos: build/<variant>/ of the new commit and the branch
	 * heads (a failure is repaired lazily by the read endpoints) */
	if (git && db->variant_index_update(repo_id, git, new_sha) < 0)
		log_warn("variant index: repo %" PRId64 " %s not indexed", repo_id, new_sha ? new_sha : "heads");
	if (action && who && db->audit(who->user_id, who->name, action, target, details,
				      who->remote_addr ? who->remote_addr : "local") < 0)
		log_error("audit: cannot record %s %s", action, target);
	if (after_move_hook)
		after_move_hook(repo_id, change);
}

void publish_end(struct publication *pub, const struct publish_actor *who, const char *action, const char *details)
{
	if (!pub)
		return;
	unlock(pub);
	if (pub->moved) {
		char *target = xasprintf("%s/%s", pub->rec.ns, pub->rec.name);
		publish_refs_moved(pub->rec.id, pub->git, pub->sha, PUBLISH_NEW_COMMIT, who, action, target, details);
		publish_new_commit_notify(pub->rec.id, pub->git, pub->ref, pub->old, pub->sha);
		free(target);
	}
	publish_stage_release(&pub->stage);
	quarantine_free(pub->quarantine);
	free(pub);
}
