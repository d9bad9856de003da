/* cmd_backup.c -- khub backup DIR: a consistent copy of a serving hub. With
 * the registry lock and every repo's write lock held (no commit, create or
 * delete half done), a database snapshot is exported and every repo's refs
 * are read; the locks go at once. pg_dump then reads that snapshot, and git
 * objects and LFS objects (immutable, only ever added) are copied after:
 * everything the refs and the dump name was stored before them. Objects
 * already in DIR are not copied again. */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How long one repo's write lock is tried before every lock is given back
 * and the whole set tried again (a writer holding it finishes meanwhile). */
#define LOCK_TRY_MS 2000
#define LOCK_ROUNDS 30

struct captured_ref {
	char *name;
	char *target;		/* a sha, or "ref: NAME" for a symbolic ref */
};

struct captured_repo {
	struct repo_record rec;
	char *head;		/* HEAD's content */
	struct captured_ref *refs;
	size_t nrefs;
	int no_git_dir;
};

struct backup {
	char *dir;
	struct captured_repo *repos;
	size_t nrepos;
	size_t nrefs, lfs_objects, lfs_damaged, warnings;
	struct backup_tally git, lfs;
	char snapshot[128];
	int pg_major;
};

/* ---- the consistent moment: locks, snapshot, refs ------------------------------ */

static int add_repo(const struct repo_record *rec, void *arg)
{
	struct backup *b = arg;
	b->repos = xrealloc(b->repos, (b->nrepos + 1) * sizeof(*b->repos));
	memset(&b->repos[b->nrepos], 0, sizeof(b->repos[0]));
	b->repos[b->nrepos++].rec = *rec;
	return 0;
}

static void release_repos(struct backup *b)
{
	for (size_t i = 0; i < b->nrepos; i++) {
		struct captured_repo *cr = &b->repos[i];
		for (size_t k = 0; k < cr->nrefs; k++) {
			free(cr->refs[k].name);
			free(cr->refs[k].target);
		}
		free(cr->refs);
		free(cr->head);
	}
	free(b->repos);
	b->repos = NULL;
	b->nrepos = 0;
}

static void unlock_repos(struct backup *b, size_t n)
{
	while (n > 0)
		db_unlock(DB_LOCK_REPO_WRITE, b->repos[--n].rec.id);
}

/* Every repo's write lock: 0, 1 when one stayed busy (none held then), or KHUB_EDB. */
static int lock_repos(struct backup *b)
{
	for (size_t i = 0; i < b->nrepos; i++) {
		uint64_t until = monotonic_usec() + LOCK_TRY_MS * 1000ull;
		int rc;
		while ((rc = db_lock_try(DB_LOCK_REPO_WRITE, b->repos[i].rec.id)) == 1 && monotonic_usec() < until)
			usleep(5000);
		if (rc != 0) {
			unlock_repos(b, i);
			return rc;
		}
	}
	return 0;
}

/* The registry lock, then every repo's: 0 with both held, or an error. */
static int lock_everything(struct backup *b)
{
	for (int round = 0; round < LOCK_ROUNDS; round++) {
		int rc = db_lock_wait(DB_LOCK_REGISTRY, 0);
		if (rc < 0)
			return rc;
		if ((rc = db_repo_each(add_repo, b)) == 0 && (rc = lock_repos(b)) == 0)
			return 0;
		db_unlock(DB_LOCK_REGISTRY, 0);
		release_repos(b);
		if (rc < 0)
			return rc;
		usleep(100000);
	}
	fprintf(stderr, "khub backup: some repo stayed busy writing through %d tries\n", LOCK_ROUNDS);
	return KHUB_ECONFLICT;
}

static void capture_ref(struct captured_repo *cr, git_reference *ref)
{
	const git_oid *id = git_reference_target(ref);
	char sha[41];
	cr->refs = xrealloc(cr->refs, (cr->nrefs + 1) * sizeof(*cr->refs));
	cr->refs[cr->nrefs].name = xstrdup(git_reference_name(ref));
	if (id) {
		git_oid_tostr(sha, sizeof(sha), id);
		cr->refs[cr->nrefs].target = xstrdup(sha);
	} else {
		cr->refs[cr->nrefs].target = xasprintf("ref: %s", git_reference_symbolic_target(ref));
	}
	cr->nrefs++;
}

