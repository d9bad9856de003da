/* cmd_lfs.c -- khub lfs migrate --to s3: copy every object of the local
 * LFS store to the S3 backend (resumable, verified, while serving). */
#include "server/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct migration {
	struct lfs_store *s3;
	size_t copied, present, failed;
	uint64_t bytes;
};

/* Copy one local object through a writer of the S3 store: the sha256 is
 * checked as it is read (a corrupt local file is refused, not copied). */
static int copy_object(struct lfs_store *s3, const char *oid, const char *path, uint64_t *size)
{
	FILE *in = fopen(path, "rb");
	struct lfs_writer *w = in ? lfs_writer_begin(s3) : NULL;
	int rc = in && w ? 0 : KHUB_EIO;
	char *buf = xmalloc(1 << 20);
	size_t n;
	while (rc == 0 && (n = fread(buf, 1, 1 << 20, in)) > 0)
		rc = lfs_writer_write(w, buf, n);
	if (rc == 0 && ferror(in))
		rc = KHUB_EIO;
	free(buf);
	if (in)
		fclose(in);
	if (rc < 0 || !w) {
		lfs_writer_abort(w);
		return rc;
	}
	char got[65];
	rc = lfs_writer_commit(w, oid, got, size);
	if (rc == KHUB_EINVAL)
		fprintf(stderr, "khub lfs migrate: %s: its content hashes to %s: not copied (run khub fsck)\n", path,
			got);
	return rc;
}

static int migrate_one(const char *oid, const char *path, void *arg)
{
	struct migration *m = arg;
	struct stat st;
	uint64_t there;
	if (!is_lower_hex(oid, 64) || stat(path, &st) < 0)
		return 0;
	/* already copied (a resumed run): khub put it there, same size */
	if (lfs_store_stat(m->s3, oid, &there) == 0 && there == (uint64_t)st.st_size) {
		m->present++;
		return 0;
	}
	uint64_t size = 0;
	if (copy_object(m->s3, oid, path, &size) < 0) {
		fprintf(stderr, "khub lfs migrate: %s: not copied\n", oid);
		m->failed++;
		return 0;
	}
	m->copied++;
	m->bytes += size;
	return 0;
}

static int lfs_migrate(void)
{
	struct migration m = { 0 };
	m.s3 = lfs_store_open_as(runtime_lfs_root(), config_lfs_s3());
	if (!m.s3) {
		fprintf(stderr, "khub lfs migrate: cannot open the S3 store (lfs_s3_* settings and credentials; "
				"see the log above)\n");
		return 2;
	}
	int rc = store_each_lfs_object(runtime_lfs_root(), migrate_one, &m);
	lfs_store_close(m.s3);
	printf("khub lfs migrate: %zu objects copied (%llu bytes), %zu already there, %zu failed\n", m.copied,
	       (unsigned long long)m.bytes, m.present, m.failed);
	if (rc < 0 || m.failed) {
		fprintf(stderr, "khub lfs migrate: incomplete: run it again (it resumes) before setting "
				"lfs_backend = s3\n");
		return 1;
	}
	printf("khub lfs migrate: the S3 bucket holds every local object; set lfs_backend = s3 and restart "
	       "(then run this again: it copies what arrived meanwhile)\n");
	return 0;
}

char **lfs_hook_env(void)
{
	static const char *const creds[] = { "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY" };
	char **env = xcalloc(12, sizeof(*env));
	size_t n = 0;
	if (!config_lfs_backend()->remote)
		return env;
	env[n++] = xasprintf("KHUB_LFS_BACKEND=%s", config_lfs_backend()->name);
	env[n++] = xasprintf("KHUB_LFS_S3_ENDPOINT=%s", config.lfs_s3_endpoint);
	env[n++] = xasprintf("KHUB_LFS_S3_BUCKET=%s", config.lfs_s3_bucket);
	env[n++] = xasprintf("KHUB_LFS_S3_REGION=%s", config.lfs_s3_region);
	env[n++] = xasprintf("KHUB_LFS_S3_PATH_STYLE=%ld", config.lfs_s3_path_style);
	env[n++] = xasprintf("KHUB_LFS_S3_PART_MB=%ld", config.lfs_s3_part_mb);
	env[n++] = xasprintf("KHUB_LFS_S3_CREDENTIALS_FILE=%s", config.lfs_s3_credentials_file);
	for (size_t i = 0; i < 2 && !config.lfs_s3_credentials_file[0]; i++)
		if (getenv(creds[i]))
			env[n++] = xasprintf("%s=%s", creds[i], getenv(creds[i]));
	return env;
}

const char cmd_lfs_usage[] =
	"usage: khub lfs migrate --to s3\n";

int cmd_lfs(int argc, char **argv)
{
	const struct lfs_backend_info *to = argc == 4 ? lfs_backend_find(argv[3]) : NULL;
	if (argc == 4 && strcmp(argv[1], "migrate") == 0 && strcmp(argv[2], "--to") == 0 && to && to->remote) {
		runtime_open_database();	/* sets the data dir's paths */
		int rc = lfs_migrate();
		runtime_close_database();
		return rc;
	}
	fputs(cmd_lfs_usage, stderr);
	return 2;
}
