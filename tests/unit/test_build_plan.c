/* test_build_plan.c -- judging variants against a build.toml plan (what
 * builder-worker/build_toml.py --plan prints), and the default variants of
 * a plan given what live and stale workers offer (farm/build_plan.c). */
#include "farm/farm.h"
#include "tests/unit/tap.h"

#include <stdlib.h>

static struct build_plan plan_of(const char *json)
{
	struct build_plan p = { json_loads(json, 0, NULL), NULL };
	if (!p.doc)
		printf("# bad test JSON: %s\n", json);
	return p;
}

/* judge: want 1 (built) or 0 with why containing reason. */
static void judge(const char *json, const char *variant, int want, const char *reason)
{
	struct build_plan p = plan_of(json);
	char why[512] = "";
	int got = p.doc ? build_plan_judge(&p, variant, why, sizeof(why)) : -1;
	ok(got == want && (want || strstr(why, reason)), "%s: %s%s%s", variant, want ? "built" : "skipped: ",
	   want ? "" : reason, got == want ? "" : " (got the other)");
	if (!want && got == 0 && !strstr(why, reason))
		printf("#   why: %s\n", why);
	build_plan_release(&p);
}

#define RELU "{\"framework\":\"torch\",\"backends\":[\"cpu\",\"cuda\"],\"compiled\":true," \
	     "\"kernel-backends\":[\"cpu\",\"cuda\"],\"torch\":{},\"stable-abi\":{},\"cuda\":{},\"cuda-kernels\":[]}"
#define NOARCH "{\"framework\":\"torch-noarch\",\"backends\":[\"cuda\",\"cann\"],\"compiled\":false," \
	       "\"kernel-backends\":[],\"torch\":{},\"stable-abi\":{},\"cuda\":{},\"cuda-kernels\":[]}"
#define STABLE "{\"framework\":\"torch\",\"backends\":[\"cpu\",\"cuda\"],\"compiled\":true," \
	       "\"kernel-backends\":[],\"torch\":{},\"stable-abi\":{\"cpu\":\"2.11\"},\"cuda\":{},\"cuda-kernels\":[]}"
#define BOUNDS "{\"framework\":\"torch\",\"backends\":[\"cuda\"],\"compiled\":true,\"kernel-backends\":[\"cuda\"]," \
	       "\"torch\":{\"minver\":\"2.11\",\"maxver\":\"2.12\"},\"stable-abi\":{}," \
	       "\"cuda\":{\"minver\":\"12.8\"},\"cuda-kernels\":[{\"capabilities\":[\"7.0\",\"9.0a\"],\"minver\":null}]}"
#define CAPS "{\"framework\":\"torch\",\"backends\":[\"cuda\"],\"compiled\":true,\"kernel-backends\":[\"cuda\"]," \
	     "\"torch\":{},\"stable-abi\":{},\"cuda\":{},\"cuda-kernels\":[{\"capabilities\":[\"12.0\"],\"minver\":null}," \
	     "{\"capabilities\":[],\"minver\":\"13.0\"}]}"
#define TVM "{\"framework\":\"tvm-ffi\",\"backends\":[\"cuda\"],\"compiled\":true,\"kernel-backends\":[]," \
	    "\"torch\":{},\"stable-abi\":{},\"cuda\":{},\"cuda-kernels\":[]}"