/* HEAD and every ref of a repo, as they are now. */
static int capture_refs(struct captured_repo *cr)
{
	git_repository *git = NULL;
	git_reference_iterator *it = NULL;
	git_reference *ref = NULL;
	int rc = KHUB_EIO;
	if (repo_store_open(runtime_repo_root(), cr->rec.type, cr->rec.ns, cr->rec.name, &git) < 0) {
		cr->no_git_dir = 1;
		return 0;
	}
	if (git_reference_lookup(&ref, git, "HEAD") == 0) {
		char sha[41] = "";
		if (git_reference_target(ref))
			git_oid_tostr(sha, sizeof(sha), git_reference_target(ref));
		cr->head = git_reference_symbolic_target(ref) ? xasprintf("ref: %s", git_reference_symbolic_target(ref))
							      : xstrdup(sha);
		git_reference_free(ref);
	}
	if (git_reference_iterator_new(&it, git) < 0)
		goto cleanup;
	int grc;
	while ((grc = git_reference_next(&ref, it)) == 0) {
		capture_ref(cr, ref);
		git_reference_free(ref);
	}
	rc = grc == GIT_ITEROVER ? 0 : KHUB_EIO;
cleanup:
	if (rc < 0)
		log_git_error("khub backup: %s/%s: cannot read the refs", cr->rec.ns, cr->rec.name);
	git_reference_iterator_free(it);
	git_repository_free(git);
	return rc;
}

/* Hold everything still for a moment: export the database snapshot and read
 * every repo's refs, then let writers go on. The snapshot's transaction
 * stays open (this thread's connection) until db_snapshot_release. */
static int freeze(struct backup *b)
{
	int rc = lock_everything(b);
	if (rc < 0)
		return rc;
	rc = db_snapshot_export(b->snapshot, sizeof(b->snapshot));
	for (size_t i = 0; rc == 0 && i < b->nrepos; i++) {
		rc = capture_refs(&b->repos[i]);
		b->nrefs += b->repos[i].nrefs;
	}
	unlock_repos(b, b->nrepos);
	db_unlock(DB_LOCK_REGISTRY, 0);
	if (rc < 0 && b->snapshot[0])
		db_snapshot_release();
	return rc;
}

/* ---- the database ------------------------------------------------------------------ */

static int dump_database(struct backup *b)
{
	char *pg_dump = backup_pg_tool("pg_dump", b->pg_major);
	if (!pg_dump)
		return KHUB_EIO;
	char *tmp = xasprintf("%s/db.dump.tmp", b->dir), *path = xasprintf("%s/db.dump", b->dir);
	char *snap = xasprintf("--snapshot=%s", b->snapshot), *file = xasprintf("--file=%s", tmp);
	char *args[] = { "--format=custom", "--no-sync", snap, file, NULL };
	int status = backup_pg_run(pg_dump, args);
	int rc = status == 0 && fsync_file(tmp) == 0 && rename(tmp, path) == 0 ? 0 : KHUB_EIO;
	if (rc < 0)
		fprintf(stderr, "khub backup: pg_dump failed (exit %d)\n", status);
	free(file);
	free(snap);
	free(path);
	free(tmp);
	free(pg_dump);
	return rc;
}

/* ---- git ------------------------------------------------------------------------- */

/* What a writer is still writing, or left when killed: never copied. */
static int skip_git_temp(const char *rel, const char *name)
{
	size_t n = strlen(name);
	return strncmp(rel, "info", 4) == 0 || strstr(name, "_git2_") || strncmp(name, "tmp_", 4) == 0 ||
	       strncmp(name, "incoming-", 9) == 0 || strstr(name, ".tmp-") ||
	       (n > 5 && strcmp(name + n - 5, ".lock") == 0);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)ftw;
	return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 ? -1 : 0;
}

static int remove_tree(const char *path)
{
	return nftw(path, remove_entry, 16, FTW_PHYS | FTW_DEPTH) < 0 && errno != ENOENT ? KHUB_EIO : 0;
}

static int write_text(const char *dir, const char *name, const char *text)
{
	char *path = xasprintf("%s/%s", dir, name), *tmp = xasprintf("%s.tmp", path);
	FILE *fp = fopen(tmp, "w");
	int rc = fp && fputs(text, fp) >= 0 && fflush(fp) == 0 && fsync(fileno(fp)) == 0 ? 0 : KHUB_EIO;
	if (fp && fclose(fp) != 0)
		rc = KHUB_EIO;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = KHUB_EIO;
	free(tmp);
	free(path);
	return rc;
}

/* The captured refs as the copy's only refs: packed-refs, HEAD, and a
 * loose file for each symbolic ref. */
