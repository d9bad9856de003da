/* spawn.c -- start a program in a child process from a threaded server.
 * Everything the child needs (argv, envp, the program's path, open files) is
 * built before fork; between fork and exec the child calls only functions
 * POSIX lists as async-signal-safe, because any other thread may have held
 * any lock (malloc's, the log's, libgit2's) at the moment of the fork. */
#include "common/common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

char *spawn_find_program(const char *name, const char *path)
{
	if (strchr(name, '/'))
		return xstrdup(name);
	const char *p = path;
	while (p && *p) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);
		char *candidate = xasprintf("%.*s/%s", (int)n, p, name);
		if (access(candidate, X_OK) == 0)
			return candidate;
		free(candidate);
		p = colon ? colon + 1 : NULL;
	}
	return NULL;
}

void fds_set_cloexec_from(int first)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		if (*end || end == e->d_name || fd < first || fd == dirfd(d))
			continue;
		int flags = fcntl((int)fd, F_GETFD);
		if (flags >= 0 && !(flags & FD_CLOEXEC))
			(void)fcntl((int)fd, F_SETFD, flags | FD_CLOEXEC);
	}
	if (d)
		closedir(d);
}

/* In the child: make fd the descriptor `target`, open across exec. */
static int child_move_fd(int fd, int target)
{
	if (fd < 0)
		return 0;
	if (fd == target) {
		int flags = fcntl(fd, F_GETFD);
		return flags < 0 ? -1 : fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
	}
	return dup2(fd, target) < 0 ? -1 : 0;
}

/* getdents64's record (the C library declares none for the raw call). */
struct fd_dirent {
	uint64_t ino;
	int64_t off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

/* In the child: close the descriptors from `first` on that the open
 * directory dir (/proc/self/fd) lists, dir itself kept; how many were
 * closed, or -1. */
static int child_close_listed(int dir, int first)
{
	char buf[4096] __attribute__((aligned(8)));
	int closed = 0;
	long n;
	if (lseek(dir, 0, SEEK_SET) < 0)
		return -1;
	while ((n = syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0)
		for (long at = 0; at < n; at += ((struct fd_dirent *)(buf + at))->reclen) {
			const char *name = ((struct fd_dirent *)(buf + at))->name;
			int fd = 0;
			for (; *name >= '0' && *name <= '9'; name++)
				fd = fd * 10 + (*name - '0');
			if (*name || name == ((struct fd_dirent *)(buf + at))->name || fd < first || fd == dir)
				continue;	/* ".", "..", or one we keep */
			close(fd);
			closed++;
		}
	return n < 0 ? -1 : closed;
}

/* In the child: close every descriptor from `first` on, with close_range,
 * else with what /proc/self/fd lists (read again until it lists none: a
 * directory read while its entries go may skip one). */
static int child_close_from(int first)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, (unsigned)first, ~0U, 0) == 0)
		return 0;
#endif
	int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return -1;
	int closed;
	while ((closed = child_close_listed(dir, first)) > 0)
		;
	close(dir);
	return closed;
}

/* In the child: keep[i] becomes SPAWN_FIRST_KEPT_FD + i, open across
 * exec, and every other descriptor past 2 is closed. */
static int child_keep_only(const int *keep, size_t n)
{
	int moved[SPAWN_MAX_KEPT_FDS];
	int above = SPAWN_FIRST_KEPT_FD + (int)n;
	if (n > SPAWN_MAX_KEPT_FDS)
		return -1;
	for (size_t i = 0; i < n; i++)	/* out of the way of the numbers they get */
		if ((moved[i] = fcntl(keep[i], F_DUPFD_CLOEXEC, above)) < 0)
			return -1;
	for (size_t i = 0; i < n; i++)
		if (dup2(moved[i], SPAWN_FIRST_KEPT_FD + (int)i) < 0)
			return -1;
	return child_close_from(above);
}

int spawn_process(const struct spawn_opts *o, pid_t *pid_out)
{
	extern char **environ;
	char *const *envp = o->envp ? o->envp : environ;
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		/* async-signal-safe calls only from here to execve (prctl is a
		 * plain system call) */
		if (o->new_process_group && setpgid(0, 0) < 0)
			_exit(126);
		if (o->reset_signals) {
			/* a blocked mask and SIG_IGN survive execve */
			struct sigaction dfl = { .sa_handler = SIG_DFL };
			sigset_t none;
			sigemptyset(&none);
			if (sigaction(SIGPIPE, &dfl, NULL) < 0 || sigaction(SIGTERM, &dfl, NULL) < 0 ||
			    sigaction(SIGINT, &dfl, NULL) < 0 || sigprocmask(SIG_SETMASK, &none, NULL) < 0)
				_exit(126);
		}
		if (o->die_with_parent &&
		    (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent))
			_exit(126);
		if (o->drop_privileges &&
		    (setgroups(0, NULL) < 0 || setgid(o->gid) < 0 || setuid(o->uid) < 0))
			_exit(126);
		if (o->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
			_exit(126);
		for (size_t i = 0; i < o->nrlimits; i++) {
			struct rlimit rl = { (rlim_t)o->rlimits[i].value, (rlim_t)o->rlimits[i].value };
			if (setrlimit(o->rlimits[i].resource, &rl) < 0)
				_exit(126);
		}
		if (child_move_fd(o->fd_in, 0) < 0 || child_move_fd(o->fd_out, 1) < 0 ||
		    child_move_fd(o->fd_err, 2) < 0 || child_keep_only(o->keep_fds, o->nkeep_fds) < 0)
			_exit(126);
		if (o->dir && chdir(o->dir) < 0)
			_exit(126);
		execve(o->argv[0], o->argv, envp);
		_exit(127);
	}
	/* Both sides set the group, so a kill(-pid) right after this returns
	 * cannot miss it. */
	if (o->new_process_group)
		(void)setpgid(pid, pid);
	*pid_out = pid;
	return 0;
}

