/* benchmark.c -- `khub-worker benchmark`: a kernel's benchmarks/ scripts
 * (the author's code) run against a built variant as `kernels benchmark`
 * runs them (benchmark_run.py), inside the same sandbox as builds: no
 * network, none of the worker's files or environment (its token
 * included), only copies of the source and the variant in a scratch. The
 * payloads (one per script, the shape POST …/benchmarks takes) go to
 * --output; the scripts' output and failures to stderr, the job's log. */
#include "builder-worker/build_internal.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BENCH_OUTPUT_MAX (16 * 1024 * 1024)

extern const char embedded_benchmark_run_py[];

struct benchmark_options {
	const char *toolchains, *toolchain, *source, *variant_dir, *commit, *device, *output;
	long iterations, warmup;
	long build_uid, build_gid, max_processes;
};

#define BOPT(field) offsetof(struct benchmark_options, field)
static const struct worker_option benchmark_option_rows[] = {
	{ .name = "toolchains", .arg = "FILE", .kind = WOPT_STRING, .offset = BOPT(toolchains), .required = 1,
	  .help = "toolchains.json" },
	{ .name = "toolchain", .arg = "NAME", .kind = WOPT_STRING, .offset = BOPT(toolchain),
	  .help = "the toolchain whose Python runs the benchmarks (the first usable one)" },
	{ .name = "source", .arg = "DIR", .kind = WOPT_STRING, .offset = BOPT(source), .required = 1,
	  .help = "the kernel's source, with benchmarks/benchmark*.py" },
	{ .name = "variant-dir", .arg = "DIR", .kind = WOPT_STRING, .offset = BOPT(variant_dir), .required = 1,
	  .help = "the built variant (build/<variant>/) the benchmarks load" },
	{ .name = "commit", .arg = "SHA", .kind = WOPT_STRING, .offset = BOPT(commit), .required = 1,
	  .help = "the commit measured (kernelCommitSha)" },
	{ .name = "device", .arg = "NAME", .kind = WOPT_STRING, .offset = BOPT(device),
	  .help = "the device model measured on: \"cpu\" (the default) or the GPU's name" },
	{ .name = "output", .arg = "FILE", .kind = WOPT_STRING, .offset = BOPT(output), .required = 1,
	  .help = "where the JSON list of payloads goes" },
	{ .name = "iterations", .arg = "N", .kind = WOPT_LONG, .offset = BOPT(iterations), .min = 1, .max = 100000,
	  .help = "timed calls per workload (20)" },
	{ .name = "warmup", .arg = "N", .kind = WOPT_LONG, .offset = BOPT(warmup), .min = 0, .max = 100000,
	  .help = "untimed calls first (3)" },
	{ .name = "build-user", .arg = "UID[:GID]", .kind = WOPT_CALL, .offset = BOPT(build_uid),
	  .parse = worker_option_build_user, .help = "who the scripts run as when the worker is root (65534:65534)" },
	{ .name = "max-processes", .arg = "N", .kind = WOPT_LONG, .offset = BOPT(max_processes), .min = 0,
	  .max = 1 << 22, .help = "processes (and threads) of that uid at once (512)" },
	{ .name = "help", .kind = WOPT_HELP, .help = "this text" },
	{ .name = NULL },
};

static const struct worker_command benchmark_command = {
	.synopsis = "usage: khub-worker benchmark --toolchains FILE --source DIR --variant-dir DIR --commit SHA\n"
		    "       --output FILE [--device NAME] [--toolchain NAME] [--iterations N] [--warmup N]",
	.options = benchmark_option_rows,
};

/* The named toolchain, else the first usable one, probed (borrowed). */
static const struct toolchain *pick_toolchain(struct toolchain_set *set, const char *name)
{
	for (size_t i = 0; i < set->count; i++) {
		struct toolchain *tc = &set->items[i];
		if (name && strcmp(tc->name, name) != 0)
			continue;
		if (toolchain_probe(tc, NULL) == 0 && tc->usable)
			return tc;
		log_error("khub-worker benchmark: toolchain %s: %s", tc->name, tc->why);
		if (name)
			return NULL;
	}
	return NULL;
}

