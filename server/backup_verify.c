/* backup_verify.c -- what a backup holds, file by file: the manifest's
 * "files" (size and sha256 of each, written last by khub backup) and
 * khub backup --verify, which checks a backup against them and has
 * pg_restore read the dump's table of contents, without a database. */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* sha256 (hex) and size of the regular file at path: 0 or KHUB_EIO. */
static int hash_file(const char *path, char hex[65], uint64_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		return KHUB_EIO;
	}
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	char *buf = xmalloc(1 << 20);
	ssize_t n;
	int rc = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 ? 0 : KHUB_EIO;
	*size = 0;
	while (rc == 0 && (n = read(fd, buf, 1 << 20)) != 0) {
		if (n < 0) {
			rc = errno == EINTR ? 0 : KHUB_EIO;
			continue;
		}
		EVP_DigestUpdate(ctx, buf, (size_t)n);
		*size += (uint64_t)n;
	}
	if (rc == 0)
		sha256_final_hex(ctx, hex);
	EVP_MD_CTX_free(ctx);
	free(buf);
	close(fd);
	return rc;
}

/* Not part of what a backup holds: the manifest itself, the lock. */
static int is_bookkeeping(const char *rel)
{
	return strcmp(rel, "manifest.json") == 0 || strcmp(rel, "manifest.json.tmp") == 0 ||
	       strcmp(rel, ".backup.lock") == 0;
}

static int list_file(const char *rel, const char *path, const char *name, void *arg)
{
	json_t *files = arg;
	struct stat st;
	char hex[65];
	uint64_t size;
	if (lstat(path, &st) < 0)
		return KHUB_EIO;
	if (S_ISDIR(st.st_mode))
		return DIR_WALK_ENTER;
	if (!S_ISREG(st.st_mode) || is_bookkeeping(rel))
		return 0;
	if (strncmp(rel, "lfs/objects/", 12) == 0 && strlen(name) == 64 && is_lower_hex(name, 64)) {
		/* named by its sha256, checked against it when copied: an
		 * incremental backup does not read the whole store again */
		json_object_set_new(files, rel, json_pack("{s:I, s:s}", "size", (json_int_t)st.st_size, "sha256", name));
		return 0;
	}
	if (hash_file(path, hex, &size) < 0) {
		fprintf(stderr, "khub backup: cannot read %s to list it in the manifest\n", path);
		return KHUB_EIO;
	}
	json_object_set_new(files, rel, json_pack("{s:I, s:s}", "size", (json_int_t)size, "sha256", hex));
	return 0;
}

json_t *backup_manifest_files(const char *dir)
{
	json_t *files = json_object();
	if (dir_walk(dir, list_file, files) < 0) {
		json_decref(files);
		return NULL;
	}
	return files;
}

/* One listed file as recorded? 0, or 1 said on stderr. */
static int verify_file(const char *dir, const char *rel, json_t *want)
{
	char hex[65];
	uint64_t size = 0;
	json_int_t want_size = json_integer_value(json_object_get(want, "size"));
	const char *want_sha = json_string_value(json_object_get(want, "sha256"));
	if (rel[0] == '/' || strstr(rel, "..") || !want_sha) {
		fprintf(stderr, "khub backup --verify: %s: the manifest's entry is not valid\n", rel);
		return 1;
	}
	char *path = xasprintf("%s/%s", dir, rel);
	int rc = hash_file(path, hex, &size);
	free(path);
	if (rc < 0)
		fprintf(stderr, "khub backup --verify: %s: missing or unreadable\n", rel);
	else if ((json_int_t)size != want_size)
		fprintf(stderr, "khub backup --verify: %s: %llu bytes, the manifest says %lld\n", rel,
			(unsigned long long)size, (long long)want_size);
	else if (strcmp(hex, want_sha) != 0)
		fprintf(stderr, "khub backup --verify: %s: sha256 %s, the manifest says %s\n", rel, hex, want_sha);
	else
		return 0;
	return 1;
}

/* pg_restore --list reads the dump's table of contents: 0, or 1 said. */
static int verify_dump(const char *dir, json_t *m)
{
	int major = (int)json_integer_value(json_object_get(json_object_get(m, "database"), "postgresql_major"));
	char *tool = backup_pg_tool("pg_restore", major), *dump = xasprintf("%s/db.dump", dir);
	char *argv[] = { tool, "--list", dump, NULL };
	int bad = !tool || backup_run(argv, 1) != 0;
	if (bad)
		fprintf(stderr, "khub backup --verify: db.dump: pg_restore --list cannot read it\n");
	free(dump);
	free(tool);
	return bad;
}

int backup_verify(const char *dir)
{
	char why[512];
	json_t *m = backup_manifest_read(dir, why, sizeof(why)), *files, *want;
	const char *rel;
	size_t bad = 0;
	if (!m) {
		fprintf(stderr, "khub backup --verify: %s\n", why);
		return 1;
	}
	if (!json_is_object(files = json_object_get(m, "files")) || !json_object_get(files, "db.dump")) {
		fprintf(stderr, "khub backup --verify: %s/manifest.json lists no files (a backup of an older khub?)\n",
			dir);
		json_decref(m);
		return 1;
	}
	json_object_foreach(files, rel, want)
		bad += (size_t)verify_file(dir, rel, want);
	bad += (size_t)verify_dump(dir, m);
	if (bad)
		fprintf(stderr, "khub backup --verify: %s: %zu problem%s\n", dir, bad, bad == 1 ? "" : "s");
	else
		printf("khub backup --verify: %s: %zu files as recorded; db.dump readable\n", dir,
		       json_object_size(files));
	json_decref(m);
	return bad ? 1 : 0;
}
