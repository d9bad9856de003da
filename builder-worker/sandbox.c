/* sandbox.c -- run the untrusted commands of a build (compilers, the
 * build.toml reader, the smoke import) in bubblewrap: a user namespace
 * where they are an unprivileged uid with no capability and no_new_privs,
 * their own pid, net, ipc, uts and mount namespaces, a filesystem of only
 * /usr (and /lib*, /bin), a minimal /etc, the toolchain read-only, a fresh
 * /tmp and the build's own directories, a seccomp filter
 * (sandbox_seccomp.c), rlimits (processes, CPU, memory, file size), the
 * scratch's size watched and the wall clock kept. A worker running as root
 * starts them as an unprivileged uid (the build uid), so that the kernel
 * counts their processes. Without bubblewrap a build is refused, unless the
 * toolchain allows none (allow_no_sandbox), which every log then says. */
#include "builder-worker/build_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SYSTEM_PATH "/usr/local/bin:/usr/bin:/bin"
#define DISK_CHECK_USEC 250000	/* how often the scratch's size is measured */

volatile sig_atomic_t sandbox_interrupted;

const char *sandbox_mode_name(enum sandbox_mode mode)
{
	switch (mode) {
	case SANDBOX_BWRAP: return "bubblewrap";
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

/* ---- the scratch's size ---------------------------------------------------------------- */

static unsigned long long du_bytes;
static int du_unreadable;

static int du_visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	du_bytes += (unsigned long long)st->st_blocks * 512;
	/* build code may take the permissions off its own directories to hide
	 * what they hold from a worker of its uid: put them back */
	if (flag == FTW_DNR && chmod(path, 0700) == 0)
		du_unreadable = 1;
	return 0;
}

/* Bytes allocated under path, links not followed. */
static unsigned long long scratch_usage(const char *path)
{
	for (int pass = 0; pass < 3; pass++) {
		du_bytes = 0;
		du_unreadable = 0;
		(void)nftw(path, du_visit, 32, FTW_PHYS | FTW_MOUNT);
		if (!du_unreadable)
			break;
	}
	return du_bytes;
}

/* 1 (and a log line) when the scratch holds more than disk_mb. */
static int over_disk(struct sandbox *sb, uint64_t *next_check)
{
	if (!sb || sb->disk_mb <= 0 || monotonic_usec() < *next_check)
		return 0;
	*next_check = monotonic_usec() + DISK_CHECK_USEC;
	unsigned long long used = scratch_usage(sb->scratch);
	if (sb->cache_dir) {	/* what the build added to its cache counts too */
		unsigned long long cache = scratch_usage(sb->cache_dir);
		used += cache > sb->cache_start ? cache - sb->cache_start : 0;
	}
	if (used <= (unsigned long long)sb->disk_mb << 20)
		return 0;
	dprintf(sb->log_fd, "khub-worker: the build's files take %.1f MiB, over the disk limit of %ld MiB: killed\n",
		(double)used / (1024.0 * 1024.0), sb->disk_mb);
	sb->disk_hit = 1;
	return 1;
}

/* Wait for pid, killing its process group at deadline (0 = none), when the
 * worker is told to stop or when the scratch grows over the disk limit. */
static int wait_group(struct sandbox *sb, pid_t pid, uint64_t deadline_usec)
{
	uint64_t next_check = 0;
	for (;;) {
		int status;
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return status_code(status);
		if (r < 0 && errno != EINTR)
			return KHUB_EIO;
		int disk = over_disk(sb, &next_check);
		if ((deadline_usec && monotonic_usec() >= deadline_usec) || sandbox_interrupted || disk) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			return disk ? SANDBOX_DISK_LIMIT : SANDBOX_TIMED_OUT;
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
	rc = wait_group(NULL, pid, deadline);
	*out = strbuf_detach(&sb, NULL);
	return rc;
}

/* name (with '/': itself) inside root as a command would run it: an
 * executable file or a link (resolved inside root when it runs). */
static int root_has_program(const char *root, const char *name)
{
	char *full = xasprintf("%s%s", root, name);
	struct stat st;
	int ok = lstat(full, &st) == 0 && (S_ISLNK(st.st_mode) || (S_ISREG(st.st_mode) && (st.st_mode & 0111)));
	free(full);
	return ok;
}

char *sandbox_find_program(const char *root, const char *name, const char *path)
{
	if (!root)
		return spawn_find_program(name, path);
	if (strchr(name, '/'))
		return name[0] == '/' && root_has_program(root, name) ? xstrdup(name) : NULL;
	for (const char *p = path; p && *p;) {
		const char *colon = strchr(p, ':');
		char *candidate = xasprintf("%.*s/%s", (int)(colon ? (size_t)(colon - p) : strlen(p)), p, name);
		if (candidate[0] == '/' && root_has_program(root, candidate))
			return candidate;
		free(candidate);
		p = colon ? colon + 1 : NULL;
	}
	return NULL;
}

#define ROOT_LINK_HOPS 40

char *sandbox_root_resolve(const char *root, const char *path)
{
	char *cur = xstrdup(path);
	for (int hop = 0; hop < ROOT_LINK_HOPS; hop++) {
		char *full = xasprintf("%s%s", root, cur), target[PATH_MAX];
		ssize_t n = readlink(full, target, sizeof(target) - 1);
		free(full);
		if (n <= 0)
			break;
		target[n] = 0;
		char *next;
		if (target[0] == '/') {
			next = xstrdup(target);
		} else {
			char *slash = strrchr(cur, '/');
			next = xasprintf("%.*s/%s", (int)(slash - cur), cur, target);
		}
		free(cur);
		cur = next;
	}
	return cur;
}

static void push_system(struct strvec *args, const char *root);

int run_capture_in_root(const char *root, char *const *argv, char *const *env, int timeout_s, char **out, int err_fd)
{
	if (!root)
		return run_capture(argv, env, timeout_s, out, err_fd);
	*out = NULL;
	const char *path = SYSTEM_PATH;
	for (size_t i = 0; env[i]; i++)
		if (!strncmp(env[i], "PATH=", 5))
			path = env[i] + 5;
	char *bwrap = spawn_find_program("bwrap", SYSTEM_PATH);
	char *prog = bwrap ? sandbox_find_program(root, argv[0], path) : NULL;
	if (!prog) {
		free(bwrap);
		return 127;
	}
	static const char *const fixed[] = { "--unshare-all", "--die-with-parent", "--new-session", "--proc", "/proc",
					     "--dev", "/dev", "--tmpfs", "/tmp", "--clearenv" };
	struct strvec args = STRVEC_INIT;
	strvec_pushf(&args, "%s", bwrap);
	push_system(&args, root);
	for (size_t i = 0; i < sizeof(fixed) / sizeof(*fixed); i++)
		strvec_pushf(&args, "%s", fixed[i]);
	for (size_t i = 0; env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		if (!eq)
			continue;
		strvec_pushf(&args, "--setenv");
		strvec_pushf(&args, "%.*s", (int)(eq - env[i]), env[i]);
		strvec_pushf(&args, "%s", eq + 1);
	}
	strvec_pushf(&args, "--");
	strvec_pushf(&args, "%s", prog);
	for (size_t i = 1; argv[i]; i++)
		strvec_pushf(&args, "%s", argv[i]);
	char *no_env[] = { NULL };
	int rc = run_capture(args.items, no_env, timeout_s, out, err_fd);
	strvec_release(&args);
	free(prog);
	free(bwrap);
	return rc;
}

/* ---- set-up ------------------------------------------------------------------------------- */

/* 1 when uid:gid has the permission `want` (4 read, 2 write, 1 search, as
 * the "other" bits) on st by its mode bits. */
static int permits(const struct stat *st, uid_t uid, gid_t gid, int want)
{
	int bits = st->st_uid == uid ? (st->st_mode >> 6) & 7 : st->st_gid == gid ? (st->st_mode >> 3) & 7 : st->st_mode & 7;
	return (bits & want) == want;
}

int sandbox_reachable(const char *path, uid_t uid, gid_t gid, int want)
{
	char *copy = xstrdup(path);
	struct stat st;
	int ok = 1;
	for (char *slash = copy; ok && slash; slash = strchr(slash + 1, '/')) {
		char keep = slash[1];
		slash[1] = 0;	/* the directory up to and with this slash */
		ok = stat(copy, &st) == 0 && permits(&st, uid, gid, 1);
		slash[1] = keep;
	}
	ok = ok && stat(path, &st) == 0 && permits(&st, uid, gid, want);
	free(copy);
	return ok;
}

int sandbox_init(struct sandbox *sb, const char *scratch, const struct sandbox_options *o,
		 const struct strvec *ro_dirs, char *why, size_t why_size)
{
	memset(sb, 0, sizeof(*sb));
	sb->scratch = xstrdup(scratch);
	sb->log_fd = 2;
	sb->max_processes = o->max_processes;
	sb->drop = geteuid() == 0;
	sb->uid = sb->drop ? (uid_t)o->build_uid : getuid();
	sb->gid = sb->drop ? (gid_t)o->build_gid : getgid();
	if (sb->drop && o->build_uid == 0) {
		snprintf(why, why_size, "the build uid must not be 0 (root)");
		return KHUB_EPERM;
	}
	for (size_t i = 0; ro_dirs && i < ro_dirs->count; i++) {
		size_t n = strlen(ro_dirs->items[i]);
		if (strncmp(scratch, ro_dirs->items[i], n) == 0 && (scratch[n] == '/' || n == 1)) {
			snprintf(why, why_size, "the toolchain directory %s holds the scratch directory %s: a build would "
				 "see other builds (give the worker a --work-dir elsewhere)", ro_dirs->items[i], scratch);
			return KHUB_EPERM;
		}
		strvec_pushf(&sb->ro_dirs, "%s", ro_dirs->items[i]);
	}
	if (sb->drop && !sandbox_reachable(scratch, sb->uid, sb->gid, 0)) {
		snprintf(why, why_size, "the build uid %ld cannot reach %s: every directory above it must be searchable "
			 "by that uid (chmod o+x), or choose another --work-dir", (long)sb->uid, scratch);
		return KHUB_EPERM;
	}
	sb->root = o->root ? xstrdup(o->root) : NULL;
	if (sb->root && sb->drop && !sandbox_reachable(sb->root, sb->uid, sb->gid, 5)) {
		snprintf(why, why_size, "the build uid %ld cannot read the toolchain's root %s: it and every directory "
			 "above it must be readable and searchable by that uid (chmod o+rx)", (long)sb->uid, sb->root);
		return KHUB_EPERM;
	}
	char *bwrap = spawn_find_program("bwrap", SYSTEM_PATH);
	if (bwrap) {
		sb->mode = SANDBOX_BWRAP;
		sb->tool = bwrap;
		char *help_argv[] = { bwrap, "--help", NULL }, *env[] = { NULL }, *help = NULL;
		run_capture(help_argv, env, 20, &help, -1);
		sb->disable_userns = help && strstr(help, "--disable-userns") != NULL;
		free(help);
		return 0;
	}
	if (o->allow_no_sandbox && !o->bwrap_only && !o->root) {
		sb->mode = SANDBOX_NONE;
		return 0;
	}
	snprintf(why, why_size, "bubblewrap (bwrap) is not installed: no build runs without its sandbox; set "
		 "\"allow_no_sandbox\": true on the toolchain to build without one (build code would see the "
		 "network and the whole machine)%s", o->root ? "; a toolchain with a \"root\" always needs it" : "");
	return KHUB_EPERM;
}

void sandbox_release(struct sandbox *sb)
{
	if (!sb)
		return;
	free(sb->tool);
	free(sb->scratch);
	free(sb->cache_dir);
	free(sb->root);
	for (size_t i = 0; i < sb->nbinds; i++) {
		free(sb->binds[i].path);
		free(sb->binds[i].at);
	}
	free(sb->binds);
	for (size_t i = 0; i < sb->ndevices; i++) {
		free(sb->devices[i].path);
		free(sb->devices[i].at);
	}
	free(sb->devices);
	strvec_release(&sb->ro_dirs);
	strvec_release(&sb->hide);
	strvec_release(&sb->env);
	memset(sb, 0, sizeof(*sb));
}

void sandbox_bind_at(struct sandbox *sb, const char *path, const char *at, int writable)
{
	for (size_t i = 0; i < sb->nbinds; i++)
		if (!strcmp(sb->binds[i].path, path) && !strcmp(sb->binds[i].at, at)) {
			sb->binds[i].writable = writable;
			return;
		}
	sb->binds = xrealloc(sb->binds, (sb->nbinds + 1) * sizeof(*sb->binds));
	sb->binds[sb->nbinds++] = (struct sandbox_bind){ xstrdup(path), xstrdup(at), writable };
}

void sandbox_bind(struct sandbox *sb, const char *path, int writable)
{
	for (size_t i = 0; i < sb->nbinds; i++)	/* its other names follow */
		if (!strcmp(sb->binds[i].path, path))
			sb->binds[i].writable = writable;
	sandbox_bind_at(sb, path, path, writable);
}

/* The NVIDIA device nodes a CUDA program opens (the driver's control
 * node, unified memory, one node per GPU, the capability nodes of MIG). */
static int nvidia_node(const char *name)
{
	static const char *const fixed[] = { "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-caps" };
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (strcmp(name, fixed[i]) == 0)
			return 1;
	if (strncmp(name, "nvidia", 6) != 0 || !name[6])
		return 0;
	for (const char *p = name + 6; *p; p++)
		if (*p < '0' || *p > '9')
			return 0;
	return 1;
}

static int bind_name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct sandbox_bind *)a)->at, ((const struct sandbox_bind *)b)->at);
}

