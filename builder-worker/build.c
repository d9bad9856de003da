/* build.c -- `khub-worker build`: one variant of a kernel source into OUT.
 * Copies the source into a scratch directory, reads build.toml through the
 * toolchain's Python (sandboxed), compiles (compile.c) or, for a noarch
 * variant, only packages (package.c), checks the ABI (abi_check.c) and
 * imports the result as the loader would, then moves <variant>/,
 * abi-report.json and README.md into OUT. Nothing lands in OUT unless the
 * whole build succeeded; the scratch directory is always removed. */
#include "builder-worker/build_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern const char embedded_build_toml_py[];
extern const size_t embedded_build_toml_py_len;
extern volatile sig_atomic_t sandbox_interrupted;

/* This process is the launcher inside the sandbox, where ptrace is refused:
 * LeakSanitizer (which stops the world with ptrace) must stay out of it. */
static int measuring_launcher;
#if defined(__SANITIZE_ADDRESS__)
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
	return measuring_launcher;
}
#endif

extern const char embedded_smoke_check_py[];
extern const size_t embedded_smoke_check_py_len;

static void on_signal(int sig)
{
	(void)sig;
	sandbox_interrupted = 1;
}

/* A bad-source line of the build contract ("build.toml: <key>: <what>",
 * "source layout: ..."), as build_toml.py prints them into the same log:
 * verbatim, for the kernel's author, not a worker diagnostic. */
static void source_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void source_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* SOURCE_DATE_EPOCH from the environment into *epoch (0 when unset): 0,
 * or -1 after saying on stderr that it is not a number. */
static int source_date_epoch_from_env(long *epoch)
{
	const char *env = getenv("SOURCE_DATE_EPOCH");
	*epoch = 0;
	if (!env || !*env)
		return 0;
	return worker_parse_number(env, "SOURCE_DATE_EPOCH", 0, LONG_MAX, epoch);
}

/* A new file (never through a link build code may have left there). */
static int write_text(const char *path, const char *data, size_t len)
{
	if (unlink(path) < 0 && errno != ENOENT)
		return KHUB_EIO;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return KHUB_EIO;
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		return KHUB_EIO;
	}
	int ok = fwrite(data, 1, len, f) == len;
	return fclose(f) == 0 && ok ? 0 : KHUB_EIO;
}

/* The build's scratch: SCRATCH/{src,obj,home,stage/VARIANT}, the worker's
 * own top (build code sees only the binds: src, obj and home read-write,
 * the variant directory read-write until the compile is done). */
static int scratch_prepare(struct sandbox *sb, const struct build_plan *plan, const char *scratch, const char *script)
{
	char *home = xasprintf("%s/home", scratch), *stage = xasprintf("%s/stage", scratch);
	const char *owned[] = { plan->src, plan->obj, home, plan->stage };
	int rc = chmod(scratch, sb->drop ? 0711 : 0700) < 0 || chmod(stage, 0711) < 0 ? KHUB_EIO : 0;
	for (size_t i = 0; i < 4 && rc == 0; i++)
		rc = chmod(owned[i], 0700) < 0 ? KHUB_EIO : sandbox_give(sb, owned[i]);
	if (rc == 0) {
		sandbox_bind(sb, script, 0);
		sandbox_bind(sb, plan->src, 1);
		sandbox_bind(sb, plan->obj, 1);
		sandbox_bind_at(sb, plan->src, BUILD_FIXED_SRC, 1);	/* where the compilers run */
		sandbox_bind_at(sb, plan->obj, BUILD_FIXED_OBJ, 1);
		sandbox_bind(sb, home, 1);
		sandbox_bind(sb, stage, 0);
		sandbox_bind(sb, plan->stage, 1);
	}
	free(home);
	free(stage);
	return rc;
}

/* Set the sandbox up for this toolchain, log what it gives: 0, or
 * KHUB_EPERM (logged) when it is less than a whole sandbox. */
static int sandbox_setup(struct sandbox *sb, const struct toolchain *tc, const struct sandbox_options *opts,
			 const char *scratch)
{
	char why[1024];
	struct strvec dirs = STRVEC_INIT;
	struct sandbox_options o = *opts;
	o.allow_no_sandbox = tc->allow_no_sandbox;
	o.root = tc->root;
	int rc = toolchain_sandbox_dirs(tc, &dirs, why, sizeof(why));
	if (rc == 0)
		rc = sandbox_init(sb, scratch, &o, &dirs, why, sizeof(why));
	strvec_release(&dirs);
	if (rc < 0)
		log_error("khub-worker build: refusing to build: %s", why);
	return rc;
}

static int is_dir_empty_or_missing(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return errno == ENOENT;
	if (!S_ISDIR(st.st_mode))
		return 0;
	DIR *d = opendir(path);
	if (!d)
		return 0;
	int empty = 1;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			empty = 0;
	closedir(d);
	return empty;
}

/* The 7 hex characters of the op namespace when no commit is given: the
 * SHA-256 of the source tree's digest (every file's path and SHA-256). */
static void tree_uid(const char *src, char out[8])
{
	json_t *files = json_object();
	struct strbuf list = STRBUF_INIT;
	if (package_tree_digest(src, files) == 0) {
		char *text = json_dumps(files, JSON_SORT_KEYS | JSON_COMPACT);
		if (text)
			strbuf_adds(&list, text);
		free(text);
	}
	char hex[65];
	sha256_hex(list.buf ? list.buf : "", list.len, hex);
	memcpy(out, hex, 7);
	out[7] = 0;
	strbuf_release(&list);
	json_decref(files);
}

/* Judge stage/metadata.json with the server's own rules (kernel/): what
 * it would refuse is a worker bug, caught here; warnings are logged. */
