/* backup_files.c -- what khub backup and khub restore share: copying files
 * and trees (verified, fsynced, renamed into place), the LFS object sources
 * a backup reads (a table of backends: the local store today), PostgreSQL
 * client tools of the server's major version, and the manifest. */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"

/* ---- files ------------------------------------------------------------------ */

/* Copy fd_in to fd_out, hashing when sha is not NULL; bytes copied in *bytes. */
static int copy_fd(int fd_in, int fd_out, EVP_MD_CTX *sha, uint64_t *bytes)
{
	char *buf = xmalloc(1 << 20);
	ssize_t n;
	int rc = 0;
	*bytes = 0;
	while (rc == 0 && (n = read(fd_in, buf, 1 << 20)) != 0) {
		if (n < 0) {
			rc = errno == EINTR ? 0 : KHUB_EIO;
			continue;
		}
		if (sha)
			EVP_DigestUpdate(sha, buf, (size_t)n);
		if (write_all(fd_out, buf, (size_t)n) < 0)
			rc = khub_err_from_errno(errno);
		*bytes += (uint64_t)n;
	}
	free(buf);
	return rc;
}

/* The file to copy, never through a symbolic link (a restored backup may
 * hold one planted to read another file), but for the /proc/self/fd/N by
 * which a remote store lends a download (linked_each). */
static int open_source(const char *from)
{
	static const char lent[] = "/proc/self/fd/";
	int nofollow = strncmp(from, lent, sizeof(lent) - 1) == 0 ? 0 : O_NOFOLLOW;
	return open(from, O_RDONLY | O_CLOEXEC | nofollow);
}

int backup_copy_file(const char *from, const char *to, const char *expect_sha256, uint64_t *bytes)
{
	char *tmp = xasprintf("%s.tmp-%d", to, (int)getpid());
	struct stat st;
	int in = open_source(from), out = -1, rc = KHUB_EIO;
	uint64_t copied = 0;
	EVP_MD_CTX *sha = expect_sha256 ? EVP_MD_CTX_new() : NULL;
	if (in < 0 || fstat(in, &st) < 0 || !S_ISREG(st.st_mode))
		goto cleanup;
	unlink(tmp);	/* one a killed copy left; never written through */
	out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st.st_mode & 0777);
	if (out < 0)
		goto cleanup;
	if (sha)
		EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
	if ((rc = copy_fd(in, out, sha, &copied)) < 0)
		goto cleanup;
	if (sha) {
		char got[65];
		sha256_final_hex(sha, got);
		if (strcmp(got, expect_sha256) != 0) {
			rc = KHUB_EINVAL;
			goto cleanup;
		}
	}
	rc = fsync(out) == 0 && close(out) == 0 && rename(tmp, to) == 0 ? 0 : khub_err_from_errno(errno);
	out = -1;
cleanup:
	if (out >= 0)
		close(out);
	if (in >= 0)
		close(in);
	if (rc < 0)
		unlink(tmp);
	if (bytes)
		*bytes = copied;
	EVP_MD_CTX_free(sha);
	free(tmp);
	return rc;
}

/* 1 when path is a regular file of size bytes. */
static int have_file(const char *path, off_t size)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == size;
}

struct tree_copy {
	const char *to;
	int (*skip)(const char *rel, const char *name);
	struct backup_tally *tally;
};

static int copy_entry(const char *rel, const char *path, const char *name, void *arg)
{
	struct tree_copy *tc = arg;
	struct stat st;
	if (tc->skip && tc->skip(rel, name))
		return 0;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : KHUB_EIO;	/* gone meanwhile (a temp file) */
	char *dest = xasprintf("%s/%s", tc->to, rel);
	int rc = 0;
	if (S_ISDIR(st.st_mode)) {
		rc = mkdir_p(dest, st.st_mode & 0777) < 0 ? KHUB_EIO : DIR_WALK_ENTER;
	} else if (S_ISREG(st.st_mode) && !have_file(dest, st.st_size)) {
		uint64_t bytes = 0;
		rc = backup_copy_file(path, dest, NULL, &bytes);
		if (rc == KHUB_EIO && access(path, F_OK) < 0)
			rc = 0;	/* removed while copied (a pack replaced by a repack) */
		tc->tally->files += rc == 0;
		tc->tally->bytes += bytes;
	} else if (S_ISREG(st.st_mode)) {
		tc->tally->present++;
	}
	if (rc < 0)
		fprintf(stderr, "khub: cannot copy %s to %s: %s\n", path, dest, khub_strerror(rc));
	free(dest);
	return rc;
}

