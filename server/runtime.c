/* runtime.c -- what every command that touches data needs: the data
 * directories and an open, migrated database (embedded or external). */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <openssl/rand.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static char repo_root[PATH_MAX + 16], lfs_root[PATH_MAX + 16];
static int using_embedded;
static char *conninfo_in_use;

const char *runtime_conninfo(void)
{
	return conninfo_in_use ? conninfo_in_use : "";
}

/* Root against a data dir that belongs to another user (the package's
 * /var/lib/khub, owned by khub): become that user before anything is
 * touched, so that every file khub writes (and its embedded PostgreSQL)
 * stays that user's; nothing is ever chowned. A data dir that is absent or
 * root's is left to root as before (a quickstart as root). */
void runtime_become_data_dir_owner(void)
{
	struct stat st;
	char absolute[PATH_MAX];
	if (geteuid() != 0 || !config.data_dir[0] || stat(config.data_dir, &st) < 0 || st.st_uid == 0)
		return;
	if (realpath(config.data_dir, absolute)) {	/* the working directory may be root's alone */
		free(config.data_dir);
		config.data_dir = xstrdup(absolute);
	}
	struct passwd *pw = getpwuid(st.st_uid);
	char name[64];
	if (pw)
		snprintf(name, sizeof(name), "%s", pw->pw_name);
	else
		snprintf(name, sizeof(name), "%u", (unsigned)st.st_uid);
	gid_t gid = pw ? pw->pw_gid : st.st_gid;
	if ((pw ? initgroups(pw->pw_name, gid) : setgroups(0, NULL)) < 0 || setgid(gid) < 0 || setuid(st.st_uid) < 0)
		fatal("data dir %s belongs to %s and khub cannot become that user (%s); run it as that user: "
		      "sudo -u %s khub ...", config.data_dir, name, strerror(errno), name);
	if (pw && pw->pw_dir)
		setenv("HOME", pw->pw_dir, 1);
	log_info("running as %s, the owner of data dir %s (never as root on another user's data)", name,
		 config.data_dir);
}

static void prepare_data_dir(void)
{
	if (mkdir_p(config.data_dir, 0755) < 0)
		fatal("cannot create data dir %s: %s", config.data_dir, strerror(errno));
	char absolute[PATH_MAX];
	if (!realpath(config.data_dir, absolute))
		fatal("cannot resolve data dir %s: %s", config.data_dir, strerror(errno));
	free(config.data_dir);
	config.data_dir = xstrdup(absolute);
	snprintf(repo_root, sizeof(repo_root), "%s/repos", absolute);
	snprintf(lfs_root, sizeof(lfs_root), "%s/lfs", absolute);
	if (mkdir_p(repo_root, 0755) < 0 || mkdir_p(lfs_root, 0755) < 0)
		fatal("cannot create %s: %s", repo_root, strerror(errno));
}

const char *runtime_repo_root(void) { return repo_root; }
const char *runtime_lfs_root(void) { return lfs_root; }

void runtime_load_secret(unsigned char out[32])
{
	char *path = xasprintf("%s/secret", config.data_dir);
	FILE *fp = fopen(path, "rb");
	if (fp) {
		size_t n = fread(out, 1, 32, fp);
		fclose(fp);
		if (n != 32)
			fatal("%s is damaged; delete it to make a new one (outstanding LFS URLs stop working)", path);
		free(path);
		return;
	}
	if (RAND_bytes(out, 32) != 1)
		fatal("no randomness for the URL secret");
	char *tmp = xasprintf("%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, out, 32) != 32 || fsync(fd) < 0 || close(fd) < 0 || rename(tmp, path) < 0)
		fatal("cannot write %s: %s", path, strerror(errno));
	free(tmp);
	free(path);
}

void runtime_open_database(void)
{
	runtime_connect_database();
	if (db_migrate() < 0)
		fatal("database migration failed");
}

void runtime_connect_database(void)
{
	prepare_data_dir();
	repo_store_global_init();
	if (config.database_url[0]) {
		db_configure(config.database_url);
		conninfo_in_use = xstrdup(config.database_url);
	} else {
		char *conninfo = NULL;
		if (db_embedded_acquire(config.data_dir, config.pg_bindir, &conninfo) < 0)
			fatal("cannot start the embedded database (see the log above)");
		using_embedded = 1;
		db_embedded_set_linger((int)config.embedded_db_linger_s);
		db_configure(conninfo);
		conninfo_in_use = conninfo;
	}
	db_pool_configure(config.db_pool_size, config.db_pool_wait_ms);
	if (db_ping() < 0)
		fatal("cannot connect to the database");
}

void runtime_watch_database(void)
{
	if (using_embedded && db_embedded_watchdog_start() < 0)
		fatal("cannot start the embedded database watchdog");
}

void runtime_close_database(void)
{
	db_shutdown();
	if (using_embedded)
		db_embedded_release();
	using_embedded = 0;
}