static int check_metadata(const struct build_plan *plan)
{
	char *path = xasprintf("%s/" BUILD_METADATA_FILE, plan->stage);
	size_t len = 0;
	char *text = read_file_limited(path, METADATA_MAX_BYTES, &len);
	free(path);
	struct variant_check c;
	variant_check_init(&c, plan->variant);
	if (text)
		variant_check_metadata(&c, text, len);
	else
		variant_check_unreadable(&c, "cannot be read");
	for (size_t i = 0; i < c.warnings.count; i++)
		log_warn("khub-worker build: metadata.json: warning: %s", c.warnings.items[i]);
	int rc = 0;
	if (!c.name_valid || c.metadata_status != VARIANT_METADATA_OK) {
		log_error("khub-worker build: metadata.json would be refused: %s",
			!c.name_valid ? c.name_error : c.metadata_error);
		rc = KHUB_EINVAL;
	}
	variant_check_release(&c);
	free(text);
	return rc;
}

/* 1 (and a log line) when the scratch directory uses more than disk_mb. */
static int over_disk(const char *scratch, long disk_mb)
{
	if (disk_mb <= 0)
		return 0;
	unsigned long long used = tree_disk_usage(scratch);
	if (used <= (unsigned long long)disk_mb << 20)
		return 0;
	log_error("khub-worker build: the build uses %.1f MiB of disk, over the limit of %ld MiB",
		(double)used / (1024.0 * 1024.0), disk_mb);
	return 1;
}

/* 1 when a sandbox result is a limit hit (the CPU and disk limits log
 * themselves; the wall clock is logged once, at build_main's end). */
static int limit_hit(int r)
{
	return r == SANDBOX_TIMED_OUT || r == SANDBOX_CPU_LIMIT || r == SANDBOX_DISK_LIMIT;
}

/* Log what isolation the sandbox gives: BUILD_OK, BUILD_TIMED_OUT when the
 * wall clock ran out first, BUILD_INTERNAL when it is less than whole. */
static int sandbox_check(struct sandbox *sb)
{
	char isolation[1024];
	int whole = sandbox_describe(sb, isolation, sizeof(isolation));
	if (whole < 0 && ((sb->deadline_usec && monotonic_usec() >= sb->deadline_usec) || sandbox_interrupted)) {
		limit_hit(SANDBOX_TIMED_OUT);
		return BUILD_TIMED_OUT;
	}
	log_info("khub-worker build: sandbox %s", isolation);
	if (whole < 0) {
		log_error("khub-worker build: refusing to build: the sandbox is less than it must be");
		return BUILD_INTERNAL;
	}
	return BUILD_OK;
}

/* "2.11" -> "211" into buf (the <MM> of a variant name). */
static const char *stable_abi_digits(const char *version, char *buf, size_t size)
{
	long major = 0, minor = 0;
	if (sscanf(version, "%ld.%ld", &major, &minor) < 1)
		major = minor = 0;
	snprintf(buf, size, "%ld%ld", major, minor);
	return buf;
}

/* 1 when build.toml lists sources to compile: a [kernel.*] with src, or
 * [torch] src. Such a kernel never gets a noarch variant (it would load
 * and fail on its first op); *where names the first key. */
static int has_compiled_sources(json_t *config, const char **where)
{
	const char *name;
	json_t *k;
	json_object_foreach(json_object_get(config, "kernel"), name, k)
		if (json_array_size(json_object_get(k, "src")) > 0) {
			*where = name;
			return 1;
		}
	*where = NULL;
	return json_array_size(json_object_get(json_object_get(config, "torch"), "src")) > 0;
}

/* The torch stable ABI version [torch] stable-abi sets for backend ("2.11",
 * a string or a per-backend table), or NULL. */
static const char *stable_abi_target(json_t *config, const char *backend)
{
	json_t *s = json_object_get(json_object_get(config, "torch"), "stable-abi");
	return json_is_object(s) ? json_string_value(json_object_get(s, backend)) : json_string_value(s);
}

/* Whether plan->variant is one this kernel is built as: BUILD_OK, or
 * BUILD_BAD_JOB with the reason on the log (a job the server should not
 * have queued: failed for good, never retried). Sets plan->stable_abi. */
static int check_variant_fits(struct build_plan *plan)
{
	const struct variant_name *v = &plan->parsed;
	const char *where = NULL;
	if (json_object_get(plan->config, "tvm-ffi")) {
		source_error("build.toml: tvm-ffi: tvm-ffi kernels are not built by this worker (no toolchain has the "
			"tvm-ffi package and headers; see docs/worker-build.md): the job asked for %s", plan->variant);
		return BUILD_BAD_JOB;
	}
	if (plan->noarch && has_compiled_sources(plan->config, &where)) {
		source_error("build.toml: %s%s: the kernel has compiled sources, so it has no noarch variant: %s would "
			"package the Python only, load, and fail on its first op. Build its arch variants "
			"(torch<MM>-cxx11-%s-..., or torch-stable-abi<MM>-... with [torch] stable-abi) instead",
			where ? "kernel." : "torch.src", where ? where : "", plan->variant, plan->backend);
		return BUILD_BAD_JOB;
	}
	if (plan->noarch)
		return BUILD_OK;
	const char *target = stable_abi_target(plan->config, plan->backend);
	char want[32];
	if (v->framework == VARIANT_TORCH && target) {
		source_error("build.toml: torch.stable-abi: the kernel is built against the torch stable ABI %s for %s: "
			"its variant is torch-stable-abi%s-..., not %s", target, plan->backend,
			stable_abi_digits(target, want, sizeof(want)), plan->variant);
		return BUILD_BAD_JOB;
	}
	if (v->framework != VARIANT_TORCH_STABLE_ABI)
		return BUILD_OK;
	if (!target) {
		source_error("build.toml: torch.stable-abi: not set for %s, so %s (a stable ABI variant) is not built; "
			"the kernel's variant is torch<MM>-cxx11-...", plan->backend, plan->variant);
		return BUILD_BAD_JOB;
	}
	snprintf(want, sizeof(want), "%ld%ld", v->framework_major, v->framework_minor);
	char have[32];
	if (strcmp(stable_abi_digits(target, have, sizeof(have)), want) != 0) {
		source_error("build.toml: torch.stable-abi: the kernel targets the stable ABI %s (torch-stable-abi%s-...), "
			"not %s", target, have, plan->variant);
		return BUILD_BAD_JOB;
	}
	if (plan->torch_major < v->framework_major ||
	    (plan->torch_major == v->framework_major && plan->torch_minor < v->framework_minor)) {
		source_error("build.toml: torch.stable-abi: torch %ld.%ld is older than the stable ABI target %s",
			plan->torch_major, plan->torch_minor, target);
		return BUILD_BAD_JOB;
	}
	snprintf(plan->stable_abi, sizeof(plan->stable_abi), "%s", target);
	return BUILD_OK;
}