int backup_copy_tree(const char *from, const char *to, int (*skip)(const char *rel, const char *name),
		     struct backup_tally *tally)
{
	struct tree_copy tc = { .to = to, .skip = skip, .tally = tally };
	if (mkdir_p(to, 0755) < 0)
		return KHUB_EIO;
	return dir_walk(from, copy_entry, &tc);
}

/* ---- LFS sources -------------------------------------------------------------- */

static int local_each(const char *lfs_root, int (*fn)(const char *oid, const char *path, void *arg), void *arg)
{
	return store_each_lfs_object(lfs_root, fn, arg);
}

/* A remote store (S3): every object some repo links (the database names
 * them all; an object no repo links is no repo's content), wanted(oid, size)
 * asked first from the store's size alone, then downloaded by the backend
 * (which re-hashes it) to an unlinked temp file that fn copies from. */
static int linked_each(const char *lfs_root, int (*fn)(const char *oid, const char *path, void *arg), void *arg)
{
	const struct backup_lfs_source *self = backup_lfs_source("s3");
	struct lfs_store *store = lfs_store_open(lfs_root);
	char **oids = NULL;
	size_t n = 0;
	int rc = store ? db_lfs_linked_oids(&oids, &n) : KHUB_EIO;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		uint64_t size;
		int fd, got = lfs_store_stat(store, oids[i], &size);
		if (got == KHUB_ENOTFOUND || (got == 0 && !self->wanted(oids[i], size, arg)))
			continue;	/* missing (fsck's to report), or already in the backup */
		if (got < 0 || (got = lfs_store_open_object(store, oids[i], &fd, &size)) < 0) {
			fprintf(stderr, "khub: cannot read LFS object %s from the store: %s\n", oids[i], khub_strerror(got));
			rc = got;
			break;
		}
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		rc = fn(oids[i], path, arg);
		close(fd);
	}
	for (size_t i = 0; i < n; i++)
		free(oids[i]);
	free(oids);
	lfs_store_close(store);
	return rc;
}

/* Where a backup reads LFS objects from, by lfs backend name: each(root, fn,
 * arg) calls fn with every object's oid and a local path to copy it from. */
static struct backup_lfs_source lfs_sources[] = {
	{ "local", local_each, NULL },
	{ "s3", linked_each, NULL },
};

void backup_lfs_set_wanted(int (*wanted)(const char *oid, uint64_t size, void *arg))
{
	for (size_t i = 0; i < sizeof(lfs_sources) / sizeof(lfs_sources[0]); i++)
		lfs_sources[i].wanted = wanted;
}

const struct backup_lfs_source *backup_lfs_source(const char *name)
{
	for (size_t i = 0; i < sizeof(lfs_sources) / sizeof(lfs_sources[0]); i++)
		if (strcmp(lfs_sources[i].name, name) == 0)
			return &lfs_sources[i];
	return NULL;
}

char *backup_lfs_path(const char *lfs_root, const char *oid)
{
	return xasprintf("%s/objects/%.2s/%.2s/%s", lfs_root, oid, oid + 2, oid);
}

/* ---- PostgreSQL tools ----------------------------------------------------------- */