static void test_judge(void)
{
	judge(RELU, "torch212-cxx11-cpu-x86_64-linux", 1, NULL);
	judge(RELU, "torch212-cxx11-cu130-x86_64-linux", 1, NULL);
	judge(RELU, "torch212-cxx11-rocm71-x86_64-linux", 0, "general.backends does not list rocm");
	judge(RELU, "torch-cpu", 0, "compiled sources");
	judge(RELU, "torch-stable-abi211-cpu-x86_64-linux", 0, "no torch.stable-abi for cpu");
	judge(RELU, "tvm-ffi01-cu130-x86_64-linux", 0, "not a [tvm-ffi] kernel");
	judge(RELU, "torch-universal", 0, "not torch-universal");
	judge(NOARCH, "torch-cuda", 1, NULL);
	judge(NOARCH, "torch-npu", 1, NULL);
	judge(NOARCH, "torch-cpu", 0, "general.backends does not list cpu");
	judge(NOARCH, "torch212-cxx11-cu130-x86_64-linux", 0, "builds only torch-<backend> variants (torch-cuda)");
	judge(STABLE, "torch-stable-abi211-cpu-x86_64-linux", 1, NULL);
	judge(STABLE, "torch-stable-abi210-cpu-x86_64-linux", 0, "torch.stable-abi is 2.11 for cpu, not 2.10");
	judge(STABLE, "torch212-cxx11-cpu-x86_64-linux", 0, "built as torch-stable-abi211-cpu-x86_64-linux instead");
	judge(STABLE, "torch212-cxx11-cu130-x86_64-linux", 1, NULL);	/* no stable ABI for cuda */
	judge(BOUNDS, "torch210-cxx11-cu130-x86_64-linux", 0, "torch 2.10 is below torch.minver 2.11");
	judge(BOUNDS, "torch213-cxx11-cu130-x86_64-linux", 0, "torch 2.13 is above torch.maxver 2.12");
	judge(BOUNDS, "torch212-cxx11-cu126-x86_64-linux", 0, "CUDA 12.6 is below general.cuda.minver 12.8");
	judge(BOUNDS, "torch212-cxx11-cu128-x86_64-linux", 1, NULL);
	judge(BOUNDS, "torch212-cxx11-cu130-x86_64-linux", 1, NULL);	/* 9.0a still compiles */
	judge(CAPS, "torch212-cxx11-cu126-x86_64-linux", 0, "no [kernel.*] for cuda compiles with CUDA 12.6");
	judge(CAPS, "torch212-cxx11-cu128-x86_64-linux", 1, NULL);	/* 12.0 from 12.8 */
	judge(CAPS, "torch212-cxx11-cu130-x86_64-linux", 1, NULL);
	judge(TVM, "tvm-ffi01-cu130-x86_64-linux", 1, NULL);
	judge(TVM, "torch212-cxx11-cu130-x86_64-linux", 0, "builds only tvm-ffi");
}

static void test_default(void)
{
	struct build_plan p = plan_of(RELU);
	char *live[] = { "torch211-cxx11-cpu-x86_64-linux", "torch210-cxx11-cpu-x86_64-linux", "torch-cpu", NULL };
	char *stale[] = { "torch212-cxx11-cu130-x86_64-linux", NULL };
	struct required_variants list;
	const char *text = "{\"x86_64-linux\": {\"cpu\": [\"torch211-cxx11-cpu-x86_64-linux\"]}}";
	char why[128];
	ok(required_variants_parse(text, strlen(text), &list, why, sizeof(why)) == 0, "a required list");
	char **names;
	size_t n;
	json_t *skipped = json_array();
	struct worker_offers w = { .live = live, .nlive = 3, .stale = stale, .nstale = 1 };
	build_plan_default(&p, &w, &list, &names, &n, skipped);
	ok(n == 1 && strcmp(names[0], "torch211-cxx11-cpu-x86_64-linux") == 0 && !names[1],
	   "default: the required list's cpu variant only");
	char *dump = json_dumps(skipped, JSON_SORT_KEYS);
	ok(strstr(dump, "\"torch210-cxx11-cpu-x86_64-linux\"") && strstr(dump, "not on the required list"),
	   "torch210 skipped: not on the required list");
	ok(strstr(dump, "\"torch-cpu\"") && strstr(dump, "compiled sources"), "torch-cpu skipped: compiled sources");
	ok(strstr(dump, "only workers not seen within build_worker_live_seconds offer it"),
	   "the stale worker's cu130 variant named with why");
	ok(strstr(dump, "no live worker builds cuda (only workers not seen"), "cuda: no live worker builds it");
	free(dump);
	json_decref(skipped);
	build_names_free(names, n);
	required_variants_release(&list);
	build_plan_release(&p);
}

#define ARCHS "{\"framework\":\"torch\",\"backends\":[\"cuda\"],\"compiled\":true,\"kernel-backends\":[\"cuda\"]," \
	      "\"torch\":{\"minver\":\"2.12\",\"maxver\":\"2.12\"},\"stable-abi\":{},\"cuda\":{}," \
	      "\"cuda-kernels\":[{\"capabilities\":[\"5.0\",\"8.0\",\"12.1\"],\"minver\":null}]}"

/* Each capability a planned variant's toolkit does not build is said,
 * with the real reason. */