/* torch.minver / torch.maxver against the toolchain's torch (the installed
 * one, as kernel-builder's CMake checks it, also for a stable ABI build). */
static int check_torch_bounds(const struct build_plan *plan)
{
	json_t *torch = json_object_get(plan->config, "torch");
	const char *bound[2] = { json_string_value(json_object_get(torch, "minver")),
				 json_string_value(json_object_get(torch, "maxver")) };
	for (int i = 0; i < 2; i++) {
		long mj, mn;
		if (!bound[i] || sscanf(bound[i], "%ld.%ld", &mj, &mn) != 2)
			continue;
		int cmp = plan->torch_major != mj ? (plan->torch_major < mj ? -1 : 1) :
			  plan->torch_minor != mn ? (plan->torch_minor < mn ? -1 : 1) : 0;
		if ((i == 0 && cmp < 0) || (i == 1 && cmp > 0)) {
			source_error("build.toml: torch.%s: %s is %s this toolchain's torch %ld.%ld", i ? "maxver" : "minver",
				bound[i], i ? "below" : "above", plan->torch_major, plan->torch_minor);
			return BUILD_BAD_SOURCE;
		}
	}
	return BUILD_OK;
}

int build_describe_sandbox(const struct toolchain *tc, long build_uid, long build_gid, long max_processes,
			   char *text, size_t size)
{
	struct sandbox_options o = { .build_uid = build_uid, .build_gid = build_gid, .max_processes = max_processes };
	struct sandbox sb;
	memset(&sb, 0, sizeof(sb));
	const char *base = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *scratch = xasprintf("%s/khub-check-XXXXXX", base);
	int rc = KHUB_EIO;
	snprintf(text, size, "cannot be probed: no scratch directory in %s", base);
	if (!mkdtemp(scratch)) {
		free(scratch);
		return rc;
	}
	char why[1024];
	struct strvec dirs = STRVEC_INIT;
	o.allow_no_sandbox = tc->allow_no_sandbox;
	o.root = tc->root;
	rc = toolchain_sandbox_dirs(tc, &dirs, why, sizeof(why));
	if (rc == 0 && chmod(scratch, geteuid() == 0 ? 0711 : 0700) < 0)
		rc = KHUB_EIO;
	if (rc == 0)
		rc = sandbox_init(&sb, scratch, &o, &dirs, why, sizeof(why));
	if (rc < 0) {
		snprintf(text, size, "none: builds are refused: %s", why);
	} else {
		sandbox_bind(&sb, scratch, 0);
		toolchain_environment(tc, "/tmp", &sb.env);
		int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
		sb.log_fd = null_fd >= 0 ? null_fd : 2;
		rc = sandbox_describe(&sb, text, size);
		if (null_fd >= 0)
			close(null_fd);
	}
	strvec_release(&dirs);
	sandbox_release(&sb);
	tree_remove(scratch);
	free(scratch);
	return rc < 0 ? KHUB_EPERM : 0;
}

/* The smoke import (smoke_check.py, run with -c in the sandbox, where the
 * scratch's top is not visible): the import, and the ops it registers
 * against what the Python calls and the namespace. */
static int smoke_import(struct build_plan *plan, struct sandbox *sb, const char *scratch, int foreign)
{
	if (sandbox_take_back(sb, plan->stage) < 0) {	/* the files written since: readable by the build */
		log_error("khub-worker build: cannot hand %s to the smoke import", plan->stage);
		return BUILD_INTERNAL;
	}
	char *args[] = { plan->tc->python, "-c", (char *)embedded_smoke_check_py, plan->stage, plan->ops_name,
			 plan->module, plan->noarch ? "noarch" : "arch", foreign ? "direct" : "loader", NULL };
	int r = sandbox_run(sb, args, scratch, 2);
	if (limit_hit(r))
		return BUILD_TIMED_OUT;
	if (r != 0) {
		log_error("khub-worker build: the smoke import failed (status %d): nothing is published", r);
		return BUILD_FAILED;
	}
	return BUILD_OK;
}

/* ---- the command line --------------------------------------------------------------- */

struct build_options {
	const char *toolchains_path, *toolchain_name, *source, *out_dir, *variant;
	const char *build_id, *repo, *commit, *worker, *work_dir, *cache_root, *manylinux, *probe_cache;
	long wall, cpu, memory, disk, jobs, epoch, cache_max_mb;
	struct strvec hide;
	struct sandbox_options sandbox;
};

/* --sandbox auto|bwrap into sandbox_options.bwrap_only. */
static int parse_sandbox(const char *arg, void *field)
{
	if (!strcmp(arg, "unshare")) {
		fprintf(stderr, "khub-worker build: --sandbox unshare is refused: it cannot hide the machine's "
			"files nor drop root; bubblewrap is the only sandbox (--sandbox bwrap)\n");
		return -1;
	}
	if (strcmp(arg, "auto") != 0 && strcmp(arg, "bwrap") != 0)
		return -1;
	*(int *)field = !strcmp(arg, "bwrap");
	return 0;
}