int backup_run(char *const argv[], int quiet)
{
	pid_t pid;
	int null = quiet ? open("/dev/null", O_WRONLY | O_CLOEXEC) : -1;
	struct spawn_opts opts = { .argv = argv, .fd_in = -1, .fd_out = null, .fd_err = null };
	int rc = spawn_process(&opts, &pid);
	if (null >= 0)
		close(null);
	if (rc < 0)
		return -1;
	int status = 0;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

extern char **environ;

int backup_pg_run(const char *tool, char *const args[])
{
	char *conn = NULL, *password = NULL;
	if (db_conninfo_split_password(runtime_conninfo(), &conn, &password) < 0)
		return -1;
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	strvec_pushf(&argv, "%s", tool);
	for (size_t i = 0; args[i]; i++)
		strvec_pushf(&argv, "%s", args[i]);
	strvec_pushf(&argv, "--dbname=%s", conn);
	for (size_t i = 0; environ[i]; i++)
		if (strncmp(environ[i], "PGPASSWORD=", 11) != 0)
			strvec_pushf(&env, "%s", environ[i]);
	if (password)	/* in the environment, not on the command line */
		strvec_pushf(&env, "PGPASSWORD=%s", password);
	pid_t pid;
	int status = -1;
	struct spawn_opts opts = { .argv = argv.items, .envp = env.items, .fd_in = -1, .fd_out = -1, .fd_err = -1 };
	if (spawn_process(&opts, &pid) == 0) {
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	}
	strvec_release(&env);
	strvec_release(&argv);
	free(password);
	free(conn);
	return status;
}

/* The major version `tool --version` prints ("pg_dump (PostgreSQL) 16.4"), or -1. */
static int tool_major(const char *tool)
{
	char *cmd = xasprintf("'%s' --version 2>/dev/null", tool);
	FILE *fp = popen(cmd, "r");
	char line[256] = "";
	int major = -1;
	if (fp && fgets(line, sizeof(line), fp)) {
		char *p = strstr(line, ") ");
		if (p)
			major = atoi(p + 2);
	}
	if (fp)
		pclose(fp);
	free(cmd);
	return major;
}

char *backup_pg_tool(const char *name, int major)
{
	char *candidates[] = { xasprintf("%s/%s", config.pg_bindir, name),
			       xasprintf("/usr/lib/postgresql/%d/bin/%s", major, name) };
	char *found = NULL;
	for (size_t i = 0; i < 2; i++) {
		if (!found && access(candidates[i], X_OK) == 0 && tool_major(candidates[i]) == major)
			found = candidates[i];
		else
			free(candidates[i]);
	}
	if (!found)
		fprintf(stderr, "khub: no %s of PostgreSQL %d (looked in pg_bindir %s and /usr/lib/postgresql/%d/bin); "
			"install that version's client\n", name, major, config.pg_bindir, major);
	return found;
}

/* ---- the manifest ------------------------------------------------------------------ */

int backup_manifest_write(const char *dir, json_t *manifest)
{
	char *path = xasprintf("%s/manifest.json", dir);
	char *tmp = xasprintf("%s.tmp", path);
	json_object_set_new(manifest, "format", json_integer(BACKUP_FORMAT));
	json_object_set_new(manifest, "khub_version", json_string(PACKAGE_VERSION));
	int rc = json_dump_file(manifest, tmp, JSON_INDENT(2) | JSON_SORT_KEYS) == 0 && fsync_file(tmp) == 0 &&
			 rename(tmp, path) == 0 && fsync_dir(dir) == 0
		 ? 0
		 : KHUB_EIO;
	free(tmp);
	free(path);
	return rc;
}

json_t *backup_manifest_read(const char *dir, char *why, size_t why_size)
{
	char *path = xasprintf("%s/manifest.json", dir);
	json_error_t err;
	json_t *m = json_load_file(path, 0, &err);
	free(path);
	if (!m) {
		snprintf(why, why_size, "no readable manifest.json in %s (an unfinished backup?): %s", dir, err.text);
		return NULL;
	}
	json_int_t format = json_integer_value(json_object_get(m, "format"));
	if (format != BACKUP_FORMAT || !json_is_true(json_object_get(m, "complete"))) {
		snprintf(why, why_size, "%s/manifest.json: format %lld%s (this khub reads format %d, complete)", dir,
			 (long long)format, json_is_true(json_object_get(m, "complete")) ? "" : ", not complete",
			 BACKUP_FORMAT);
		json_decref(m);
		return NULL;
	}
	return m;
}
