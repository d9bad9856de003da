/* sandbox.c -- run the untrusted commands of a build (compilers, the
 * build.toml reader, the smoke import) without network, without the
 * worker's environment, with resource limits, in their own process group
 * killed whole at the wall-clock deadline. bubblewrap when it can make
 * namespaces here; else `unshare --net --pid` as root; else, only when the
 * toolchain allows it, no isolation at all. */
#include "builder-worker/build_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SYSTEM_PATH "/usr/local/bin:/usr/bin:/bin"

volatile sig_atomic_t sandbox_interrupted;

const char *sandbox_mode_name(enum sandbox_mode mode)
{
	switch (mode) {
	case SANDBOX_BWRAP: return "bubblewrap";
	case SANDBOX_UNSHARE: return "unshare";
	case SANDBOX_NONE: return "none";
	}
	return "?";
}

static int status_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 255;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Wait for pid, killing its process group at deadline (0 = none) or when
 * the worker is told to stop. */
static int wait_group(pid_t pid, uint64_t deadline_usec)
{
	for (;;) {
		int status;
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return status_code(status);
		if (r < 0 && errno != EINTR)
			return KHUB_EIO;
		if ((deadline_usec && monotonic_usec() >= deadline_usec) || sandbox_interrupted) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			return SANDBOX_TIMED_OUT;
		}
		sleep_ms(20);
	}
}

int run_capture(char *const *argv, char *const *env, int timeout_s, char **out, int err_fd)
{
	*out = NULL;
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return KHUB_EIO;
	int devnull = -1;
	if (err_fd < 0)
		devnull = err_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	char *prog = spawn_find_program(argv[0], SYSTEM_PATH);
	if (!prog) {
		close(p[0]);
		close(p[1]);
		if (devnull >= 0)
			close(devnull);
		return 127;
	}
	char **args = (char **)argv;
	char *saved = args[0];
	args[0] = prog;
	struct spawn_opts o = { .argv = args, .envp = env, .fd_in = -1, .fd_out = p[1], .fd_err = err_fd,
				.new_process_group = 1 };
	pid_t pid;
	int rc = spawn_process(&o, &pid);
	args[0] = saved;
	free(prog);
	close(p[1]);
	if (devnull >= 0)
		close(devnull);
	if (rc < 0) {
		close(p[0]);
		return KHUB_EIO;
	}
	uint64_t deadline = monotonic_usec() + (uint64_t)timeout_s * 1000000;
	struct strbuf sb = STRBUF_INIT;
	read_until_deadline(p[0], deadline, 1024 * 1024, &sb);
	close(p[0]);
	rc = wait_group(pid, deadline);
	*out = strbuf_detach(&sb, NULL);
	return rc;
}

/* 0 when `argv` runs and exits 0 (a namespace probe). */
static int probe_ok(char *const *argv)
{
	char *env[] = { "PATH=" SYSTEM_PATH, NULL };
	char *out = NULL;
	int rc = run_capture(argv, env, 20, &out, -1);
	free(out);
	return rc == 0 ? 0 : -1;
}

int sandbox_init(struct sandbox *sb, const char *scratch, int allow_no_sandbox, const char *only, char *why,
		 size_t why_size)
{
	memset(sb, 0, sizeof(*sb));
	sb->scratch = xstrdup(scratch);
	sb->log_fd = 2;
	char *bwrap = only && strcmp(only, "bwrap") != 0 ? NULL : spawn_find_program("bwrap", SYSTEM_PATH);
	if (bwrap) {
		char *argv[] = { bwrap, "--unshare-net", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/",
				 "--dev", "/dev", "--proc", "/proc", "true", NULL };
		if (probe_ok(argv) == 0) {
			sb->mode = SANDBOX_BWRAP;
			sb->tool = bwrap;
			return 0;
		}
		free(bwrap);
	}
	char *unshare = geteuid() == 0 && (!only || !strcmp(only, "unshare")) ? spawn_find_program("unshare", SYSTEM_PATH) : NULL;
	if (unshare) {
		char *argv[] = { unshare, "--net", "--pid", "--fork", "--kill-child", "true", NULL };
		if (probe_ok(argv) == 0) {
			sb->mode = SANDBOX_UNSHARE;
			sb->tool = unshare;
			return 0;
		}
		free(unshare);
	}
	if (only) {
		snprintf(why, why_size, "the %s sandbox cannot be used here%s", only,
			 !strcmp(only, "unshare") && geteuid() != 0 ? " (needs root)" : "");
		return KHUB_EPERM;
	}
	if (allow_no_sandbox) {
		sb->mode = SANDBOX_NONE;
		return 0;
	}
	snprintf(why, why_size, "no network isolation here: bwrap cannot create namespaces%s; set \"allow_no_sandbox\": true "
		 "on the toolchain to build without one", geteuid() == 0 ? " and unshare --net failed" : " and the worker is not root");
	return KHUB_EPERM;
}

