/* main.c -- khub-worker's entry: `--check` (what each toolchain builds),
 * `build` (one build by hand, build.c), `benchmark` (a kernel's benchmarks
 * in the sandbox, benchmark.c) or the daemon (daemon.c). */
#include "builder-worker/worker.h"
#include "common/common.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct check_options {
	int check;
	const char *toolchains;
	long build_uid, build_gid, max_processes;
};

#define CHECK_OPT(field) offsetof(struct check_options, field)
static const struct worker_option check_option_rows[] = {
	{ .name = "check", .kind = WOPT_FLAG, .offset = CHECK_OPT(check),
	  .help = "say what each toolchain builds and the sandbox its builds get" },
	{ .name = "toolchains", .arg = "FILE", .kind = WOPT_STRING, .offset = CHECK_OPT(toolchains), .required = 1,
	  .help = "toolchains.json" },
	{ .name = "build-user", .arg = "UID[:GID]", .kind = WOPT_CALL, .offset = CHECK_OPT(build_uid),
	  .parse = worker_option_build_user, .help = "who build code runs as when the worker is root (65534:65534)" },
	{ .name = "max-processes", .arg = "N", .kind = WOPT_LONG, .offset = CHECK_OPT(max_processes), .min = 0,
	  .max = 1 << 22, .help = "processes (and threads) of that uid at once (512)" },
	{ .name = "help", .kind = WOPT_HELP, .help = "this text" },
	{ .name = NULL },
};

static const struct worker_command check_command = {
	.synopsis = "usage: khub-worker --check --toolchains FILE [--build-user UID[:GID]] [--max-processes N]",
	.options = check_option_rows,
};

/* `khub-worker --check --toolchains F`: 0 when at least one toolchain is usable. */
static int check_main(int argc, char **argv)
{
	struct check_options o = { .build_uid = SANDBOX_BUILD_UID_DEFAULT, .build_gid = SANDBOX_BUILD_UID_DEFAULT,
				   .max_processes = SANDBOX_MAX_PROCESSES_DEFAULT };
	int parsed = worker_options_parse(&check_command, argc, argv, &o);
	if (parsed == WORKER_OPTIONS_HELP) {
		worker_options_usage(&check_command, stdout);
		return 0;
	}
	if (parsed < 0) {
		worker_options_usage(&check_command, stderr);
		return 64;
	}
	const char *path = o.toolchains;
	long uid = o.build_uid, gid = o.build_gid, nproc = o.max_processes;
	struct toolchain_set set = { 0 };
	char why[512];
	if (toolchains_load(path, &set, why, sizeof(why)) != KHUB_OK) {
		log_error("khub-worker: %s: %s", path, why);
		return 1;
	}
	size_t usable = 0;
	for (size_t i = 0; i < set.count; i++) {
		struct toolchain *tc = &set.items[i];
		if (toolchain_probe(tc, NULL) != KHUB_OK || !tc->usable) {
			printf("%s: not usable: %s\n", tc->name, tc->why);
			continue;
		}
		usable++;
		printf("%s: torch %s%s%s%s%s%s, %s ABI\n", tc->name, tc->torch_version ? tc->torch_version : "?",
		       tc->cuda_version ? ", CUDA " : "", tc->cuda_version ? tc->cuda_version : "",
		       tc->rocm_version ? ", ROCm " : "", tc->rocm_version ? tc->rocm_version : "",
		       tc->rocm_from_hipcc ? " from hipcc (rocm_from_hipcc: the torch is a CPU build, not a ROCm one)" : "",
		       tc->cxx11_abi ? "cxx11" : "pre-cxx11");
		if (tc->root)
			printf("  root %s, %s\n", tc->root, tc->root_digest);
		if (tc->hipify_version)
			printf("  hipify %s: a ROCm variant's CUDA sources are hipified first\n", tc->hipify_version);
		for (size_t k = 0; k < tc->nvariants; k++)
			printf("  %s\n", tc->variants[k]);
		if (tc->benchmarks)
			printf("  benchmarks on %s%s%s\n", tc->device ? tc->device : "cpu",
			       tc->driver && *tc->driver ? ", driver " : "", tc->driver ? tc->driver : "");
		char isolation[1024];
		int whole = build_describe_sandbox(tc, uid, gid, nproc, isolation, sizeof(isolation));
		printf("  sandbox %s%s\n", isolation, whole < 0 ? " -- builds are REFUSED" :
		       tc->allow_no_sandbox && strncmp(isolation, "none", 4) == 0 ? " -- WARNING: allow_no_sandbox" : "");
	}
	toolchains_release(&set);
	return usable ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "build") == 0)
		return build_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "benchmark") == 0)
		return benchmark_main(argc - 1, argv + 1);
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--check") == 0)
			return check_main(argc, argv);
	return daemon_main(argc, argv);
}