size_t sandbox_pass_nvidia_gpu(struct sandbox *sb, const char *dev_dir)
{
	DIR *dir = opendir(dev_dir);
	struct dirent *de;
	size_t found = 0;
	while (dir && (de = readdir(dir))) {
		if (!nvidia_node(de->d_name))
			continue;
		sb->devices = xrealloc(sb->devices, (sb->ndevices + 1) * sizeof(*sb->devices));
		sb->devices[sb->ndevices++] = (struct sandbox_bind){ xasprintf("%s/%s", dev_dir, de->d_name),
								     xasprintf("/dev/%s", de->d_name), 1 };
		found++;
	}
	if (dir)
		closedir(dir);
	if (sb->ndevices > 1)	/* the same command line whatever readdir's order */
		qsort(sb->devices, sb->ndevices, sizeof(*sb->devices), bind_name_cmp);
	return found;
}

/* nftw has no context argument; the build is one thread. */
static uid_t walk_uid;
static gid_t walk_gid;
static int walk_failed, walk_chown, walk_share;

static int give_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)flag, (void)ftw;
	if (walk_chown && lchown(path, walk_uid, walk_gid) < 0)
		walk_failed = 1;
	mode_t want = (st->st_mode & 07777) | ((st->st_mode & 0700) >> 3);	/* the group as the owner */
	if (walk_share && !S_ISLNK(st->st_mode) && want != (st->st_mode & 07777))
		(void)chmod(path, want);	/* a file removed meanwhile (by a build sharing it): nothing to share */
	return 0;
}

