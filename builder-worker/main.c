/* main.c -- khub-worker's entry: `build` (one variant by hand, build.c) and
 * `--check` (what each toolchain builds). The daemon's options come later. */
#include "builder-worker/worker.h"
#include "common/common.h"

#include <stdio.h>
#include <string.h>

static int check_main(int argc, char **argv)
{
	const char *path = NULL;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--toolchains") && i + 1 < argc)
			path = argv[++i];
	if (!path) {
		fprintf(stderr, "usage: khub-worker --check --toolchains FILE\n");
		return 64;
	}
	struct toolchain_set set;
	char why[512];
	if (toolchains_load(path, &set, why, sizeof(why)) < 0) {
		fprintf(stderr, "khub-worker: %s\n", why);
		return 1;
	}
	int usable = 0;
	for (size_t i = 0; i < set.count; i++) {
		struct toolchain *tc = &set.items[i];
		toolchain_probe(tc);
		if (!tc->usable) {
			printf("%s: unusable: %s\n", tc->name, tc->why);
			continue;
		}
		usable++;
		printf("%s: torch %s%s%s, C++11 ABI %s:", tc->name, tc->torch_version,
		       tc->cuda_version ? ", CUDA " : tc->rocm_version ? ", ROCm " : "",
		       tc->cuda_version ? tc->cuda_version : tc->rocm_version ? tc->rocm_version : "",
		       tc->cxx11_abi ? "yes" : "no");
		for (size_t j = 0; j < tc->nvariants; j++)
			printf(" %s", tc->variants[j]);
		printf("\n");
		if (tc->why[0])
			printf("%s: note: %s\n", tc->name, tc->why);
	}
	toolchains_release(&set);
	return usable ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "build"))
		return build_main(argc - 1, argv + 1);
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--check"))
			return check_main(argc, argv);
	fprintf(stderr, "usage: khub-worker build ... | khub-worker --check --toolchains FILE\n");
	return 64;
}
