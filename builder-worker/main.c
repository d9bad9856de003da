/* main.c -- khub-worker's entry: `--check` (what each toolchain builds),
 * `build` (one build by hand, build.c) or the daemon (daemon.c). */
#include "builder-worker/worker.h"
#include "common/common.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `khub-worker --check --toolchains F`: 0 when at least one toolchain is usable. */
int worker_parse_number(const char *s, const char *flag, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi) {
		fprintf(stderr, "khub-worker: %s wants a number from %ld to %ld\n", flag, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

int worker_parse_build_user(const char *s, long *uid, long *gid)
{
	char *end;
	errno = 0;
	long u = strtol(s, &end, 10), g = u;
	if (!errno && *end == ':')
		g = strtol(end + 1, &end, 10);
	if (errno || *end || end == s || u <= 0 || g <= 0 || u > 0x7fffffffL || g > 0x7fffffffL) {
		fprintf(stderr, "khub-worker: --build-user wants UID or UID:GID (not 0, root)\n");
		return -1;
	}
	*uid = u;
	*gid = g;
	return 0;
}

static int check_main(int argc, char **argv)
{
	const char *path = NULL;
	long uid = 65534, gid = 65534, nproc = 512;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--toolchains") == 0 && i + 1 < argc)
			path = argv[++i];
		else if (strcmp(argv[i], "--build-user") == 0 && i + 1 < argc) {
			if (worker_parse_build_user(argv[++i], &uid, &gid) < 0)
				return 64;
		} else if (strcmp(argv[i], "--max-processes") == 0 && i + 1 < argc) {
			if (worker_parse_number(argv[++i], "--max-processes", 0, 1 << 22, &nproc) < 0)
				return 64;
		}
		else if (strncmp(argv[i], "--toolchains=", 13) == 0)
			path = argv[i] + 13;
		else if (strcmp(argv[i], "--check") != 0) {
			fprintf(stderr, "khub-worker --check: unexpected argument '%s'\n", argv[i]);
			return 64;
		}
	}
	if (!path) {
		fprintf(stderr, "usage: khub-worker --check --toolchains FILE [--build-user UID[:GID]] [--max-processes N]\n");
		return 64;
	}
	struct toolchain_set set = { 0 };
	char why[512];
	if (toolchains_load(path, &set, why, sizeof(why)) != KHUB_OK) {
		fprintf(stderr, "khub-worker: %s: %s\n", path, why);
		return 1;
	}
	size_t usable = 0;
	for (size_t i = 0; i < set.count; i++) {
		struct toolchain *tc = &set.items[i];
		if (toolchain_probe(tc) != KHUB_OK || !tc->usable) {
			printf("%s: not usable: %s\n", tc->name, tc->why);
			continue;
		}
		usable++;
		printf("%s: torch %s%s%s%s%s%s, %s ABI\n", tc->name, tc->torch_version ? tc->torch_version : "?",
		       tc->cuda_version ? ", CUDA " : "", tc->cuda_version ? tc->cuda_version : "",
		       tc->rocm_version ? ", ROCm " : "", tc->rocm_version ? tc->rocm_version : "",
		       tc->rocm_from_hipcc ? " from hipcc (rocm_from_hipcc: the torch is a CPU build, not a ROCm one)" : "",
		       tc->cxx11_abi ? "cxx11" : "pre-cxx11");
		for (size_t k = 0; k < tc->nvariants; k++)
			printf("  %s\n", tc->variants[k]);
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
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--check") == 0)
			return check_main(argc, argv);
	return daemon_main(argc, argv);
}