/* One walk of path: lchown to the build uid when the worker drops to it;
 * with share, every entry's group bits made its owner's. */
static int give_walk(struct sandbox *sb, const char *path, int share)
{
	walk_chown = sb->drop;
	walk_share = share;
	if (!walk_chown && !walk_share)
		return 0;
	walk_uid = sb->uid;
	walk_gid = sb->gid;
	walk_failed = 0;
	if (nftw(path, give_one, 32, FTW_PHYS | FTW_MOUNT) < 0 || walk_failed)
		return KHUB_EIO;
	return 0;
}

int sandbox_give(struct sandbox *sb, const char *path)
{
	return give_walk(sb, path, 0);
}

int sandbox_give_shared(struct sandbox *sb, const char *path)
{
	return give_walk(sb, path, 1);
}

static int take_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (flag == FTW_SL || flag == FTW_SLN || (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))) {
		if (unlink(path) < 0)
			walk_failed = 1;
		return 0;
	}
	mode_t mode = S_ISDIR(st->st_mode) || (st->st_mode & 0100) ? 0750 : 0640;	/* the build's group reads */
	if (lchown(path, walk_uid, walk_gid) < 0 || chmod(path, mode) < 0)
		walk_failed = 1;
	return 0;
}

int sandbox_take_back(struct sandbox *sb, const char *path)
{
	walk_uid = geteuid();
	walk_gid = sb->gid;
	walk_failed = 0;
	(void)scratch_usage(path);	/* directories build code made unreadable are readable again */
	if (nftw(path, take_one, 32, FTW_PHYS | FTW_MOUNT) < 0 || walk_failed)
		return KHUB_EIO;
	return 0;
}