#define BUILD_OPT(field) offsetof(struct build_options, field)
static const struct worker_option build_option_rows[] = {
	{ .name = "toolchains", .arg = "FILE", .kind = WOPT_STRING, .offset = BUILD_OPT(toolchains_path), .required = 1,
	  .help = "toolchains.json" },
	{ .name = "toolchain", .arg = "NAME", .kind = WOPT_STRING, .offset = BUILD_OPT(toolchain_name), .required = 1,
	  .help = "the toolchain of that file to build with" },
	{ .name = "source", .arg = "DIR", .kind = WOPT_STRING, .offset = BUILD_OPT(source), .required = 1,
	  .help = "the kernel's source (build.toml at its top)" },
	{ .name = "out", .arg = "DIR", .kind = WOPT_STRING, .offset = BUILD_OPT(out_dir), .required = 1,
	  .help = "where <variant>/, abi-report.json and README.md go (missing or empty)" },
	{ .name = "variant", .arg = "V", .kind = WOPT_STRING, .offset = BUILD_OPT(variant), .required = 1,
	  .help = "the variant to build" },
	{ .name = "build-id", .arg = "ID", .kind = WOPT_STRING, .offset = BUILD_OPT(build_id),
	  .help = "recorded in metadata.json's khub object" },
	{ .name = "repo", .arg = "NS/NAME", .kind = WOPT_STRING, .offset = BUILD_OPT(repo), .help = "recorded too" },
	{ .name = "commit", .arg = "SHA40", .kind = WOPT_STRING, .offset = BUILD_OPT(commit),
	  .help = "the source's commit (names the op namespace; else the tree's digest)" },
	{ .name = "worker", .arg = "NAME", .kind = WOPT_STRING, .offset = BUILD_OPT(worker), .help = "recorded too" },
	{ .name = "wall-seconds", .arg = "N", .kind = WOPT_LONG, .offset = BUILD_OPT(wall), .min = 0, .max = LONG_MAX,
	  .help = "the whole build's wall-clock limit (0: none)" },
	{ .name = "cpu-seconds", .arg = "N", .kind = WOPT_LONG, .offset = BUILD_OPT(cpu), .min = 0, .max = LONG_MAX,
	  .help = "CPU time of each process (0: none)" },
	{ .name = "memory-mb", .arg = "N", .kind = WOPT_LONG, .offset = BUILD_OPT(memory), .min = 0, .max = LONG_MAX,
	  .help = "address space of each process (0: none)" },
	{ .name = "disk-mb", .arg = "N", .kind = WOPT_LONG, .offset = BUILD_OPT(disk), .min = 0, .max = LONG_MAX,
	  .help = "the scratch directory's size (0: none)" },
	{ .name = "work-dir", .arg = "DIR", .kind = WOPT_STRING, .offset = BUILD_OPT(work_dir),
	  .help = "where the scratch directory is made ($TMPDIR, else /tmp)" },
	{ .name = "hide", .arg = "PATH", .kind = WOPT_LIST, .offset = BUILD_OPT(hide),
	  .help = "a path the build must not see (again for more)" },
	{ .name = "sandbox", .arg = "auto|bwrap", .kind = WOPT_CALL, .offset = BUILD_OPT(sandbox.bwrap_only),
	  .parse = parse_sandbox, .help = "bwrap: bubblewrap or no build, whatever the toolchain allows (auto)" },
	{ .name = "jobs", .arg = "N", .kind = WOPT_LONG, .offset = BUILD_OPT(jobs), .min = 1, .max = 1024,
	  .help = "compiler processes at once (the CPUs this process may use; 64 at most)" },
	{ .name = "build-user", .arg = "UID[:GID]", .kind = WOPT_CALL, .offset = BUILD_OPT(sandbox.build_uid),
	  .parse = worker_option_build_user, .help = "who build code runs as when the worker is root (65534:65534)" },
	{ .name = "max-processes", .arg = "N", .kind = WOPT_LONG, .offset = BUILD_OPT(sandbox.max_processes), .min = 0,
	  .max = 1 << 22, .help = "processes (and threads) of that uid at once (512)" },
	{ .name = "source-date-epoch", .arg = "SECONDS", .kind = WOPT_LONG, .offset = BUILD_OPT(epoch), .min = 0,
	  .max = LONG_MAX, .help = "the commit's time (else $SOURCE_DATE_EPOCH, else 0)" },
	{ .name = "cache-root", .arg = "DIR", .kind = WOPT_STRING, .offset = BUILD_OPT(cache_root),
	  .help = "compile through ccache, its cache DIR/<sha256 of --repo and the toolchain> (none: no cache)" },
	{ .name = "cache-max-mb", .arg = "N", .kind = WOPT_LONG, .offset = BUILD_OPT(cache_max_mb), .min = 1,
	  .max = 1L << 30, .help = "that cache's size (ccache's max_size; 2048)" },
	{ .name = "manylinux", .arg = "2_X", .kind = WOPT_STRING, .offset = BUILD_OPT(manylinux),
	  .help = "the manylinux target the ABI check applies (2_28; the server's abi_manylinux)" },
	{ .name = "probe-cache", .arg = "DIR", .kind = WOPT_STRING, .offset = BUILD_OPT(probe_cache),
	  .help = "reuse (and keep) the toolchain's Python probe there (the worker's own)" },
	{ .name = "help", .kind = WOPT_HELP, .help = "this text" },
	{ .name = NULL },
};

static const struct worker_command build_command = {
	.synopsis = "usage: khub-worker build --toolchains FILE --toolchain NAME --source DIR --out DIR --variant V [options]",
	.options = build_option_rows,
	.epilogue = "exit: 0 ok, 1 build failed, 2 bad source, 3 limit hit, 4 worker failure, 5 bad job (wrong variant\n"
		    "      for this kernel), 6 the toolchain lacks a tool the source needs (hipify), 64 usage\n",
};

/* argv into *o, checked: BUILD_OK, 1 after --help, or BUILD_USAGE after
 * the usage (the caller releases o->hide either way). */