/* The runner in the sandbox, its stdout (the payloads) into out_path. */
static int run_sandboxed(const struct benchmark_options *o, const struct toolchain *tc, const char *scratch,
			 const char *src, const char *variant, const char *out_path)
{
	struct sandbox_options so = { .build_uid = o->build_uid, .build_gid = o->build_gid,
				      .max_processes = o->max_processes, .allow_no_sandbox = tc->allow_no_sandbox };
	struct sandbox sb;
	struct strvec dirs = STRVEC_INIT;
	char why[1024], iterations[24], warmup[24];
	int rc = BUILD_INTERNAL;
	memset(&sb, 0, sizeof(sb));
	if (toolchain_sandbox_dirs(tc, &dirs, why, sizeof(why)) < 0 || sandbox_init(&sb, scratch, &so, &dirs, why,
										  sizeof(why)) < 0) {
		log_error("khub-worker benchmark: no sandbox, the benchmarks are not run: %s", why);
		goto cleanup;
	}
	sandbox_bind(&sb, src, 0);
	sandbox_bind(&sb, variant, 0);
	if (toolchain_device_is_nvidia_gpu(tc))	/* the GPU measured, and nothing else of the host's /dev */
		log_info("khub-worker benchmark: %zu NVIDIA device node(s) passed through",
			 sandbox_pass_nvidia_gpu(&sb, "/dev"));
	toolchain_environment(tc, "/tmp", &sb.env);
	sb.log_fd = 2;
	log_info("khub-worker benchmark: sandbox %s, device %s", sandbox_mode_name(sb.mode), o->device);
	int out_fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out_fd < 0)
		goto cleanup;
	snprintf(iterations, sizeof(iterations), "%ld", o->iterations);
	snprintf(warmup, sizeof(warmup), "%ld", o->warmup);
	char *args[] = { tc->python, "-c", (char *)embedded_benchmark_run_py, (char *)src, (char *)variant,
			 (char *)o->commit, (char *)o->device, iterations, warmup, NULL };
	int r = sandbox_run(&sb, args, src, out_fd);
	close(out_fd);
	rc = r == 0 ? BUILD_OK : r == SANDBOX_TIMED_OUT || r == SANDBOX_CPU_LIMIT || r == SANDBOX_DISK_LIMIT ?
	     BUILD_TIMED_OUT : BUILD_FAILED;
	if (rc != BUILD_OK)
		log_error("khub-worker benchmark: the benchmarks failed (status %d)", r);
cleanup:
	strvec_release(&dirs);
	sandbox_release(&sb);
	return rc;
}

/* The payloads the runner wrote, checked to be a JSON list, to o->output. */
static int keep_payloads(const struct benchmark_options *o, const char *out_path)
{
	size_t len = 0;
	char *text = read_file_limited(out_path, BENCH_OUTPUT_MAX, &len);
	json_t *doc = text ? json_loadb(text, len, 0, NULL) : NULL;
	int rc = BUILD_INTERNAL;
	if (!json_is_array(doc))
		log_error("khub-worker benchmark: the runner wrote no list of payloads");
	else if (json_dump_file(doc, o->output, JSON_COMPACT) == 0)
		rc = BUILD_OK;
	json_decref(doc);
	free(text);
	return rc;
}

int benchmark_main(int argc, char **argv)
{
	struct benchmark_options o = { .device = "cpu", .iterations = 20, .warmup = 3,
				       .build_uid = SANDBOX_BUILD_UID_DEFAULT, .build_gid = SANDBOX_BUILD_UID_DEFAULT,
				       .max_processes = SANDBOX_MAX_PROCESSES_DEFAULT };
	struct toolchain_set set = { 0 };
	char why[512];
	int rc = worker_options_parse(&benchmark_command, argc, argv, &o);
	if (rc != 0) {
		worker_options_usage(&benchmark_command, rc == WORKER_OPTIONS_HELP ? stdout : stderr);
		return rc == WORKER_OPTIONS_HELP ? 0 : BUILD_USAGE;
	}
	if (toolchains_load(o.toolchains, &set, why, sizeof(why)) < 0) {
		log_error("khub-worker benchmark: %s", why);
		return BUILD_USAGE;
	}
	const struct toolchain *tc = pick_toolchain(&set, o.toolchain);
	const char *base = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *scratch = xasprintf("%s/khub-bench-XXXXXX", base), *src = NULL, *variant = NULL, *out_path = NULL;
	int made = tc && mkdtemp(scratch);
	rc = BUILD_INTERNAL;
	if (!made || chmod(scratch, geteuid() == 0 ? 0711 : 0700) < 0)
		goto cleanup;
	src = xasprintf("%s/src", scratch);
	variant = xasprintf("%s/variant", scratch);
	out_path = xasprintf("%s/payloads.json", scratch);
	if (copy_tree(o.source, src, 2) < 0 || copy_tree(o.variant_dir, variant, 2) < 0)
		goto cleanup;
	rc = run_sandboxed(&o, tc, scratch, src, variant, out_path);
	int kept = keep_payloads(&o, out_path);
	if (rc == BUILD_OK)
		rc = kept;
cleanup:
	if (made)
		tree_remove(scratch);
	free(out_path);
	free(variant);
	free(src);
	free(scratch);
	toolchains_release(&set);
	return rc;
}