/* ---- the command line of bubblewrap ---------------------------------------------------- */

/* What of the system the commands see: /usr, and / 's links into it
 * (merged /usr) or those directories read-only. */
static const char *const system_dirs[] = { "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" };

/* The /etc a compiler, Python and torch read (read-only where it exists);
 * a trailing '*' names every entry of /etc with that prefix. Never
 * shadow, passwd (a minimal one is written), sudoers, ssh... */
static const char *const etc_files[] = {
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "hosts", "host.conf", "nsswitch.conf",
	"gai.conf", "protocols", "services", "localtime", "os-release", "debian_version", "ssl",
	"ca-certificates", "ca-certificates.conf", "python*", "mime.types", "OpenCL", "gcc",
};

static void push(struct strvec *args, const char *a)
{
	strvec_pushf(args, "%s", a);
}

static void push2(struct strvec *args, const char *a, const char *b)
{
	push(args, a);
	push(args, b);
}

static void push3(struct strvec *args, const char *a, const char *b, const char *c)
{
	push(args, a);
	push(args, b);
	push(args, c);
}

/* A root's directories shown besides system_dirs (a manylinux image's
 * Pythons and gcc-toolset live in /opt). */
static const char *const root_extra_dirs[] = { "/opt" };

/* dir (a system directory) from root ("" for the host's) as dir: the link
 * it is (merged /usr), else the directory read-only. */
