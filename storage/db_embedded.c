/* db_embedded.c -- khub's own PostgreSQL cluster under {data_dir}/pg, used
 * when no database URL is configured: unix socket only, run as an
 * unprivileged user when khub runs as root (PostgreSQL refuses root), shared
 * by every khub process on the data dir and stopped by the last one. */
#include "storage.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct {
	char *pg_dir, *cluster, *run_dir, *log_file, *bindir;
	int start_lock_fd, users_lock_fd;
	uid_t uid;
	gid_t gid;
	int drop_privileges;
} emb = { .start_lock_fd = -1, .users_lock_fd = -1 };

/* Run argv[0] from the PostgreSQL bindir as the cluster's owner; returns
 * the exit status, or -1 when it could not run. Output goes to the log. */
static int run_pg_tool(char *const argv[])
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (emb.drop_privileges) {
			if (setgroups(0, NULL) < 0 || setgid(emb.gid) < 0 || setuid(emb.uid) < 0)
				_exit(126);
		}
		int fd = open(emb.log_file, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		/* PostgreSQL finds its siblings (postgres, share/) through
		 * argv[0]: give it the full path, not a name found on PATH. */
		char *path = xasprintf("%s/%s", emb.bindir, argv[0]);
		char *args[16];
		size_t n = 0;
		args[n++] = path;
		for (size_t i = 1; argv[i] && n < 15; i++)
			args[n++] = argv[i];
		args[n] = NULL;
		execv(path, args);
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int choose_owner(void)
{
	if (geteuid() != 0)
		return 0;
	struct passwd *pw = getpwnam("postgres");
	if (!pw)
		pw = getpwnam("nobody");
	if (!pw) {
		log_error("embedded database: running as root and no 'postgres' or 'nobody' user exists");
		return KHUB_EIO;
	}
	emb.uid = pw->pw_uid;
	emb.gid = pw->pw_gid;
	emb.drop_privileges = 1;
	return 0;
}

/* Can the cluster's owner reach pg_dir? Checked in a child as that user. */
static int owner_can_reach(const char *dir)
{
	if (!emb.drop_privileges)
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setgid(emb.gid) < 0 || setuid(emb.uid) < 0)
			_exit(1);
		_exit(access(dir, R_OK | W_OK | X_OK) == 0 ? 0 : 1);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int append_conf(void)
{
	char *conf = xasprintf("%s/postgresql.conf", emb.cluster);
	FILE *fp = fopen(conf, "a");
	free(conf);
	if (!fp)
		return KHUB_EIO;
	fprintf(fp, "\n# added by khub: unix socket only\n"
		    "listen_addresses = ''\n"
		    "unix_socket_directories = '%s'\n"
		    "max_connections = 300\n"
		    "logging_collector = off\n", emb.run_dir);
	fclose(fp);
	return 0;
}

static int cluster_running(void)
{
	char *argv[] = { "pg_ctl", "status", "-D", emb.cluster, NULL };
	return run_pg_tool(argv) == 0;
}

static int init_cluster(void)
{
	struct stat st;
	char *version = xasprintf("%s/PG_VERSION", emb.cluster);
	int exists = stat(version, &st) == 0;
	free(version);
	if (exists)
		return 0;
	log_info("embedded database: initialising %s", emb.cluster);
	char *argv[] = { "initdb", "-D", emb.cluster, "-U", "khub", "--auth=trust", "-E", "UTF8",
			 "--locale=C", "--no-instructions", NULL };
	if (run_pg_tool(argv) != 0) {
		log_error("embedded database: initdb failed, see %s", emb.log_file);
		return KHUB_EIO;
	}
	return append_conf();
}

static int start_cluster(void)
{
	if (cluster_running())
		return 0;
	log_info("embedded database: starting (socket in %s)", emb.run_dir);
	char *argv[] = { "pg_ctl", "start", "-w", "-t", "60", "-D", emb.cluster, "-l", emb.log_file, NULL };
	if (run_pg_tool(argv) != 0) {
		log_error("embedded database: pg_ctl start failed, see %s", emb.log_file);
		return KHUB_EIO;
	}
	return 0;
}

static int create_database(void)
{
	char *conninfo = xasprintf("host=%s dbname=postgres user=khub", emb.run_dir);
	PGconn *conn = PQconnectdb(conninfo);
	free(conninfo);
	int rc = KHUB_EDB;
	if (PQstatus(conn) != CONNECTION_OK) {
		log_error("embedded database: %s", PQerrorMessage(conn));
		goto cleanup;
	}
	PGresult *res = PQexec(conn, "SELECT 1 FROM pg_database WHERE datname = 'khub'");
	int exists = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1;
	PQclear(res);
	if (!exists) {
		res = PQexec(conn, "CREATE DATABASE khub");
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			log_error("embedded database: %s", PQresultErrorMessage(res));
			PQclear(res);
			goto cleanup;
		}
		PQclear(res);
	}
	rc = 0;
cleanup:
	PQfinish(conn);
	return rc;
}

