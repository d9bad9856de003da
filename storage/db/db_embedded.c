/* db_embedded.c -- khub's own PostgreSQL cluster under {data_dir}/pg, used
 * when no database URL is configured: unix socket only, run as an
 * unprivileged user when khub runs as root (PostgreSQL refuses root): an
 * existing cluster's owner, nothing chowned but the directories khub just
 * made; shared by every khub process on the data dir and stopped by the
 * last one; in the serve role a watchdog restarts its postmaster when it
 * dies. */
#include "storage/db/db_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct {
	char *pg_dir, *cluster, *run_dir, *log_file, *bindir;
	int start_lock_fd, users_lock_fd;
	uid_t uid;
	gid_t gid;
	int drop_privileges;
	int linger_s;	/* db_embedded_set_linger */
} emb = { .start_lock_fd = -1, .users_lock_fd = -1 };

/* This process's environment without NOTIFY_SOCKET: a postmaster built
 * with systemd support would otherwise tell khub's unit READY=1 itself
 * (server/service.c). The strings stay environ's; the caller frees the array. */
static char **environ_for_postgres(void)
{
	extern char **environ;
	size_t n = 0;
	while (environ[n])
		n++;
	char **envp = xcalloc(n + 1, sizeof(*envp));
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "NOTIFY_SOCKET=", 14) != 0)
			envp[k++] = environ[i];
	return envp;
}

/* Run argv[0] from the PostgreSQL bindir as the cluster's owner; returns
 * the exit status, or -1 when it could not run. Output goes to the log. */