static int build_options_parse(int argc, char **argv, struct build_options *o)
{
	memset(o, 0, sizeof(*o));
	o->hide = (struct strvec)STRVEC_INIT;
	o->sandbox = (struct sandbox_options){ .build_uid = SANDBOX_BUILD_UID_DEFAULT,
					       .build_gid = SANDBOX_BUILD_UID_DEFAULT,
					       .max_processes = SANDBOX_MAX_PROCESSES_DEFAULT };
	o->jobs = usable_cpus(NULL, 0);
	o->epoch = -1;
	o->cache_max_mb = BUILD_CACHE_MAX_MB_DEFAULT;
	int parsed = worker_options_parse(&build_command, argc, argv, o);
	if (parsed == WORKER_OPTIONS_HELP) {
		worker_options_usage(&build_command, stdout);
		return 1;
	}
	if (parsed < 0)
		goto usage_error;
	if (o->commit && !is_lower_hex(o->commit, 40)) {
		log_error("khub-worker build: --commit: want 40 lowercase hex characters");
		goto usage_error;
	}
	if (o->epoch < 0 && source_date_epoch_from_env(&o->epoch) < 0)
		goto usage_error;
	if (o->cache_root && (!o->repo || !*o->cache_root)) {
		log_error("khub-worker build: --cache-root: needs --repo (each repo has a cache of its own)");
		goto usage_error;
	}
	if (!abi_manylinux_find(o->manylinux)) {
		log_error("khub-worker build: --manylinux %s: not a manylinux target this worker knows", o->manylinux);
		goto usage_error;
	}
	if (!is_dir_empty_or_missing(o->out_dir)) {
		log_error("khub-worker build: --out %s: must be missing or an empty directory", o->out_dir);
		goto usage_error;
	}
	return BUILD_OK;
usage_error:
	worker_options_usage(&build_command, stderr);
	return BUILD_USAGE;
}

/* ---- the steps of one build -------------------------------------------------------------- */

/* One build from the command line to OUT; each step fills what the next reads. */
struct build_run {
	const struct build_options *o;
	struct toolchain_set set;
	struct toolchain *tc;
	struct sandbox sb;
	struct build_plan plan;
	char *scratch, *script;		/* owned */
	int foreign;			/* rocm_from_hipcc: compiled against a torch of another build */
	json_t *report, *offload;	/* abi-report.json; the HIP code objects found (owned) */
	int out_created;		/* OUT may hold part of the result: removed unless the build succeeded */
	uint64_t started, t_probed, t_compiled, t_checked;
};

/* The toolchain and what the variant asks of it: BUILD_OK, BUILD_USAGE
 * (no such toolchain, a variant it cannot build) or BUILD_BAD_JOB. */
static int step_plan(struct build_run *r)
{
	const struct build_options *o = r->o;
	char why[512];
	if (toolchains_load(o->toolchains_path, &r->set, why, sizeof(why)) < 0) {
		log_error("khub-worker build: %s", why);
		return BUILD_USAGE;
	}
	for (size_t i = 0; i < r->set.count; i++)
		if (!strcmp(r->set.items[i].name, o->toolchain_name))
			r->tc = &r->set.items[i];
	if (!r->tc) {
		log_error("khub-worker build: no toolchain named %s in %s", o->toolchain_name, o->toolchains_path);
		return BUILD_USAGE;
	}
	struct toolchain *tc = r->tc;
	toolchain_probe(tc, o->probe_cache);
	r->t_probed = monotonic_usec();
	const char *parse_why = NULL;
	if (variant_name_parse(o->variant, &r->plan.parsed, &parse_why) < 0) {
		log_error("khub-worker build: variant %s: %s", o->variant, parse_why);
		return BUILD_USAGE;
	}
	if (r->plan.parsed.framework == VARIANT_TVM_FFI) {
		log_error("khub-worker build: %s: tvm-ffi variants are not built by this worker (no toolchain has the "
			  "tvm-ffi package and headers; see docs/worker-build.md)", o->variant);
		return BUILD_BAD_JOB;
	}
	int can = 0;
	for (size_t i = 0; tc->usable && i < tc->nvariants; i++)
		can |= !strcmp(tc->variants[i], o->variant);
	if (!can) {
		log_error("khub-worker build: toolchain %s cannot build %s%s%s", tc->name, o->variant,
			  tc->why[0] ? ": " : "", tc->why);
		if (tc->usable && r->plan.parsed.framework == VARIANT_TORCH_STABLE_ABI)
			log_error("khub-worker build: a torch-stable-abi<MM> variant is built against torch %s's headers "
				  "with TORCH_TARGET_VERSION; this toolchain's torch %s builds the stable ABI 2.9 up to its own "
				  "version only", "MM or newer", tc->torch_version);
		return BUILD_USAGE;
	}
	struct build_plan *plan = &r->plan;
	plan->tc = tc;
	if (sscanf(tc->torch_version, "%ld.%ld", &plan->torch_major, &plan->torch_minor) != 2)
		plan->torch_major = plan->torch_minor = -1;	/* a usable toolchain has one */
	plan->variant = o->variant;
	plan->backend = plan->parsed.backend;
	plan->cb = compile_backend_find(plan->backend);	/* a toolchain lists variants of these only */
	plan->noarch = plan->parsed.framework == VARIANT_TORCH_NOARCH;
	plan->jobs = o->jobs > 64 ? 64 : o->jobs < 1 ? 1 : (int)o->jobs;
	if (o->cache_root && plan->noarch)
		snprintf(plan->cache.why_off, sizeof(plan->cache.why_off), "a noarch variant compiles nothing");
	else if (o->cache_root)
		plan->cache.dir = build_cache_dir(o->cache_root, o->repo, tc->name);
	plan->cache.max_mb = o->cache_max_mb;
	return BUILD_OK;
}

/* A new scratch directory under the work directory, its real path into
 * r->scratch: 0 or KHUB_EIO (logged). */
static int make_scratch_dir(struct build_run *r)
{
	const char *base = r->o->work_dir ? r->o->work_dir : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	if (mkdir_p(base, 0755) < 0) {
		log_error("khub-worker build: %s: %s", base, strerror(errno));
		return KHUB_EIO;
	}
	r->scratch = xasprintf("%s/khub-build-XXXXXX", base);
	if (!mkdtemp(r->scratch)) {
		log_error("khub-worker build: mkdtemp %s: %s", r->scratch, strerror(errno));
		free(r->scratch);
		r->scratch = NULL;
		return KHUB_EIO;
	}
	char real[4096];
	if (realpath(r->scratch, real)) {
		free(r->scratch);
		r->scratch = xstrdup(real);
	}
	return 0;
}

