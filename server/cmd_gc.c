/* cmd_gc.c -- khub gc: remove what nothing uses any more. LFS objects (of
 * the local store or the S3 bucket, as listed) no commit of any ref
 * references and no repo links (a link is kept while the repo exists: it
 * records bytes uploaded for a commit not made yet), never younger than
 * the grace period (file mtime, S3 LastModified) nor named by an in-flight write (decided
 * under the object's database lock, see storage/db/db_store_check.c);
 * partial uploads; git temp packs, stale locks and push staging dirs
 * (under the repo's write lock); what a killed sync import staged; trash
 * older than trash_keep_days. */
#include "server/server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/file.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct gc_tally {
	size_t count;
	unsigned long long bytes;
};

struct gc {
	int dry_run;
	long grace;			/* seconds */
	time_t now;
	struct hashmap used;		/* referenced or linked oids → non-NULL */
	int incomplete;			/* a repo's history could not be read: no LFS object is removed */
	struct gc_tally lfs, tmp, trash;
	size_t kept_young, kept_in_use;
	struct lfs_store *lfs_store;	/* local or s3, as configured */
	uint64_t current_size;		/* of the object db_lfs_collect removed */
};

static void mark_used(const struct lfs_pointer *ptr, void *arg)
{
	struct gc *gc = arg;
	if (!hashmap_get(&gc->used, ptr->oid))
		hashmap_put(&gc->used, ptr->oid, gc);
}

static int mark_repo(const struct repo_record *rec, void *arg)
{
	struct gc *gc = arg;
	git_repository *git = NULL;
	if (repo_store_open(runtime_repo_root(), rec->type, rec->ns, rec->name, &git) < 0 ||
	    store_scan_pointers(git, mark_used, gc) < 0) {
		fprintf(stderr, "khub gc: %s/%s/%s: cannot read the whole history (run khub fsck)\n",
			repo_type_plural(rec->type), rec->ns, rec->name);
		gc->incomplete = 1;
	}
	git_repository_free(git);
	return 0;
}

/* Under the object's lock, with no link and no in-flight row: 1 removed. */
static int remove_object(const char *oid, void *arg)
{
	struct gc *gc = arg;
	uint64_t size = 0;
	int64_t mtime = 0;
	int rc = lfs_store_stat_at(gc->lfs_store, oid, &size, &mtime);
	if (rc == KHUB_ENOTFOUND || (rc == 0 && gc->now - mtime < gc->grace))
		return 0;	/* gone, or written again meanwhile */
	if (rc < 0 || (!gc->dry_run && (rc = lfs_store_remove(gc->lfs_store, oid)) < 0))
		return rc < 0 ? rc : KHUB_EIO;
	gc->current_size = size;
	return 1;
}

static int collect_object(const struct lfs_listed *o, void *arg)
{
	struct gc *gc = arg;
	if (!o->well_placed || hashmap_get(&gc->used, o->name))
		return 0;	/* fsck reports misnamed files */
	if (gc->now - o->mtime < gc->grace) {
		gc->kept_young++;
		return 0;
	}
	int rc = db_lfs_collect(o->name, remove_object, gc);
	if (rc < 0) {
		fprintf(stderr, "khub gc: %s: %s\n", o->name, khub_strerror(rc));
		return rc == KHUB_EDB ? rc : 0;
	}
	if (rc == 0) {
		gc->kept_in_use++;
		return 0;
	}
	printf("%s lfs object %s (%llu bytes)\n", gc->dry_run ? "would remove" : "removed", o->name,
	       (unsigned long long)gc->current_size);
	gc->lfs.count++;
	gc->lfs.bytes += gc->current_size;
	return 0;
}

/* ---- removing trees --------------------------------------------------------- */

static unsigned long long tree_bytes;

static int add_size(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path, (void)ftw;
	if (flag == FTW_F)	/* what the files hold, not the directories */
		tree_bytes += (unsigned long long)st->st_size;
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)ftw;
	return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 ? -1 : 0;
}

/* Remove a file or a whole tree (unless dry_run); its size in *bytes. */
static int remove_tree(const char *path, int dry_run, unsigned long long *bytes)
{
	tree_bytes = 0;
	if (nftw(path, add_size, 16, FTW_PHYS) < 0)
		return -1;
	*bytes = tree_bytes;
	return dry_run ? 0 : nftw(path, remove_entry, 16, FTW_PHYS | FTW_DEPTH);
}

static void remove_counted(struct gc *gc, struct gc_tally *t, const char *path, const char *what)
{
	unsigned long long bytes = 0;
	if (remove_tree(path, gc->dry_run, &bytes) < 0) {
		fprintf(stderr, "khub gc: cannot remove %s: %s\n", path, strerror(errno));
		return;
	}
	printf("%s %s %s (%llu bytes)\n", gc->dry_run ? "would remove" : "removed", what, path, bytes);
	t->count++;
	t->bytes += bytes;
}

/* ---- git temp files --------------------------------------------------------- */

