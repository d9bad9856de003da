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

/* Imports <stage>/__init__.py under the metadata id, as the kernels loader
 * does, then checks that the arch build registered ops in its namespace.
 * argv: stage, id, module, "arch"|"noarch", "loader"|"direct" (direct: the
 * import logic even when kernels is there; a rocm_from_hipcc variant is not
 * the one kernels would pick for the torch running it). */
static const char smoke_script[] =
	"import importlib.util, os, sys\n"
	"stage, kid, module, kind, how = sys.argv[1:6]\n"
	"import torch\n"
	"try:\n"
	"    import kernels\n"
	"except Exception:\n"
	"    kernels = None\n"
	"mod = None\n"
	"if how == 'loader' and kernels is not None and hasattr(kernels, 'get_local_kernel'):\n"
	"    from pathlib import Path\n"
	"    try:\n"
	"        mod = kernels.get_local_kernel(Path(os.path.dirname(stage)))\n"
	"    except TypeError:  # older kernels also wanted the package name\n"
	"        mod = kernels.get_local_kernel(Path(os.path.dirname(stage)), module)\n"
	"    print('smoke import: kernels.get_local_kernel loaded', getattr(mod, '__name__', mod))\n"
	"else:\n"
	"    spec = importlib.util.spec_from_file_location(kid, os.path.join(stage, '__init__.py'))\n"
	"    mod = importlib.util.module_from_spec(spec)\n"
	"    sys.modules[kid] = mod\n"
	"    spec.loader.exec_module(mod)\n"
	"    print('smoke import: loaded', kid, 'from', stage, '(the loader\\'s import logic)')\n"
	"if kind == 'arch':\n"
	"    ops = [s.name for s in torch._C._jit_get_all_schemas() if s.name.startswith(kid + '::')]\n"
	"    if not ops:\n"
	"        sys.exit('smoke import: no op registered in namespace ' + kid)\n"
	"    print('smoke import: ops', ', '.join(sorted(ops)))\n";

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
		"         [--work-dir DIR] [--hide PATH]... [--sandbox auto|bwrap|unshare] [--jobs N]\n"
		"         [--source-date-epoch SECONDS]  (the commit's time; else $SOURCE_DATE_EPOCH, else 0)\n"
		"exit: 0 ok, 1 build failed, 2 bad source, 3 limit hit, 4 worker failure, 64 usage\n");
}