void sandbox_release(struct sandbox *sb)
{
	if (!sb)
		return;
	free(sb->tool);
	free(sb->scratch);
	strvec_release(&sb->hide);
	strvec_release(&sb->env);
	memset(sb, 0, sizeof(*sb));
}

/* The PATH the commands see: the sandbox environment's, else the system's. */
static const char *sandbox_path(const struct sandbox *sb)
{
	for (size_t i = 0; i < sb->env.count; i++)
		if (strncmp(sb->env.items[i], "PATH=", 5) == 0)
			return sb->env.items[i] + 5;
	return SYSTEM_PATH;
}

int sandbox_start(struct sandbox *sb, char *const *argv, const char *dir, int out_fd, pid_t *pid_out)
{
	char *prog = spawn_find_program(argv[0], sandbox_path(sb));
	if (!prog) {
		dprintf(sb->log_fd, "khub-worker: %s: not found in PATH\n", argv[0]);
		return 127;
	}
	struct strvec args = STRVEC_INIT;
	char *empty_env[] = { NULL };
	char *const *envp = sb->env.items ? sb->env.items : empty_env;	/* never the worker's own */
	/* With a CPU limit, our own launcher runs the command to tell a kill by
	 * RLIMIT_CPU from a failure: a compiler driver only reports that its
	 * cc1plus died, and bwrap does not pass CPU times up. */
	char self[4096];
	int measure = sb->cpu_seconds > 0;
#if defined(__SANITIZE_ADDRESS__)
	measure = measure && sb->memory_mb == 0;	/* an ASan build cannot start under RLIMIT_AS */
#endif
	ssize_t selflen = measure ? readlink("/proc/self/exe", self, sizeof(self) - 1) : -1;
	if (selflen > 0)
		self[selflen] = 0;
	if (sb->mode == SANDBOX_BWRAP) {
		strvec_pushf(&args, "%s", sb->tool);
		const char *fixed[] = { "--unshare-net", "--unshare-pid", "--unshare-ipc", "--die-with-parent",
					"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp" };
		for (size_t i = 0; i < sizeof(fixed) / sizeof(*fixed); i++)
			strvec_pushf(&args, "%s", fixed[i]);
		for (size_t i = 0; i < sb->hide.count; i++) {
			struct stat st;
			if (stat(sb->hide.items[i], &st) < 0)
				continue;
			if (S_ISDIR(st.st_mode)) {
				strvec_pushf(&args, "--tmpfs");
				strvec_pushf(&args, "%s", sb->hide.items[i]);
			} else {
				strvec_pushf(&args, "--ro-bind");
				strvec_pushf(&args, "/dev/null");
				strvec_pushf(&args, "%s", sb->hide.items[i]);
			}
		}
		strvec_pushf(&args, "--bind");
		strvec_pushf(&args, "%s", sb->scratch);
		strvec_pushf(&args, "%s", sb->scratch);
		if (selflen > 0) {	/* the launcher, even where it lives under /tmp or a hidden dir */
			strvec_pushf(&args, "--ro-bind");
			strvec_pushf(&args, "%s", self);
			strvec_pushf(&args, "%s", self);
		}
		strvec_pushf(&args, "--chdir");
		strvec_pushf(&args, "%s", dir ? dir : sb->scratch);
		strvec_pushf(&args, "--clearenv");
		for (size_t i = 0; i < sb->env.count; i++) {
			const char *eq = strchr(sb->env.items[i], '=');
			if (!eq)
				continue;
			strvec_pushf(&args, "--setenv");
			strvec_pushf(&args, "%.*s", (int)(eq - sb->env.items[i]), sb->env.items[i]);
			strvec_pushf(&args, "%s", eq + 1);
		}
		strvec_pushf(&args, "--");
		envp = empty_env;
	} else if (sb->mode == SANDBOX_UNSHARE) {
		strvec_pushf(&args, "%s", sb->tool);
		strvec_pushf(&args, "--net");
		strvec_pushf(&args, "--pid");
		strvec_pushf(&args, "--fork");
		strvec_pushf(&args, "--kill-child");
		strvec_pushf(&args, "--");
	}
	if (selflen > 0) {
		strvec_pushf(&args, "%s", self);
		strvec_pushf(&args, "build");
		strvec_pushf(&args, "--exec-measured");
		strvec_pushf(&args, "%ld", sb->cpu_seconds);
		strvec_pushf(&args, "--");
	}
	strvec_pushf(&args, "%s", prog);
	for (size_t i = 1; argv[i]; i++)
		strvec_pushf(&args, "%s", argv[i]);
	free(prog);

	struct spawn_rlimit limits[3];
	size_t nlimits = 0;
	if (sb->cpu_seconds > 0)
		limits[nlimits++] = (struct spawn_rlimit){ RLIMIT_CPU, (unsigned long long)sb->cpu_seconds };
	if (sb->memory_mb > 0)
		limits[nlimits++] = (struct spawn_rlimit){ RLIMIT_AS, (unsigned long long)sb->memory_mb << 20 };
	if (sb->disk_mb > 0)
		limits[nlimits++] = (struct spawn_rlimit){ RLIMIT_FSIZE, (unsigned long long)sb->disk_mb << 20 };
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	struct spawn_opts o = { .argv = args.items, .envp = envp, .fd_in = devnull,
				.fd_out = out_fd >= 0 ? out_fd : sb->log_fd, .fd_err = sb->log_fd,
				.dir = sb->mode == SANDBOX_BWRAP ? NULL : (dir ? dir : sb->scratch),
				.new_process_group = 1, .rlimits = limits, .nrlimits = nlimits };
	pid_t pid;
	int rc = spawn_process(&o, &pid);
	if (devnull >= 0)
		close(devnull);
	strvec_release(&args);
	if (rc < 0)
		return KHUB_EIO;
	setpgid(pid, pid);	/* both sides, so the group exists before we may kill it */
	*pid_out = pid;
	return 0;
}