static void push_system_dir(struct strvec *args, const char *root, const char *dir)
{
	char *path = xasprintf("%s%s", root, dir), target[4096];
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	struct stat st;
	if (n > 0) {
		target[n] = 0;
		push3(args, "--symlink", target, dir);
	} else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		push3(args, "--ro-bind", path, dir);
	}
	free(path);
}

/* The entries of root's /etc (root "" for the host) named by etc_files. */
static void push_etc(struct strvec *args, const char *root)
{
	push2(args, "--dir", "/etc");
	char *etc = xasprintf("%s/etc", root);
	for (size_t i = 0; i < sizeof(etc_files) / sizeof(*etc_files); i++) {
		size_t n = strlen(etc_files[i]);
		if (etc_files[i][n - 1] != '*') {
			char *path = xasprintf("%s/%s", etc, etc_files[i]);
			push3(args, "--ro-bind-try", path, path + strlen(root));
			free(path);
			continue;
		}
		DIR *d = opendir(etc);
		struct dirent *e;
		while (d && (e = readdir(d)))
			if (!strncmp(e->d_name, etc_files[i], n - 1)) {
				char *path = xasprintf("%s/%s", etc, e->d_name);
				push3(args, "--ro-bind-try", path, path + strlen(root));
				free(path);
			}
		if (d)
			closedir(d);
	}
	free(etc);
}

/* The system the commands see: the host's, or root's (NULL: the host). */
static void push_system(struct strvec *args, const char *root)
{
	const char *prefix = root ? root : "";
	for (size_t i = 0; i < sizeof(system_dirs) / sizeof(*system_dirs); i++)
		push_system_dir(args, prefix, system_dirs[i]);
	for (size_t i = 0; root && i < sizeof(root_extra_dirs) / sizeof(*root_extra_dirs); i++)
		push_system_dir(args, prefix, root_extra_dirs[i]);
	push_etc(args, prefix);
}

/* A memfd holding text (close-on-exec: spawn_process hands it to bwrap),
 * or -1. */
