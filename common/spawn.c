/* spawn.c -- start a program in a child process from a threaded server.
 * Everything the child needs (argv, envp, the program's path, open files) is
 * built before fork; between fork and exec the child calls only functions
 * POSIX lists as async-signal-safe, because any other thread may have held
 * any lock (malloc's, the log's, libgit2's) at the moment of the fork. */
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/stat.h>
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
		    child_move_fd(o->fd_err, 2) < 0)
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