static int map_status(const struct sandbox *sb, int rc)
{
	return rc == SANDBOX_EXIT_CPU_LIMIT && sb->cpu_seconds > 0 ? SANDBOX_CPU_LIMIT : rc;
}

int sandbox_run(struct sandbox *sb, char *const *argv, const char *dir, int out_fd)
{
	if (sb->deadline_usec && monotonic_usec() >= sb->deadline_usec)
		return SANDBOX_TIMED_OUT;
	pid_t pid;
	int rc = sandbox_start(sb, argv, dir, out_fd, &pid);
	if (rc != 0)
		return rc;
	return map_status(sb, wait_group(pid, sb->deadline_usec));
}

int sandbox_wait_any(struct sandbox *sb, pid_t *pids, size_t n, size_t *index)
{
	for (;;) {
		for (size_t i = 0; i < n; i++) {
			if (pids[i] <= 0)
				continue;
			int status;
			pid_t r = waitpid(pids[i], &status, WNOHANG);
			if (r == pids[i] || (r < 0 && errno != EINTR)) {
				pids[i] = 0;
				*index = i;
				return r < 0 ? KHUB_EIO : map_status(sb, status_code(status));
			}
		}
		if ((sb->deadline_usec && monotonic_usec() >= sb->deadline_usec) || sandbox_interrupted) {
			sandbox_kill_all(pids, n);
			return SANDBOX_TIMED_OUT;
		}
		sleep_ms(20);
	}
}

void sandbox_kill_all(pid_t *pids, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (pids[i] <= 0)
			continue;
		kill(-pids[i], SIGKILL);
		kill(pids[i], SIGKILL);
		int status;
		while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR)
			;
		pids[i] = 0;
	}
}

int sandbox_exec_measured(long cpu_seconds, char **argv)
{
	extern char **environ;
	struct spawn_opts o = { .argv = argv, .envp = environ, .fd_in = -1, .fd_out = -1, .fd_err = -1 };
	pid_t pid;
	if (spawn_process(&o, &pid) < 0)
		return 126;
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 126;
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	double used = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		      (double)ru.ru_stime.tv_usec / 1e6;
	int code = status_code(status);
	if (code != 0 && used >= (double)cpu_seconds - 0.5) {
		fprintf(stderr, "khub-worker: the CPU-time limit (%ld s per process) was hit after %.1f s\n", cpu_seconds, used);
		return SANDBOX_EXIT_CPU_LIMIT;
	}
	return code;
}
