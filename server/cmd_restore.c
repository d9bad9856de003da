/* cmd_restore.c -- khub restore DIR: a backup made by khub backup into an
 * empty data dir and an empty database (the embedded cluster it creates, or
 * the configured one): git repos, LFS objects (each checked against its
 * sha256), the URL secret, then the dump (pg_restore), the migrations newer
 * than it, and the variant index's branch heads recorded again from the
 * restored refs (a commit's index is written just after its ref moves).
 * A backup holding anything but files and directories is refused whole. */
#include "server/server.h"
#include "storage/db/variant_index.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct restore {
	const char *from;
	json_t *manifest;
	size_t lfs_objects, lfs_damaged, reindexed;
	struct lfs_store *store;	/* a remote LFS store being restored into; NULL: local files */
	struct backup_tally git, lfs;
};

/* 1 when dir is absent or holds nothing, 0 when it holds something, -1. */
static int dir_is_empty(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 1 : -1;
	struct dirent *e;
	int empty = 1;
	while (empty && (e = readdir(d)))
		empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
	closedir(d);
	return empty;
}

/* Every entry of the backup a file or a directory (lstat): a symbolic
 * link (a secret that names /etc/shadow) or a special file is refused. */
static int only_files(const char *rel, const char *path, const char *name, void *arg)
{
	struct stat st;
	(void)rel, (void)name, (void)arg;
	if (lstat(path, &st) < 0) {
		fprintf(stderr, "khub restore: %s: %s\n", path, strerror(errno));
		return KHUB_EIO;
	}
	if (S_ISDIR(st.st_mode))
		return DIR_WALK_ENTER;
	if (S_ISREG(st.st_mode))
		return 0;
	fprintf(stderr, "khub restore: %s is a %s; a backup holds only files and directories: refused, nothing "
		"restored\n", path, S_ISLNK(st.st_mode) ? "symbolic link" : "special file");
	return KHUB_EINVAL;
}

/* ---- files ------------------------------------------------------------------------ */

/* A temp file an interrupted khub backup left in DIR (never part of a repo). */
static int skip_backup_temp(const char *rel, const char *name)
{
	size_t n = strlen(name);
	(void)rel;
	return strstr(name, ".tmp-") || (n > 4 && strcmp(name + n - 4, ".tmp") == 0);
}

/* Into a remote store (lfs_backend = s3): through the store, which hashes
 * what it installs; KHUB_EINVAL when that is not oid. */
static int restore_lfs_remote(struct restore *r, const char *oid, const char *path, uint64_t *bytes)
{
	char got[65];
	int rc = lfs_store_put_file(r->store, path, got, bytes);
	return rc < 0 ? rc : strcmp(got, oid) != 0 ? KHUB_EINVAL : 0;
}

static int restore_lfs_object(const char *oid, const char *path, void *arg)
{
	struct restore *r = arg;
	if (!is_lower_hex(oid, 64))
		return 0;
	char *lfs_root = xasprintf("%s/lfs", config.data_dir), *dest = backup_lfs_path(lfs_root, oid);
	char *dir = xstrndup(dest, strlen(dest) - 65);
	uint64_t bytes = 0;
	int rc = r->store ? restore_lfs_remote(r, oid, path, &bytes)
	       : mkdir_p(dir, 0755) < 0 ? KHUB_EIO : backup_copy_file(path, dest, oid, &bytes);
	r->lfs_objects++;
	if (rc == KHUB_EINVAL) {	/* damaged in the backup: khub fsck then names what misses it */
		fprintf(stderr, "khub restore: LFS object %s in the backup does not match its sha256; left out\n", oid);
		r->lfs_damaged++;
		rc = 0;
	} else if (rc == 0) {
		r->lfs.files++;
		r->lfs.bytes += bytes;
	}
	free(dir);
	free(dest);
	free(lfs_root);
	return rc;
}

static int restore_files(struct restore *r)
{
	char *repos = xasprintf("%s/repos", r->from), *repos_to = xasprintf("%s/repos", config.data_dir);
	char *lfs = xasprintf("%s/lfs", r->from);
	char *secret = xasprintf("%s/secret", r->from), *secret_to = xasprintf("%s/secret", config.data_dir);
	int rc = mkdir_p(config.data_dir, 0755) < 0 ? KHUB_EIO : 0;
	if (rc == 0 && access(repos, F_OK) == 0)
		rc = backup_copy_tree(repos, repos_to, skip_backup_temp, &r->git);
	/* a remote LFS store (lfs_backend = s3) gets the objects through khub's
	 * store, the local one as files */
	if (rc == 0 && config_lfs_backend()->remote) {
		char *lfs_root = xasprintf("%s/lfs", config.data_dir);
		r->store = lfs_store_open(lfs_root);
		free(lfs_root);
		rc = r->store ? 0 : KHUB_EIO;
	}
	if (rc == 0)
		rc = store_each_lfs_object(lfs, restore_lfs_object, r);
	lfs_store_close(r->store);
	r->store = NULL;
	if (rc == 0 && access(secret, F_OK) == 0)
		rc = backup_copy_file(secret, secret_to, NULL, NULL);
	free(secret_to);
	free(secret);
	free(lfs);
	free(repos_to);
	free(repos);
	return rc;
}