static int chown_tree(const char *dir)
{
	if (!emb.drop_privileges)
		return 0;
	char *argv_path = xasprintf("chown -R %u:%u '%s'", (unsigned)emb.uid, (unsigned)emb.gid, dir);
	int rc = system(argv_path);
	free(argv_path);
	return rc == 0 ? 0 : KHUB_EIO;
}

int db_embedded_acquire(const char *data_dir, const char *pg_bindir, char **conninfo)
{
	int rc;
	emb.pg_dir = xasprintf("%s/pg", data_dir);
	emb.cluster = xasprintf("%s/data", emb.pg_dir);
	emb.run_dir = xasprintf("%s/run", emb.pg_dir);
	emb.log_file = xasprintf("%s/postgresql.log", emb.pg_dir);
	emb.bindir = xstrdup(pg_bindir);
	if (strlen(emb.run_dir) > 90) {
		log_error("embedded database: socket directory %s is too long for a unix socket; "
			  "use a shorter data dir", emb.run_dir);
		return KHUB_EINVAL;
	}
	if ((rc = choose_owner()) < 0)
		return rc;
	if (mkdir_p(emb.run_dir, 0700) < 0) {
		log_error("embedded database: cannot create %s: %s", emb.run_dir, strerror(errno));
		return KHUB_EIO;
	}
	char *start_lock = xasprintf("%s/start.lock", emb.pg_dir);
	char *users_lock = xasprintf("%s/users.lock", emb.pg_dir);
	emb.start_lock_fd = open(start_lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	emb.users_lock_fd = open(users_lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	free(start_lock);
	free(users_lock);
	if (emb.start_lock_fd < 0 || emb.users_lock_fd < 0)
		return KHUB_EIO;
	flock(emb.start_lock_fd, LOCK_EX);
	if ((rc = chown_tree(emb.pg_dir)) < 0)
		goto unlock;
	if (!owner_can_reach(emb.pg_dir)) {
		log_error("embedded database: the 'postgres' user cannot reach %s; put the data dir "
			  "where it can (every parent directory searchable), or set database_url",
			  emb.pg_dir);
		rc = KHUB_EIO;
		goto unlock;
	}
	if ((rc = init_cluster()) < 0 || (rc = start_cluster()) < 0 || (rc = create_database()) < 0)
		goto unlock;
	flock(emb.users_lock_fd, LOCK_SH);
	*conninfo = xasprintf("host=%s dbname=khub user=khub", emb.run_dir);
unlock:
	flock(emb.start_lock_fd, LOCK_UN);
	return rc;
}

void db_embedded_release(void)
{
	if (emb.users_lock_fd < 0)
		return;
	flock(emb.start_lock_fd, LOCK_EX);
	flock(emb.users_lock_fd, LOCK_UN);
	if (flock(emb.users_lock_fd, LOCK_EX | LOCK_NB) == 0) {
		log_info("embedded database: stopping");
		char *argv[] = { "pg_ctl", "stop", "-w", "-m", "fast", "-D", emb.cluster, NULL };
		run_pg_tool(argv);
		flock(emb.users_lock_fd, LOCK_UN);
	}
	flock(emb.start_lock_fd, LOCK_UN);
	close(emb.users_lock_fd);
	close(emb.start_lock_fd);
	emb.users_lock_fd = emb.start_lock_fd = -1;
	free(emb.pg_dir);
	free(emb.cluster);
	free(emb.run_dir);
	free(emb.log_file);
	free(emb.bindir);
}