static struct gc *tmp_gc;
static char **tmp_found;
static size_t tmp_nfound;

/* A push's quarantine directory: git receive-pack's "tmp_objdir-incoming-*"
 * (git 2.11 and later; "incoming-*" before), removed whole. */
static int is_quarantine_dir(const char *name)
{
	return strncmp(name, "tmp_objdir-", 11) == 0 || strncmp(name, "incoming-", 9) == 0;
}

/* A temp file libgit2 ("{name}_git2_{random}") or git leaves when killed
 * mid-write. */
static int is_git_temp(const char *name)
{
	size_t n = strlen(name);
	return strstr(name, "_git2_") || strncmp(name, "tmp_pack_", 9) == 0 || strncmp(name, "tmp_idx_", 8) == 0 ||
	       strncmp(name, "tmp_obj_", 8) == 0 || is_quarantine_dir(name) ||
	       (n > 5 && strcmp(name + n - 5, ".lock") == 0);
}

/* 1 when path lies below a quarantine directory under objects_dir (it goes
 * with the directory). */
static int inside_quarantine(const char *objects_dir, const char *path)
{
	size_t n = strlen(objects_dir);
	if (strncmp(path, objects_dir, n) != 0 || path[n] != '/')
		return 0;
	const char *slash = strchr(path + n + 1, '/');
	char *top = xstrndup(path + n + 1, slash ? (size_t)(slash - path - n - 1) : strlen(path + n + 1));
	int inside = slash && is_quarantine_dir(top);
	free(top);
	return inside;
}

static int find_temp(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)flag;
	if (ftw->level > 0 && is_git_temp(path + ftw->base) && tmp_gc->now - st->st_mtime >= tmp_gc->grace) {
		tmp_found = xrealloc(tmp_found, (tmp_nfound + 1) * sizeof(char *));
		tmp_found[tmp_nfound++] = xstrdup(path);
	}
	return 0;
}

/* Under the repo's write lock, which every writer of the repo holds: no
 * temp file found then belongs to a live write. */
static int clean_repo_temp(const struct repo_record *rec, void *arg)
{
	struct gc *gc = arg;
	char *dir = repo_store_git_dir(runtime_repo_root(), rec->type, rec->ns, rec->name);
	int busy = db_lock_try(DB_LOCK_REPO_WRITE, rec->id);
	if (busy != 0) {
		if (busy > 0)
			printf("skipped %s: a write is in progress (run gc again later)\n", dir);
		free(dir);
		return busy < 0 ? busy : 0;
	}
	char *objects = xasprintf("%s/objects", dir);
	tmp_gc = gc;
	tmp_nfound = 0;
	tmp_found = NULL;
	nftw(dir, find_temp, 16, FTW_PHYS);
	for (size_t i = 0; i < tmp_nfound; i++) {
		if (!inside_quarantine(objects, tmp_found[i]))
			remove_counted(gc, &gc->tmp, tmp_found[i], "git temp");
		free(tmp_found[i]);
	}
	free(tmp_found);
	free(objects);
	db_unlock(DB_LOCK_REPO_WRITE, rec->id);
	free(dir);
	return 0;
}

/* ---- staging of khub sync import ------------------------------------------------ */

/* Remove the entries of dir whose names start with prefix, older than the
 * grace period. */
static void clean_staging_in(struct gc *gc, const char *dir, const char *prefix, const char *skip)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix)) != 0 ||
		    (skip && strcmp(e->d_name, skip) == 0))
			continue;
		char *path = xasprintf("%s/%s", dir, e->d_name);
		struct stat st;
		if (lstat(path, &st) == 0 && gc->now - st.st_mtime >= gc->grace)
			remove_counted(gc, &gc->tmp, path, "staging");
		free(path);
	}
	if (d)
		closedir(d);
}

/* What a killed sync import left (repos/.sync-staging/{bundle},
 * lfs/tmp/sync-{bundle}), only while no import holds its lock: a running
 * import has its lock file locked, and a new one waits for nothing (it
 * refuses to start, so gc keeps the lock only for this moment). */
static void clean_sync_staging(struct gc *gc)
{
	char *staging = xasprintf("%s/.sync-staging", runtime_repo_root());
	char *lock = xasprintf("%s/import.lock", staging);
	char *lfs_tmp = xasprintf("%s/tmp", runtime_lfs_root());
	int fd = open(lock, O_RDWR | O_CLOEXEC);
	if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0) {
		clean_staging_in(gc, staging, "", "import.lock");
		clean_staging_in(gc, lfs_tmp, "sync-", NULL);
	} else if (fd >= 0) {
		printf("skipped the sync import staging: an import is running\n");
	}
	if (fd >= 0)
		close(fd);
	free(lfs_tmp);
	free(lock);
	free(staging);
}

/* ---- trash ---------------------------------------------------------------- */

/* When an entry "{name}.git.{YYYYmmddTHHMMSSZ}.{random}" was trashed; its
 * mtime when the name says nothing. */