/* ---- the database ------------------------------------------------------------------ */

static int run_pg_restore(struct restore *r)
{
	int major = 0, dumped = (int)json_integer_value(json_object_get(json_object_get(r->manifest, "database"),
									 "postgresql_major"));
	int rc = db_server_major(&major);
	if (rc < 0)
		return rc;
	if (major < dumped) {
		fprintf(stderr, "khub restore: the dump is from PostgreSQL %d, the database runs %d (older)\n", dumped,
			major);
		return KHUB_EINVAL;
	}
	char *pg_restore = backup_pg_tool("pg_restore", major);
	if (!pg_restore)
		return KHUB_EIO;
	char *dump = xasprintf("%s/db.dump", r->from);
	char *args[] = { "--no-owner", "--no-acl", "--exit-on-error", "--single-transaction", dump, NULL };
	int status = backup_pg_run(pg_restore, args);
	if (status != 0) {
		fprintf(stderr, "khub restore: pg_restore failed (exit %d)\n", status);
		rc = KHUB_EDB;
	}
	free(dump);
	free(pg_restore);
	return rc;
}

static int reindex_repo(const struct repo_record *rec, void *arg)
{
	struct restore *r = arg;
	git_repository *git = NULL;
	if (rec->type != REPO_KERNEL ||
	    repo_store_open(runtime_repo_root(), rec->type, rec->ns, rec->name, &git) < 0)
		return 0;	/* khub fsck reports a missing git dir */
	if (variant_index_catch_up_repo(rec->id, git) == 0)
		r->reindexed++;
	else
		fprintf(stderr, "khub restore: %s/%s: variant index not brought up to date (khub fsck --repair does)\n",
			rec->ns, rec->name);
	git_repository_free(git);
	return 0;
}

/* Into the database runtime_connect_database opened, empty: the dump, the
 * newer migrations, no in-flight writes, the index's heads from git. */
static int restore_database(struct restore *r)
{
	int rc = run_pg_restore(r);
	if (rc == 0)
		rc = db_migrate();
	if (rc == 0)
		rc = db_lfs_inflight_clear();
	return rc < 0 ? rc : db_repo_each(reindex_repo, r);
}

/* ---- the command ------------------------------------------------------------------- */

const char cmd_restore_usage[] =
	"usage: khub restore DIR\n"
	"  restore a backup made by khub backup into the configured data_dir and database,\n"
	"  both empty (the embedded cluster is created in data_dir when database_url is unset)\n";

int cmd_restore(int argc, char **argv)
{
	char why[600];
	if (argc != 2 || argv[1][0] == '-') {
		fputs(cmd_restore_usage, stderr);
		return 2;
	}
	struct restore r = { .from = argv[1] };
	int scanned = dir_walk(r.from, only_files, NULL);
	if (scanned < 0) {
		if (scanned == KHUB_EIO)
			fprintf(stderr, "khub restore: cannot read all of %s\n", r.from);
		return 2;
	}
	if (!(r.manifest = backup_manifest_read(r.from, why, sizeof(why)))) {
		fprintf(stderr, "khub restore: %s\n", why);
		return 2;
	}
	int empty = dir_is_empty(config.data_dir);
	if (empty != 1) {
		fprintf(stderr, "khub restore: data_dir %s is %s; restore into an empty one\n", config.data_dir,
			empty < 0 ? "not readable" : "not empty");
		json_decref(r.manifest);
		return 2;
	}
	runtime_connect_database();
	int rc = db_is_empty();
	if (rc == 0) {
		fprintf(stderr, "khub restore: the database is not empty; restore into an empty one\n");
		rc = KHUB_EEXIST;
	}
	if (rc > 0 && (rc = restore_files(&r)) == 0)
		rc = restore_database(&r);
	runtime_close_database();
	if (rc == 0)
		printf("khub restore: %zu git files, %zu LFS objects (%llu bytes), %zu kernel repos re-indexed; "
		       "run khub fsck to check\n", r.git.files, r.lfs.files, r.lfs.bytes, r.reindexed);
	else if (rc != KHUB_EEXIST)	/* refused: nothing was copied */
		fprintf(stderr, "khub restore: failed (%s); empty %s (and the database) before trying again\n",
			khub_strerror(rc), config.data_dir);
	json_decref(r.manifest);
	return rc < 0 ? 2 : r.lfs_damaged ? 1 : 0;
}