static void test_left_out(void)
{
	struct build_plan p = plan_of(ARCHS);
	char *names[] = { "torch212-cxx11-cu130-x86_64-linux", "torch212-cxx11-cu128-x86_64-linux", NULL };
	json_t *left = build_plan_left_out(&p, names, 2);
	char *dump = json_dumps(left, JSON_SORT_KEYS);
	ok(json_array_size(left) == 2, "cu130 leaves out 5.0, cu128 leaves out 12.1, nothing else");
	ok(strstr(dump, "\"capability 5.0 left out: CUDA 13.0 cannot build it (oldest it builds: 7.5)\"") != NULL,
	   "5.0 for CUDA 13.0: too old for it, with the oldest it builds");
	ok(strstr(dump, "\"capability 12.1 left out: CUDA 12.8 cannot build it (first CUDA with it: 12.9)\"") != NULL,
	   "12.1 for CUDA 12.8: too new, with the first CUDA that builds it");
	printf("# %s\n", dump);
	free(dump);
	json_decref(left);
	build_plan_release(&p);
}

/* A backend whose live variants build.toml's torch bounds all exclude is
 * answered with that, never "no live worker builds cuda". */
static void test_torch_bounds_reason(void)
{
	struct build_plan p = plan_of(ARCHS);
	char *live[] = { "torch211-cxx11-cu130-x86_64-linux", "torch211-cxx11-cu128-x86_64-linux", NULL };
	struct required_variants list = { 0 };
	char **names;
	size_t n;
	json_t *skipped = json_array();
	struct worker_offers w = { .live = live, .nlive = 2 };
	build_plan_default(&p, &w, &list, &names, &n, skipped);
	char *dump = json_dumps(skipped, JSON_SORT_KEYS);
	ok(n == 0, "nothing planned");
	ok(strstr(dump, "\"torch 2.11 of every live cuda toolchain is outside build.toml's torch bounds "
		   ">=2.12,<=2.12\"") != NULL, "the real reason: torch bounds");
	ok(!strstr(dump, "no live worker builds cuda"), "not: no live worker builds cuda");
	printf("# %s\n", dump);
	free(dump);
	json_decref(skipped);
	build_names_free(names, n);
	build_plan_release(&p);
}

#define ROCM_CU "{\"framework\":\"torch\",\"backends\":[\"cpu\",\"rocm\"],\"compiled\":true," \
		"\"kernel-backends\":[\"cpu\",\"rocm\"],\"torch\":{},\"stable-abi\":{},\"cuda\":{},\"cuda-kernels\":[]," \
		"\"rocm-cuda-sources\":[\"relu_cuda/relu_kernel.cu\"]}"

/* A ROCm build of CUDA sources needs a toolchain with hipify: without one
 * the plan says exactly that, never "no live worker builds rocm". */
static void test_hipify_reason(void)
{
	struct build_plan p = plan_of(ROCM_CU);
	char *live[] = { "torch211-cxx11-cpu-x86_64-linux", "torch211-cxx11-rocm52-x86_64-linux", NULL };
	char *with[] = { "torch211-cxx11-rocm52-x86_64-linux", NULL };
	struct required_variants list = { 0 };
	char **names;
	size_t n;
	json_t *skipped = json_array();
	struct worker_offers w = { .live = live, .nlive = 2 };
	build_plan_default(&p, &w, &list, &names, &n, skipped);
	char *dump = json_dumps(skipped, JSON_SORT_KEYS);
	const char *why = "no toolchain has hipify to build ROCm from CUDA sources (relu_cuda/relu_kernel.cu)";
	ok(n == 1 && !strcmp(names[0], live[0]), "no toolchain with hipify: only the cpu variant is planned");
	ok(strstr(dump, "{\"reason\": \"no toolchain has hipify") && strstr(dump, why), "the rocm variant: %s", why);
	ok(strstr(dump, "\"torch<MM>-cxx11-rocm…\"") && !strstr(dump, "no live worker builds rocm"),
	   "and the backend says so too, not \"no live worker builds rocm\"");
	printf("# %s\n", dump);
	free(dump);
	json_decref(skipped);
	build_names_free(names, n);
	skipped = json_array();
	w.hipify = with;
	w.nhipify = 1;
	build_plan_default(&p, &w, &list, &names, &n, skipped);
	ok(n == 2 && json_array_size(skipped) == 0, "a toolchain with hipify offers it: rocm planned too");
	json_decref(skipped);
	build_names_free(names, n);
	build_plan_release(&p);
}

int main(void)
{
	test_judge();
	test_default();
	test_left_out();
	test_torch_bounds_reason();
	test_hipify_reason();
	return done_testing();
}