static time_t trashed_at(const char *path, const char *entry)
{
	const char *p = strstr(entry, ".git.");
	struct tm tm = { 0 };
	if (p && strptime(p + 5, "%Y%m%dT%H%M%SZ", &tm))
		return timegm(&tm);
	struct stat st;
	return lstat(path, &st) == 0 ? st.st_mtime : 0;
}

static void clean_trashed(enum repo_type type, const char *ns, const char *name, const char *path, void *arg)
{
	struct gc *gc = arg;
	(void)type;
	(void)ns;
	if (gc->now - trashed_at(path, name) >= config.trash_keep_days * 86400L)
		remove_counted(gc, &gc->trash, path, "trash");
}

/* The trash (repos/.trash), and data_dir/trash where versions before it
 * moved there. */
static void clean_trash(struct gc *gc)
{
	char *trash = repo_store_trash_dir(runtime_repo_root());
	char *old_trash = xasprintf("%s/trash", config.data_dir);
	store_each_repo_dir(trash, clean_trashed, gc);
	store_each_repo_dir(old_trash, clean_trashed, gc);
	free(old_trash);
	free(trash);
}

/* ---- the command --------------------------------------------------------------- */

static int collect_lfs(struct gc *gc)
{
	char **linked = NULL;
	size_t n = 0;
	int expired = db_lfs_inflight_expire();
	if (expired > 0)
		printf("expired %d in-flight LFS write record%s older than a day\n", expired, expired == 1 ? "" : "s");
	if (db_repo_each(mark_repo, gc) < 0 || db_lfs_linked_oids(&linked, &n) < 0)
		return KHUB_EDB;
	for (size_t i = 0; i < n; i++) {
		if (!hashmap_get(&gc->used, linked[i]))
			hashmap_put(&gc->used, linked[i], gc);
		free(linked[i]);
	}
	free(linked);
	if (gc->incomplete) {
		fprintf(stderr, "khub gc: not removing LFS objects: some history could not be read\n");
		return 0;
	}
	int rc = lfs_store_list(gc->lfs_store, collect_object, gc);
	if (rc < 0 && rc != KHUB_EDB)
		fprintf(stderr, "khub gc: cannot list the LFS store (%s): %s\n", lfs_store_backend(gc->lfs_store),
			khub_strerror(rc));
	return rc;
}

static int run_gc(struct gc *gc)
{
	if (!(gc->lfs_store = lfs_store_open(runtime_lfs_root())))
		return KHUB_EIO;
	int rc = collect_lfs(gc);
	if (rc < 0)
		return rc;
	if (!gc->dry_run) {	/* partial uploads no live writer holds */
		int n = lfs_store_clean_tmp(gc->lfs_store, gc->grace);
		gc->tmp.count += n > 0 ? (size_t)n : 0;
		if (n > 0)
			printf("removed %d partial LFS upload%s\n", n, n == 1 ? "" : "s");
	}
	if ((rc = db_repo_each(clean_repo_temp, gc)) < 0)
		return rc;
	clean_sync_staging(gc);
	clean_trash(gc);
	return 0;
}

const char cmd_gc_usage[] =
	"usage: khub gc [--dry-run] [--grace HOURS]\n"
	"  remove LFS objects no commit references and no repo links, partial uploads,\n"
	"  git temp files and trash older than trash_keep_days; nothing younger than\n"
	"  the grace period (default 24 hours)\n";

int cmd_gc(int argc, char **argv)
{
	struct gc gc = { .grace = 24 * 3600L, .now = time(NULL) };
	for (int i = 1; i < argc; i++) {
		char *end = NULL;
		long hours = -1;
		if (strcmp(argv[i], "--grace") == 0 && i + 1 < argc) {
			hours = strtol(argv[++i], &end, 10);
			if (*end || end == argv[i] || hours > 24L * 365 * 100)
				hours = -1;
		}
		if (strcmp(argv[i], "--dry-run") == 0) {
			gc.dry_run = 1;
		} else if (hours >= 0) {
			gc.grace = hours * 3600L;
		} else {
			fputs(cmd_gc_usage, stderr);
			return 2;
		}
	}
	runtime_open_database();
	hashmap_init(&gc.used);
	int rc = run_gc(&gc);
	lfs_store_close(gc.lfs_store);
	hashmap_release(&gc.used, NULL);
	runtime_close_database();
	if (rc < 0) {
		fprintf(stderr, "khub gc: %s\n", rc == KHUB_EDB ? "database unavailable" : khub_strerror(rc));
		return 2;
	}
	printf("khub gc: %s %zu LFS objects (%llu bytes), %zu temp files (%llu bytes), %zu trash dirs (%llu bytes); "
	       "kept %zu unreferenced LFS objects younger than the grace period, %zu in use\n",
	       gc.dry_run ? "would free" : "freed", gc.lfs.count, gc.lfs.bytes, gc.tmp.count, gc.tmp.bytes,
	       gc.trash.count, gc.trash.bytes, gc.kept_young, gc.kept_in_use);
	return gc.incomplete ? 1 : 0;
}