static int memfd_text(const char *name, const char *text)
{
	int fd = memfd_create(name, MFD_CLOEXEC);
	size_t len = strlen(text);
	if (fd >= 0 && (write(fd, text, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET) < 0)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* The files bwrap reads from descriptors: the seccomp filter, /etc/passwd
 * and /etc/group. They are all it is given past 0-2, in this order, as
 * the numbers BWRAP_FD_* (spawn_opts.keep_fds); it closes each once read,
 * so build code finds only 0-2 open. */
struct bwrap_fds {
	int seccomp, passwd, group;
};

enum { BWRAP_FD_SECCOMP = SPAWN_FIRST_KEPT_FD, BWRAP_FD_PASSWD, BWRAP_FD_GROUP };

static void bwrap_fds_close(struct bwrap_fds *f)
{
	int *all[] = { &f->seccomp, &f->passwd, &f->group };
	for (size_t i = 0; i < 3; i++)
		if (*all[i] >= 0) {
			close(*all[i]);
			*all[i] = -1;
		}
}

static int bwrap_fds_open(const struct sandbox *sb, struct bwrap_fds *f)
{
	char passwd[512], group[256];
	snprintf(passwd, sizeof(passwd), "build:x:%d:%d:khub build:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:"
		 "/usr/sbin/nologin\n", SANDBOX_INNER_UID, SANDBOX_INNER_UID);
	snprintf(group, sizeof(group), "build:x:%d:\nnogroup:x:65534:\n", SANDBOX_INNER_UID);
	(void)sb;
	f->seccomp = sandbox_seccomp_fd();
	f->passwd = memfd_text("khub-passwd", passwd);
	f->group = memfd_text("khub-group", group);
	if (f->seccomp < 0 || f->passwd < 0 || f->group < 0) {
		bwrap_fds_close(f);
		return KHUB_EIO;
	}
	return 0;
}

/* Namespaces, identity, capabilities. */
static void push_isolation(const struct sandbox *sb, struct strvec *args)
{
	static const char *const fixed[] = { "--unshare-user", "--unshare-pid", "--unshare-net",
					     "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent",
					     "--new-session", "--cap-drop", "ALL", "--hostname", "khub-build" };
	for (size_t i = 0; i < sizeof(fixed) / sizeof(*fixed); i++)
		push(args, fixed[i]);
	if (sb->disable_userns)
		push(args, "--disable-userns");
	strvec_pushf(args, "--uid");
	strvec_pushf(args, "%d", SANDBOX_INNER_UID);
	strvec_pushf(args, "--gid");
	strvec_pushf(args, "%d", SANDBOX_INNER_UID);
	strvec_pushf(args, "--seccomp");
	strvec_pushf(args, "%d", BWRAP_FD_SECCOMP);
}

/* The filesystem: the system, /etc, /proc, /dev, /tmp, the toolchain,
 * the build's directories, hidden paths last. */
static void push_filesystem(const struct sandbox *sb, struct strvec *args, const char *launcher)
{
	push_system(args, sb->root);
	strvec_pushf(args, "--ro-bind-data");
	strvec_pushf(args, "%d", BWRAP_FD_PASSWD);
	push(args, "/etc/passwd");
	strvec_pushf(args, "--ro-bind-data");
	strvec_pushf(args, "%d", BWRAP_FD_GROUP);
	push(args, "/etc/group");
	push2(args, "--proc", "/proc");
	push2(args, "--dev", "/dev");
	char size[32];
	snprintf(size, sizeof(size), "%llu", (unsigned long long)(sb->disk_mb > 0 ? sb->disk_mb : 1024) << 20);
	push2(args, "--size", size);	/* tmpfs: memory, not the disk, bounded all the same */
	push2(args, "--tmpfs", "/tmp");
	push2(args, "--size", size);
	push2(args, "--tmpfs", "/dev/shm");
	for (size_t i = 0; i < sb->ndevices; i++)	/* a GPU benchmark's nodes, nothing else of /dev */
		push3(args, "--dev-bind", sb->devices[i].path, sb->devices[i].at);
	for (size_t i = 0; i < sb->ro_dirs.count; i++)
		push3(args, "--ro-bind", sb->ro_dirs.items[i], sb->ro_dirs.items[i]);
	for (size_t i = 0; i < sb->nbinds; i++)
		push3(args, sb->binds[i].writable ? "--bind" : "--ro-bind", sb->binds[i].path, sb->binds[i].at);
	if (launcher)
		push3(args, "--ro-bind", launcher, launcher);
	for (size_t i = 0; i < sb->hide.count; i++) {
		struct stat st;
		if (stat(sb->hide.items[i], &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode))
			push2(args, "--tmpfs", sb->hide.items[i]);
		else
			push3(args, "--ro-bind", "/dev/null", sb->hide.items[i]);
	}
	push2(args, "--remount-ro", "/");	/* the root bwrap made (/etc, the binds' parents): read-only */
}

static void push_environment(const struct sandbox *sb, struct strvec *args)
{
	push(args, "--clearenv");
	for (size_t i = 0; i < sb->env.count; i++) {
		const char *eq = strchr(sb->env.items[i], '=');
		if (!eq)
			continue;
		push(args, "--setenv");
		strvec_pushf(args, "%.*s", (int)(eq - sb->env.items[i]), sb->env.items[i]);
		push(args, eq + 1);
	}
}

/* The PATH the commands see: the sandbox environment's, else the system's. */
static const char *sandbox_path(const struct sandbox *sb)
{
	for (size_t i = 0; i < sb->env.count; i++)
		if (strncmp(sb->env.items[i], "PATH=", 5) == 0)
			return sb->env.items[i] + 5;
	return SYSTEM_PATH;
}

/* Our own program, to run a command under the CPU limit (it tells a kill
 * by RLIMIT_CPU from a failure: a compiler driver only reports that its
 * cc1plus died, and bwrap does not pass CPU times up); NULL when there is
 * no CPU limit or the build uid could not run it. */
static char *measuring_launcher(const struct sandbox *sb)
{
	if (sb->cpu_seconds <= 0 || sb->root)
		return NULL;	/* in a root, our program would not find its libraries */
#if defined(__SANITIZE_ADDRESS__)
	if (sb->memory_mb > 0)
		return NULL;	/* an ASan build cannot start under RLIMIT_AS */
#endif
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return NULL;
	self[n] = 0;
	if (sb->drop && !sandbox_reachable(self, sb->uid, sb->gid, 5))
		return NULL;
	return xstrdup(self);
}

static void limits_for(const struct sandbox *sb, struct spawn_rlimit *limits, size_t *n)
{
	*n = 0;
	if (sb->cpu_seconds > 0)
		limits[(*n)++] = (struct spawn_rlimit){ RLIMIT_CPU, (unsigned long long)sb->cpu_seconds };
	if (sb->memory_mb > 0)
		limits[(*n)++] = (struct spawn_rlimit){ RLIMIT_AS, (unsigned long long)sb->memory_mb << 20 };
	if (sb->disk_mb > 0)
		limits[(*n)++] = (struct spawn_rlimit){ RLIMIT_FSIZE, (unsigned long long)sb->disk_mb << 20 };
	if (sb->max_processes > 0)
		limits[(*n)++] = (struct spawn_rlimit){ RLIMIT_NPROC, (unsigned long long)sb->max_processes };
	limits[(*n)++] = (struct spawn_rlimit){ RLIMIT_CORE, 0 };
}

/* The whole command line: bwrap and its options (SANDBOX_BWRAP), the
 * launcher, the program. */
static void sandbox_command(const struct sandbox *sb, const char *launcher,
			    const char *prog, char *const *argv, const char *dir, struct strvec *args)
{
	if (sb->mode == SANDBOX_BWRAP) {
		push(args, sb->tool);
		push_isolation(sb, args);
		push_filesystem(sb, args, launcher);
		push2(args, "--chdir", dir);
		push_environment(sb, args);
		push(args, "--");
	}
	if (launcher) {
		push3(args, launcher, "build", "--exec-measured");
		strvec_pushf(args, "%ld", sb->cpu_seconds);
		push(args, "--");
	}
	push(args, prog);
	for (size_t i = 1; argv[i]; i++)
		push(args, argv[i]);
}

void sandbox_command_line(const struct sandbox *sb, char *const *argv, const char *dir, struct strvec *args)
{
	sandbox_command(sb, NULL, argv[0], argv, dir, args);
}

int sandbox_start(struct sandbox *sb, char *const *argv, const char *dir, int out_fd, pid_t *pid_out)
{
	char *prog = sb->mode == SANDBOX_BWRAP ? sandbox_find_program(sb->root, argv[0], sandbox_path(sb))
					       : spawn_find_program(argv[0], sandbox_path(sb));
	if (!prog) {
		dprintf(sb->log_fd, "khub-worker: %s: not found in PATH\n", argv[0]);
		return 127;
	}
	struct bwrap_fds f = { -1, -1, -1 };
	if (sb->mode == SANDBOX_BWRAP && bwrap_fds_open(sb, &f) < 0) {
		free(prog);
		dprintf(sb->log_fd, "khub-worker: cannot make the seccomp filter: %s\n", strerror(errno));
		return KHUB_EIO;
	}
	char *launcher = measuring_launcher(sb);
	struct strvec args = STRVEC_INIT;
	sandbox_command(sb, launcher, prog, argv, dir ? dir : sb->scratch, &args);
	free(prog);
	free(launcher);
	char *empty_env[] = { NULL };
	struct spawn_rlimit limits[5];
	size_t nlimits;
	limits_for(sb, limits, &nlimits);
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	const int keep[] = { f.seccomp, f.passwd, f.group };	/* BWRAP_FD_* */
	struct spawn_opts o = { .argv = args.items, .envp = sb->mode == SANDBOX_BWRAP || !sb->env.items ? empty_env : sb->env.items,
				.fd_in = devnull, .fd_out = out_fd >= 0 ? out_fd : sb->log_fd, .fd_err = sb->log_fd,
				.dir = sb->mode == SANDBOX_BWRAP ? NULL : (dir ? dir : sb->scratch),
				.drop_privileges = sb->drop, .uid = sb->uid, .gid = sb->gid, .no_new_privs = 1,
				.new_process_group = 1, .rlimits = limits, .nrlimits = nlimits,
				.keep_fds = keep, .nkeep_fds = sb->mode == SANDBOX_BWRAP ? 3 : 0 };
	pid_t pid;
	int rc = spawn_process(&o, &pid);
	if (devnull >= 0)
		close(devnull);
	bwrap_fds_close(&f);
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
	return map_status(sb, wait_group(sb, pid, sb->deadline_usec));
}

int sandbox_wait_any(struct sandbox *sb, pid_t *pids, size_t n, size_t *index)
{
	uint64_t next_check = 0;
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
		int disk = over_disk(sb, &next_check);
		if ((sb->deadline_usec && monotonic_usec() >= sb->deadline_usec) || sandbox_interrupted || disk) {
			sandbox_kill_all(pids, n);
			return disk ? SANDBOX_DISK_LIMIT : SANDBOX_TIMED_OUT;
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

/* ---- what the sandbox gives --------------------------------------------------------------- */

/* Printed from inside by the probe: the process's identity and namespaces. */
static const char describe_script[] =
	"grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; "
	"for n in user pid net ipc mnt; do echo \"ns_$n: $(readlink /proc/self/ns/$n)\"; done; "
	"echo \"nproc: $(awk '/^Max processes/ {print $3}' /proc/self/limits)\"";

/* The value after "key:" on a line of text, or "" (static buffer). */
static const char *field(const char *text, const char *key)
{
	static char value[128];
	value[0] = 0;
	size_t n = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, n) && p[n] == ':') {
			p += n + 1;
			p += strspn(p, " \t");
			snprintf(value, sizeof(value), "%.*s", (int)strcspn(p, "\n"), p);
			break;
		}
	return value;
}

/* 1 when the probe's namespace `name` is not the worker's. */
static int own_namespace(const char *probe, const char *name)
{
	char key[16], path[64], mine[128];
	snprintf(key, sizeof(key), "ns_%s", name);
	snprintf(path, sizeof(path), "/proc/self/ns/%s", name);
	ssize_t n = readlink(path, mine, sizeof(mine) - 1);
	if (n <= 0)
		return 0;
	mine[n] = 0;
	const char *theirs = field(probe, key);
	return *theirs && strcmp(theirs, mine) != 0;
}

/* Run the probe in the sandbox; its output (caller frees) or NULL. */
static char *run_probe(struct sandbox *sb)
{
	int fd = memfd_create("khub-probe", MFD_CLOEXEC);
	if (fd < 0)
		return NULL;
	char *argv[] = { "sh", "-c", (char *)describe_script, NULL };
	int rc = sandbox_run(sb, argv, sb->scratch, fd);
	struct strbuf out = STRBUF_INIT;
	if (rc == 0 && lseek(fd, 0, SEEK_SET) == 0)
		read_until_deadline(fd, monotonic_usec() + 5000000, 64 * 1024, &out);
	close(fd);
	if (rc != 0) {
		strbuf_release(&out);
		return NULL;
	}
	return strbuf_detach(&out, NULL);
}

static void limit_text(char *out, size_t size, long value, const char *unit)
{
	if (value > 0)
		snprintf(out, size, "%ld %s", value, unit);
	else
		snprintf(out, size, "none");
}

int sandbox_describe(struct sandbox *sb, char *text, size_t size)
{
	char *probe = run_probe(sb);
	if (!probe) {
		snprintf(text, size, "%s: the sandbox could not run a probe (bwrap failed: see the build log)", sandbox_mode_name(sb->mode));
		return KHUB_EPERM;
	}
	char uid[32];
	snprintf(uid, sizeof(uid), "%s", field(probe, "Uid"));
	uid[strcspn(uid, " \t")] = 0;
	int userns = own_namespace(probe, "user"), pid = own_namespace(probe, "pid"), net = own_namespace(probe, "net");
	int ipc = own_namespace(probe, "ipc"), mnt = own_namespace(probe, "mnt");
	int nocaps = strtoull(field(probe, "CapEff"), NULL, 16) == 0 && strtoull(field(probe, "CapBnd"), NULL, 16) == 0;
	int nnp = !strcmp(field(probe, "NoNewPrivs"), "1"), seccomp = !strcmp(field(probe, "Seccomp"), "2");
	char nproc[32], cpu[64], mem[64], disk[64];
	snprintf(nproc, sizeof(nproc), "%s", field(probe, "nproc"));
	limit_text(cpu, sizeof(cpu), sb->cpu_seconds, "s per process");
	limit_text(mem, sizeof(mem), sb->memory_mb, "MiB per process");
	limit_text(disk, sizeof(disk), sb->disk_mb, "MiB for the scratch");
	snprintf(text, size,
		 "%s: uid %s%s (%ld outside), %s, %s, %s; namespaces: user %s, pid %s, net %s, ipc %s, mount %s; "
		 "limits: processes %s (uid %ld), CPU %s, memory %s, disk %s, wall clock %s",
		 sandbox_mode_name(sb->mode), uid, userns ? " in its own user namespace" : "", (long)sb->uid,
		 nocaps ? "no capabilities" : "CAPABILITIES KEPT", nnp ? "no_new_privs" : "NO no_new_privs",
		 seccomp ? "seccomp filter on" : "NO seccomp filter", userns ? "own" : "SHARED", pid ? "own" : "SHARED",
		 net ? "own (no network)" : "SHARED (network)", ipc ? "own" : "SHARED", mnt ? "own" : "SHARED", nproc,
		 (long)sb->uid, cpu, mem, disk, sb->deadline_usec ? "set" : "none");
	int whole = userns && pid && net && ipc && mnt && nocaps && nnp && seccomp && strcmp(uid, "0") != 0;
	free(probe);
	return whole || sb->mode == SANDBOX_NONE ? 0 : KHUB_EPERM;
}