/* What the build runs with and under, said on the log. */
static void log_build_start(struct build_run *r)
{
	const struct toolchain *tc = r->tc;
	log_info("khub-worker build: %s with toolchain %s (torch %s%s%s, python %s), sandbox %s", r->o->variant, tc->name,
		 tc->torch_version ? tc->torch_version : "?", tc->cuda_version ? ", CUDA " : tc->rocm_version ? ", ROCm " : "",
		 tc->cuda_version ? tc->cuda_version : tc->rocm_version ? tc->rocm_version : "",
		 tc->python_version ? tc->python_version : "?", sandbox_mode_name(r->sb.mode));
	if (r->foreign)
		log_info("khub-worker build: ROCm %s from hipcc (%s) against torch %s, a %s build, not a ROCm "
			 "torch build (rocm_from_hipcc): built and ABI-checked here, never run on an AMD GPU",
			 tc->rocm_version, tc->hipcc_version ? tc->hipcc_version : "?", tc->torch_version, tc->torch_build);
	if (r->sb.mode == SANDBOX_NONE)
		log_warn("khub-worker build: WARNING: NO SANDBOX (the toolchain sets allow_no_sandbox): build code "
			 "runs with the network, sees the whole machine and everything uid %ld may read", (long)r->sb.uid);
}

/* Scratch: src/ (the copy), obj/, stage/<variant>/, home/; the sandbox
 * over it with the limits of the command line. */
static int step_scratch(struct build_run *r)
{
	const struct build_options *o = r->o;
	struct build_plan *plan = &r->plan;
	if (make_scratch_dir(r) < 0)
		return BUILD_INTERNAL;
	plan->scratch = r->scratch;
	plan->src = xasprintf("%s/src", r->scratch);
	plan->obj = xasprintf("%s/obj", r->scratch);
	plan->stage = xasprintf("%s/stage/%s", r->scratch, o->variant);
	char *home = xasprintf("%s/home", r->scratch);
	int rc = BUILD_INTERNAL;
	if ((mkdir_p(plan->obj, 0700) | mkdir_p(plan->stage, 0700) | mkdir_p(home, 0700)) < 0) {
		log_error("khub-worker build: cannot make the scratch directories under %s", r->scratch);
		goto cleanup;
	}
	if (sandbox_setup(&r->sb, r->tc, &o->sandbox, r->scratch) < 0)
		goto cleanup;
	toolchain_environment(r->tc, home, &r->sb.env);
	strvec_pushf(&r->sb.env, "PYTHONDONTWRITEBYTECODE=1");
	strvec_pushf(&r->sb.env, "SOURCE_DATE_EPOCH=%ld", o->epoch);	/* __DATE__, __TIME__ and tools that honour it */
	for (size_t i = 0; i < o->hide.count; i++)
		strvec_pushf(&r->sb.hide, "%s", o->hide.items[i]);
	r->sb.cpu_seconds = o->cpu;
	r->sb.memory_mb = o->memory;
	r->sb.disk_mb = o->disk;
	r->sb.deadline_usec = o->wall > 0 ? r->started + (uint64_t)o->wall * 1000000 : 0;
	if (build_cache_prepare(&plan->cache, &r->sb, home) < 0)
		goto cleanup;
	r->script = xasprintf("%s/build_toml.py", r->scratch);
	plan->sb = &r->sb;
	r->foreign = r->tc->rocm_from_hipcc && plan->cb->from_hipcc;
	log_build_start(r);
	rc = BUILD_OK;
cleanup:
	free(home);
	return rc;
}

/* The source copied in, build.toml's reader beside it, the sandbox checked. */
static int step_source(struct build_run *r)
{
	if (copy_tree(r->o->source, r->plan.src, 2) < 0) {
		log_error("khub-worker build: cannot copy the source %s", r->o->source);
		return BUILD_BAD_SOURCE;
	}
	if (over_disk(r->scratch, r->o->disk))
		return BUILD_TIMED_OUT;
	if (write_text(r->script, embedded_build_toml_py, embedded_build_toml_py_len) < 0 ||
	    scratch_prepare(&r->sb, &r->plan, r->scratch, r->script) < 0) {
		log_error("khub-worker build: cannot prepare the scratch directory %s", r->scratch);
		return BUILD_INTERNAL;
	}
	return sandbox_check(&r->sb);
}

