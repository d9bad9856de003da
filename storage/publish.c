/* publish.c -- the one publish path (see publish.h): quarantined writes,
 * the repo's write lock, the LFS decision and per-repo links, commit with
 * compare-and-swap, and the after-move steps in one place. */
#include "storage/publish.h"
#include "storage/variant_index.h"

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
/* LFS content waits (one open temp file each) until the commit is
 * accepted; past this many, the rest is stored and linked at once. */
#define PUBLISH_PENDING_MAX 256
#define HEAD_BYTES 8000

struct publication {
	struct repo_record rec;
	struct lfs_store *lfs;
	struct git_quarantine *quarantine;
	git_repository *git;			/* owned by the quarantine */
	struct commit_builder *cb;
	char *gitattributes;			/* the parent's, for LFS decisions */
	struct lfs_writer *pending[PUBLISH_PENDING_MAX];
	size_t npending;
	int locked;
	int moved;				/* publish_commit moved ref */
	char ref[REF_NAME_MAX + 16];
	char sha[41];
	char old[41];				/* expected_old of publish_commit; "" = none */
};

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
	int rc = db_lock_try(DB_LOCK_REPO_WRITE, repo_id);
	if (rc != 0)
		unreserve(repo_id);
	return rc;
}

void publish_repo_unlock(int64_t repo_id)
{
	db_unlock(DB_LOCK_REPO_WRITE, repo_id);
	unreserve(repo_id);
	if (unlock_notify)
		unlock_notify(repo_id);
}

