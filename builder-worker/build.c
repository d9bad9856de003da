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
#include <getopt.h>
#include <limits.h>
#include <signal.h>
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

static void usage(void)
{
	fprintf(stderr,
		"usage: khub-worker build --toolchains FILE --toolchain NAME --source DIR --out DIR --variant V\n"
		"         [--build-id ID] [--repo NS/NAME] [--commit SHA40] [--worker NAME]\n"
		"         [--wall-seconds N] [--cpu-seconds N] [--memory-mb N] [--disk-mb N]\n"
		"         [--work-dir DIR] [--hide PATH]... [--sandbox auto|bwrap] [--jobs N]\n"
		"         [--build-user UID[:GID]] [--max-processes N]\n"
		"         [--source-date-epoch SECONDS]  (the commit's time; else $SOURCE_DATE_EPOCH, else 0)\n"
		"exit: 0 ok, 1 build failed, 2 bad source, 3 limit hit, 4 worker failure, 5 bad job (wrong variant\n"
		"      for this kernel), 64 usage\n");
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
	int rc = toolchain_sandbox_dirs(tc, &dirs, why, sizeof(why));
	if (rc == 0)
		rc = sandbox_init(sb, scratch, &o, &dirs, why, sizeof(why));
	strvec_release(&dirs);
	if (rc < 0)
		fprintf(stderr, "khub-worker build: refusing to build: %s\n", why);
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
		fprintf(stderr, "khub-worker build: metadata.json: warning: %s\n", c.warnings.items[i]);
	int rc = 0;
	if (!c.name_valid || c.metadata_status != VARIANT_METADATA_OK) {
		fprintf(stderr, "khub-worker build: metadata.json would be refused: %s\n",
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
	fprintf(stderr, "khub-worker build: the build uses %.1f MiB of disk, over the limit of %ld MiB\n",
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
	fprintf(stderr, "khub-worker build: sandbox %s\n", isolation);
	if (whole < 0) {
		fprintf(stderr, "khub-worker build: refusing to build: the sandbox is less than it must be\n");
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
		fprintf(stderr, "build.toml: tvm-ffi: tvm-ffi kernels are not built by this worker (no toolchain has the "
			"tvm-ffi package and headers; see docs/worker-build.md): the job asked for %s\n", plan->variant);
		return BUILD_BAD_JOB;
	}
	if (plan->noarch && has_compiled_sources(plan->config, &where)) {
		fprintf(stderr, "build.toml: %s%s: the kernel has compiled sources, so it has no noarch variant: %s would "
			"package the Python only, load, and fail on its first op. Build its arch variants "
			"(torch<MM>-cxx11-%s-..., or torch-stable-abi<MM>-... with [torch] stable-abi) instead\n",
			where ? "kernel." : "torch.src", where ? where : "", plan->variant, plan->backend);
		return BUILD_BAD_JOB;
	}
	if (plan->noarch)
		return BUILD_OK;
	const char *target = stable_abi_target(plan->config, plan->backend);
	char want[32];
	if (v->framework == VARIANT_TORCH && target) {
		fprintf(stderr, "build.toml: torch.stable-abi: the kernel is built against the torch stable ABI %s for %s: "
			"its variant is torch-stable-abi%s-..., not %s\n", target, plan->backend,
			stable_abi_digits(target, want, sizeof(want)), plan->variant);
		return BUILD_BAD_JOB;
	}
	if (v->framework != VARIANT_TORCH_STABLE_ABI)
		return BUILD_OK;
	if (!target) {
		fprintf(stderr, "build.toml: torch.stable-abi: not set for %s, so %s (a stable ABI variant) is not built; "
			"the kernel's variant is torch<MM>-cxx11-...\n", plan->backend, plan->variant);
		return BUILD_BAD_JOB;
	}
	snprintf(want, sizeof(want), "%ld%ld", v->framework_major, v->framework_minor);
	char have[32];
	if (strcmp(stable_abi_digits(target, have, sizeof(have)), want) != 0) {
		fprintf(stderr, "build.toml: torch.stable-abi: the kernel targets the stable ABI %s (torch-stable-abi%s-...), "
			"not %s\n", target, have, plan->variant);
		return BUILD_BAD_JOB;
	}
	if (plan->torch_major < v->framework_major ||
	    (plan->torch_major == v->framework_major && plan->torch_minor < v->framework_minor)) {
		fprintf(stderr, "build.toml: torch.stable-abi: torch %ld.%ld is older than the stable ABI target %s\n",
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
			fprintf(stderr, "build.toml: torch.%s: %s is %s this toolchain's torch %ld.%ld\n", i ? "maxver" : "minver",
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
		fprintf(stderr, "khub-worker build: cannot hand %s to the smoke import\n", plan->stage);
		return BUILD_INTERNAL;
	}
	char *args[] = { plan->tc->python, "-c", (char *)embedded_smoke_check_py, plan->stage, plan->ops_name,
			 plan->module, plan->noarch ? "noarch" : "arch", foreign ? "direct" : "loader", NULL };
	int r = sandbox_run(sb, args, scratch, 2);
	if (limit_hit(r))
		return BUILD_TIMED_OUT;
	if (r != 0) {
		fprintf(stderr, "khub-worker build: the smoke import failed (status %d): nothing is published\n", r);
		return BUILD_FAILED;
	}
	return BUILD_OK;
}

int build_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "toolchains", required_argument, NULL, 'T' }, { "toolchain", required_argument, NULL, 't' },
		{ "source", required_argument, NULL, 's' }, { "out", required_argument, NULL, 'o' },
		{ "variant", required_argument, NULL, 'v' }, { "build-id", required_argument, NULL, 'b' },
		{ "repo", required_argument, NULL, 'r' }, { "commit", required_argument, NULL, 'c' },
		{ "worker", required_argument, NULL, 'w' }, { "wall-seconds", required_argument, NULL, 'W' },
		{ "cpu-seconds", required_argument, NULL, 'C' }, { "memory-mb", required_argument, NULL, 'M' },
		{ "disk-mb", required_argument, NULL, 'D' }, { "work-dir", required_argument, NULL, 'd' },
		{ "hide", required_argument, NULL, 'h' }, { "sandbox", required_argument, NULL, 'S' },
		{ "jobs", required_argument, NULL, 'j' }, { "build-user", required_argument, NULL, 'U' },
		{ "max-processes", required_argument, NULL, 'P' }, { "source-date-epoch", required_argument, NULL, 'E' },
		{ "help", no_argument, NULL, '?' }, { NULL, 0, NULL, 0 },
	};
	if (argc >= 5 && !strcmp(argv[1], "--exec-measured") && !strcmp(argv[3], "--")) {
		measuring_launcher = 1;
		return sandbox_exec_measured(strtol(argv[2], NULL, 10), argv + 4);
	}
	const char *toolchains_path = NULL, *toolchain_name = NULL, *source = NULL, *out_dir = NULL, *variant = NULL;
	const char *build_id = NULL, *repo = NULL, *commit = NULL, *worker = NULL, *work_dir = NULL;
	struct sandbox_options sopts = { .build_uid = SANDBOX_BUILD_UID_DEFAULT, .build_gid = SANDBOX_BUILD_UID_DEFAULT,
					 .max_processes = SANDBOX_MAX_PROCESSES_DEFAULT };
	long wall = 0, cpu = 0, memory = 0, disk = 0, jobs = usable_cpus(NULL, 0), epoch = -1;
	struct strvec hide = STRVEC_INIT;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'T': toolchains_path = optarg; break;
		case 't': toolchain_name = optarg; break;
		case 's': source = optarg; break;
		case 'o': out_dir = optarg; break;
		case 'v': variant = optarg; break;
		case 'b': build_id = optarg; break;
		case 'r': repo = optarg; break;
		case 'c': commit = optarg; break;
		case 'w': worker = optarg; break;
		case 'd': work_dir = optarg; break;
		case 'h': strvec_pushf(&hide, "%s", optarg); break;
		case 'S':
			if (!strcmp(optarg, "unshare")) {
				fprintf(stderr, "khub-worker build: --sandbox unshare is refused: it cannot hide the machine's "
					"files nor drop root; bubblewrap is the only sandbox (--sandbox bwrap)\n");
				goto usage_error;
			}
			if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "bwrap") != 0)
				goto usage_error;
			sopts.bwrap_only = !strcmp(optarg, "bwrap");
			break;
		case 'U':
			if (worker_parse_build_user(optarg, &sopts.build_uid, &sopts.build_gid) < 0)
				goto usage_error;
			break;
		case 'P':
			if (worker_parse_number(optarg, "--max-processes", 0, 1 << 22, &sopts.max_processes) < 0)
				goto usage_error;
			break;
		case 'W': if (worker_parse_number(optarg, "--wall-seconds", 0, LONG_MAX, &wall) < 0) goto usage_error; break;
		case 'C': if (worker_parse_number(optarg, "--cpu-seconds", 0, LONG_MAX, &cpu) < 0) goto usage_error; break;
		case 'M': if (worker_parse_number(optarg, "--memory-mb", 0, LONG_MAX, &memory) < 0) goto usage_error; break;
		case 'D': if (worker_parse_number(optarg, "--disk-mb", 0, LONG_MAX, &disk) < 0) goto usage_error; break;
		case 'j': if (worker_parse_number(optarg, "--jobs", 1, 1024, &jobs) < 0) goto usage_error; break;
		case 'E': if (worker_parse_number(optarg, "--source-date-epoch", 0, LONG_MAX, &epoch) < 0) goto usage_error; break;
		default: goto usage_error;
		}
	}
	if (optind != argc || !toolchains_path || !toolchain_name || !source || !out_dir || !variant)
		goto usage_error;
	if (commit && !is_lower_hex(commit, 40)) {
		fprintf(stderr, "khub-worker build: --commit: want 40 lowercase hex characters\n");
		goto usage_error;
	}
	if (epoch < 0 && source_date_epoch_from_env(&epoch) < 0)
		goto usage_error;
	if (!is_dir_empty_or_missing(out_dir)) {
		fprintf(stderr, "khub-worker build: --out %s: must be missing or an empty directory\n", out_dir);
		goto usage_error;
	}

	int rc = BUILD_INTERNAL;
	uint64_t started = monotonic_usec();
	struct toolchain_set set = { NULL, 0 };
	struct sandbox sb;
	memset(&sb, 0, sizeof(sb));
	struct build_plan plan;
	memset(&plan, 0, sizeof(plan));
	char *scratch = NULL, *build_json = NULL, *script = NULL, *text = NULL, *report_path = NULL, *readme = NULL;
	json_t *report = NULL, *khub_fields = NULL, *offload = NULL;
	int out_created = 0;
	char why[512];
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	if (toolchains_load(toolchains_path, &set, why, sizeof(why)) < 0) {
		fprintf(stderr, "khub-worker build: %s\n", why);
		rc = BUILD_USAGE;
		goto cleanup;
	}
	struct toolchain *tc = NULL;
	for (size_t i = 0; i < set.count; i++)
		if (!strcmp(set.items[i].name, toolchain_name))
			tc = &set.items[i];
	if (!tc) {
		fprintf(stderr, "khub-worker build: no toolchain named %s in %s\n", toolchain_name, toolchains_path);
		rc = BUILD_USAGE;
		goto cleanup;
	}
	toolchain_probe(tc);
	uint64_t t_probed = monotonic_usec(), t_compiled = 0, t_checked = 0;
	const char *parse_why = NULL;
	if (variant_name_parse(variant, &plan.parsed, &parse_why) < 0) {
		fprintf(stderr, "khub-worker build: variant %s: %s\n", variant, parse_why);
		rc = BUILD_USAGE;
		goto cleanup;
	}
	if (plan.parsed.framework == VARIANT_TVM_FFI) {
		fprintf(stderr, "khub-worker build: %s: tvm-ffi variants are not built by this worker (no toolchain has the "
			"tvm-ffi package and headers; see docs/worker-build.md)\n", variant);
		rc = BUILD_BAD_JOB;
		goto cleanup;
	}
	int can = 0;
	for (size_t i = 0; tc->usable && i < tc->nvariants; i++)
		can |= !strcmp(tc->variants[i], variant);
	if (!can) {
		fprintf(stderr, "khub-worker build: toolchain %s cannot build %s%s%s\n", tc->name, variant,
			tc->why[0] ? ": " : "", tc->why);
		if (tc->usable && plan.parsed.framework == VARIANT_TORCH_STABLE_ABI)
			fprintf(stderr, "khub-worker build: a torch-stable-abi<MM> variant is built against torch %s's headers "
				"with TORCH_TARGET_VERSION; this toolchain's torch %s builds the stable ABI 2.9 up to its own "
				"version only\n", "MM or newer", tc->torch_version);
		rc = BUILD_USAGE;
		goto cleanup;
	}
	plan.tc = tc;
	if (sscanf(tc->torch_version, "%ld.%ld", &plan.torch_major, &plan.torch_minor) != 2)
		plan.torch_major = plan.torch_minor = -1;	/* a usable toolchain has one */
	plan.variant = variant;
	plan.backend = plan.parsed.backend;
	plan.cb = compile_backend_find(plan.backend);	/* a toolchain lists variants of these only */
	plan.noarch = plan.parsed.framework == VARIANT_TORCH_NOARCH;

	/* Scratch: src/ (the copy), obj/, stage/<variant>/, home/. */
	const char *base = work_dir ? work_dir : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	if (mkdir_p(base, 0755) < 0) {
		fprintf(stderr, "khub-worker build: %s: %s\n", base, strerror(errno));
		goto cleanup;
	}
	scratch = xasprintf("%s/khub-build-XXXXXX", base);
	if (!mkdtemp(scratch)) {
		fprintf(stderr, "khub-worker build: mkdtemp %s: %s\n", scratch, strerror(errno));
		free(scratch);
		scratch = NULL;
		goto cleanup;
	}
	{
		char real[4096];
		if (realpath(scratch, real)) {
			free(scratch);
			scratch = xstrdup(real);
		}
	}
	plan.scratch = scratch;
	plan.src = xasprintf("%s/src", scratch);
	plan.obj = xasprintf("%s/obj", scratch);
	plan.stage = xasprintf("%s/stage/%s", scratch, variant);
	char *home = xasprintf("%s/home", scratch);
	int mk = mkdir_p(plan.obj, 0700) | mkdir_p(plan.stage, 0700) | mkdir_p(home, 0700);
	if (mk < 0) {
		free(home);
		fprintf(stderr, "khub-worker build: cannot make the scratch directories under %s\n", scratch);
		goto cleanup;
	}
	if (sandbox_setup(&sb, tc, &sopts, scratch) < 0) {
		free(home);
		goto cleanup;
	}
	toolchain_environment(tc, home, &sb.env);
	strvec_pushf(&sb.env, "PYTHONDONTWRITEBYTECODE=1");
	strvec_pushf(&sb.env, "SOURCE_DATE_EPOCH=%ld", epoch);	/* __DATE__, __TIME__ and tools that honour it */
	free(home);
	for (size_t i = 0; i < hide.count; i++)
		strvec_pushf(&sb.hide, "%s", hide.items[i]);
	sb.cpu_seconds = cpu;
	sb.memory_mb = memory;
	sb.disk_mb = disk;
	sb.deadline_usec = wall > 0 ? started + (uint64_t)wall * 1000000 : 0;
	script = xasprintf("%s/build_toml.py", scratch);
	plan.sb = &sb;
	plan.jobs = jobs > 64 ? 64 : jobs < 1 ? 1 : (int)jobs;
	fprintf(stderr, "khub-worker build: %s with toolchain %s (torch %s%s%s, python %s), sandbox %s\n", variant, tc->name,
		tc->torch_version ? tc->torch_version : "?", tc->cuda_version ? ", CUDA " : tc->rocm_version ? ", ROCm " : "",
		tc->cuda_version ? tc->cuda_version : tc->rocm_version ? tc->rocm_version : "",
		tc->python_version ? tc->python_version : "?", sandbox_mode_name(sb.mode));
	int foreign = tc->rocm_from_hipcc && plan.cb->from_hipcc;
	if (foreign)
		fprintf(stderr, "khub-worker build: ROCm %s from hipcc (%s) against torch %s, a %s build, not a ROCm "
			"torch build (rocm_from_hipcc): built and ABI-checked here, never run on an AMD GPU\n",
			tc->rocm_version, tc->hipcc_version ? tc->hipcc_version : "?", tc->torch_version, tc->torch_build);
	if (sb.mode == SANDBOX_NONE)
		fprintf(stderr, "khub-worker build: WARNING: NO SANDBOX (the toolchain sets allow_no_sandbox): build code "
			"runs with the network, sees the whole machine and everything uid %ld may read\n", (long)sb.uid);

	if (copy_tree(source, plan.src, 2) < 0) {
		fprintf(stderr, "khub-worker build: cannot copy the source %s\n", source);
		rc = BUILD_BAD_SOURCE;
		goto cleanup;
	}
	rc = BUILD_TIMED_OUT;	/* for over_disk below */
	if (over_disk(scratch, disk))
		goto cleanup;
	rc = BUILD_INTERNAL;
	if (write_text(script, embedded_build_toml_py, embedded_build_toml_py_len) < 0 ||
	    scratch_prepare(&sb, &plan, scratch, script) < 0) {
		fprintf(stderr, "khub-worker build: cannot prepare the scratch directory %s\n", scratch);
		goto cleanup;
	}
	if ((rc = sandbox_check(&sb)) != BUILD_OK)
		goto cleanup;
	rc = BUILD_INTERNAL;

	/* build.toml, read by the toolchain's Python in the sandbox. */
	build_json = xasprintf("%s/build.json", scratch);
	{
		int fd = open(build_json, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			goto cleanup;
		char *toml = xasprintf("%s/build.toml", plan.src);
		char *args[] = { tc->python, "-I", script, toml, NULL };
		int r = sandbox_run(&sb, args, plan.src, fd);
		free(toml);
		close(fd);
		if (limit_hit(r)) {
			rc = BUILD_TIMED_OUT;
			goto cleanup;
		}
		if (r == 2) {
			rc = BUILD_BAD_SOURCE;
			goto cleanup;
		}
		if (r != 0) {
			fprintf(stderr, "khub-worker build: reading build.toml failed (status %d)\n", r);
			goto cleanup;
		}
	}
	rc = BUILD_INTERNAL;
	json_error_t jerr;
	plan.config = json_load_file(build_json, 0, &jerr);
	if (!json_is_object(plan.config)) {
		fprintf(stderr, "khub-worker build: build.toml reader printed no JSON: %s\n", jerr.text);
		goto cleanup;
	}
	json_t *general = json_object_get(plan.config, "general");
	plan.module = xstrdup(json_string_value(json_object_get(general, "name")));
	for (char *p = plan.module; *p; p++)
		if (*p == '-')
			*p = '_';

	/* What the source must look like for this variant. */
	if ((rc = check_variant_fits(&plan)) != BUILD_OK)
		goto cleanup;
	rc = BUILD_BAD_SOURCE;
	int has_backend = 0;
	size_t bi;
	json_t *bv;
	json_array_foreach(json_object_get(general, "backends"), bi, bv)
		has_backend |= !strcmp(json_string_value(bv), plan.backend);
	if (!has_backend) {
		fprintf(stderr, "build.toml: general.backends: does not list %s, which variant %s is for\n", plan.backend, variant);
		goto cleanup;
	}
	if (!plan.noarch && !json_object_get(plan.config, "torch")) {
		fprintf(stderr, "build.toml: torch: missing; a [torch-noarch] kernel builds only torch-<backend> variants\n");
		goto cleanup;
	}
	{
		char *init = xasprintf("%s/torch-ext/%s/__init__.py", plan.src, plan.module);
		char *nested = xasprintf("%s/torch-ext/%s/%s", plan.src, plan.module, plan.module);
		struct stat st;
		int bad_init = stat(init, &st) < 0, bad_nested = stat(nested, &st) == 0;
		if (bad_init)
			fprintf(stderr, "source layout: torch-ext/%s/__init__.py is missing\n", plan.module);
		if (bad_nested)
			fprintf(stderr, "source layout: torch-ext/%s/%s must not exist\n", plan.module, plan.module);
		free(init);
		free(nested);
		if (bad_init || bad_nested)
			goto cleanup;
	}
	if (!plan.noarch && (rc = check_torch_bounds(&plan)) != BUILD_OK)
		goto cleanup;

	/* Op namespace: _<module>_<backend>_<7 hex of the commit, else of the tree>. */
	char uid[8];
	if (commit) {
		memcpy(uid, commit, 7);
		uid[7] = 0;
	} else {
		tree_uid(plan.src, uid);
	}
	plan.ops_name = xasprintf("_%s_%s_%s", plan.module, plan.backend, uid);
	fprintf(stderr, "khub-worker build: kernel %s%s%s%s%s, op namespace %s\n",
		json_string_value(json_object_get(general, "name")), plan.noarch ? " (noarch: packaged, not compiled)" : "",
		plan.stable_abi[0] ? " (against the torch stable ABI " : "", plan.stable_abi[0] ? plan.stable_abi : "",
		plan.stable_abi[0] ? ")" : "", plan.ops_name);

	if (!plan.noarch) {
		char *reg = xasprintf("%s/torch-ext/registration.h", plan.src);
		int w = write_text(reg, registration_header, strlen(registration_header));
		free(reg);
		if (w < 0) {
			rc = BUILD_INTERNAL;
			goto cleanup;
		}
		if ((rc = compile_variant(&plan)) != BUILD_OK)
			goto cleanup;
	}
	t_compiled = monotonic_usec();
	if (over_disk(scratch, disk)) {
		rc = BUILD_TIMED_OUT;
		goto cleanup;
	}
	rc = BUILD_INTERNAL;
	/* From here on the worker reads the source and writes the variant
	 * directory: build code only reads them, and what it left there that
	 * is no file (a link to a secret of the machine) is removed. */
	sandbox_bind(&sb, plan.stage, 0);
	sandbox_bind(&sb, plan.src, 0);
	if (sandbox_take_back(&sb, plan.stage) < 0 || sandbox_take_back(&sb, plan.src) < 0) {
		fprintf(stderr, "khub-worker build: cannot take the source and %s back from the build\n", plan.stage);
		goto cleanup;
	}
	if (package_python(&plan) < 0) {
		fprintf(stderr, "khub-worker build: cannot copy torch-ext/%s\n", plan.module);
		goto cleanup;
	}
	/* no time of the build itself: the same source gives the same bytes
	 * (the server records when a build ran) */
	char time_text[32];
	format_iso8601((time_t)epoch, time_text);
	khub_fields = json_pack("{s:s?,s:s?,s:s?,s:s?,s:s,s:{s:s,s:s?,s:s?,s:s?,s:s?,s:s?,s:s?,s:s?,s:b,s:s?,s:b},s:s}",
				"build-id", build_id, "repo", repo, "commit", commit, "worker", worker,
				"source-date", time_text, "toolchain", "name", tc->name, "python", tc->python_version,
				"torch", tc->torch_version, "cuda", tc->cuda_version, "rocm", tc->rocm_version,
				"cxx", tc->cxx_version, "nvcc", tc->nvcc_version, "hipcc", tc->hipcc_version,
				"cxx11-abi", tc->cxx11_abi, "torch-build", tc->torch_build, "rocm-from-hipcc", foreign,
				"sandbox", sandbox_mode_name(sb.mode));
	if (package_metadata(&plan, commit, khub_fields) < 0)
		goto cleanup;
	if (check_metadata(&plan) < 0)
		goto cleanup;

	/* Checks: the ABI (reported, not fatal: the server's abi_policy
	 * decides), then the import (fatal). */
	if (abi_check_dir_for(plan.stage, plan.stable_abi[0] ? plan.stable_abi : NULL, &report) < 0) {
		fprintf(stderr, "khub-worker build: ABI check could not read the libraries\n");
		goto cleanup;
	}
	fprintf(stderr, "%s", json_string_value(json_object_get(report, "text")));
	if (!plan.noarch && plan.cb->offload_report) {
		int r = report_hip_archs(&plan, report, &offload);
		if (r < 0) {
			rc = r == KHUB_EINVAL ? BUILD_FAILED : BUILD_INTERNAL;
			goto cleanup;
		}
	}
	if ((rc = smoke_import(&plan, &sb, scratch, foreign)) != BUILD_OK)
		goto cleanup;
	rc = BUILD_INTERNAL;
	t_checked = monotonic_usec();
	report_add_build(report, &plan, offload);
	package_remove_bytecode(plan.stage);
	if (package_digest(plan.stage) < 0)
		goto cleanup;
	readme = xasprintf("%s/README.md", scratch);
	int card = package_card(&plan, readme, repo);
	if (card < 0)
		goto cleanup;
	report_path = xasprintf("%s/abi-report.json", scratch);
	text = json_dumps(report, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (!text || write_text(report_path, text, strlen(text)) < 0)
		goto cleanup;

	/* Into OUT, all or nothing. */
	char *dest = xasprintf("%s/%s", out_dir, variant);
	char *dest_report = xasprintf("%s/abi-report.json", out_dir);
	char *dest_readme = xasprintf("%s/README.md", out_dir);
	out_created = 1;
	int moved = mkdir_p(out_dir, 0755) == 0 && copy_tree(plan.stage, dest, 2) == 0 &&
		    copy_tree_file(report_path, dest_report) == 0 && (card == 1 || copy_tree_file(readme, dest_readme) == 0);
	free(dest);
	free(dest_report);
	free(dest_readme);
	if (!moved) {
		fprintf(stderr, "khub-worker build: cannot write %s\n", out_dir);
		goto cleanup;
	}
	size_t nviol = 0;
	size_t fi;
	json_t *fv;
	json_array_foreach(json_object_get(report, "files"), fi, fv)
		nviol += json_array_size(json_object_get(fv, "violations"));
	uint64_t t_done = monotonic_usec();
	fprintf(stderr, "khub-worker build: ok: %s/%s in %.1f s (probe %.1f s, build.toml and compile %.1f s, "
		"ABI check and smoke import %.1f s, packaging %.1f s; ABI: %zu violation%s)\n", out_dir, variant,
		(double)(t_done - started) / 1e6, (double)(t_probed - started) / 1e6, (double)(t_compiled - t_probed) / 1e6,
		(double)(t_checked - t_compiled) / 1e6, (double)(t_done - t_checked) / 1e6, nviol, nviol == 1 ? "" : "s");
	rc = BUILD_OK;
cleanup:
	if (rc != BUILD_OK && sandbox_interrupted) {
		fprintf(stderr, "khub-worker build: stopped by a signal\n");
		rc = BUILD_INTERNAL;
	} else if (rc == BUILD_TIMED_OUT && sb.deadline_usec && monotonic_usec() >= sb.deadline_usec) {
		/* whichever step was running when the clock ran out */
		fprintf(stderr, "khub-worker build: stopped: the build ran out of time (wall-clock limit of %ld s)\n", wall);
	} else if (rc == BUILD_TIMED_OUT) {
		fprintf(stderr, "khub-worker build: stopped: a limit was hit (see above)\n");
	}
	if (rc != BUILD_OK && out_created) {
		/* Leave OUT as it was: empty. */
		char *v = xasprintf("%s/%s", out_dir, variant);
		char *r = xasprintf("%s/abi-report.json", out_dir);
		char *m = xasprintf("%s/README.md", out_dir);
		tree_remove(v);
		unlink(r);
		unlink(m);
		free(v);
		free(r);
		free(m);
	}
	if (scratch)
		tree_remove(scratch);
	free(scratch);
	free(build_json);
	free(script);
	free(text);
	free(report_path);
	free(readme);
	json_decref(report);
	json_decref(khub_fields);
	json_decref(offload);
	json_decref(plan.config);
	free(plan.module);
	free(plan.ops_name);
	free(plan.src);
	free(plan.obj);
	free(plan.stage);
	strvec_release(&plan.archs);
	strvec_release(&plan.archs_left_out);
	sandbox_release(&sb);
	toolchains_release(&set);
	strvec_release(&hide);
	return rc;
usage_error:
	usage();
	strvec_release(&hide);
	return BUILD_USAGE;
}