/* build.toml, read by the toolchain's Python in the sandbox, into plan.config. */
static int step_read_config(struct build_run *r)
{
	struct build_plan *plan = &r->plan;
	char *build_json = xasprintf("%s/build.json", r->scratch);
	int rc = BUILD_INTERNAL, fd = open(build_json, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		goto cleanup;
	char *toml = xasprintf("%s/build.toml", plan->src);
	char *args[] = { r->tc->python, "-I", r->script, toml, NULL };
	int status = sandbox_run(&r->sb, args, plan->src, fd);
	free(toml);
	close(fd);
	if (limit_hit(status) || status == 2) {
		rc = status == 2 ? BUILD_BAD_SOURCE : BUILD_TIMED_OUT;
		goto cleanup;
	}
	if (status != 0) {
		log_error("khub-worker build: reading build.toml failed (status %d)", status);
		goto cleanup;
	}
	json_error_t jerr;
	plan->config = json_load_file(build_json, 0, &jerr);
	if (!json_is_object(plan->config)) {
		log_error("khub-worker build: build.toml reader printed no JSON: %s", jerr.text);
		goto cleanup;
	}
	plan->module = xstrdup(json_string_value(json_object_get(json_object_get(plan->config, "general"), "name")));
	for (char *p = plan->module; *p; p++)
		if (*p == '-')
			*p = '_';
	rc = BUILD_OK;
cleanup:
	free(build_json);
	return rc;
}

/* torch-ext/<module>/__init__.py present, torch-ext/<module>/<module> absent. */
static int check_layout(const struct build_plan *plan)
{
	char *init = xasprintf("%s/torch-ext/%s/__init__.py", plan->src, plan->module);
	char *nested = xasprintf("%s/torch-ext/%s/%s", plan->src, plan->module, plan->module);
	struct stat st;
	int bad_init = stat(init, &st) < 0, bad_nested = stat(nested, &st) == 0;
	if (bad_init)
		source_error("source layout: torch-ext/%s/__init__.py is missing", plan->module);
	if (bad_nested)
		source_error("source layout: torch-ext/%s/%s must not exist", plan->module, plan->module);
	free(init);
	free(nested);
	return bad_init || bad_nested ? BUILD_BAD_SOURCE : BUILD_OK;
}

/* What the source must look like for this variant; then the op namespace:
 * _<module>_<backend>_<7 hex of the commit, else of the tree>. */
static int step_check_source(struct build_run *r)
{
	struct build_plan *plan = &r->plan;
	json_t *general = json_object_get(plan->config, "general");
	int rc = check_variant_fits(plan);
	if (rc != BUILD_OK)
		return rc;
	int has_backend = 0;
	size_t bi;
	json_t *bv;
	json_array_foreach(json_object_get(general, "backends"), bi, bv)
		has_backend |= !strcmp(json_string_value(bv), plan->backend);
	if (!has_backend) {
		source_error("build.toml: general.backends: does not list %s, which variant %s is for", plan->backend,
			  plan->variant);
		return BUILD_BAD_SOURCE;
	}
	if (!plan->noarch && !json_object_get(plan->config, "torch")) {
		source_error("build.toml: torch: missing; a [torch-noarch] kernel builds only torch-<backend> variants");
		return BUILD_BAD_SOURCE;
	}
	if ((rc = check_layout(plan)) != BUILD_OK || (!plan->noarch && (rc = check_torch_bounds(plan)) != BUILD_OK))
		return rc;
	char uid[8];
	if (r->o->commit) {
		memcpy(uid, r->o->commit, 7);
		uid[7] = 0;
	} else {
		tree_uid(plan->src, uid);
	}
	plan->ops_name = xasprintf("_%s_%s_%s", plan->module, plan->backend, uid);
	log_info("khub-worker build: kernel %s%s%s%s%s, op namespace %s",
		 json_string_value(json_object_get(general, "name")), plan->noarch ? " (noarch: packaged, not compiled)" : "",
		 plan->stable_abi[0] ? " (against the torch stable ABI " : "", plan->stable_abi[0] ? plan->stable_abi : "",
		 plan->stable_abi[0] ? ")" : "", plan->ops_name);
	return BUILD_OK;
}

/* The compile (arch variants), then the variant directory taken back from
 * build code and its Python copied in. */
static int step_compile(struct build_run *r)
{
	struct build_plan *plan = &r->plan;
	int rc;
	if (!plan->noarch) {
		char *reg = xasprintf("%s/torch-ext/registration.h", plan->src);
		int w = write_text(reg, registration_header, strlen(registration_header));
		free(reg);
		if (w < 0)
			return BUILD_INTERNAL;
		rc = compile_variant(plan);
		build_cache_read_stats(&plan->cache);
		if (rc != BUILD_OK)
			return rc;
	}
	r->t_compiled = monotonic_usec();
	if (over_disk(r->scratch, r->o->disk))
		return BUILD_TIMED_OUT;
	/* From here on the worker reads the source and writes the variant
	 * directory: build code only reads them, and what it left there that
	 * is no file (a link to a secret of the machine) is removed. */
	sandbox_bind(&r->sb, plan->stage, 0);
	sandbox_bind(&r->sb, plan->src, 0);
	if (sandbox_take_back(&r->sb, plan->stage) < 0 || sandbox_take_back(&r->sb, plan->src) < 0) {
		log_error("khub-worker build: cannot take the source and %s back from the build", plan->stage);
		return BUILD_INTERNAL;
	}
	if (package_python(plan) < 0) {
		log_error("khub-worker build: cannot copy torch-ext/%s", plan->module);
		return BUILD_INTERNAL;
	}
	return BUILD_OK;
}

/* metadata.json, judged by the server's own rules. No time of the build
 * itself: the same source gives the same bytes (the server records when a
 * build ran). */
static int step_metadata(struct build_run *r)
{
	const struct build_options *o = r->o;
	const struct toolchain *tc = r->tc;
	char time_text[32];
	format_iso8601((time_t)o->epoch, time_text);
	json_t *khub_fields = json_pack(
		"{s:s?,s:s?,s:s?,s:s?,s:s,s:{s:s,s:s?,s:s?,s:s?,s:s?,s:s?,s:s?,s:s?,s:b,s:s?,s:b},s:s}",
		"build-id", o->build_id, "repo", o->repo, "commit", o->commit, "worker", o->worker, "source-date",
		time_text, "toolchain", "name", tc->name, "python", tc->python_version, "torch", tc->torch_version,
		"cuda", tc->cuda_version, "rocm", tc->rocm_version, "cxx", tc->cxx_version, "nvcc", tc->nvcc_version,
		"hipcc", tc->hipcc_version, "cxx11-abi", tc->cxx11_abi, "torch-build", tc->torch_build,
		"rocm-from-hipcc", r->foreign, "sandbox", sandbox_mode_name(r->sb.mode));
	int rc = package_metadata(&r->plan, o->commit, khub_fields) < 0 || check_metadata(&r->plan) < 0 ?
		 BUILD_INTERNAL : BUILD_OK;
	json_decref(khub_fields);
	return rc;
}

/* Checks: the ABI (reported, not fatal: the server's abi_policy decides),
 * the GPU code objects, then the import (fatal); the digest last. */
static int step_check(struct build_run *r)
{
	struct build_plan *plan = &r->plan;
	if (abi_check_dir_target(plan->stage, plan->stable_abi[0] ? plan->stable_abi : NULL,
				 abi_manylinux_find(r->o->manylinux), &r->report) < 0) {
		log_error("khub-worker build: ABI check could not read the libraries");
		return BUILD_INTERNAL;
	}
	fprintf(stderr, "%s", json_string_value(json_object_get(r->report, "text")));	/* the report, as is */
	if (!plan->noarch && plan->cb->offload_report) {
		int found = report_hip_archs(plan, r->report, &r->offload);
		if (found < 0)
			return found == KHUB_EINVAL ? BUILD_FAILED : BUILD_INTERNAL;
	}
	int rc = smoke_import(plan, &r->sb, r->scratch, r->foreign);
	if (rc != BUILD_OK)
		return rc;
	r->t_checked = monotonic_usec();
	report_add_build(r->report, plan, r->offload);
	json_object_set_new(json_object_get(r->report, "build"), "cache", build_cache_json(&plan->cache));
	package_remove_bytecode(plan->stage);
	return package_digest(plan->stage) < 0 ? BUILD_INTERNAL : BUILD_OK;
}

/* The violations the ABI report lists. */
static size_t report_violations(json_t *report)
{
	size_t n = 0, i;
	json_t *f;
	json_array_foreach(json_object_get(report, "files"), i, f)
		n += json_array_size(json_object_get(f, "violations"));
	return n;
}

/* README.md and abi-report.json in the scratch, then everything into OUT. */
static int step_install(struct build_run *r)
{
	const char *out_dir = r->o->out_dir;
	char *readme = xasprintf("%s/README.md", r->scratch), *report_path = xasprintf("%s/abi-report.json", r->scratch);
	char *dest = xasprintf("%s/%s", out_dir, r->o->variant), *dest_report = xasprintf("%s/abi-report.json", out_dir);
	char *dest_readme = xasprintf("%s/README.md", out_dir), *text = NULL;
	int rc = BUILD_INTERNAL, card = package_card(&r->plan, readme, r->o->repo);
	if (card < 0)
		goto cleanup;
	text = json_dumps(r->report, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (!text || write_text(report_path, text, strlen(text)) < 0)
		goto cleanup;
	r->out_created = 1;	/* all or nothing: build_finish empties OUT again on a failure */
	if (mkdir_p(out_dir, 0755) < 0 || copy_tree(r->plan.stage, dest, 2) < 0 ||
	    copy_tree_file(report_path, dest_report) < 0 || (card != 1 && copy_tree_file(readme, dest_readme) < 0)) {
		log_error("khub-worker build: cannot write %s", out_dir);
		goto cleanup;
	}
	size_t nviol = report_violations(r->report);
	uint64_t done = monotonic_usec(), t0 = r->started;
	log_info("khub-worker build: ok: %s/%s in %.1f s (probe %.1f s, build.toml and compile %.1f s, "
		 "ABI check and smoke import %.1f s, packaging %.1f s; ABI: %zu violation%s)", out_dir, r->o->variant,
		 (double)(done - t0) / 1e6, (double)(r->t_probed - t0) / 1e6, (double)(r->t_compiled - r->t_probed) / 1e6,
		 (double)(r->t_checked - r->t_compiled) / 1e6, (double)(done - r->t_checked) / 1e6, nviol,
		 nviol == 1 ? "" : "s");
	rc = BUILD_OK;
cleanup:
	free(readme);
	free(report_path);
	free(dest);
	free(dest_report);
	free(dest_readme);
	free(text);
	return rc;
}

/* Say why a build stopped; on a failure leave OUT as it was (empty). */
static int build_outcome_logged(struct build_run *r, int rc)
{
	if (rc != BUILD_OK && sandbox_interrupted) {
		log_error("khub-worker build: stopped by a signal");
		rc = BUILD_INTERNAL;
	} else if (rc == BUILD_TIMED_OUT && r->sb.deadline_usec && monotonic_usec() >= r->sb.deadline_usec) {
		/* whichever step was running when the clock ran out */
		log_error("khub-worker build: stopped: the build ran out of time (wall-clock limit of %ld s)", r->o->wall);
	} else if (rc == BUILD_TIMED_OUT) {
		log_error("khub-worker build: stopped: a limit was hit (see above)");
	}
	if (rc != BUILD_OK && r->out_created) {
		const char *names[] = { r->o->variant, "abi-report.json", "README.md" };
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			char *path = xasprintf("%s/%s", r->o->out_dir, names[i]);
			tree_remove(path);
			free(path);
		}
	}
	return rc;
}

/* Everything a build held, the scratch directory included. */
static void build_run_release(struct build_run *r)
{
	build_cache_bound(&r->plan.cache);
	build_cache_release(&r->plan.cache);
	if (r->scratch)
		tree_remove(r->scratch);
	free(r->scratch);
	free(r->script);
	json_decref(r->report);
	json_decref(r->offload);
	json_decref(r->plan.config);
	free(r->plan.module);
	free(r->plan.ops_name);
	strvec_release(&r->plan.namespace_units);
	strvec_release(&r->plan.runtime_units);
	free(r->plan.src);
	free(r->plan.obj);
	free(r->plan.stage);
	strvec_release(&r->plan.archs);
	strvec_release(&r->plan.archs_left_out);
	strvec_release(&r->plan.hipified);
	strvec_release(&r->plan.hipified_headers);
	json_decref(r->plan.capabilities_left_out);
	sandbox_release(&r->sb);
	toolchains_release(&r->set);
}

/* The build, step after step until one fails. */
static int (*const build_steps[])(struct build_run *r) = {
	step_plan, step_scratch, step_source, step_read_config, step_check_source,
	step_compile, step_metadata, step_check, step_install,
};

int build_main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "--exec-measured") && !strcmp(argv[3], "--")) {
		measuring_launcher = 1;
		return sandbox_exec_measured(strtol(argv[2], NULL, 10), argv + 4);
	}
	struct build_options o;
	int rc = build_options_parse(argc, argv, &o);
	if (rc != BUILD_OK) {
		strvec_release(&o.hide);
		return rc == 1 ? BUILD_OK : rc;
	}
	struct build_run r;
	memset(&r, 0, sizeof(r));
	r.o = &o;
	r.started = monotonic_usec();
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	for (size_t i = 0; rc == BUILD_OK && i < sizeof(build_steps) / sizeof(build_steps[0]); i++)
		rc = build_steps[i](&r);
	rc = build_outcome_logged(&r, rc);
	build_run_release(&r);
	strvec_release(&o.hide);
	return rc;
}