static int write_refs(const char *dst, const struct captured_repo *cr)
{
	struct strbuf packed = STRBUF_INIT;
	char *refs = xasprintf("%s/refs", dst);
	int rc = remove_tree(refs);
	for (size_t i = 0; rc == 0 && i < cr->nrefs; i++) {
		const struct captured_ref *r = &cr->refs[i];
		if (strncmp(r->target, "ref: ", 5) != 0) {
			strbuf_addf(&packed, "%s %s\n", r->target, r->name);
			continue;
		}
		char *file = xasprintf("%s/%s", dst, r->name), *slash = strrchr(file, '/');
		*slash = '\0';
		char *text = xasprintf("%s\n", r->target);
		rc = mkdir_p(file, 0755) < 0 ? KHUB_EIO : write_text(file, slash + 1, text);
		free(text);
		free(file);
	}
	char *heads = xasprintf("%s/heads", refs), *tags = xasprintf("%s/tags", refs);
	char *head = xasprintf("%s\n", cr->head ? cr->head : "ref: refs/heads/main");
	if (rc == 0 && (mkdir_p(heads, 0755) < 0 || mkdir_p(tags, 0755) < 0))
		rc = KHUB_EIO;
	if (rc == 0 && (rc = write_text(dst, "packed-refs", packed.len ? packed.buf : "")) == 0)
		rc = write_text(dst, "HEAD", head);
	free(head);
	free(tags);
	free(heads);
	free(refs);
	strbuf_release(&packed);
	return rc;
}