static int write_text(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return KHUB_EIO;
	int ok = fwrite(data, 1, len, f) == len;
	return fclose(f) == 0 && ok ? 0 : KHUB_EIO;
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
		{ "jobs", required_argument, NULL, 'j' }, { "source-date-epoch", required_argument, NULL, 'E' },
		{ "help", no_argument, NULL, '?' }, { NULL, 0, NULL, 0 },
	};
	if (argc >= 5 && !strcmp(argv[1], "--exec-measured") && !strcmp(argv[3], "--"))
		return sandbox_exec_measured(strtol(argv[2], NULL, 10), argv + 4);
	const char *toolchains_path = NULL, *toolchain_name = NULL, *source = NULL, *out_dir = NULL, *variant = NULL;
	const char *build_id = NULL, *repo = NULL, *commit = NULL, *worker = NULL, *work_dir = NULL, *only = NULL;
	long wall = 0, cpu = 0, memory = 0, disk = 0, jobs = sysconf(_SC_NPROCESSORS_ONLN), epoch = -1;
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
			if (!strcmp(optarg, "auto"))
				only = NULL;
			else if (!strcmp(optarg, "bwrap") || !strcmp(optarg, "unshare"))
				only = optarg;
			else
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
	int can = 0;
	for (size_t i = 0; tc->usable && i < tc->nvariants; i++)
		can |= !strcmp(tc->variants[i], variant);
	if (!can) {
		fprintf(stderr, "khub-worker build: toolchain %s cannot build %s%s%s\n", tc->name, variant,
			tc->why[0] ? ": " : "", tc->why);
		rc = BUILD_USAGE;
		goto cleanup;
	}
	const char *parse_why = NULL;
	if (variant_name_parse(variant, &plan.parsed, &parse_why) < 0 ||
	    (plan.parsed.framework != VARIANT_TORCH && plan.parsed.framework != VARIANT_TORCH_NOARCH)) {
		fprintf(stderr, "khub-worker build: variant %s: %s\n", variant, parse_why ? parse_why : "only torch variants are built");
		rc = BUILD_USAGE;
		goto cleanup;
	}
	plan.tc = tc;
	plan.variant = variant;
	plan.backend = plan.parsed.backend;
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
	int mk = mkdir_p(plan.obj, 0755) | mkdir_p(plan.stage, 0755) | mkdir_p(home, 0755);
	if (mk < 0) {
		free(home);
		fprintf(stderr, "khub-worker build: cannot make the scratch directories under %s\n", scratch);
		goto cleanup;
	}
	if (sandbox_init(&sb, scratch, tc->allow_no_sandbox, only, why, sizeof(why)) < 0) {
		free(home);
		fprintf(stderr, "khub-worker build: refusing to build: %s\n", why);
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
	plan.sb = &sb;
	plan.jobs = jobs > 64 ? 64 : jobs < 1 ? 1 : (int)jobs;
	fprintf(stderr, "khub-worker build: %s with toolchain %s (torch %s%s%s, python %s), sandbox %s\n", variant, tc->name,
		tc->torch_version ? tc->torch_version : "?", tc->cuda_version ? ", CUDA " : tc->rocm_version ? ", ROCm " : "",
		tc->cuda_version ? tc->cuda_version : tc->rocm_version ? tc->rocm_version : "",
		tc->python_version ? tc->python_version : "?", sandbox_mode_name(sb.mode));
	int foreign = tc->rocm_from_hipcc && !strcmp(plan.backend, "rocm");
	if (foreign)
		fprintf(stderr, "khub-worker build: ROCm %s from hipcc (%s) against torch %s, a %s build, not a ROCm "
			"torch build (rocm_from_hipcc): built and ABI-checked here, never run on an AMD GPU\n",
			tc->rocm_version, tc->hipcc_version ? tc->hipcc_version : "?", tc->torch_version, tc->torch_build);
	if (sb.mode == SANDBOX_NONE)
		fprintf(stderr, "khub-worker build: WARNING: no sandbox (allow_no_sandbox): build code has the network\n");

	if (copy_tree(source, plan.src, 2) < 0) {
		fprintf(stderr, "khub-worker build: cannot copy the source %s\n", source);
		rc = BUILD_BAD_SOURCE;
		goto cleanup;
	}
	rc = BUILD_TIMED_OUT;	/* for over_disk below */

	if (over_disk(scratch, disk))
		goto cleanup;
	rc = BUILD_INTERNAL;

	/* build.toml, read by the toolchain's Python in the sandbox. */
	script = xasprintf("%s/build_toml.py", scratch);
	build_json = xasprintf("%s/build.json", scratch);
	if (write_text(script, embedded_build_toml_py, embedded_build_toml_py_len) < 0)
		goto cleanup;
	{
		int fd = open(build_json, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			goto cleanup;
		char *toml = xasprintf("%s/build.toml", plan.src);
		char *args[] = { tc->python, "-I", script, toml, NULL };
		int r = sandbox_run(&sb, args, plan.src, fd);
		free(toml);
		close(fd);
		if (r == SANDBOX_TIMED_OUT || r == SANDBOX_CPU_LIMIT) {
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
	rc = BUILD_BAD_SOURCE;
	if (json_object_get(plan.config, "tvm-ffi")) {
		fprintf(stderr, "build.toml: tvm-ffi: tvm-ffi kernels are not built by this worker\n");
		goto cleanup;
	}
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
	if (!plan.noarch) {
		json_t *torch = json_object_get(plan.config, "torch");
		const char *minver = json_string_value(json_object_get(torch, "minver"));
		const char *maxver = json_string_value(json_object_get(torch, "maxver"));
		char have[32];
		snprintf(have, sizeof(have), "%ld.%ld", plan.parsed.framework_major, plan.parsed.framework_minor);
		long mj, mn;
		if (minver && sscanf(minver, "%ld.%ld", &mj, &mn) == 2 &&
		    (plan.parsed.framework_major < mj || (plan.parsed.framework_major == mj && plan.parsed.framework_minor < mn))) {
			fprintf(stderr, "build.toml: torch.minver: %s is above this toolchain's torch %s\n", minver, have);
			goto cleanup;
		}
		if (maxver && sscanf(maxver, "%ld.%ld", &mj, &mn) == 2 &&
		    (plan.parsed.framework_major > mj || (plan.parsed.framework_major == mj && plan.parsed.framework_minor > mn))) {
			fprintf(stderr, "build.toml: torch.maxver: %s is below this toolchain's torch %s\n", maxver, have);
			goto cleanup;
		}
	}

	/* Op namespace: _<module>_<backend>_<7 hex of the commit, else of the tree>. */
	char uid[8];
	if (commit) {
		memcpy(uid, commit, 7);
		uid[7] = 0;
	} else {
		tree_uid(plan.src, uid);
	}
	plan.ops_name = xasprintf("_%s_%s_%s", plan.module, plan.backend, uid);
	fprintf(stderr, "khub-worker build: kernel %s%s, op namespace %s\n",
		json_string_value(json_object_get(general, "name")), plan.noarch ? " (noarch: packaged, not compiled)" : "",
		plan.ops_name);

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
	if (abi_check_dir(plan.stage, &report) < 0) {
		fprintf(stderr, "khub-worker build: ABI check could not read the libraries\n");
		goto cleanup;
	}
	fprintf(stderr, "%s", json_string_value(json_object_get(report, "text")));
	if (!plan.noarch && !strcmp(plan.backend, "rocm")) {
		int r = report_hip_archs(&plan, report, &offload);
		if (r < 0) {
			rc = r == KHUB_EINVAL ? BUILD_FAILED : BUILD_INTERNAL;
			goto cleanup;
		}
	}
	{
		char *args[] = { tc->python, "-c", (char *)smoke_script, plan.stage, plan.ops_name, plan.module,
				 plan.noarch ? "noarch" : "arch", foreign ? "direct" : "loader", NULL };
		int r = sandbox_run(&sb, args, scratch, 2);
		if (r == SANDBOX_TIMED_OUT || r == SANDBOX_CPU_LIMIT) {
			rc = BUILD_TIMED_OUT;
			goto cleanup;
		}
		if (r != 0) {
			fprintf(stderr, "khub-worker build: the smoke import failed (status %d)\n", r);
			rc = BUILD_FAILED;
			goto cleanup;
		}
	}
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
		remove_tree(v);
		unlink(r);
		unlink(m);
		free(v);
		free(r);
		free(m);
	}
	if (scratch)
		remove_tree(scratch);
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