/* Wait for the lock (command line and background work only). */
static int repo_lock_wait(int64_t repo_id)
{
	while (reserve(repo_id))
		usleep(20000);
	int rc = db_lock_wait(DB_LOCK_REPO_WRITE, repo_id);
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

git_repository *publish_git(struct publication *pub)
{
	return pub->git;
}

struct commit_builder *publish_builder(struct publication *pub)
{
	return pub->cb;
}

int publish_over_limit(struct publication *pub)
{
	return quarantine_over_limit(pub->quarantine);
}

int publish_tree(struct publication *pub, const char *parent_sha, int clear)
{
	commit_builder_free(pub->cb);
	free(pub->gitattributes);
	pub->gitattributes = NULL;
	pub->cb = commit_builder_new(pub->git, parent_sha);
	if (!pub->cb)
		return KHUB_EIO;
	if (parent_sha && parent_sha[0])
		pub->gitattributes = repo_read_text_file(pub->git, parent_sha, ".gitattributes", 1 << 20);
	if (clear)
		commit_builder_clear(pub->cb);
	return 0;
}

void publish_set_gitattributes(struct publication *pub, const char *text)
{
	free(pub->gitattributes);
	pub->gitattributes = text ? xstrdup(text) : NULL;
}

/* Store a sealed writer's object and link it to the repo, named in flight
 * in between so that khub gc cannot remove it before the link exists. */
static int install_and_link(struct publication *pub, struct lfs_writer *w, const char *oid)
{
	int64_t inflight = 0;
	int rc = db_lfs_inflight_begin(oid, &inflight);
	if (rc < 0) {
		lfs_writer_abort(w);
		return rc;
	}
	if ((rc = lfs_writer_install(w)) == 0)
		rc = db_lfs_link(pub->rec.id, oid);
	db_lfs_inflight_end(inflight);
	return rc;
}

int publish_hold_lfs(struct publication *pub, struct lfs_writer *w, struct lfs_pointer *ptr)
{
	int rc = lfs_writer_seal(w, ptr->oid, &ptr->size);
	if (rc < 0) {	/* sealed twice: a caller's mistake */
		lfs_writer_abort(w);
		return rc;
	}
	if (pub->npending < PUBLISH_PENDING_MAX) {
		pub->pending[pub->npending++] = w;
		return 0;
	}
	/* too many to keep open: stored and linked now (never referenced
	 * unless the commit lands) */
	return install_and_link(pub, w, ptr->oid);
}

static int blob_failed(struct publication *pub)
{
	return quarantine_over_limit(pub->quarantine) ? KHUB_ETOOBIG : khub_err_from_errno(errno);
}

int publish_write_pointer(struct publication *pub, const struct lfs_pointer *ptr, char blob_sha[41])
{
	char text[LFS_POINTER_MAX];
	size_t n = lfs_pointer_format(ptr, text);
	git_oid oid;
	if (git_blob_create_from_buffer(&oid, pub->git, text, n) < 0)
		return blob_failed(pub);
	git_oid_tostr(blob_sha, 41, &oid);
	return 0;
}

int publish_unchanged(struct publication *pub)
{
	return commit_builder_unchanged(pub->cb);
}

/* Content that is itself an LFS pointer: only to an object of this repo. */
static int put_pointer_text(struct publication *pub, const char *path, const struct lfs_pointer *ptr,
			    unsigned mode)
{
	uint64_t stored;
	int linked = db_lfs_linked(pub->rec.id, ptr->oid);
	if (linked < 0)
		return KHUB_EDB;
	if (!linked || lfs_store_stat(pub->lfs, ptr->oid, &stored) < 0 || stored != ptr->size)
		return KHUB_EPERM;
	char blob[41];
	int rc = publish_write_pointer(pub, ptr, blob);
	return rc < 0 ? rc : commit_builder_put_blob(pub->cb, path, blob, mode);
}

static int put_as_blob(struct publication *pub, const char *path, git_oid *oid, unsigned mode)
{
	char hex[41];
	git_oid_tostr(hex, sizeof(hex), oid);
	return commit_builder_put_blob(pub->cb, path, hex, mode);
}


/* The end of an LFS put: w holds the content (rc 0) or failed (rc < 0, w
 * may be NULL); held for the commit, its pointer goes in at path. */
static int put_lfs_written(struct publication *pub, struct lfs_writer *w, int rc, const char *path, unsigned mode,
			   int *as_lfs)
{
	struct lfs_pointer ptr;
	char blob[41];
	if (rc < 0) {
		lfs_writer_abort(w);
		return rc;
	}
	if ((rc = publish_hold_lfs(pub, w, &ptr)) < 0 || (rc = publish_write_pointer(pub, &ptr, blob)) < 0)
		return rc;
	*as_lfs = 1;
	return commit_builder_put_blob(pub->cb, path, blob, mode);
}

int publish_put_bytes(struct publication *pub, const char *path, const void *data, size_t len, unsigned mode,
		      int *as_lfs)
{
	struct lfs_pointer ptr;
	int dummy;
	if (!as_lfs)
		as_lfs = &dummy;
	*as_lfs = 0;
	if (lfs_pointer_parse(data, len, &ptr) == 0) {
		*as_lfs = 1;
		return put_pointer_text(pub, path, &ptr, mode);
	}
	if (lfs_should_store(pub->gitattributes, path, data, len < HEAD_BYTES ? len : HEAD_BYTES, len)) {
		struct lfs_writer *w = lfs_writer_begin(pub->lfs);
		if (!w)
			return khub_err_from_errno(errno);
		return put_lfs_written(pub, w, lfs_writer_write(w, data, len), path, mode, as_lfs);
	}
	git_oid oid;
	if (git_blob_create_from_buffer(&oid, pub->git, data, len) < 0)
		return blob_failed(pub);
	return put_as_blob(pub, path, &oid, mode);
}

int publish_put_file(struct publication *pub, const char *path, const char *fs_path, unsigned mode, int *as_lfs)
{
	char head[HEAD_BYTES];
	struct stat st;
	int dummy;
	if (!as_lfs)
		as_lfs = &dummy;
	*as_lfs = 0;
	int fd = open(fs_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return KHUB_EIO;
	ssize_t n = fstat(fd, &st) == 0 ? read(fd, head, sizeof(head)) : -1;
	if (n < 0) {
		close(fd);
		return KHUB_EIO;
	}
	struct lfs_pointer ptr;
	if ((uint64_t)st.st_size == (uint64_t)n && lfs_pointer_parse(head, (size_t)n, &ptr) == 0) {
		close(fd);
		*as_lfs = 1;
		return put_pointer_text(pub, path, &ptr, mode);
	}
	if (!lfs_should_store(pub->gitattributes, path, head, (size_t)n, (uint64_t)st.st_size)) {
		close(fd);
		git_oid oid;
		if (git_blob_create_from_disk(&oid, pub->git, fs_path) < 0)
			return blob_failed(pub);
		return put_as_blob(pub, path, &oid, mode);
	}
	struct lfs_writer *w = lfs_writer_begin(pub->lfs);
	int rc = w ? 0 : khub_err_from_errno(errno);
	char buf[1 << 16];
	if (rc == 0 && lseek(fd, 0, SEEK_SET) < 0)
		rc = KHUB_EIO;
	while (rc == 0 && (n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0)
			rc = errno == EINTR ? 0 : KHUB_EIO;
		else
			rc = lfs_writer_write(w, buf, (size_t)n);
	}
	close(fd);
	return put_lfs_written(pub, w, rc, path, mode, as_lfs);
}

/* ---- commit, end ----------------------------------------------------------------- */

static int install_pending(struct publication *pub)
{
	int rc = 0;
	for (size_t i = 0; i < pub->npending; i++) {
		struct lfs_writer *w = pub->pending[i];
		char oid[65];
		pub->pending[i] = NULL;
		memcpy(oid, lfs_writer_oid(w), sizeof(oid));
		if (rc < 0) {
			lfs_writer_abort(w);
			continue;
		}
		rc = install_and_link(pub, w, oid);
	}
	pub->npending = 0;
	return rc;
}

int publish_commit(struct publication *pub, const struct publish_actor *who, const char *summary,
		   const char *description, const char *ref, const char *expected_old, char sha[41])
{
	if (!pub->locked || !pub->cb)
		return KHUB_EINVAL;
	int rc = commit_builder_write(pub->cb, who->name, who->email ? who->email : "system@khub.local", summary,
				      description, sha);
	if (rc < 0)
		return quarantine_over_limit(pub->quarantine) ? KHUB_ETOOBIG : rc;
	/* accepted: its objects and LFS content are stored durably before
	 * the ref may point at them */
	if ((rc = quarantine_publish(pub->quarantine)) < 0 || (rc = install_pending(pub)) < 0)
		return rc;
	if ((rc = repo_update_ref(pub->git, ref, expected_old, sha, summary)) < 0)
		return rc;
	pub->moved = 1;
	snprintf(pub->old, sizeof(pub->old), "%s", expected_old ? expected_old : "");
	snprintf(pub->ref, sizeof(pub->ref), "%s", ref);
	memcpy(pub->sha, sha, 41);
	return 0;
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
	if (db_repo_touch(repo_id) < 0)
		log_warn("repo %" PRId64 ": lastModified not updated", repo_id);
	/* kernel repos: build/<variant>/ of the new commit and the branch
	 * heads (a failure is repaired lazily by the read endpoints) */
	if (git && variant_index_update(repo_id, git, new_sha) < 0)
		log_warn("variant index: repo %" PRId64 " %s not indexed", repo_id, new_sha ? new_sha : "heads");
	if (action && who && db_audit(who->user_id, who->name, action, target, details,
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
	for (size_t i = 0; i < pub->npending; i++)
		lfs_writer_abort(pub->pending[i]);
	commit_builder_free(pub->cb);
	free(pub->gitattributes);
	quarantine_free(pub->quarantine);
	free(pub);
}