/* Every object every ref of the copy needs is there: git rev-list. */
static int connected(const char *dst)
{
	char *git = spawn_find_program("git", getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	char *gd = xasprintf("--git-dir=%s", dst);
	char *argv[] = { git, "-c", "safe.directory=*", gd, "rev-list", "--objects", "--all", "--quiet", NULL };
	int ok = git && backup_run(argv, 1) == 0;
	free(gd);
	free(git);
	return ok;
}

static int copy_objects(struct backup *b, const char *src, const char *dst)
{
	char *from = xasprintf("%s/objects", src), *to = xasprintf("%s/objects", dst);
	int rc = backup_copy_tree(from, to, skip_git_temp, &b->git);
	free(to);
	free(from);
	return rc;
}

/* A repo's objects, then its refs as captured; objects again when a repack
 * moved some while they were copied. */
static int copy_repo(struct backup *b, struct captured_repo *cr, const char *root)
{
	char *src = repo_store_git_dir(runtime_repo_root(), cr->rec.type, cr->rec.ns, cr->rec.name);
	char *dst = repo_store_git_dir(root, cr->rec.type, cr->rec.ns, cr->rec.name);
	char *conf = xasprintf("%s/config", src), *conf_to = xasprintf("%s/config", dst);
	int rc = mkdir_p(dst, 0755) < 0 ? KHUB_EIO : 0;
	if (rc == 0)
		rc = copy_objects(b, src, dst);
	if (rc == 0)
		rc = backup_copy_file(conf, conf_to, NULL, NULL);
	if (rc == 0)
		rc = write_refs(dst, cr);
	for (int again = 0; rc == 0 && !connected(dst); again++) {
		if (again == 2) {
			fprintf(stderr, "khub backup: %s: objects of the refs are missing (run khub fsck)\n", src);
			rc = KHUB_EIO;
		} else {
			rc = copy_objects(b, src, dst);
		}
	}
	free(conf_to);
	free(conf);
	free(dst);
	free(src);
	return rc;
}

struct prune {
	struct hashmap keep;	/* git dirs of the backup's repos → non-NULL */
};

static void prune_dir(enum repo_type type, const char *ns, const char *name, const char *path, void *arg)
{
	struct prune *p = arg;
	(void)type, (void)ns, (void)name;
	if (!hashmap_get(&p->keep, path) && remove_tree(path) == 0)
		printf("removed %s from the backup (no longer a repo)\n", path);
}

static int copy_repos(struct backup *b)
{
	char *root = xasprintf("%s/repos", b->dir);
	struct prune p;
	int rc = 0;
	hashmap_init(&p.keep);
	for (size_t i = 0; rc == 0 && i < b->nrepos; i++) {
		struct captured_repo *cr = &b->repos[i];
		char *dst = repo_store_git_dir(root, cr->rec.type, cr->rec.ns, cr->rec.name);
		hashmap_put(&p.keep, dst, b);
		free(dst);
		if (cr->no_git_dir) {
			fprintf(stderr, "khub backup: %s/%s has no git directory (run khub fsck); left out\n",
				cr->rec.ns, cr->rec.name);
			b->warnings++;
			continue;
		}
		rc = copy_repo(b, cr, root);
	}
	if (rc == 0)	/* repos deleted since an earlier backup into DIR */
		store_each_repo_dir(root, prune_dir, &p);
	hashmap_release(&p.keep, NULL);
	free(root);
	return rc;
}

/* ---- LFS ------------------------------------------------------------------------- */

static int copy_lfs_object(const char *oid, const char *path, void *arg)
{
	struct backup *b = arg;
	struct stat st, have;
	if (!is_lower_hex(oid, 64) || stat(path, &st) < 0)
		return 0;	/* not an object (fsck says so), or removed by gc */
	char *lfs_root = xasprintf("%s/lfs", b->dir), *dest = backup_lfs_path(lfs_root, oid);
	char *dir = xstrndup(dest, strlen(dest) - 65);
	b->lfs_objects++;
	int rc = 0;
	if (stat(dest, &have) == 0 && have.st_size == st.st_size) {
		b->lfs.present++;
	} else if (mkdir_p(dir, 0755) < 0) {
		rc = KHUB_EIO;
	} else {
		uint64_t bytes = 0;
		rc = backup_copy_file(path, dest, oid, &bytes);
		if (rc == KHUB_EINVAL) {
			fprintf(stderr, "khub backup: LFS object %s does not match its sha256; left out (run khub fsck)\n",
				oid);
			b->lfs_damaged++;
			rc = 0;
		} else if (rc == 0) {
			b->lfs.files++;
			b->lfs.bytes += bytes;
		}
	}
	free(dir);
	free(dest);
	free(lfs_root);
	return rc;
}

/* A remote store's object is downloaded only when the backup lacks it:
 * objects never change, so one of the same name and size is the same. */
static int lfs_object_wanted(const char *oid, uint64_t size, void *arg)
{
	struct backup *b = arg;
	struct stat have;
	char *lfs_root = xasprintf("%s/lfs", b->dir), *dest = backup_lfs_path(lfs_root, oid);
	int present = stat(dest, &have) == 0 && (uint64_t)have.st_size == size;
	free(dest);
	free(lfs_root);
	if (present) {
		b->lfs_objects++;
		b->lfs.present++;
	}
	return !present;
}

static int copy_lfs(struct backup *b)
{
	const struct backup_lfs_source *src = backup_lfs_source(config_lfs_backend());
	backup_lfs_set_wanted(lfs_object_wanted);
	return src->each(runtime_lfs_root(), copy_lfs_object, b);
}

/* ---- the command ------------------------------------------------------------------- */

static json_t *manifest(struct backup *b, time_t started)
{
	char at[32];
	format_iso8601(started, at);
	return json_pack("{s:b, s:s, s:I, s:s, s:{s:s, s:i}, s:I, s:I, s:{s:I, s:I, s:I},"
			 " s:{s:s, s:I, s:I, s:I, s:I, s:I}}",
			 "complete", 1, "created", at, "seconds", (json_int_t)(time(NULL) - started), "snapshot",
			 b->snapshot, "database", "file", "db.dump", "postgresql_major", b->pg_major, "repos",
			 (json_int_t)b->nrepos, "refs", (json_int_t)b->nrefs, "git", "files_copied",
			 (json_int_t)b->git.files, "files_present", (json_int_t)b->git.present, "bytes_copied",
			 (json_int_t)b->git.bytes, "lfs", "backend", config_lfs_backend()->name, "objects", (json_int_t)b->lfs_objects,
			 "copied", (json_int_t)b->lfs.files, "already_present", (json_int_t)b->lfs.present,
			 "bytes_copied", (json_int_t)b->lfs.bytes, "damaged_left_out", (json_int_t)b->lfs_damaged);
}

static int copy_secret(struct backup *b)
{
	char *from = xasprintf("%s/secret", config.data_dir), *to = xasprintf("%s/secret", b->dir);
	int rc = access(from, F_OK) == 0 ? backup_copy_file(from, to, NULL, NULL) : 0;
	free(to);
	free(from);
	return rc;
}

/* dir_walk: one entry of the backup to 0600 (a file) or 0700 (a directory). */
static int make_private(const char *rel, const char *path, const char *name, void *arg)
{
	struct stat st;
	(void)rel, (void)name, (void)arg;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : KHUB_EIO;
	mode_t want = S_ISDIR(st.st_mode) ? 0700 : 0600;
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return 0;	/* none is made; a link's own mode means nothing */
	if ((st.st_mode & 07777) != want && chmod(path, want) < 0)
		return KHUB_EIO;
	return S_ISDIR(st.st_mode) ? DIR_WALK_ENTER : 0;
}

/* Every file in DIR 0600 and every directory 0700, those of an earlier
 * backup into it included: the dump holds token hashes, emails and
 * sessions, repos/ the private repos. */
static int make_dir_private(const char *dir)
{
	int rc = chmod(dir, 0700) < 0 ? KHUB_EIO : dir_walk(dir, make_private, NULL);
	if (rc < 0)
		fprintf(stderr, "khub backup: cannot make everything in %s private (mode 0600/0700)\n", dir);
	return rc;
}

static int run_backup(struct backup *b)
{
	time_t started = time(NULL);
	char *old = xasprintf("%s/manifest.json", b->dir);
	int rc = unlink(old) < 0 && errno != ENOENT ? KHUB_EIO : 0;	/* unfinished until the end */
	free(old);
	if (rc == 0)
		rc = db_server_major(&b->pg_major);
	if (rc == 0 && (rc = freeze(b)) == 0) {
		printf("khub backup: snapshot %s: %zu repos, %zu refs\n", b->snapshot, b->nrepos, b->nrefs);
		rc = dump_database(b);
		db_snapshot_release();
	}
	if (rc == 0 && (rc = copy_repos(b)) == 0 && (rc = copy_lfs(b)) == 0 && (rc = copy_secret(b)) == 0)
		rc = make_dir_private(b->dir);
	json_t *files = rc == 0 ? backup_manifest_files(b->dir) : NULL;	/* for khub backup --verify */
	if (rc < 0 || !files)
		return rc < 0 ? rc : KHUB_EIO;
	json_t *m = manifest(b, started);
	json_object_set_new(m, "files", files);
	rc = backup_manifest_write(b->dir, m);
	json_decref(m);
	return rc;
}

/* Back up only the data dir the operator named: without one, khub would
 * start an empty hub in ./var and back that up. */
static int data_dir_named(void)
{
	if (config_is_set("data_dir"))
		return 1;
	fprintf(stderr, "khub backup: no data_dir is configured (--config FILE, KHUB_DATA_DIR or --data-dir); "
		"refusing to back up the default ./var\n");
	return 0;
}

/* 1 when path is dir or lies below it. */
static int inside(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* DIR made if absent, set to mode 0700 whatever it was, and locked
 * against a second backup into it: the lock's fd, or -1. */
static int lock_dir(const char *dir)
{
	char *path = xasprintf("%s/.backup.lock", dir);
	int fd = mkdir_p(dir, 0700) == 0 && chmod(dir, 0700) == 0
			 ? open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)
			 : -1;
	if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
		fprintf(stderr, "khub backup: another backup into %s is running\n", dir);
		close(fd);
		fd = -1;
	} else if (fd < 0) {
		fprintf(stderr, "khub backup: cannot use %s: %s\n", dir, strerror(errno));
	}
	free(path);
	return fd;
}