static int run_pg_tool(char *const argv[])
{
	/* PostgreSQL finds its siblings (postgres, share/) through argv[0]:
	 * give it the full path, not a name found on PATH. Built before the
	 * fork: the watchdog forks from a process with many threads. */
	char *path = xasprintf("%s/%s", emb.bindir, argv[0]);
	char *args[16];
	size_t n = 0;
	args[n++] = path;
	for (size_t i = 1; argv[i] && n < 15; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	/* opened here (before the fork), owned
	 * by the cluster's owner: pg_ctl -l opens it as that user */
	int fd = open(emb.log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	struct stat st;
	if (fd >= 0 && emb.drop_privileges && fstat(fd, &st) == 0 && st.st_uid == 0 &&
	    fchown(fd, emb.uid, emb.gid) < 0)
		log_warn("embedded database: cannot hand %s to its owner", emb.log_file);
	char **envp = environ_for_postgres();
	/* reset_signals: serve blocks SIGINT, SIGTERM and SIGHUP in every
	 * thread (server/service.c); PostgreSQL must not start with them blocked */
	struct spawn_opts opts = { .argv = args, .envp = envp, .fd_in = -1, .fd_out = fd, .fd_err = fd,
				   .drop_privileges = emb.drop_privileges, .uid = emb.uid, .gid = emb.gid,
				   .reset_signals = 1 };
	pid_t pid;
	int rc = spawn_process(&opts, &pid);
	free(envp);
	if (fd >= 0)
		close(fd);
	if (rc < 0) {
		free(path);
		return -1;
	}
	free(path);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Who runs the cluster when khub runs as root (PostgreSQL refuses root):
 * the owner of the cluster, or of pg_dir, when there is one that is not
 * root's (a cluster is never handed to another user); else 'postgres', or
 * 'nobody'. */
static int choose_owner(void)
{
	if (geteuid() != 0)
		return 0;
	struct stat st;
	struct passwd *pw = NULL;
	if ((stat(emb.cluster, &st) == 0 || stat(emb.pg_dir, &st) == 0) && st.st_uid != 0) {
		pw = getpwuid(st.st_uid);
		emb.uid = st.st_uid;
		emb.gid = pw ? pw->pw_gid : st.st_gid;
		emb.drop_privileges = 1;
		return 0;
	}
	pw = getpwnam("postgres");
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

/* Can the cluster's owner reach pg_dir? Checked in a child as that user;
 * the child runs no program, so not through spawn_process, but it calls only
 * async-signal-safe functions (setgroups, setgid, setuid, access, _exit). */
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

static pid_t postmaster_pid(void);
static int postmaster_alive(pid_t pid);

/* What `pg_ctl status` says (the pid in postmaster.pid lives), without
 * running it: every command asks, and a pg_ctl costs a fork and an exec
 * as the cluster's owner. */
static int cluster_running(void)
{
	return postmaster_alive(postmaster_pid());
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
	db_notices_to_log(conn);
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

/* Hand pg_dir or run_dir to the cluster's owner when root has it (khub,
 * as root, just made it): that directory alone, never what lies in it nor
 * a directory someone else owns (a live cluster's files stay its owner's). */
static int hand_over(const char *dir)
{
	struct stat st;
	if (!emb.drop_privileges || lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0)
		return 0;
	if (chown(dir, emb.uid, emb.gid) < 0) {
		log_error("embedded database: cannot hand %s to its owner: %s", dir, strerror(errno));
		return KHUB_EIO;
	}
	return 0;
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
	if ((rc = hand_over(emb.pg_dir)) < 0 || (rc = hand_over(emb.run_dir)) < 0)
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

/* ---- the watchdog (serve only) ------------------------------------------------ */

static struct {
	pthread_t thread;
	int started, stop;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	char problem[256];	/* "" while the postmaster runs */
} watch = { .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER };

static void set_problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_problem(const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&watch.lock);
	va_start(ap, fmt);
	vsnprintf(watch.problem, sizeof(watch.problem), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&watch.lock);
}

int db_embedded_problem(char *buf, size_t size)
{
	pthread_mutex_lock(&watch.lock);
	int down = watch.problem[0] != '\0';
	if (down)
		snprintf(buf, size, "%s", watch.problem);
	pthread_mutex_unlock(&watch.lock);
	return down;
}

static char *pid_file_path(void)
{
	return xasprintf("%s/postmaster.pid", emb.cluster);
}

/* The postmaster's pid, from the first line of postmaster.pid; 0 when the
 * file is absent or unreadable. */
static pid_t postmaster_pid(void)
{
	char *path = pid_file_path();
	FILE *fp = fopen(path, "r");
	free(path);
	if (!fp)
		return 0;
	long pid = 0;
	if (fscanf(fp, "%ld", &pid) != 1)
		pid = 0;
	fclose(fp);
	return (pid_t)pid;
}

/* Is pid a live postgres? A killed postmaster that nobody reaps (its
 * parent is init, which may not reap) stays a zombie, and a pid may have
 * been reused by another program. */
static int postmaster_alive(pid_t pid)
{
	if (pid <= 0 || (kill(pid, 0) < 0 && errno == ESRCH))
		return 0;
	char path[64], stat[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *fp = fopen(path, "r");
	if (!fp)
		return errno != ENOENT;	/* no /proc: kill() said it lives */
	size_t n = fread(stat, 1, sizeof(stat) - 1, fp);
	fclose(fp);
	stat[n] = '\0';
	char *open_paren = strchr(stat, '('), *close_paren = strrchr(stat, ')');
	if (!open_paren || !close_paren || close_paren[1] != ' ')
		return 1;
	if (close_paren[2] == 'Z' || close_paren[2] == 'X')
		return 0;
	return strncmp(open_paren + 1, "postgres", 8) == 0;
}

/* Restart the cluster if it is still down, holding the start lock that
 * orders every start and stop among the processes sharing it (each holds
 * users.lock shared, as this one does, so any of them may). 0 when it
 * runs, 1 when another process holds the lock (look again soon), or
 * KHUB_EIO. */
static int restart_cluster(void)
{
	if (flock(emb.start_lock_fd, LOCK_EX | LOCK_NB) < 0)
		return 1;
	int rc = 0;
	pid_t pid = postmaster_pid();
	if (!postmaster_alive(pid)) {
		if (pid) {
			/* PostgreSQL (and pg_ctl) refuse a lock file whose pid
			 * exists, zombies included; this one is dead */
			char *path = pid_file_path();
			unlink(path);
			free(path);
		}
		rc = start_cluster();
	}
	flock(emb.start_lock_fd, LOCK_UN);
	return rc;
}

static void *watchdog(void *arg)
{
	(void)arg;
	log_set_request_id("db-watchdog");
	unsigned wait = 1, backoff = 1;
	int attempts = 0, down = 0;
	pthread_mutex_lock(&watch.lock);
	while (!watch.stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += wait;
		pthread_cond_timedwait(&watch.wake, &watch.lock, &until);
		if (watch.stop)
			break;
		pthread_mutex_unlock(&watch.lock);
		wait = 1;
		pid_t pid = postmaster_pid();
		int rc = postmaster_alive(pid) ? 0 : -1;
		if (rc < 0) {
			if (!down)
				log_error("embedded database: the postmaster (pid %d) is gone; restarting it", (int)pid);
			down = 1;
			set_problem("embedded PostgreSQL is not running, restarting it (%d failed attempt%s)", attempts,
				    attempts == 1 ? "" : "s");
			rc = restart_cluster();
			if (rc < 0) {
				attempts++;
				wait = backoff;
				backoff = backoff >= 16 ? 30 : backoff * 2;
				log_error("embedded database: restart attempt %d failed (see %s); next in %u s", attempts,
					  emb.log_file, wait);
			}
		}
		/* back, restarted here or by another process sharing it */
		if (rc == 0 && down) {
			log_info("embedded database: running again (pid %d) after %d failed attempt%s",
				 (int)postmaster_pid(), attempts, attempts == 1 ? "" : "s");
			db_server_restarted();
			set_problem("%s", "");
			down = attempts = 0;
			backoff = 1;
		}
		pthread_mutex_lock(&watch.lock);
	}
	pthread_mutex_unlock(&watch.lock);
	return NULL;
}

int db_embedded_watchdog_start(void)
{
	if (emb.users_lock_fd < 0 || watch.started)
		return 0;
	watch.stop = 0;
	if (pthread_create(&watch.thread, NULL, watchdog, NULL) != 0)
		return KHUB_EIO;
	watch.started = 1;
	return 0;
}

static void watchdog_stop(void)
{
	if (!watch.started)
		return;
	pthread_mutex_lock(&watch.lock);
	watch.stop = 1;
	pthread_cond_signal(&watch.wake);
	pthread_mutex_unlock(&watch.lock);
	pthread_join(watch.thread, NULL);
	watch.started = 0;
}

void db_embedded_set_linger(int seconds)
{
	emb.linger_s = seconds > 0 ? seconds : 0;
}

static char *linger_pid_path(void)
{
	return xasprintf("%s/linger.pid", emb.pg_dir);
}

static void stop_cluster(void)
{
	log_info("embedded database: stopping");
	char *argv[] = { "pg_ctl", "stop", "-w", "-m", "fast", "-D", emb.cluster, NULL };
	run_pg_tool(argv);
}

/* users.lock's mtime is when the cluster was last released: the lingerer
 * waits until it is linger_s old. */
static void stamp_release(void)
{
	futimens(emb.users_lock_fd, NULL);
}

static time_t last_release(void)
{
	struct stat st;
	return fstat(emb.users_lock_fd, &st) == 0 ? st.st_mtime : 0;
}

/* The lingerer: a user of the cluster (users.lock shared) with nothing
 * else open, that stops the cluster once it was last released linger_s ago
 * and nobody else holds it, or at once on SIGTERM or SIGINT (the test
 * harness's teardown). Finding another user, it leaves: that user stops
 * the cluster, or leaves a lingerer, when it is the last. Never returns. */
static void linger(void)
{
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigprocmask(SIG_SETMASK, &stop, NULL);	/* taken by sigtimedwait, never delivered */
	prctl(PR_SET_NAME, "khub-db-linger");
	char *pid_path = linger_pid_path();
	int stop_now = 0;
	for (;;) {
		time_t due = last_release() + emb.linger_s, now = time(NULL);
		if (!stop_now && now < due) {
			struct timespec wait = { .tv_sec = due - now };
			stop_now = sigtimedwait(&stop, NULL, &wait) > 0;
			continue;
		}
		flock(emb.start_lock_fd, LOCK_EX);
		if (!stop_now && time(NULL) < last_release() + emb.linger_s) {
			flock(emb.start_lock_fd, LOCK_UN);	/* released again meanwhile */
			continue;
		}
		flock(emb.users_lock_fd, LOCK_UN);
		if (flock(emb.users_lock_fd, LOCK_EX | LOCK_NB) == 0)
			stop_cluster();
		unlink(pid_path);
		_exit(0);	/* unlocks both */
	}
}

/* In the lingerer: its own descriptions of both lock files (a flock lock
 * belongs to a description, and the inherited ones are the releasing
 * process's), users.lock taken shared before the inherited, shared one is
 * closed, so that the cluster always has a user; every other descriptor
 * closed, so that a shell reading the command's output does not wait. */
static int linger_take_locks(void)
{
	char *start_lock = xasprintf("%s/start.lock", emb.pg_dir);
	char *users_lock = xasprintf("%s/users.lock", emb.pg_dir);
	int start_fd = open(start_lock, O_RDWR | O_CLOEXEC), users_fd = open(users_lock, O_RDWR | O_CLOEXEC);
	free(start_lock);
	free(users_lock);
	if (start_fd < 0 || users_fd < 0 || flock(users_fd, LOCK_SH) < 0)
		return KHUB_EIO;
	struct rlimit rl;
	int max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (int)rl.rlim_cur : 65536;
	for (int fd = 0; fd < max; fd++)
		if (fd != start_fd && fd != users_fd)
			close(fd);
	int null = open("/dev/null", O_RDWR);
	for (int fd = 0; null >= 0 && fd <= 2; fd++)
		if (fd != null)
			dup2(null, fd);
	emb.start_lock_fd = start_fd;
	emb.users_lock_fd = users_fd;
	return 0;
}

/* Leave a lingerer behind (the caller, the last user, holds users.lock
 * exclusively and the start lock): users.lock turns shared, then a double
 * fork, so that nobody waits for the lingerer; its pid goes to
 * pg/linger.pid, removed when it ends. 0 when it runs; the caller
 * then closes its descriptors without unlocking them. */
static int spawn_lingerer(void)
{
	flock(emb.users_lock_fd, LOCK_SH);
	stamp_release();
	pid_t pid = fork();
	if (pid < 0) {
		flock(emb.users_lock_fd, LOCK_EX | LOCK_NB);
		return KHUB_EIO;
	}
	if (pid == 0) {
		setsid();
		pid_t lingerer = fork();
		if (lingerer != 0) {	/* linger.pid is there once the release returns */
			char *path = linger_pid_path();
			FILE *fp = lingerer > 0 ? fopen(path, "w") : NULL;
			if (fp) {
				fprintf(fp, "%d\n", (int)lingerer);
				fclose(fp);
			}
			_exit(0);
		}
		if (linger_take_locks() < 0)
			_exit(1);	/* the inherited description still holds the cluster: next user stops it */
		linger();
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return 0;
}

/* Only a process with one thread forks a lingerer: the child goes on
 * running khub's code (allocating), which a fork of a process whose other
 * threads may hold the allocator's locks must not. */
static int single_threaded(void)
{
	FILE *fp = fopen("/proc/self/status", "r");
	char line[128];
	long threads = 0;
	while (fp && fgets(line, sizeof(line), fp))
		if (sscanf(line, "Threads: %ld", &threads) == 1)
			break;
	if (fp)
		fclose(fp);
	return threads == 1;
}

static void free_paths(void)
{
	free(emb.pg_dir);
	free(emb.cluster);
	free(emb.run_dir);
	free(emb.log_file);
	free(emb.bindir);
}

void db_embedded_release(void)
{
	watchdog_stop();
	if (emb.users_lock_fd < 0)
		return;
	flock(emb.start_lock_fd, LOCK_EX);
	flock(emb.users_lock_fd, LOCK_UN);
	if (flock(emb.users_lock_fd, LOCK_EX | LOCK_NB) == 0) {
		if (emb.linger_s == 0 || !single_threaded() || spawn_lingerer() < 0) {
			stop_cluster();
			flock(emb.users_lock_fd, LOCK_UN);
		}
	} else {
		stamp_release();	/* a lingerer waits linger_s from now */
	}
	flock(emb.start_lock_fd, LOCK_UN);
	close(emb.users_lock_fd);
	close(emb.start_lock_fd);
	emb.users_lock_fd = emb.start_lock_fd = -1;
	free_paths();
}