const char cmd_backup_usage[] =
	"usage: khub backup DIR | khub backup --verify DIR\n"
	"  a consistent backup of the serving hub into DIR (database dump, git repos, LFS\n"
	"  objects, the URL secret; LFS objects already in DIR are not copied again);\n"
	"  --verify: every file as the manifest records it, the dump readable\n";

int cmd_backup(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--verify") == 0)
		return backup_verify(argv[2]);
	if (argc != 2 || argv[1][0] == '-') {
		fputs(cmd_backup_usage, stderr);
		return 2;
	}
	if (!data_dir_named())
		return 2;
	umask(077);	/* every file and directory made: the owner's alone */
	struct backup b = { 0 };
	int fd = lock_dir(argv[1]);
	if (fd < 0)
		return 2;
	char real[4096];
	b.dir = xstrdup(realpath(argv[1], real) ? real : argv[1]);
	runtime_open_database();
	if (inside(b.dir, config.data_dir) || inside(config.data_dir, b.dir)) {
		fprintf(stderr, "khub backup: %s and the data dir %s overlap; back up somewhere else\n", b.dir,
			config.data_dir);
		runtime_close_database();
		free(b.dir);
		close(fd);
		return 2;
	}
	int rc = run_backup(&b);
	runtime_close_database();
	if (rc == 0)
		printf("khub backup: %zu repos, %zu refs; git: %zu files copied (%llu bytes), %zu already there; "
		       "LFS: %zu objects, %zu copied (%llu bytes), %zu already there\n",
		       b.nrepos, b.nrefs, b.git.files, b.git.bytes, b.git.present, b.lfs_objects, b.lfs.files,
		       b.lfs.bytes, b.lfs.present);
	else
		fprintf(stderr, "khub backup: failed (%s); %s has no manifest and is no backup\n", khub_strerror(rc),
			b.dir);
	release_repos(&b);
	free(b.dir);
	close(fd);
	return rc < 0 ? 2 : b.lfs_damaged || b.warnings ? 1 : 0;
}
